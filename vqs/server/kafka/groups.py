"""Group APIs: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups,
DescribeGroups.

Membership is the broker's group coordinator (vqs/broker/coordinator.py),
called on the listener's loop (its lock guards memory only, never I/O). A
JoinGroup v4+ without a member id is answered MEMBER_ID_REQUIRED with one
(Kafka's KIP-394), which the client joins with. A
JoinGroup or SyncGroup that must wait for other members awaits the
coordinator's ``GroupWait`` (no thread held) while its connection is watched:
a connection that closes meanwhile cancels the wait, and the member leaves the
group at once instead of holding the rebalance until its timeout. Offsets are the broker's group offsets
(DATA/groups/G/offsets.json), the ones ``vqs group`` and REST show; a commit
is checked against the member's generation first (a fenced member commits
nothing) and is durable when answered. Commit metadata strings (at most
``MAX_METADATA`` bytes each, else OFFSET_METADATA_TOO_LARGE) and committed leader
epochs are kept with the offsets, and OffsetFetch answers all three as committed.
"""

from __future__ import annotations

from ... import errors as E
from ...broker.group_offsets import MAX_METADATA
from . import acls as A
from . import consumer_protocol, share_groups
from . import errors as K
from .admin import authorized_operations
from .codec import Writer

ST = K.COORDINATOR_STATUS


def _coordinator(ctx):
    return ctx.broker.coordinator


async def _answer(conn, wait):
    """A coordinator wait's result: at once when it needed no waiting, else awaited with the
    request parked (``Connection.park``: the connection's next requests are handled meanwhile;
    a close cancels the wait, and the member leaves)."""
    if wait.done:
        return wait.result
    conn.park()
    return await wait.wait_async()


async def join_group(ctx, conn, v, r):
    group = r.string()
    session = r.int32()
    rebalance = r.int32() if v >= 1 else session
    member = r.string()
    instance = r.nullable_string() if v >= 5 else None
    ptype = r.string()
    protocols = [(r.string(), r.bytes_()) for _ in range(r.array_len(6))]
    host = str(conn.peer[0]) if conn.peer else ""
    st = ctx.settings
    lo, hi = st.kafka_group_min_session_timeout_ms, st.kafka_group_max_session_timeout_ms
    refused = None
    if not A.allowed(ctx, conn, A.READ, A.GROUP, group):
        refused = K.GROUP_AUTHORIZATION_FAILED
    elif not (lo <= session <= hi and 0 < rebalance <= hi):
        # as Kafka: a member's timeouts within the broker's bounds, so no member holds a
        # rebalance (and the coordinator's wait for it) longer than the broker allows
        refused = K.INVALID_SESSION_TIMEOUT
    if refused is not None:
        w = Writer()
        if v >= 2:
            w.int32(0)
        w.int16(refused).int32(-1).string("").string("").string(member).array(0)
        return bytes(w.b)
    if v >= 4 and not member and not instance:
        # as Kafka (KIP-394): a member id first, which the client joins with, so a client that
        # drops a waiting join's answer joins again as the same member (coordinator.py)
        try:
            status, member = _coordinator(ctx).new_member_id(
                group, client_id=conn.client_id or "", protocol_type=ptype, protocols=protocols,
                session_timeout_ms=session)
            err = ST[status] or K.MEMBER_ID_REQUIRED
        except E.InvalidName:
            err = K.INVALID_GROUP_ID
        w = Writer().int32(0)
        w.int16(err).int32(-1).string("").string("").string(member).array(0)
        return bytes(w.b)
    try:
        wait = _coordinator(ctx).start_join(
            group, member, client_id=conn.client_id or "", client_host=host, protocol_type=ptype,
            protocols=protocols, session_timeout_ms=session, rebalance_timeout_ms=rebalance,
            group_instance_id=instance)
        res = await _answer(conn, wait)
        err = ST[res.status]
    except E.InvalidName:
        res, err = None, K.INVALID_GROUP_ID
    w = Writer()
    if v >= 2:
        w.int32(0)
    if res is None or err:
        w.int16(err).int32(-1).string("").string("").string(member).array(0)
        return bytes(w.b)
    w.int16(K.NONE).int32(res.generation).string(res.protocol).string(res.leader).string(res.member_id)
    w.array(len(res.members))
    for mid, inst, meta in res.members:
        w.string(mid)
        if v >= 5:
            w.string(inst)
        w.bytes_(meta)
    return bytes(w.b)


