"""The cluster-level APIs against a real server: arrays bounded before anything is allocated."""

from __future__ import annotations

import pytest
from raw_client import RawKafka

from vqs.server.kafka.codec import Writer


@pytest.mark.parametrize("count, frame_bytes", [
    (1_000_001, 2 * 1_000_001),  # over Kafka's 1,000,000 elements, though the bytes are there
    (50_000, 10),                 # more elements than the bytes left could hold
])
def test_an_oversized_array_closes_the_connection_before_allocating(kafka_server, count, frame_bytes):
    k = RawKafka(kafka_server.kafka_port)
    k.corr += 1
    head = Writer().int16(3).int16(1).int32(k.corr).string("raw-test").int32(count)  # Metadata topics
    k.send_frame(bytes(head.b) + b"\0" * frame_bytes)  # empty strings: 2 bytes each
    assert k.recv_frame() is None
    k = RawKafka(kafka_server.kafka_port)  # DescribeConfigs' key list (read through the same rule)
    k.corr += 1
    head = (Writer().int16(32).int16(1).int32(k.corr).string("raw-test").array(1).int8(2).string("t")
            .int32(count))
    k.send_frame(bytes(head.b) + b"\0" * frame_bytes)
    assert k.recv_frame() is None
    k = RawKafka(kafka_server.kafka_port)
    assert k.request(18, 0, b"").int16() == 0  # the server carries on
    k.close()
    assert "at most 1000000 items" in kafka_server.log()
