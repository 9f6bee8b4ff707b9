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
        assert r.compact_array_len(0) == 0  # no partitions for an unknown topic
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
