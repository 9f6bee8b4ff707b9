"""confluent-kafka's AdminClient against a real ``vqs serve --kafka-port``: CreatePartitions,
DeleteRecords, DeleteGroups, OffsetDelete, commit metadata, DescribeCluster."""

from __future__ import annotations

import uuid

import pytest

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic  # noqa: E402


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _admin(server) -> AdminClient:
    return AdminClient({"bootstrap.servers": server.bootstrap})


def _create(admin, name: str, partitions: int) -> None:
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(10)


def _produce(server, topic: str, n: int, partition: int = 0) -> None:
    p = ck.Producer({"bootstrap.servers": server.bootstrap})
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), partition=partition)
    assert p.flush(10) == 0


def _partitions(admin, topic: str) -> int:
    return len(admin.list_topics(topic, timeout=10).topics[topic].partitions)


def _code(fut) -> int:
    with pytest.raises(ck.KafkaException) as e:
        fut.result(10)
    return e.value.args[0].code()


def test_create_partitions_grows_validates_and_refuses_shrinking(kafka_server):
    admin = _admin(kafka_server)
    topic = _name("grow")
    _create(admin, topic, 2)
    _produce(kafka_server, topic, 5, partition=1)
    admin.create_partitions([NewPartitions(topic, 5)], validate_only=True)[topic].result(10)
    assert _partitions(admin, topic) == 2  # validate_only changed nothing
    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(10)
    assert _partitions(admin, topic) == 5
    assert _code(admin.create_partitions([NewPartitions(topic, 3)])[topic]) == KafkaError.INVALID_PARTITIONS
    assert _code(admin.create_partitions([NewPartitions(topic, 5)])[topic]) == KafkaError.INVALID_PARTITIONS
    missing = _name("nope")
    assert _code(admin.create_partitions([NewPartitions(missing, 3)])[missing]) == \
        KafkaError.UNKNOWN_TOPIC_OR_PART
    # the new partitions take records; the old ones kept theirs
    _produce(kafka_server, topic, 3, partition=4)
    c = ck.Consumer({"bootstrap.servers": kafka_server.bootstrap, "group.id": _name("g")})
    assert c.get_watermark_offsets(TopicPartition(topic, 1), timeout=10) == (0, 5)
    assert c.get_watermark_offsets(TopicPartition(topic, 4), timeout=10) == (0, 3)
    c.close()


def test_delete_records_moves_the_low_watermark(kafka_server):
    admin = _admin(kafka_server)
    topic = _name("delrec")
    _create(admin, topic, 2)
    _produce(kafka_server, topic, 10, partition=0)
    _produce(kafka_server, topic, 4, partition=1)
    res = admin.delete_records([TopicPartition(topic, 0, 6)])
    got = res[TopicPartition(topic, 0, 6)].result(10)
    assert got.low_watermark == 6
    c = ck.Consumer({"bootstrap.servers": kafka_server.bootstrap, "group.id": _name("g"),
                     "auto.offset.reset": "earliest"})
    assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (6, 10)
    c.assign([TopicPartition(topic, 0, 0)])  # below the start: reset to it
    msg = c.poll(10)
    assert msg is not None and not msg.error() and msg.offset() == 6
    c.close()
    # -1: up to the high watermark
    tp_all = TopicPartition(topic, 1, -1)
    assert admin.delete_records([tp_all])[tp_all].result(10).low_watermark == 4
    # past the high watermark
    tp_far = TopicPartition(topic, 0, 11)
    assert _code(admin.delete_records([tp_far])[tp_far]) == KafkaError.OFFSET_OUT_OF_RANGE
