"""Admin APIs: CreatePartitions, DeleteRecords, DeleteGroups, OffsetDelete, DescribeCluster;
the authorized operations that Metadata, DescribeGroups and DescribeCluster answer.

Each is a thin translation to the broker's public surface (``Broker.create_partitions``,
``Broker.delete_records``, the group coordinator and group offsets), answered per
topic/partition/group as Kafka does: one bad entry fails only itself. Every
array count is checked against the bytes left before anything is allocated
(``Reader.array_len``). Each checks the principal's ACLs first (acls.py), as Kafka:
ALTER on a topic to add partitions, DELETE on a topic to delete records, DELETE on a
group to delete it or its offsets (and READ on each topic), DESCRIBE on the cluster.
"""

from __future__ import annotations

from ... import errors as E
from . import acls as A
from . import errors as K
from .codec import ProtocolError, Reader, Writer

NOT_REQUESTED = -2147483648  # the authorized-operations field when the client did not ask


def authorized_operations(ctx, conn, rtype: int, name: str, requested: bool) -> int:
    """The authorized-operations field of a resource (acls.TOPIC, GROUP or CLUSTER) in an
    answer: the operations Kafka defines on it that the connection's principal may do (its
    ACLs, acls.py), when asked; else NOT_REQUESTED."""
    return A.operations(ctx, conn, rtype, name) if requested else NOT_REQUESTED


def _total_partitions(ctx) -> int:
    total = 0
    for name in ctx.broker.topics():
        try:
            total += ctx.broker.topic(name).partitions
        except E.TopicDoesNotExist:  # deleted since listed: holds none
            pass
    return total


async def create_partitions(ctx, conn, v, r):
    topics = []
    for _ in range(r.array_len(2 + 4 + 4)):
        name = r.string()
        count = r.int32()
        n = r.int32()  # assignments: null, or one list of broker ids per new partition
        assignments = None
        if n != -1:
            if n < 0 or n * 4 > r.remaining:
                raise ProtocolError(f"array of {n} assignments cannot fit in the frame")
            assignments = [[r.int32() for _ in range(r.array_len(4))] for _ in range(n)]
        topics.append((name, count, assignments))
    r.int32()  # timeout: the answer is given when the partitions exist
    validate_only = r.boolean()
    seen: dict[str, int] = {}
    for name, _, _ in topics:
        seen[name] = seen.get(name, 0) + 1
    w = Writer().int32(0).array(len(topics))
    limit = ctx.settings.max_partitions_per_topic
    for name, count, assignments in topics:
        err, msg = K.NONE, None
        try:
            if not A.allowed(ctx, conn, A.ALTER, A.TOPIC, name):
                raise A.Refused(K.TOPIC_AUTHORIZATION_FAILED)
            current = ctx.broker.topic(name).partitions
        except A.Refused as e:
            err, msg, current = e.code, "ALTER on the topic is not allowed", 0
        except E.VQSError as e:
            err, msg, current = K.code_for(e), str(e), 0
        if err:
            pass
        elif seen[name] > 1:
            err, msg = K.INVALID_REQUEST, f"topic {name!r} appears more than once in the request"
        elif count <= current:
            err, msg = K.INVALID_PARTITIONS, (
                f"topic {name!r} already has {current} partitions" if count == current else
                f"topic {name!r} has {current} partitions, more than the requested {count}: "
                "partitions cannot be removed")
        elif count > limit:
            err, msg = K.INVALID_PARTITIONS, f"{count} partitions exceed max_partitions_per_topic ({limit})"
        elif (total := _total_partitions(ctx)) + count - current > ctx.settings.max_total_partitions:
            err, msg = K.INVALID_PARTITIONS, (
                f"the server holds {total} partitions; {count - current} more would pass "
                f"max_total_partitions ({ctx.settings.max_total_partitions})")
        elif assignments is not None and (len(assignments) != count - current or
                                          any(a != [ctx.node_id] for a in assignments)):
            err, msg = K.INVALID_REPLICA_ASSIGNMENT, (
                f"this broker is one node (id {ctx.node_id}): each of the {count - current} new "
                f"partitions is assigned [{ctx.node_id}]")
        elif not validate_only:
            try:
                await ctx.blocking(ctx.broker.create_partitions, name, count)
            except E.VQSError as e:
                err, msg = K.code_for(e), str(e)
                if isinstance(e, E.ConfigError):
                    err = K.INVALID_PARTITIONS
        w.string(name).int16(err).string(msg)
    return bytes(w.b)


async def delete_records(ctx, conn, v, r):
    topics = []
    for _ in range(r.array_len(2 + 4)):
        name = r.string()
        topics.append((name, [(r.int32(), r.int64()) for _ in range(r.array_len(12))]))
    r.int32()  # timeout
    deletable = {name: A.allowed(ctx, conn, A.DELETE, A.TOPIC, name) for name, _ in topics}

    def work():
        out = []
        for name, parts in topics:
            rows = []
            for p, offset in parts:
                if not deletable[name]:
                    rows.append((p, -1, K.TOPIC_AUTHORIZATION_FAILED))
                    continue
                try:
                    if offset < -1:
                        raise E.OffsetOutOfRange(f"offset {offset} is not an offset", offset=offset,
                                                 start_offset=-1, end_offset=-1)
                    rows.append((p, ctx.broker.delete_records(name, p, offset), K.NONE))
                except E.VQSError as e:
                    rows.append((p, -1, K.code_for(e)))
            out.append((name, rows))
        return out

    w = Writer().int32(0).array(len(topics))
    for name, rows in await ctx.blocking(work):
        w.string(name).array(len(rows))
        for p, low, err in rows:
            w.int32(p).int64(low).int16(err)
    return bytes(w.b)


