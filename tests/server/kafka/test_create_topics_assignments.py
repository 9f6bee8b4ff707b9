"""CreateTopics with manual replica assignments, as Kafka: the assignments give the partition
count (librdkafka's test 0081_admin creates topics so); on this one-node broker each partition
is assigned the node itself, else INVALID_REPLICA_ASSIGNMENT. (A raw request: confluent-kafka's
NewTopic refuses a replica assignment before sending it.)"""

from __future__ import annotations

import uuid

import pytest
from raw_client import RawKafka

from vqs.server.kafka.codec import Writer

pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient

INVALID_REQUEST, INVALID_REPLICA_ASSIGNMENT = 42, 39


def _create(port: int, topic: str, assignment: list, parts: int = -1, rf: int = -1) -> int:
    """CreateTopics v4 of one topic with these replica lists (partition i: assignment[i])."""
    w = Writer().array(1).string(topic).int32(parts).int16(rf).array(len(assignment))
    for i, brokers in enumerate(assignment):
        w.int32(i).array(len(brokers))
        for b in brokers:
            w.int32(b)
    w.array(0).int32(10_000).boolean(False)
    k = RawKafka(port)
    try:
        r = k.request(19, 4, bytes(w.b))
        r.int32()
        assert r.int32() == 1 and r.string() == topic
        return r.int16()
    finally:
        k.close()


def test_manual_assignments_give_the_partition_count(kafka_server):
    topic = f"assigned-{uuid.uuid4().hex[:8]}"
    assert _create(kafka_server.kafka_port, topic, [[0]] * 5) == 0
    md = AdminClient({"bootstrap.servers": kafka_server.bootstrap}).list_topics(topic, timeout=10).topics[topic]
    assert md.error is None and len(md.partitions) == 5
    assert all(p.replicas == [0] for p in md.partitions.values())


@pytest.mark.parametrize(("assignment", "parts", "code"), [
    ([[1]], -1, INVALID_REPLICA_ASSIGNMENT),  # a node that does not exist
    ([[0, 0]], -1, INVALID_REPLICA_ASSIGNMENT),
    ([[0], []], -1, INVALID_REPLICA_ASSIGNMENT),
    ([[0]], 3, INVALID_REQUEST),  # a partition count besides the assignments
])
def test_an_impossible_assignment_is_refused(kafka_server, assignment, parts, code):
    topic = f"assigned-{uuid.uuid4().hex[:8]}"
    assert _create(kafka_server.kafka_port, topic, assignment, parts) == code
    assert topic not in AdminClient({"bootstrap.servers": kafka_server.bootstrap}).list_topics(timeout=10).topics