async def sync_group(ctx, conn, v, r):
    group = r.string()
    gen = r.int32()
    member = r.string()
    instance = r.nullable_string() if v >= 3 else None
    assignments = {r.string(): r.bytes_() for _ in range(r.array_len(6))}
    try:
        if not A.allowed(ctx, conn, A.READ, A.GROUP, group):
            raise A.Refused(K.GROUP_AUTHORIZATION_FAILED)
        wait = _coordinator(ctx).start_sync(group, gen, member, assignments, instance)
        status, data = await _answer(conn, wait)
        err = ST[status]
    except A.Refused as e:
        err, data = e.code, b""
    except E.InvalidName:
        err, data = K.INVALID_GROUP_ID, b""
    w = Writer()
    if v >= 1:
        w.int32(0)
    return bytes(w.int16(err).bytes_(data).b)


async def heartbeat(ctx, conn, v, r):
    group = r.string()
    gen = r.int32()
    member = r.string()
    instance = r.nullable_string() if v >= 3 else None
    try:
        if not A.allowed(ctx, conn, A.READ, A.GROUP, group):
            raise A.Refused(K.GROUP_AUTHORIZATION_FAILED)
        err = ST[_coordinator(ctx).heartbeat(group, gen, member, instance)]
    except A.Refused as e:
        err = e.code
    except E.InvalidName:
        err = K.INVALID_GROUP_ID
    w = Writer()
    if v >= 1:
        w.int32(0)
    return bytes(w.int16(err).b)


async def leave_group(ctx, conn, v, r):
    group = r.string()
    if v >= 3:
        members = []
        for _ in range(r.array_len(4)):
            members.append((r.string(), r.nullable_string()))
    else:
        members = [(r.string(), None)]
    errs = []
    top = K.NONE
    if not A.allowed(ctx, conn, A.READ, A.GROUP, group):
        top = K.GROUP_AUTHORIZATION_FAILED
        errs = [top] * len(members)
    for mid, inst in members if not top else ():
        try:
            errs.append(ST[_coordinator(ctx).leave(group, mid, inst)])
        except E.InvalidName:
            errs.append(K.INVALID_GROUP_ID)
    w = Writer()
    if v >= 1:
        w.int32(0)
    if v >= 3:
        w.int16(top).array(len(members))
        for (mid, inst), err in zip(members, errs):
            w.string(mid).string(inst).int16(err)
    else:
        w.int16(errs[0])
    return bytes(w.b)


class _Wire:
    """Reads a field in a request version's encoding: compact (flexible versions) or classic."""

    __slots__ = ("r", "flex")

    def __init__(self, r, flex: bool):
        self.r, self.flex = r, flex

    def string(self) -> str:
        s = self.r.compact_string() if self.flex else self.r.nullable_string()
        return s or ""

    def nullable_string(self) -> str | None:
        return self.r.compact_string() if self.flex else self.r.nullable_string()

    def array_len(self, min_item: int) -> int:
        return self.r.compact_array_len(min_item) if self.flex else self.r.array_len(min_item)

    def nullable_array_len(self, min_item: int) -> int | None:
        return self.r.compact_nullable_array_len(min_item) if self.flex else self.r.nullable_array_len(min_item)

    def tags(self) -> None:
        if self.flex:
            self.r.tagged_fields()


async def offset_commit(ctx, conn, v, r):
    """v2-9; 8+ flexible; 9 as 8, with a consumer-protocol member's epoch where the generation is
    (every version takes it so: librdkafka sends it in v7 too)."""
    f = _Wire(r, v >= 8)
    group = f.string()
    gen = r.int32()
    member = f.string()
    if v <= 4:
        r.int64()  # retention time
    instance = f.nullable_string() if v >= 7 else None
    topics = []
    for _ in range(f.array_len(6)):
        name = f.string()
        parts = []
        for _ in range(f.array_len(14)):
            p = r.int32()
            off = r.int64()
            epoch = r.int32() if v >= 6 else -1
            meta = f.nullable_string() or ""
            f.tags()
            parts.append((p, off, meta, epoch))
        f.tags()
        topics.append((name, parts))
    f.tags()
    codes = await _commit(ctx, conn, group, gen, member, instance, topics)
    w = Writer()
    if v >= 3:
        w.int32(0)
    if v >= 8:
        w.compact_array(len(topics))
        for name, parts in topics:
            w.compact_string(name).compact_array(len(parts))
            for p, *_ in parts:
                w.int32(p).int16(codes[(name, p)]).tags()
            w.tags()
        return bytes(w.tags().b)
    w.array(len(topics))
    for name, parts in topics:
        w.string(name).array(len(parts))
        for p, *_ in parts:
            w.int32(p).int16(codes[(name, p)])
    return bytes(w.b)


