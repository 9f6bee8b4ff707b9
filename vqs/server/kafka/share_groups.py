"""Share-group membership APIs: ShareGroupHeartbeat (76), ShareGroupDescribe (77) (a group's
configs, a GROUP resource of DescribeConfigs and (Incremental)AlterConfigs: configs.py).

Version 1 of each (the first stable one, Kafka 4.1+; what librdkafka 2.15+
sends), flexible. Membership and the assignment are the broker's share groups
(vqs.broker.share.groups): a member joins with epoch 0 and its topics, is
answered with its member id, epoch and partitions (by topic id), and
heartbeats every ``kafka_share_heartbeat_interval_ms``. The records are
share.py.
"""

from __future__ import annotations

from ... import errors as E
from ...broker.share.groups import FENCED_EPOCH, FULL, INVALID, UNKNOWN_MEMBER
from . import acls as A
from . import errors as K
from .admin import authorized_operations
from .codec import Writer
from .topic_ids import heartbeat_error, topic_id, write_assignment

FENCED_MEMBER_EPOCH = 110
GROUP_MAX_SIZE_REACHED = 81


def shares(ctx):
    """The broker's share groups (the server's settings on them since the listener was made:
    ``KafkaContext``)."""
    return ctx.broker.share_groups


# ---------------------------------------------------------------------- heartbeat

async def share_group_heartbeat(ctx, conn, v, r):
    group = r.compact_string()
    member = r.compact_string() or ""
    epoch = r.int32()
    r.compact_string()  # rack id
    n = r.compact_nullable_array_len(2)
    topics = None if n is None else [r.compact_string() for _ in range(n)]
    r.tagged_fields()
    sg = shares(ctx)
    w = Writer().int32(0)
    if not group or (topics is not None and any(not t for t in topics)):
        return heartbeat_error(w, K.INVALID_REQUEST, "a group id and topic names are required")
    if not A.allowed(ctx, conn, A.READ, A.GROUP, group):
        return heartbeat_error(w, K.GROUP_AUTHORIZATION_FAILED, "READ on the group is not allowed")
    if topics is not None and any(not A.allowed(ctx, conn, A.DESCRIBE, A.TOPIC, t) for t in topics):
        return heartbeat_error(w, K.TOPIC_AUTHORIZATION_FAILED, "DESCRIBE on a subscribed topic is not allowed")
    try:
        status, member, m_epoch, assignment = sg.heartbeat(
            group, member, epoch, topics, client_id=conn.client_id or "",
            client_host=str(conn.peer[0]) if conn.peer else "")
    except E.InvalidName as e:
        return heartbeat_error(w, K.INVALID_GROUP_ID, str(e))
    if status == UNKNOWN_MEMBER:
        return heartbeat_error(w, K.UNKNOWN_MEMBER_ID, f"member {member!r} is not in share group {group!r}")
    if status == FENCED_EPOCH:
        return heartbeat_error(w, FENCED_MEMBER_EPOCH, f"member epoch {epoch} is not the member's")
    if status == INVALID:
        return heartbeat_error(w, K.INVALID_REQUEST, "a member joins with its subscribed topic names")
    if status == FULL:
        return heartbeat_error(w, GROUP_MAX_SIZE_REACHED, f"share group {group!r} has its most members")
    w.int16(K.NONE).compact_string(None).compact_string(member).int32(m_epoch)
    w.int32(sg.settings_for(group).heartbeat_interval_ms)
    write_assignment(w, ctx.broker, assignment)
    return bytes(w.tags().b)


# ---------------------------------------------------------------------- listing

def listed(ctx, with_state: bool) -> list[tuple[str, str]]:
    """(name, state) of the share groups ListGroups shows (those with members or stored state):
    ``Stable`` with members, else ``Empty``; state "" unless ``with_state`` (ListGroups v0-3
    carry no state)."""
    sg = shares(ctx)
    out = []
    for name in sg.groups():
        state = ""
        if with_state:
            try:
                d = sg.describe(name)
            except E.InvalidName:
                continue
            state = "Stable" if d and d["members"] else "Empty"
        out.append((name, state))
    return out


# ---------------------------------------------------------------------- describe

async def share_group_describe(ctx, conn, v, r):
    groups = [r.compact_string() or "" for _ in range(r.compact_array_len(1))]
    ops = r.boolean()
    r.tagged_fields()
    sg = shares(ctx)
    w = Writer().int32(0).compact_array(len(groups))
    for group in groups:
        try:
            if not A.allowed(ctx, conn, A.DESCRIBE, A.GROUP, group):
                raise A.Refused(K.GROUP_AUTHORIZATION_FAILED)
            d = sg.describe(group) if group else None
            err = K.NONE if d is not None else K.GROUP_ID_NOT_FOUND
        except A.Refused as e:
            d, err = None, e.code
        except E.InvalidName:
            d, err = None, K.INVALID_GROUP_ID
        why = "DESCRIBE on the group is not allowed" if err == K.GROUP_AUTHORIZATION_FAILED else \
            f"share group {group!r} not found"
        w.int16(err).compact_string(None if not err else why)
        w.compact_string(group)
        members = d["members"] if d else []
        w.compact_string("Dead" if d is None else "Stable" if members else "Empty")
        epoch = d["epoch"] if d else -1
        w.int32(epoch).int32(epoch).compact_string("simple")
        w.compact_array(len(members))
        for m in members:
            w.compact_string(m["member_id"]).compact_string(None).int32(m["epoch"])
            w.compact_string(m["client_id"]).compact_string(m["client_host"])
            w.compact_array(len(m["topics"]))
            for t in m["topics"]:
                w.compact_string(t)
            w.compact_array(len(m["assignment"]))
            for t, ps in sorted(m["assignment"].items()):
                w.b += topic_id(ctx.broker, t)
                w.compact_string(t).compact_array(len(ps))
                for p in ps:
                    w.int32(p)
                w.tags()
            w.tags().tags()  # assignment, member
        w.int32(authorized_operations(ctx, conn, A.GROUP, group, ops and not err)).tags()
    return bytes(w.tags().b)
