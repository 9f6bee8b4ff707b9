"""The Kafka listener on a real full filesystem (a 3 MiB tmpfs, tests/conftest.py),
default server settings: a produce answers KAFKA_STORAGE_ERROR (retriable) for its
partition; InitProducerId, which has to write a new block of producer ids, answers
COORDINATOR_LOAD_IN_PROGRESS (what Kafka answers while it has no id block: every
client retries it), never a closed connection, and so does a group's first
OffsetCommit (it has no spare offsets file yet); once space is freed both work, and
an idempotent confluent-kafka producer created on the full disk delivers."""

from __future__ import annotations

import os

import pytest
from raw_client import RawKafka

from vqs.server.kafka.codec import Writer
from vqs.server.kafka.records import encode_records

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kafka_server_proc import KafkaServer  # noqa: E402

KAFKA_STORAGE_ERROR, COORDINATOR_LOAD_IN_PROGRESS = 56, 14


def _init_producer_id_error(k: RawKafka) -> int:
    r = k.request(22, 1, bytes(Writer().string(None).int32(60_000).b))
    r.int32()
    return r.int16()


def _offset_commit_error(k: RawKafka, group: str, topic: str) -> int:
    """OffsetCommit v2 of offset 1 of ``topic``'s partition 0 by ``group`` (no member)."""
    body = (Writer().string(group).int32(-1).string("").int64(-1).array(1).string(topic).array(1)
            .int32(0).int64(1).string(None))
    r = k.request(8, 2, bytes(body.b))
    assert r.int32() == 1
    r.string()
    assert r.int32() == 1
    r.int32()
    return r.int16()


def test_kafka_produce_and_init_producer_id_on_a_full_disk(small_disk):
    server = KafkaServer(os.path.join(small_disk.path, "data")).start()
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        admin.create_topics([NewTopic("full", num_partitions=1, replication_factor=1)])["full"].result(10)
        k = RawKafka(server.kafka_port)
        small_disk.fill(1 << 20)
        small_disk.fill_rest()
        big = encode_records(0, [b"x" * 60_000] * 4, timestamps=1_000)
        errors = {k.produce("full", 0, big)[0] for _ in range(3)}  # the last page may take one
        assert KAFKA_STORAGE_ERROR in errors and errors <= {0, KAFKA_STORAGE_ERROR}
        assert _init_producer_id_error(k) == COORDINATOR_LOAD_IN_PROGRESS  # and the connection stays
        assert _init_producer_id_error(k) == COORDINATOR_LOAD_IN_PROGRESS
        # a group's first commit has no spare offsets file yet: retriable, not KAFKA_STORAGE_ERROR
        assert _offset_commit_error(k, "new-group", "full") == COORDINATOR_LOAD_IN_PROGRESS

        delivered = []
        p = ck.Producer({"bootstrap.servers": server.bootstrap, "enable.idempotence": True,
                         "message.timeout.ms": 30_000, "retry.backoff.max.ms": 200})
        p.produce("full", b"idempotent", on_delivery=lambda e, m: delivered.append(e))
        p.poll(1.0)
        assert delivered == []  # waiting for its producer id, not failed

        small_disk.free()
        pid, _ = k.init_producer_id()
        assert pid >= 0
        assert k.produce("full", 0, encode_records(0, [b"after"], timestamps=1_000))[0] == 0
        assert _offset_commit_error(k, "new-group", "full") == 0
        assert p.flush(20) == 0 and delivered == [None]
        k.close()
    finally:
        rc = server.stop()
    assert rc == 0, server.log()[-3000:]
    assert "after an unexpected error" not in server.log()