async def _commit(ctx, conn, group, gen, member, instance, topics) -> dict:
    """Each partition's error code of one OffsetCommit; the good ones committed (durable).
    The principal must READ the group, and each topic (as Kafka)."""
    broker = ctx.broker
    err = None
    if not A.allowed(ctx, conn, A.READ, A.GROUP, group):
        err = K.GROUP_AUTHORIZATION_FAILED
    else:  # a consumer-protocol member commits with its member epoch in the generation's place
        err = consumer_protocol.commit_status(ctx, group, member, gen, [(t, p[0]) for t, ps in topics for p in ps])
    if err is None:
        try:
            err = ST[_coordinator(ctx).check_commit(group, gen, member, instance)]
        except E.InvalidName:
            err = K.INVALID_GROUP_ID
    codes = {}
    good = {}
    metadata, epochs = {}, {}
    for name, parts in topics:
        readable = err or A.allowed(ctx, conn, A.READ, A.TOPIC, name)
        for p, off, meta, epoch in parts:
            code = err if readable else K.TOPIC_AUTHORIZATION_FAILED
            if not code and len(meta.encode()) > MAX_METADATA:
                code = K.OFFSET_METADATA_TOO_LARGE
            elif not code:
                try:
                    broker.topic(name).log(p)
                    if off < 0:
                        raise E.ConfigError("negative offset")
                    good[(name, p)] = off
                    if meta:
                        metadata[(name, p)] = meta
                    if epoch >= 0:
                        epochs[(name, p)] = epoch
                except E.VQSError as e:
                    code = K.code_for(e)
            codes[(name, p)] = code
    if good:
        try:
            await ctx.blocking(broker.commit_offsets, group, good, metadata, epochs)
        except E.VQSError as e:
            # A full disk (the kernel found no room even for a control write): retriable
            # for every client, as Kafka's own storage errors on commit are (KAFKA_STORAGE_ERROR
            # on OffsetCommit fails a librdkafka or Java commit for good).
            code = K.COORDINATOR_LOAD_IN_PROGRESS if isinstance(e, E.DiskFullError) else K.code_for(e)
            for k in good:
                codes[k] = code
    return codes


def _wanted(f, r) -> list | None:
    """OffsetFetch's topics: [(name, [partition])], None for "every committed one"."""
    n = f.nullable_array_len(6)
    if n is None:
        return None
    wanted = []
    for _ in range(n):
        name = f.string()
        wanted.append((name, [r.int32() for _ in range(f.array_len(4))]))
        f.tags()
    return wanted


def _fetched(ctx, conn, group: str, wanted, member: str | None = None, epoch: int = -1) -> tuple[int, list]:
    """(group error, [(topic, [(partition, offset, metadata, leader epoch, error)])]) of one
    group. A member id (OffsetFetch v9) is checked as a consumer-protocol member's, with its
    epoch. The principal must DESCRIBE the group; a topic it may not DESCRIBE is left out of
    "every committed one" and answered TOPIC_AUTHORIZATION_FAILED when named (as Kafka)."""
    err = K.NONE
    committed = {}
    if not A.allowed(ctx, conn, A.DESCRIBE, A.GROUP, group):
        return K.GROUP_AUTHORIZATION_FAILED, []
    try:
        if member:
            err = consumer_protocol.commit_status(ctx, group, member, epoch, ()) or K.NONE
        committed = ctx.broker.group_commits(group) if not err else {}
    except E.InvalidName:
        err = K.INVALID_GROUP_ID
    if wanted is None:
        by_topic: dict = {}
        for (t, p) in committed:
            by_topic.setdefault(t, []).append(p)
        wanted = [(t, ps) for t, ps in sorted(by_topic.items()) if A.allowed(ctx, conn, A.DESCRIBE, A.TOPIC, t)]
    out = []
    for name, parts in wanted:
        if A.allowed(ctx, conn, A.DESCRIBE, A.TOPIC, name):
            out.append((name, [(p, *committed.get((name, p), (-1, "", -1)), K.NONE) for p in parts]))
        else:
            out.append((name, [(p, -1, "", -1, K.TOPIC_AUTHORIZATION_FAILED) for p in parts]))
    return err, out


async def offset_fetch(ctx, conn, v, r):
    """v1-9; 6+ flexible, 7 asks for stable offsets (every offset is: no transactions), 8+ several
    groups, 9 with the asking member's id and epoch."""
    f = _Wire(r, v >= 6)
    if v >= 8:
        asked = []
        for _ in range(f.array_len(2)):
            group = f.string()
            member, epoch = (f.nullable_string(), r.int32()) if v >= 9 else (None, -1)
            asked.append((group, member, epoch, _wanted(f, r)))
            f.tags()
        r.boolean()  # require stable
        f.tags()
        w = Writer().int32(0).compact_array(len(asked))
        for group, member, epoch, wanted in asked:
            err, topics = _fetched(ctx, conn, group, wanted, member, epoch)
            w.compact_string(group)
            _write_fetched(w, topics, True, K.NONE)
            w.int16(err).tags()
        return bytes(w.tags().b)
    group = f.string()
    wanted = _wanted(f, r)
    if v >= 7:
        r.boolean()
    f.tags()
    err, topics = _fetched(ctx, conn, group, wanted)
    w = Writer()
    if v >= 3:
        w.int32(0)
    _write_fetched(w, topics, v >= 6, err if v < 2 else K.NONE, v >= 5)
    if v >= 2:
        w.int16(err)
    if v >= 6:
        w.tags()
    return bytes(w.b)


