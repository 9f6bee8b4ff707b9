"""Metadata's flexible versions asked for topics by id (v12), as librdkafka's share consumer does."""

from __future__ import annotations

import uuid

from raw_client import RawKafka

from vqs.server.kafka.codec import Writer

UNKNOWN_TOPIC_ID = 100


def _metadata_by_id(raw: RawKafka, tid: bytes):
    w = Writer().compact_array(1)
    w.b += tid
    w.compact_string(None).tags()
    w.boolean(False).boolean(False).tags()  # allow auto-create, topic authorized operations
    r = raw.flex_request(3, 12, bytes(w.b))
    r.int32()  # throttle
    for _ in range(r.compact_array_len(0)):  # brokers
        r.int32(), r.compact_string(), r.int32(), r.compact_string(), r.tagged_fields()
    r.compact_string(), r.int32()  # cluster id, controller
    topics = []
    for _ in range(r.compact_array_len(0)):
        err, name, got = r.int16(), r.compact_string(), r.raw(16)
        r.boolean()
        parts = r.compact_array_len(0)
        assert parts == 0 or not err  # no partitions for an unknown topic
        for _ in range(parts):
            r.int16(), r.int32(), r.int32(), r.int32()  # error, partition, leader, leader epoch
            for _ in range(3):  # replicas, in-sync replicas, offline replicas
                [r.int32() for _ in range(r.compact_array_len(0))]
            r.tagged_fields()
        r.int32(), r.tagged_fields()
        topics.append((err, name, got))
    return topics


def test_a_topic_asked_by_an_unknown_id_is_unknown_topic_id_and_the_connection_stays(kafka_server):
    # a deleted (or never made) topic's id: librdkafka asks for it after a topic deletion
    tid = uuid.uuid4().bytes
    raw = RawKafka(kafka_server.kafka_port)
    try:
        assert _metadata_by_id(raw, tid) == [(UNKNOWN_TOPIC_ID, None, tid)]
        assert _metadata_by_id(raw, tid) == [(UNKNOWN_TOPIC_ID, None, tid)]  # same connection, still served
    finally:
        raw.close()


def test_a_topic_made_again_under_its_name_has_a_new_id_and_the_old_one_is_unknown(kafka_server):
    """As Kafka's (librdkafka's 0184 checks it): clients that name topics by id tell the new
    topic from the one deleted."""
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"remade-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_server.bootstrap})
    raw = RawKafka(kafka_server.kafka_port)
    try:
        admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(10)
        first = raw.topic_id(name)
        assert first != bytes(16) and _metadata_by_id(raw, first)[0][:2] == (0, name)
        admin.delete_topics([name])[name].result(10)
        admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(10)
        again = raw.topic_id(name)
        assert again not in (first, bytes(16))
        assert _metadata_by_id(raw, first)[0][0] == UNKNOWN_TOPIC_ID
        assert _metadata_by_id(raw, again)[0][:2] == (0, name)
    finally:
        raw.close()
