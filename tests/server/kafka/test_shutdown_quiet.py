"""Stopping a server with Kafka connections open closes them quietly: no
traceback in the server's log (Python 3.11's asyncio logged one for each
connection task cancelled at shutdown)."""

from __future__ import annotations

from kafka_server_proc import KafkaServer
from raw_client import RawKafka


def test_stop_with_open_kafka_connections_logs_no_traceback(tmp_path):
    server = KafkaServer(tmp_path / "data").start()
    conns = []
    try:
        conns = [RawKafka(server.kafka_port) for _ in range(3)]
        for k in conns:
            k.init_producer_id()  # the connections are served, then left open
    finally:
        rc = server.stop()
        for k in conns:
            k.close()
    log = server.log()
    assert rc == 0, log[-3000:]
    assert "Traceback" not in log and "CancelledError" not in log, log[-3000:]
