"""ShareGroupHeartbeat with subscribed names no topic can have: share groups take no regex, so
``^orders$`` is a literal name of no topic, assigned nothing, and the member is not refused."""

from __future__ import annotations

import uuid

from raw_client import RawKafka

from vqs.server.kafka.codec import Writer


def _join(raw: RawKafka, group: str, topics: list[str]) -> tuple[int, str | None, dict]:
    w = Writer().compact_string(group).compact_string(str(uuid.uuid4())).int32(0).compact_string(None)
    w.compact_array(len(topics))
    for t in topics:
        w.compact_string(t)
    r = raw.flex_request(76, 1, bytes(w.tags().b))
    r.int32()  # throttle
    err, msg = r.int16(), r.compact_string()
    if err:
        return err, msg, {}
    r.compact_string(), r.int32(), r.int32()  # member id, epoch, heartbeat interval
    assigned = {}
    if r.int8() >= 0:  # the assignment (nullable struct)
        for _ in range(r.compact_array_len(0)):
            tid = r.raw(16)
            assigned[tid] = sorted(r.int32() for _ in range(r.compact_array_len(0)))
            r.tagged_fields()
    return err, msg, assigned


def test_a_caret_name_is_a_literal_of_no_topic_not_an_invalid_group(kafka_server):
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"lit-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_server.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    raw = RawKafka(kafka_server.kafka_port)
    try:
        err, msg, assigned = _join(raw, f"g-{uuid.uuid4().hex[:8]}", [f"^{topic}$"])
        assert (err, assigned) == (0, {}), msg
        err, msg, assigned = _join(raw, f"g-{uuid.uuid4().hex[:8]}", [f"^{topic}$", topic])
        assert err == 0, msg
        assert list(assigned.values()) == [[0, 1]]  # the real topic's partitions, and nothing else
    finally:
        raw.close()
