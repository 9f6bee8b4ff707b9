"""Fetch's response max_bytes as Kafka applies it (KIP-74): only the first partition that
answers data may go over it (by its first batch); later partitions get whole batches
within what is left, or nothing this time. librdkafka sizes its receive buffer by this
(``receive.message.max.bytes`` just above ``fetch.max.bytes``), so a response over it is
refused and the consumer never progresses (librdkafka's test 0082_fetch_max_bytes)."""

from __future__ import annotations

import uuid

import pytest
from raw_client import RawKafka

from vqs.server.kafka.codec import Writer
from vqs.server.kafka.records import encode_records

pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic

VALUE = 10_000  # one record per batch, one batch per partition


def _fetch(k: RawKafka, topic: str, parts: int, max_bytes: int, part_max: int) -> dict[int, tuple]:
    """Fetch v11 of ``parts`` partitions from offset 0: {partition: (error, high watermark, bytes)}."""
    w = Writer().int32(-1).int32(0).int32(1).int32(max_bytes).int8(0).int32(0).int32(-1)
    w.array(1).string(topic).array(parts)
    for p in range(parts):
        w.int32(p).int32(-1).int64(0).int64(-1).int32(part_max)
    w.array(0).string("")
    r = k.request(1, 11, bytes(w.b))
    r.int32()
    assert r.int16() == 0
    r.int32()
    assert r.array_len() == 1 and r.string() == topic
    out = {}
    for _ in range(r.array_len()):
        p, err, hw = r.int32(), r.int16(), r.int64()
        r.int64()
        r.int64()
        assert r.array_len(0) == 0
        r.int32()
        out[p] = (err, hw, len(r.bytes_()))
    return out


@pytest.mark.parametrize("max_bytes", [int(VALUE * 1.5), 1_000])
def test_only_the_first_partition_with_data_goes_over_max_bytes(kafka_server, max_bytes):
    topic = f"fetchlimit-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_server.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(10)
    k = RawKafka(kafka_server.kafka_port)
    try:
        for p in range(3):
            assert k.produce(topic, p, encode_records(0, [bytes([65 + p]) * VALUE], timestamps=[1_000])) == (0, 0)
        got = _fetch(k, topic, 3, max_bytes, 1 << 20)
        assert all(err == 0 and hw == 1 for err, hw, _ in got.values()), got
        assert got[0][2] > VALUE  # the first partition's batch, even over max_bytes
        assert got[1][2] == got[2][2] == 0, got  # nothing more once max_bytes is reached
        # the partition's own limit is kept the same way past the first partition
        got = _fetch(k, topic, 3, 1 << 20, 1_000)
        assert got[0][2] > VALUE and got[1][2] == got[2][2] == 0, got
    finally:
        k.close()
