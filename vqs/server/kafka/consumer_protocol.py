"""Kafka's consumer group protocol (KIP-848): ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69).

Versions 0-1 of each, flexible. Membership, epochs and the server-side
assignment are ``vqs.broker.consumer_groups`` (the group coordinator's
``consumer``, configured on first use with the server's ``kafka_consumer_*`` settings);
partitions travel by topic id (topic_ids.py), as Metadata v10+ names them.
Subscriptions are topic names and (v1) a pattern, matched against whole
non-internal topic names by topic_regex.py (linear time; a pattern it cannot
take is INVALID_REGULAR_EXPRESSION); what a pattern matches is cut, member by member, to the
topics its principal may DESCRIBE (acls.py), and a group is described only to a principal that
may DESCRIBE every topic it is assigned (else TOPIC_AUTHORIZATION_FAILED). The offsets of these groups are the classic OffsetCommit and
OffsetFetch (groups.py), checked here by ``check_commit``: a member commits
with its member epoch where the classic protocol has a generation.

A group id has members of one protocol at a time (checked under the group
coordinator's lock): a heartbeat joining a group that has classic (or VQS)
members is GROUP_ID_NOT_FOUND, and a JoinGroup into a group with members here
INCONSISTENT_GROUP_PROTOCOL, as Kafka answers when it does not convert a group.
"""

from __future__ import annotations

import time

from ... import errors as E
from ...broker import consumer_groups as CG
from ...broker.names import is_internal
from . import acls as A
from . import errors as K
from .admin import authorized_operations
from .codec import Writer
from .topic_ids import heartbeat_error, topic_id, topic_name, write_assignment
from .topic_regex import RegexError, TopicRegex

GROUP_MAX_SIZE_REACHED = 81
FENCED_MEMBER_EPOCH = 110
UNSUPPORTED_ASSIGNOR = 112
INVALID_REGULAR_EXPRESSION = 128
UNRELEASED_INSTANCE_ID = 111
STALE_MEMBER_EPOCH = 113

_STATUS = {CG.UNKNOWN_MEMBER: K.UNKNOWN_MEMBER_ID, CG.FENCED: FENCED_MEMBER_EPOCH,
           CG.INVALID: K.INVALID_REQUEST, CG.UNSUPPORTED_ASSIGNOR: UNSUPPORTED_ASSIGNOR,
           CG.FULL: GROUP_MAX_SIZE_REACHED, CG.NOT_THIS_PROTOCOL: K.GROUP_ID_NOT_FOUND,
           CG.STALE_EPOCH: STALE_MEMBER_EPOCH, CG.UNRELEASED_INSTANCE: UNRELEASED_INSTANCE_ID}
_MESSAGE = {CG.UNKNOWN_MEMBER: "member {m!r} is not in group {g!r}",
            CG.FENCED: "member epoch {e} is not the member's: rejoin with epoch 0",
            CG.INVALID: (f"a member joins with the topic names it subscribes to (at most {CG.MAX_TOPICS}, "
                         f"{CG.MAX_TOPIC_NAME} characters each); ids of at most {CG.MAX_ID} characters"),
            CG.UNSUPPORTED_ASSIGNOR: "server assignors: " + ", ".join(CG.ASSIGNORS),
            CG.FULL: f"group {{g!r}} has its most members ({CG.MAX_MEMBERS})",
            CG.NOT_THIS_PROTOCOL: "group {g!r} is a classic group, not a consumer-protocol group",
            CG.UNRELEASED_INSTANCE: "the instance id is held by a member of group {g!r} that has not left"}


def consumer_groups(ctx) -> CG.ConsumerGroups:
    """The coordinator's consumer-protocol groups (the server's settings and the pattern resolver on
    them since the listener was made: ``KafkaContext``)."""
    return ctx.broker.coordinator.consumer


