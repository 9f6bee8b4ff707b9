"""A real ``vqs serve --kafka-port`` for the Kafka tests (one per module)."""

from __future__ import annotations

import pytest
from vqs_server_proc import ServerProcess, free_port


class KafkaServer(ServerProcess):
    def __init__(self, data_dir, *args, **kw):
        self.kafka_port = free_port()
        super().__init__(data_dir, "--kafka-port", str(self.kafka_port), *args, **kw)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"


@pytest.fixture(scope="module")
def kafka_server(tmp_path_factory):
    s = KafkaServer(tmp_path_factory.mktemp("vqs-kafka") / "data", "--flush", "always").start()
    yield s
    rc = s.stop()
    assert rc == 0, s.log()
