"""Idempotent producers: duplicates dropped, gaps refused, state recovered after SIGKILL."""

from __future__ import annotations

import socket
import threading

import pytest
from raw_client import RawKafka
from socket_reads import recv_exact

from vqs.server.kafka.records import encode_records

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kafka_server_proc import KafkaServer  # noqa: E402


def _batch(pid, epoch, seq, n, tag=b"v"):
    return encode_records(0, [tag + b"%d" % (seq + i) for i in range(n)], timestamps=1_000,
                          producer=(pid, epoch, seq))


def test_sequences_duplicates_gaps_fencing_and_recovery_after_sigkill(tmp_path):
    server = KafkaServer(tmp_path / "data", "--flush", "interval").start()
    try:
        k = RawKafka(server.kafka_port)
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        admin.create_topics([NewTopic("idem", num_partitions=1, replication_factor=1)])["idem"].result(10)
        pid, epoch = k.init_producer_id()
        assert k.init_producer_id()[0] != pid
        assert k.produce("idem", 0, _batch(pid, epoch, 0, 3)) == (0, 0)
        assert k.produce("idem", 0, _batch(pid, epoch, 0, 3)) == (0, 0)  # a retry: the first offset, no append
        assert k.produce("idem", 0, _batch(pid, epoch, 5, 1))[0] == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
        assert k.produce("idem", 0, _batch(pid, epoch, 3, 2)) == (0, 3)
        assert k.produce("idem", 0, _batch(pid, epoch + 1, 0, 1)) == (0, 5)  # a new epoch starts at 0
        assert k.produce("idem", 0, _batch(pid, epoch, 5, 1))[0] == 47  # the old epoch is fenced
        assert k.produce("idem", 0, _batch(pid + 99, 0, 7, 1))[0] == 45  # unknown producer must start at 0
        k.produce("idem", 0, _batch(-1, -1, -1, 1, b"plain"))  # not idempotent: always appended
        # flush=interval: wait until durable, then crash
        import time

        time.sleep(0.3)
        k.close()
        server.kill9()
        server.start()
        k = RawKafka(server.kafka_port)
        assert k.produce("idem", 0, _batch(pid, epoch + 1, 0, 1)) == (0, 5)  # still a duplicate after the crash
        assert k.produce("idem", 0, _batch(pid, epoch + 1, 1, 1)) == (0, 7)
        assert k.init_producer_id()[0] > pid + 1  # ids are never handed out twice
        k.close()
    finally:
        server.stop()


class _DropFirstProduceResponse:
    """A TCP proxy that forwards everything but closes the client's connection instead of
    passing on the first Produce response: the client must retry a batch the broker has."""

    def __init__(self, target_port: int):
        self.target = target_port
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen()
        self.port = self.lsock.getsockname()[1]
        self.dropped = threading.Event()
        self.pending: dict = {}
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            s = socket.create_connection(("127.0.0.1", self.target))
            corrs: set = set()
            threading.Thread(target=self._up, args=(c, s, corrs), daemon=True).start()
            threading.Thread(target=self._down, args=(s, c, corrs), daemon=True).start()

    @staticmethod
    def _frame(sock):
        head = recv_exact(sock, 4)
        body = None if head is None else recv_exact(sock, int.from_bytes(head, "big"))
        return None if body is None else head + body

    def _up(self, c, s, corrs):
        try:
            while (f := self._frame(c)) is not None:
                if int.from_bytes(f[4:6], "big") == 0:  # Produce: remember its correlation id
                    corrs.add(f[8:12])
                s.sendall(f)
        except OSError:
            pass
        finally:
            s.close()

    def _down(self, s, c, corrs):
        try:
            while (f := self._frame(s)) is not None:
                if f[4:8] in corrs and not self.dropped.is_set():
                    self.dropped.set()
                    c.shutdown(socket.SHUT_RDWR)
                    c.close()
                    return
                c.sendall(f)
        except OSError:
            pass
        finally:
            c.close()

    def close(self):
        self.lsock.close()


def test_retry_after_a_dropped_connection_does_not_duplicate(tmp_path):
    topic = "retry"
    server = KafkaServer(tmp_path / "data")
    proxy = _DropFirstProduceResponse(server.kafka_port)
    # clients are told to connect to the proxy (as behind a NAT), so every request passes it
    server.env["VQS_KAFKA_ADVERTISED_LISTENER"] = f"127.0.0.1:{proxy.port}"
    server.start()
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(10)
        p = ck.Producer({"bootstrap.servers": f"127.0.0.1:{proxy.port}", "enable.idempotence": True,
                         "acks": "all", "linger.ms": 0, "message.timeout.ms": 20_000})
        delivered = []
        for i in range(5):
            p.produce(topic, value=b"m%d" % i, on_delivery=lambda err, m: delivered.append(err))
        assert p.flush(20) == 0
        assert proxy.dropped.is_set()
        assert delivered == [None] * 5
        c = ck.Consumer({"bootstrap.servers": server.bootstrap, "group.id": "r"})
        lo, hi = c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=10)
        c.close()
        assert hi - lo == 5  # the batch whose answer was lost was appended once
    finally:
        proxy.close()
        server.stop()


def test_a_batch_split_on_append_is_a_duplicate_when_retried_after_a_crash(tmp_path):
    """A Kafka batch larger than batch_max_bytes (1 MiB) is stored as several VQS batches; after
    SIGKILL the producer state is rebuilt from those pieces, and a retry of the whole batch must
    still be recognised (it was refused as out of order)."""
    server = KafkaServer(tmp_path / "data", "--flush", "always").start()
    try:
        import httpx

        assert httpx.post(server.url + "/topics", json={"name": "split"}).status_code == 201
        k = RawKafka(server.kafka_port)
        pid, epoch = k.init_producer_id()
        big = encode_records(0, [bytes([65 + i]) * (600 << 10) for i in range(3)], timestamps=1_000,
                             producer=(pid, epoch, 0))
        assert k.produce("split", 0, big) == (0, 0)
        k.close()
        server.kill9()  # no snapshot: the state comes from the pieces' batch headers
        server.start()
        k = RawKafka(server.kafka_port)
        assert k.produce("split", 0, big) == (0, 0)  # the retry: a duplicate, answered with its offset
        assert k.produce("split", 0, _batch(pid, epoch, 3, 1)) == (0, 3)  # the next sequence follows it
        k.close()
    finally:
        server.stop()