class PatternTopics:
    """pattern -> the (non-internal) topics it matches, for regex subscriptions. Called under the
    coordinator's lock on every heartbeat, so it reads the topic list at most once a second
    (a topic made meanwhile is matched within a second, as Kafka refreshes regexes
    periodically) and keeps each pattern's answer until the list changes."""

    MAX_PATTERNS = 1000

    def __init__(self, broker):
        self._broker = broker
        self._names: list = []
        self._read_at = float("-inf")
        self._matches: dict[str, frozenset] = {}

    def __call__(self, pattern: str) -> frozenset:
        now = time.monotonic()
        if now - self._read_at >= 1.0:
            self._read_at = now
            names = self._broker.topics()
            if names != self._names:
                self._names, self._matches = names, {}
        hit = self._matches.get(pattern)
        if hit is None:
            if len(self._matches) >= self.MAX_PATTERNS:
                self._matches.clear()
            try:
                rx = TopicRegex(pattern)
            except RegexError:
                return frozenset()
            hit = self._matches[pattern] = frozenset(n for n in self._names if not is_internal(n) and rx.fullmatch(n))
        return hit


def has_members(ctx, group: str) -> bool:
    return consumer_groups(ctx).has_members(group)


def commit_status(ctx, group: str, member_id: str, epoch: int, partitions) -> int | None:
    """The Kafka error of a commit to a consumer-protocol group (0: allowed), or None when
    ``group`` is not one (the classic coordinator decides)."""
    if not has_members(ctx, group):
        return None
    status = consumer_groups(ctx).check_commit(group, member_id, epoch, partitions)
    return K.NONE if status == CG.OK else _STATUS[status]


# ---------------------------------------------------------------------- heartbeat

async def consumer_group_heartbeat(ctx, conn, v, r):
    group = r.compact_string()
    member = r.compact_string() or ""
    epoch = r.int32()
    instance = r.compact_string()
    rack = r.compact_string()
    rebalance_ms = r.int32()
    n = r.compact_nullable_array_len(1)
    topics = None if n is None else [r.compact_string() for _ in range(n)]
    regex = r.compact_string() if v >= 1 else None
    assignor = r.compact_string()
    n = r.compact_nullable_array_len(18)
    owned_ids = None
    if n is not None:
        owned_ids = []
        for _ in range(n):
            tid = r.uuid()
            owned_ids.append((tid, [r.int32() for _ in range(r.compact_array_len(4))]))
            r.tagged_fields()
    r.tagged_fields()
    w = Writer().int32(0)
    cg = consumer_groups(ctx)
    if not group or (topics is not None and any(not t for t in topics)):
        return heartbeat_error(w, K.INVALID_REQUEST, "a group id and topic names are required")
    if not A.allowed(ctx, conn, A.READ, A.GROUP, group):
        return heartbeat_error(w, K.GROUP_AUTHORIZATION_FAILED, "READ on the group is not allowed")
    if topics is not None and any(not A.allowed(ctx, conn, A.DESCRIBE, A.TOPIC, t) for t in topics):
        return heartbeat_error(w, K.TOPIC_AUTHORIZATION_FAILED, "DESCRIBE on a subscribed topic is not allowed")
    if regex:
        try:
            TopicRegex(regex)
        except RegexError as e:
            return heartbeat_error(w, INVALID_REGULAR_EXPRESSION, f"subscribed topic regex: {e}")
    owned = None
    if owned_ids is not None:
        owned = []
        for tid, parts in owned_ids:
            name = topic_name(ctx.broker, tid)
            if name is not None:
                owned += [(name, p) for p in parts]
    try:
        a = cg.heartbeat(group, member, epoch, topics=topics, regex=regex, assignor=assignor, owned=owned,
                         rebalance_timeout_ms=rebalance_ms, instance_id=instance, rack_id=rack,
                         client_id=conn.client_id or "", client_host=str(conn.peer[0]) if conn.peer else "",
                         visible=A.describable(ctx, conn))
    except E.InvalidName as e:
        return heartbeat_error(w, K.INVALID_GROUP_ID, str(e))
    if a.status != CG.OK:
        return heartbeat_error(w, _STATUS[a.status], _MESSAGE[a.status].format(m=member, g=group, e=epoch))
    w.int16(K.NONE).compact_string(None).compact_string(a.member_id).int32(a.epoch)
    w.int32(cg.heartbeat_interval_for(group))
    by_topic: dict | None = None
    if a.assignment is not None and epoch >= 0:
        by_topic = {}
        for t, p in a.assignment:
            by_topic.setdefault(t, []).append(p)
    write_assignment(w, ctx.broker, by_topic)
    return bytes(w.tags().b)


