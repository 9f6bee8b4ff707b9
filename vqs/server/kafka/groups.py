"""Group APIs: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups,
DescribeGroups.

Membership is the broker's group coordinator (vqs/broker/coordinator.py),
called on the listener's loop (its lock guards memory only, never I/O). A
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
from . import errors as K
from . import share_groups
from .admin import authorized_operations
from .codec import Writer

ST = K.COORDINATOR_STATUS


def _coordinator(ctx):
    return ctx.broker.coordinator


async def _answer(conn, wait):
    """A coordinator wait's result: at once when it needed no waiting, else awaited while the
    connection is watched (a close cancels it: the member leaves)."""
    if wait.done:
        return wait.result
    return await conn.unless_closed(wait.wait_async())


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
    if not (lo <= session <= hi and 0 < rebalance <= hi):
        # as Kafka: a member's timeouts within the broker's bounds, so no member holds a
        # rebalance (and the coordinator's wait for it) longer than the broker allows
        w = Writer()
        if v >= 2:
            w.int32(0)
        w.int16(K.INVALID_SESSION_TIMEOUT).int32(-1).string("").string("").string(member).array(0)
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
        wait = _coordinator(ctx).start_sync(group, gen, member, assignments, instance)
        status, data = await _answer(conn, wait)
        err = ST[status]
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
        err = ST[_coordinator(ctx).heartbeat(group, gen, member, instance)]
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
    for mid, inst in members:
        try:
            errs.append(ST[_coordinator(ctx).leave(group, mid, inst)])
        except E.InvalidName:
            errs.append(K.INVALID_GROUP_ID)
    w = Writer()
    if v >= 1:
        w.int32(0)
    if v >= 3:
        w.int16(K.NONE).array(len(members))
        for (mid, inst), err in zip(members, errs):
            w.string(mid).string(inst).int16(err)
    else:
        w.int16(errs[0])
    return bytes(w.b)


async def offset_commit(ctx, conn, v, r):
    group = r.string()
    gen = r.int32()
    member = r.string()
    if v <= 4:
        r.int64()  # retention time
    instance = r.nullable_string() if v >= 7 else None
    topics = []
    for _ in range(r.array_len(6)):
        name = r.string()
        parts = []
        for _ in range(r.array_len(14)):
            p = r.int32()
            off = r.int64()
            epoch = r.int32() if v >= 6 else -1
            meta = r.nullable_string() or ""
            parts.append((p, off, meta, epoch))
        topics.append((name, parts))
    broker = ctx.broker
    try:
        err = ST[_coordinator(ctx).check_commit(group, gen, member, instance)]
    except E.InvalidName:
        err = K.INVALID_GROUP_ID
    codes = {}
    good = {}
    metadata, epochs = {}, {}
    for name, parts in topics:
        for p, off, meta, epoch in parts:
            code = err
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
    w = Writer()
    if v >= 3:
        w.int32(0)
    w.array(len(topics))
    for name, parts in topics:
        w.string(name).array(len(parts))
        for p, *_ in parts:
            w.int32(p).int16(codes[(name, p)])
    return bytes(w.b)


async def offset_fetch(ctx, conn, v, r):
    group = r.string()
    n = r.nullable_array_len(6)
    wanted = None
    if n is not None:
        wanted = []
        for _ in range(n):
            name = r.string()
            wanted.append((name, [r.int32() for _ in range(r.array_len(4))]))
    err = K.NONE
    committed = {}
    try:
        committed = ctx.broker.group_commits(group)
    except E.InvalidName:
        err = K.INVALID_GROUP_ID
    if wanted is None:
        by_topic: dict = {}
        for (t, p) in committed:
            by_topic.setdefault(t, []).append(p)
        wanted = sorted(by_topic.items())
    w = Writer()
    if v >= 3:
        w.int32(0)
    w.array(len(wanted))
    for name, parts in wanted:
        w.string(name).array(len(parts))
        for p in parts:
            off, meta, epoch = committed.get((name, p), (-1, "", -1))
            w.int32(p).int64(off)
            if v >= 5:
                w.int32(epoch)
            w.string(meta).int16(err if v < 2 else K.NONE)
    if v >= 2:
        w.int16(err)
    return bytes(w.b)


async def list_groups(ctx, conn, v, r):
    """ListGroups: classic groups (and VQS's own consumers' groups, protocol type ``vqs``) and
    share groups (protocol type and group type ``share``, share_groups.listed). v3+ flexible;
    v4 filters by state, v5 by group type (Kafka's ``classic``, ``consumer``, ``share``), each
    matched case-insensitively as Kafka does; an empty filter keeps every group."""
    states = types = ()
    if v >= 4:
        states = {(r.compact_string() or "").lower() for _ in range(r.compact_array_len(1))}
    if v >= 5:
        types = {(r.compact_string() or "").lower() for _ in range(r.compact_array_len(1))}
    if v >= 3:
        r.tagged_fields()
    rows = []  # (name, protocol type, state, group type)
    active = dict(_coordinator(ctx).groups())
    for name in ctx.broker.groups():
        active.setdefault(name, "consumer")
    for name, ptype in active.items():
        state = _coordinator(ctx).describe(name)["state"] if states else ""
        if state == "Dead":
            state = "Empty"  # committed offsets, no members
        rows.append((name, ptype, state, "classic"))
    rows += [(name, "share", state, "share") for name, state in share_groups.listed(ctx, bool(states))]
    rows = sorted(row for row in rows if (not states or row[2].lower() in states)
                  and (not types or row[3] in types))
    w = Writer()
    if v >= 1:
        w.int32(0)
    if v < 3:
        w.int16(K.NONE).array(len(rows))
        for name, ptype, _state, _type in rows:
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
            d = _coordinator(ctx).describe(name)
            err = K.NONE
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
            w.int32(authorized_operations("group", ops and not err))
    return bytes(w.b)
