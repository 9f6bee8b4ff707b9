"""A real ``vqs serve --kafka-port`` for the Kafka tests (one for the session; tests use unique topic names)."""

from __future__ import annotations

import pytest
from kafka_server_proc import KafkaServer


@pytest.fixture(scope="session")
def kafka_server(tmp_path_factory):
    # members in the tests use 3 s sessions, to see a SIGKILLed one go quickly
    s = KafkaServer(tmp_path_factory.mktemp("vqs-kafka") / "data", "--flush", "always",
                    env={"VQS_KAFKA_GROUP_MIN_SESSION_TIMEOUT_MS": "1000"}).start()
    yield s
    rc = s.stop()
    assert rc == 0, s.log()
