"""Topic ids, and Metadata's flexible versions (9-12) that carry them.

Kafka names a topic by a UUID in its newer APIs (the share-group APIs,
Metadata v10+). A VQS topic's id is the broker's (``Topic.topic_id``, kept in
its topic.json): drawn when the topic is created, so a topic deleted and made
again under the same name has a new id, as in Kafka, and a request naming the
old id gets UNKNOWN_TOPIC_ID. The share state of a deleted topic is deleted
with it (vqs.broker.share), so a re-made topic starts a share group afresh.

``write_assignment`` and ``heartbeat_error`` write what ConsumerGroupHeartbeat
(KIP-848) and ShareGroupHeartbeat (KIP-932) answers share: the nullable
Assignment struct (partitions by topic id) and the error answer.

``metadata_flexible`` answers Metadata v9-12 (compact strings and arrays,
tagged fields; v10+: topic ids, and topics asked for by id: a null name and
the id; v11 dropped the cluster's authorized operations). librdkafka's share
consumer needs v12 to look up the topics of its assignment by id.
"""

from __future__ import annotations

from ... import errors as E
from ...broker.names import is_internal
from . import acls as A
from . import errors as K
from .admin import authorized_operations
from .codec import Writer


def write_assignment(w: Writer, broker, by_topic: dict | None) -> None:
    """A heartbeat answer's nullable Assignment: {topic name: [partition]} by topic id,
    topics in name order (None: -1, no change to report)."""
    if by_topic is None:
        w.int8(-1)
        return
    w.int8(1).compact_array(len(by_topic))
    for t, ps in sorted(by_topic.items()):
        w.b += topic_id(broker, t)
        w.compact_array(len(ps))
        for p in ps:
            w.int32(p)
        w.tags()
    w.tags()


def heartbeat_error(w: Writer, code: int, msg: str) -> bytes:
    """A heartbeat's error answer (after its throttle time): the code and message, no member
    id, epoch and interval 0, no assignment."""
    w.int16(code).compact_string(msg).compact_string(None).int32(0).int32(0).int8(-1)
    return bytes(w.tags().b)


_ZERO = bytes(16)
_by_id: dict[bytes, str] = {}  # id -> name of the topics seen (checked against the broker on use)


def topic_id(broker, name: str) -> bytes:
    """The 16 bytes of topic ``name``'s id; zeros if there is no such topic (any more)."""
    try:
        tid = broker.topic(name).topic_id
    except E.VQSError:
        return _ZERO
    if _by_id.get(tid) != name:
        if len(_by_id) > 100_000:  # bounded: ids of topics long deleted go
            _by_id.clear()
        _by_id[tid] = name
    return tid


def _current(broker, tid: bytes, name: str | None) -> str | None:
    """``name`` if it names the topic whose id is ``tid`` now."""
    if name is None:
        return None
    try:
        return name if broker.topic(name).topic_id == tid else None
    except E.VQSError:
        return None


def topic_name(broker, tid: bytes) -> str | None:
    """The name of the existing topic whose id is ``tid``, else None."""
    name = _current(broker, tid, _by_id.get(tid))
    if name is None:
        for n in broker.topics():
            topic_id(broker, n)
        name = _current(broker, tid, _by_id.get(tid))
    return name


def _resolve(ctx, conn, name: str, auto_create: bool) -> tuple[int, int]:
    """(error code, partition count) of topic ``name``, made if asked and allowed; a topic the
    principal may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED, whether it exists or not."""
    broker = ctx.broker
    if not A.allowed(ctx, conn, A.DESCRIBE, A.TOPIC, name):
        return K.TOPIC_AUTHORIZATION_FAILED, 0
    try:
        return K.NONE, broker.topic(name).partitions
    except E.TopicDoesNotExist:
        if not (auto_create and ctx.settings.kafka_auto_create_topics and A.may_create_topic(ctx, conn, name)):
            return K.UNKNOWN_TOPIC_OR_PARTITION, 0
        try:
            return K.NONE, broker.create_topic(name, ctx.settings.kafka_num_partitions).partitions
        except E.TopicAlreadyExists:
            return K.NONE, broker.topic(name).partitions
        except E.VQSError as e:
            return K.code_for(e), 0
    except E.VQSError as e:
        return K.code_for(e), 0


async def metadata_flexible(ctx, conn, v, r):
    n = r.compact_nullable_array_len(2)
    wanted = None  # null: every topic
    if n is not None:
        wanted = []
        for _ in range(n):
            tid = r.raw(16) if v >= 10 else _ZERO
            name = r.compact_string()
            r.tagged_fields()
            wanted.append((tid, name))
    auto_create = r.boolean()
    cluster_ops = r.boolean() if v <= 10 else False  # (v11 dropped the field)
    topic_ops = r.boolean()
    r.tagged_fields()
    if wanted is None:  # all topics: VQS's internal ones (__spark_*) only when asked for by name
        wanted = [(_ZERO, name) for name in ctx.broker.topics()
                  if not is_internal(name) and A.allowed(ctx, conn, A.DESCRIBE, A.TOPIC, name)]
    w = Writer().int32(0)
    w.compact_array(1).int32(ctx.node_id).compact_string(ctx.host).int32(ctx.port).compact_string(None).tags()
    w.compact_string(ctx.cluster_id).int32(ctx.node_id)
    w.compact_array(len(wanted))
    for tid, name in wanted:
        if name is None:  # asked by id
            name = topic_name(ctx.broker, tid) if tid != _ZERO else None
            err, parts = (K.UNKNOWN_TOPIC_ID, 0) if name is None else _resolve(ctx, conn, name, False)
        else:
            err, parts = _resolve(ctx, conn, name, auto_create)
        w.int16(err).compact_string(name)
        if v >= 10:
            w.b += topic_id(ctx.broker, name) if name is not None and not err else (tid if tid else _ZERO)
        w.boolean(name is not None and is_internal(name))
        w.compact_array(parts)
        for p in range(parts):
            w.int16(0).int32(p).int32(ctx.node_id).int32(0)
            w.compact_array(1).int32(ctx.node_id).compact_array(1).int32(ctx.node_id).compact_array(0).tags()
        w.int32(authorized_operations(ctx, conn, A.TOPIC, name, topic_ops and not err)).tags()
    if v <= 10:
        w.int32(authorized_operations(ctx, conn, A.CLUSTER, A.CLUSTER_NAME, cluster_ops))
    return bytes(w.tags().b)