# ---------------------------------------------------------------------- describe

async def consumer_group_describe(ctx, conn, v, r):
    groups = [r.compact_string() or "" for _ in range(r.compact_array_len(1))]
    ops = r.boolean()
    r.tagged_fields()
    cg = consumer_groups(ctx)
    w = Writer().int32(0).compact_array(len(groups))
    for group in groups:
        d, err, msg = None, K.NONE, None
        try:
            if not A.allowed(ctx, conn, A.DESCRIBE, A.GROUP, group):
                err, msg = K.GROUP_AUTHORIZATION_FAILED, "DESCRIBE on the group is not allowed"
            else:
                d = cg.describe(group) if group else None
        except E.InvalidName as e:
            err, msg = K.INVALID_GROUP_ID, str(e)
        if d is None and not err:
            # A classic group, or committed offsets and no members: ListGroups lists those as
            # classic, so this answers as Kafka does for a classic group (clients then describe
            # it with DescribeGroups: librdkafka and Kafka's admin client fall back on this code)
            if group and (ctx.broker.coordinator.describe(group)["members"] or group in ctx.broker.groups()):
                err, msg = K.GROUP_ID_NOT_FOUND, f"group {group!r} is not a consumer-protocol group"
            else:
                err, msg = K.GROUP_ID_NOT_FOUND, f"group {group!r} not found"
        if d is not None and not _may_see_topics(ctx, conn, d):
            d, err, msg = None, K.TOPIC_AUTHORIZATION_FAILED, "DESCRIBE on a topic the group is assigned is not allowed"
        w.int16(err).compact_string(msg).compact_string(group)
        w.compact_string("Dead" if d is None else d["state"])
        w.int32(d["epoch"] if d else -1).int32(d["assignment_epoch"] if d else -1)
        w.compact_string(d["assignor"] if d else "")
        members = d["members"] if d else []
        w.compact_array(len(members))
        for m in members:
            w.compact_string(m["member_id"]).compact_string(m["instance_id"]).compact_string(m["rack_id"])
            w.int32(m["epoch"]).compact_string(m["client_id"]).compact_string(m["client_host"])
            w.compact_array(len(m["topics"]))
            for t in m["topics"]:
                w.compact_string(t)
            w.compact_string(m["regex"])
            _assignment(w, ctx.broker, m["assignment"])
            _assignment(w, ctx.broker, m["target"])
            if v >= 1:
                w.int8(1)  # member type: consumer protocol
            w.tags()
        w.int32(authorized_operations(ctx, conn, A.GROUP, group, ops and not err)).tags()
    return bytes(w.tags().b)


def _may_see_topics(ctx, conn, d: dict) -> bool:
    """May the connection DESCRIBE every topic the group's members are assigned or targeted?
    A group is described whole or not at all (Kafka's TOPIC_AUTHORIZATION_FAILED for it)."""
    topics = {t for m in d["members"] for t, _ in (*m["assignment"], *m["target"])}
    return all(A.allowed(ctx, conn, A.DESCRIBE, A.TOPIC, t) for t in topics)


def _assignment(w, broker, tps) -> None:
    by_topic: dict = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    w.compact_array(len(by_topic))
    for t, ps in sorted(by_topic.items()):
        w.b += topic_id(broker, t)
        w.compact_string(t).compact_array(len(ps))
        for p in ps:
            w.int32(p)
        w.tags()
    w.tags()
