"""OffsetForLeaderEpoch against a real server, raw in every version (Java's consumer validates a
committed position through it whenever a broker lists v3+; librdkafka 2.x, with Metadata v12,
resumed at a committed offset of epoch 0 without asking: its epoch matched the leader's)."""

from __future__ import annotations

import uuid

import pytest
from raw_client import RawKafka

from vqs.server.kafka.codec import Reader, Writer

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _request(v: int, topic: str, parts: list[tuple[int, int, int]]) -> bytes:
    """(partition, current leader epoch, leader epoch) per partition, one topic."""
    flex = v >= 4
    w = Writer()
    if v >= 3:
        w.int32(-1)
    (w.compact_array(1).compact_string(topic) if flex else w.array(1).string(topic))
    w.compact_array(len(parts)) if flex else w.array(len(parts))
    for p, current, epoch in parts:
        w.int32(p)
        if v >= 2:
            w.int32(current)
        w.int32(epoch)
        if flex:
            w.tags()
    if flex:
        w.tags().tags()
    return bytes(w.b)


@pytest.mark.parametrize("v", [0, 1, 2, 3, 4])
def test_every_epoch_ends_at_the_end_offset(kafka_server, v):
    admin = AdminClient({"bootstrap.servers": kafka_server.bootstrap})
    topic = _name("epoch")
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(10)
    p = ck.Producer({"bootstrap.servers": kafka_server.bootstrap})
    for i in range(7):
        p.produce(topic, value=b"v%d" % i, partition=0)
    assert p.flush(10) == 0
    k = RawKafka(kafka_server.kafka_port)
    k.corr += 1
    head = Writer().int16(23).int16(v).int32(k.corr).string("raw-test")
    if v >= 4:
        head.tags()
    k.send_frame(bytes(head.b) + _request(v, topic, [(0, 0, 0), (1, -1, 0), (0, -1, -1), (0, 3, 0), (9, 0, 0)]))
    r = Reader(k.recv_frame())
    assert r.int32() == k.corr
    if v >= 4:
        r.tagged_fields()
    if v >= 2:
        assert r.int32() == 0
    flex = v >= 4
    assert (r.compact_array_len() if flex else r.array_len()) == 1
    assert (r.compact_string() if flex else r.string()) == topic
    got = []
    for _ in range(r.compact_array_len() if flex else r.array_len()):
        err, part = r.int16(), r.int32()
        epoch = r.int32() if v >= 1 else None
        got.append((err, part, epoch, r.int64()))
        if flex:
            r.tagged_fields()
    one = 0 if v >= 1 else None
    undefined = -1 if v >= 1 else None
    assert got == [(0, 0, one, 7), (0, 1, one, 0), (0, 0, undefined, -1),
                   (75 if v >= 2 else 0, 0, undefined if v >= 2 else one, -1 if v >= 2 else 7),
                   (3, 9, undefined, -1)]  # UNKNOWN_LEADER_EPOCH; UNKNOWN_TOPIC_OR_PARTITION
    k.close()

