"""``vqs serve --kafka-port`` as a process (ServerProcess with a Kafka port)."""

from __future__ import annotations

from vqs_server_proc import ServerProcess, free_port


class KafkaServer(ServerProcess):
    def __init__(self, data_dir, *args, **kw):
        self.kafka_port = free_port()
        super().__init__(data_dir, "--kafka-port", str(self.kafka_port), *args, **kw)

    def fresh_ports(self) -> None:
        super().fresh_ports()
        self.kafka_port = self.fresh_option_port("--kafka-port")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"