def _write_fetched(w, topics, flex: bool, part_err: int, leader_epoch: bool = True) -> None:
    if flex:
        w.compact_array(len(topics))
        for name, parts in topics:
            w.compact_string(name).compact_array(len(parts))
            for p, off, meta, epoch, err in parts:
                w.int32(p).int64(off).int32(epoch).compact_string(meta).int16(err or part_err).tags()
            w.tags()
        return
    w.array(len(topics))
    for name, parts in topics:
        w.string(name).array(len(parts))
        for p, off, meta, epoch, err in parts:
            w.int32(p).int64(off)
            if leader_epoch:
                w.int32(epoch)
            w.string(meta).int16(err or part_err)


async def list_groups(ctx, conn, v, r):
    """ListGroups v0-5: classic groups (VQS's own consumers' groups too), the consumer
    protocol's groups (group type ``consumer``) and share groups (protocol type and group type
    ``share``, share_groups.listed). v3+ flexible; v4 filters by state, v5 by group type, each
    matched case-insensitively as Kafka does; an empty filter keeps every group."""
    states = types = None
    if v >= 3:
        if v >= 4:
            states = {(r.compact_string() or "").lower() for _ in range(r.compact_array_len(1))}
        if v >= 5:
            types = {(r.compact_string() or "").lower() for _ in range(r.compact_array_len(1))}
        r.tagged_fields()
    listed: dict = {}  # name -> (protocol type, state, group type)
    new = set(_coordinator(ctx).consumer.groups())
    for name, ptype in _coordinator(ctx).groups():
        listed[name] = (ptype, _coordinator(ctx).describe(name)["state"], "consumer" if name in new else "classic")
    for name in ctx.broker.groups():
        listed.setdefault(name, ("consumer", "Empty", "classic"))  # committed offsets, no members
    rows = [(n, pt, st, gt) for n, (pt, st, gt) in listed.items()]
    # (the state is answered from v4 on whether or not it filters, as every other group's)
    rows += [(name, "share", state, "share") for name, state in share_groups.listed(ctx, v >= 4)]
    every = A.cluster_allowed(ctx, conn, A.DESCRIBE)  # else the groups it may DESCRIBE (as Kafka)
    rows = sorted(row for row in rows if (not states or row[2].lower() in states)
                  and (not types or row[3] in types) and (every or A.allowed(ctx, conn, A.DESCRIBE, A.GROUP, row[0])))
    w = Writer()
    if v >= 1:
        w.int32(0)
    if v < 3:
        w.int16(K.NONE).array(len(rows))
        for name, ptype, _, _ in rows:
            w.string(name).string(ptype)
        return bytes(w.b)
    w.int16(K.NONE).compact_array(len(rows))
    for name, ptype, state, gtype in rows:
        w.compact_string(name).compact_string(ptype)
        if v >= 4:
            w.compact_string(state)
        if v >= 5:
            w.compact_string(gtype)
        w.tags()
    return bytes(w.tags().b)


async def describe_groups(ctx, conn, v, r):
    names = [r.string() for _ in range(r.array_len(2))]
    ops = r.boolean() if v >= 3 else False
    w = Writer()
    if v >= 1:
        w.int32(0)
    w.array(len(names))
    for name in names:
        try:
            if not A.allowed(ctx, conn, A.DESCRIBE, A.GROUP, name):
                raise A.Refused(K.GROUP_AUTHORIZATION_FAILED)
            d = _coordinator(ctx).describe(name)
            err = K.NONE
        except A.Refused as e:
            d, err = {"state": "Dead", "protocol_type": "", "protocol": "", "members": []}, e.code
        except E.InvalidName:
            d, err = {"state": "Dead", "protocol_type": "", "protocol": "", "members": []}, K.INVALID_GROUP_ID
        if d["state"] == "Dead" and not err and name in ctx.broker.groups():
            d["state"] = "Empty"
        w.int16(err).string(name).string(d["state"]).string(d["protocol_type"]).string(d["protocol"])
        w.array(len(d["members"]))
        for mid, inst, client, host, meta, assignment in d["members"]:
            w.string(mid)
            if v >= 4:
                w.string(inst)
            w.string(client).string(host).bytes_(meta).bytes_(assignment)
        if v >= 3:
            w.int32(authorized_operations(ctx, conn, A.GROUP, name, ops and not err))
    return bytes(w.b)

