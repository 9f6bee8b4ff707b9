"""The server SIGKILLed and restarted under an idempotent producer and a consumer group."""

from __future__ import annotations

import threading
import time

import pytest
from kafka_server_proc import KafkaServer

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def test_every_acknowledged_record_once_in_order_across_a_server_crash(tmp_path):
    server = KafkaServer(tmp_path / "data", "--flush", "always").start()
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        admin.create_topics([NewTopic("crash", num_partitions=3, replication_factor=1)])["crash"].result(10)
        p = ck.Producer({"bootstrap.servers": server.bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 2, "message.timeout.ms": 60_000, "reconnect.backoff.max.ms": 200})
        acked: dict[int, list] = {0: [], 1: [], 2: []}
        lock = threading.Lock()

        def on_delivery(err, msg):
            if err is None:
                with lock:
                    acked[msg.partition()].append((msg.offset(), msg.value()))

        stop = threading.Event()

        def produce():
            i = 0
            while not stop.is_set():
                p.produce("crash", value=b"%06d" % i, key=b"k%d" % (i % 5), headers=[("n", b"%d" % i)],
                          timestamp=1_700_000_000_000 + i, on_delivery=on_delivery)
                p.poll(0)
                i += 1
                if i % 50 == 0:
                    time.sleep(0.005)

        t = threading.Thread(target=produce)
        t.start()
        deadline = time.monotonic() + 20
        while sum(map(len, acked.values())) < 300 and time.monotonic() < deadline:
            p.poll(0.05)
        server.kill9()
        server.start()
        time.sleep(0.5)  # keep producing into the restarted server
        stop.set()
        t.join()
        assert p.flush(60) == 0
        total = sum(map(len, acked.values()))
        assert total >= 300
        c = ck.Consumer({"bootstrap.servers": server.bootstrap, "group.id": "check", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
        c.subscribe(["crash"])
        got: dict[int, list] = {0: [], 1: [], 2: []}
        deadline = time.monotonic() + 30
        while sum(map(len, got.values())) < total and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got[m.partition()].append((m.offset(), m.value()))
                n = int(m.value())
                assert m.key() == b"k%d" % (n % 5) and m.headers() == [("n", b"%d" % n)]
                assert m.timestamp()[1] == 1_700_000_000_000 + n
        c.close()
        for part in range(3):
            values = [v for _, v in got[part]]
            assert len(values) == len(set(values)), f"partition {part} has duplicates"
            assert values == sorted(values), f"partition {part} is out of order"
            assert sorted(acked[part]) == got[part]  # each acknowledged record once, at its offset
    finally:
        server.stop()