def _subscribed(ctx, group: str) -> set[str] | None:
    """The topics ``group``'s live members subscribe to (empty: no members); None when a member's
    subscription is not known (a Kafka protocol other than "consumer", or metadata that does not
    parse). Raises InvalidName for a bad group id."""
    coordinator = ctx.broker.coordinator
    consumer_members = coordinator.consumer.describe(group)  # consumer protocol (KIP-848)
    if consumer_members is not None:
        return {t for m in consumer_members["members"] for t in m["subscribed"]} or None
    vqs_members = coordinator.assigned.describe(group)
    if vqs_members is not None:
        return {t for m in vqs_members["members"] for t in m["topics"]}
    d = coordinator.describe(group)
    if not d["members"]:
        return set()
    if d["protocol_type"] != "consumer":
        return None
    topics: set[str] = set()
    for member in d["members"]:
        r = Reader(member[4])  # ConsumerProtocolSubscription: version, topics, ...
        try:
            r.int16()
            topics.update(r.string() for _ in range(r.array_len(2)))
        except ProtocolError:
            return None
    return topics


async def delete_groups(ctx, conn, v, r):
    names = [r.string() for _ in range(r.array_len(2))]

    def work(name: str) -> int:
        # Members are checked, then the offsets deleted and the coordinator's record dropped (the
        # group is Dead, as Kafka's DescribeGroups then says): a member joining in between finds
        # no offsets and starts at its reset position, as after any DeleteGroups, and keeps the
        # record (``forget`` leaves a group with members).
        try:
            if _subscribed(ctx, name) != set():
                return K.NON_EMPTY_GROUP
            had_offsets = ctx.broker.delete_group(name)
            # no offsets: a group the coordinator knows (it had members) is deleted all the same
            known = ctx.broker.coordinator.forget(name)
            return K.NONE if had_offsets or known else K.GROUP_ID_NOT_FOUND
        except E.InvalidName:
            return K.INVALID_GROUP_ID
        except E.VQSError as e:
            return K.code_for(e)

    w = Writer().int32(0).array(len(names))
    for name in names:
        if not A.allowed(ctx, conn, A.DELETE, A.GROUP, name):
            w.string(name).int16(K.GROUP_AUTHORIZATION_FAILED)
            continue
        w.string(name).int16(await ctx.blocking(work, name))
    return bytes(w.b)


async def offset_delete(ctx, conn, v, r):
    group = r.string()
    topics = []
    for _ in range(r.array_len(2 + 4)):
        name = r.string()
        topics.append((name, [r.int32() for _ in range(r.array_len(4))]))
    may_delete = A.allowed(ctx, conn, A.DELETE, A.GROUP, group)
    readable = {name: A.allowed(ctx, conn, A.READ, A.TOPIC, name) for name, _ in topics}

    def work() -> tuple[int, dict]:
        codes: dict = {}
        if not may_delete:
            return K.GROUP_AUTHORIZATION_FAILED, codes
        try:
            subscribed = _subscribed(ctx, group)
            if group not in ctx.broker.groups():
                return K.GROUP_ID_NOT_FOUND, codes
        except E.InvalidName:
            return K.INVALID_GROUP_ID, codes
        if subscribed is None:
            return K.NON_EMPTY_GROUP, codes
        doomed = []
        for name, parts in topics:
            for p in parts:
                if not readable[name]:
                    codes[(name, p)] = K.TOPIC_AUTHORIZATION_FAILED
                    continue
                if name in subscribed:
                    codes[(name, p)] = K.GROUP_SUBSCRIBED_TO_TOPIC
                    continue
                try:
                    ctx.broker.topic(name).log(p)
                    codes[(name, p)] = K.NONE
                    doomed.append((name, p))
                except E.VQSError as e:
                    codes[(name, p)] = K.code_for(e)
        try:
            ctx.broker.delete_group_offsets(group, doomed)
        except E.VQSError as e:
            code = K.COORDINATOR_LOAD_IN_PROGRESS if isinstance(e, E.DiskFullError) else K.code_for(e)
            return code, {}
        return K.NONE, codes

    err, codes = await ctx.blocking(work)
    w = Writer().int16(err).int32(0)
    if err:
        return bytes(w.array(0).b)
    w.array(len(topics))
    for name, parts in topics:
        w.string(name).array(len(parts))
        for p in parts:
            w.int32(p).int16(codes[(name, p)])
    return bytes(w.b)


async def describe_cluster(ctx, conn, v, r):
    """DescribeCluster v0 (flexible: compact strings and arrays, tagged fields)."""
    ops = authorized_operations(ctx, conn, A.CLUSTER, A.CLUSTER_NAME, r.boolean())
    r.tagged_fields()
    if not A.cluster_allowed(ctx, conn, A.DESCRIBE):
        w = Writer().int32(0).int16(K.CLUSTER_AUTHORIZATION_FAILED)
        w.compact_string("DESCRIBE on the cluster is not allowed").compact_string(ctx.cluster_id).int32(-1)
        return bytes(w.compact_array(0).int32(NOT_REQUESTED).tags().b)
    w = Writer().int32(0).int16(K.NONE).compact_string(None).compact_string(ctx.cluster_id).int32(ctx.node_id)
    w.compact_array(1).int32(ctx.node_id).compact_string(ctx.host).int32(ctx.port).compact_string(None).tags()
    return bytes(w.int32(ops).tags().b)
