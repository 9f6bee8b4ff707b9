"""A compacted topic through real Kafka clients: confluent-kafka's AdminClient creates it with
cleanup.policy=compact, confluent-kafka and kafka-python produce keys (and a tombstone), the
server's own log cleaner compacts it in the background, and consumers from offset 0 read a
table (the latest value per key) at the offsets the records were produced at."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest
from kafka_server_proc import KafkaServer

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = KafkaServer(tmp_path_factory.mktemp("vqs-compact") / "data", "--flush", "always",
                    env={"VQS_CLEANER_INTERVAL_MS": "100"}).start()
    yield s
    assert s.stop() == 0, s.log()


def _consume_all(server, topic, end):
    """(offset, key, value) from offset 0 up to ``end``, with confluent-kafka."""
    c = ck.Consumer({"bootstrap.servers": server.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([ck.TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.monotonic() + 30
    while (not out or out[-1][0] < end - 1) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        out.append((m.offset(), m.key(), m.value()))
    c.close()
    return out


def test_compacted_topic_with_real_clients(server):
    topic = f"table-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "2048", "delete.retention.ms": "86400000",
        "min.cleanable.dirty.ratio": "0.1"})])[topic].result(10)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    cfg = admin.describe_configs([res])[res].result(10)
    assert cfg["cleanup.policy"].value == "compact" and cfg["delete.retention.ms"].value == "86400000"

    produced = []

    def delivered(err, msg):
        assert err is None, err
        produced.append((msg.offset(), msg.key(), msg.value()))

    p = ck.Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0, "acks": "all"})
    for i in range(400):
        p.produce(topic, key=b"user-%d" % (i % 13), value=b"state-%d-" % i + b"x" * 40, on_delivery=delivered)
        if i % 10 == 9:
            p.flush(10)  # many small batches: many segments
    p.produce(topic, key=b"user-3", value=None, on_delivery=delivered)  # a tombstone
    assert p.flush(10) == 0
    # a record without a key is refused: INVALID_RECORD, nothing appended
    errors = []
    p.produce(topic, value=b"no key", on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD, errors

    kp = pytest.importorskip("kafka")
    prod = kp.KafkaProducer(bootstrap_servers=server.bootstrap, acks="all")
    for i in range(400, 460):
        md = prod.send(topic, key=b"user-%d" % (i % 13), value=b"state-%d-" % i + b"x" * 40).get(10)
        produced.append((md.offset, b"user-%d" % (i % 13), b"state-%d-" % i + b"x" * 40))
    prod.close()
    produced.sort()
    end = produced[-1][0] + 1
    assert end == len(produced) == 461

    # the server's cleaner (every 100 ms) compacts the sealed segments, a group of them per swap:
    # wait until a read shows them compacted (a read between two swaps sees part of it)
    deadline = time.monotonic() + 60
    got = _consume_all(server, topic, end)
    while len(got) >= len(produced) / 2 and time.monotonic() < deadline:
        time.sleep(0.2)
        got = _consume_all(server, topic, end)
    assert len(got) < len(produced) / 2, "the cleaner did not compact the topic"

    by_offset = {o: (k, v) for o, k, v in produced}
    assert all(by_offset[o] == (k, v) for o, k, v in got)  # offsets kept: each reads as produced
    assert [o for o, _, _ in got] == sorted({o for o, _, _ in got}) and got[-1][0] == end - 1

    def table(rows):
        state = {}
        for _, k, v in rows:
            if v is None:
                state.pop(k, None)
            else:
                state[k] = v
        return state

    assert table(got) == table(produced)

    # kafka-python from offset 0 reads the same table
    cons = kp.KafkaConsumer(bootstrap_servers=server.bootstrap, auto_offset_reset="earliest",
                            consumer_timeout_ms=8000, enable_auto_commit=False)
    tp = kp.TopicPartition(topic, 0)
    cons.assign([tp])
    cons.seek(tp, 0)
    rows = []
    for m in cons:
        rows.append((m.offset, m.key, m.value))
        if m.offset == end - 1:
            break
    cons.close()
    assert table(rows) == table(produced)
    assert set(rows) <= set(got)  # (a pass may have gone on since: only ever fewer records)

    # what the cleaner did is in /metrics
    metrics = {line.split(" ")[0]: float(line.split(" ")[1]) for line in
               httpx.get(f"{server.url}/metrics").text.splitlines() if line.startswith("vqs_cleaner_")}
    assert metrics["vqs_cleaner_records_removed_total"] >= len(produced) - len(got)
    assert metrics['vqs_cleaner_bytes_total{direction="in"}'] > metrics['vqs_cleaner_bytes_total{direction="out"}']
