"""A real ``vqs serve --kafka-port`` for the Kafka tests (one for the session; tests use unique topic names)."""

from __future__ import annotations

import pytest
from kafka_server_proc import KafkaServer


@pytest.fixture(scope="session")
def kafka_server(tmp_path_factory):
    s = KafkaServer(tmp_path_factory.mktemp("vqs-kafka") / "data", "--flush", "always").start()
    yield s
    rc = s.stop()
    assert rc == 0, s.log()
