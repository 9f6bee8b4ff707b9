"""Share-group records: ShareFetch (78) and ShareAcknowledge (79), and share sessions.

Versions 1 (the first stable one, Kafka 4.1+; what librdkafka 2.15+ sends)
and 2 (Kafka 4.2: acquire modes, KIP-1206, and RENEW, KIP-1222), flexible.
Records are acquired and acknowledged on the broker's share partitions
(vqs.broker.share.partition), whose state is durable before an answer is
sent; membership is share_groups.py.

Share sessions (Kafka's, per member on this node): ShareFetch with session
epoch 0 opens one with the partitions it names (releasing what the member
held under an earlier session); later requests carry the next epoch, the
partitions to add and the ``ForgottenTopicsData`` to drop (their records held
by the member are released); epoch -1 closes it (acknowledgements applied,
the rest released). A wrong epoch is INVALID_SHARE_SESSION_EPOCH (the session
is dropped), a missing session SHARE_SESSION_NOT_FOUND: the client opens a
new one, as after a server restart. A connection that closes releases the
records of the sessions opened on it at once (Kafka does the same).

A ShareFetch first applies the acknowledgements it carries, then acquires up
to ``MaxRecords`` records over the session's partitions (starting from a
different partition each time) and answers the whole batches that hold them
with their ``AcquiredRecords`` ranges (clients drop the other records of a
batch). As Kafka's, the acquisition is batch-aligned: fresh records are
acquired to the end of the stored batch that holds the last one, so
``MaxRecords`` is a soft limit (a fetch acquires at most ``_MAX_RECORDS``),
unless a v2 request asks for the ``record_limit`` acquire mode; records made
available again (released, or their lock ended) come with the others of the
batch that holds the last of ``MaxRecords`` (SharePartition.acquire).
``MaxBytes`` bounds the records (available ones, then fresh ones) to the
stored batches within it, at least one batch per partition while some bytes
are left (a soft limit, as Kafka's); 0 acquires nothing.
With nothing to acquire it waits up to ``MaxWaitMs`` (30 s at most) for new
records or ended locks, on the listener's loop.

RENEW (acknowledge type 4, v2) gives records the member holds a new lock of
the group's full duration; a request may carry it only when it says so
(``IsRenewAck``), and such a ShareFetch only acknowledges: its fetch fields
must be 0 and it acquires nothing (as Kafka's, whose renewing fetch must not
spend the lock it renews waiting for records). A type the request may not
carry, or an unknown acquire mode, is INVALID_REQUEST.
"""

from __future__ import annotations

import time

from ... import errors as E
from ...broker.share import REJECT, RENEW, InvalidRecordState
from ..long_poll import wait_topics
from . import acls as A
from . import errors as K
from .codec import ProtocolError, Writer
from .share_groups import shares as _shares
from .topic_ids import topic_id, topic_name

INVALID_RECORD_STATE = 121
SHARE_SESSION_NOT_FOUND = 122
INVALID_SHARE_SESSION_EPOCH = 123
_MAX_WAIT_S = 30.0
_POLL_SLICE_S = 0.25  # a waiting fetch rechecks for released records this often
_MAX_RECORDS = 10_000  # at most this many records acquired by one ShareFetch
#: share sessions open at once on this node (Kafka's group.share.max.share.sessions: 2000);
#: one more is SHARE_SESSION_LIMIT_REACHED, which clients retry
MAX_SESSIONS = 2000
SHARE_SESSION_LIMIT_REACHED = 133


class ShareSession:
    __slots__ = ("group", "member", "epoch", "parts", "conn", "start")

    def __init__(self, group: str, member: str, conn):
        self.group = group
        self.member = member
        self.epoch = 0
        self.parts: dict[tuple[str, int], bytes] = {}  # (topic, partition) -> topic id
        self.conn = conn
        self.start = 0  # the partition the next acquisition starts from (round robin)


def _sessions(ctx) -> dict:
    return ctx.share_sessions


def _now_ms() -> int:
    return int(time.time() * 1000)


def release_connection(ctx, conn) -> None:
    """The connection closed: its share sessions end and their records are released."""
    sessions = ctx.share_sessions
    if not sessions:
        return
    for key, s in list(sessions.items()):
        if s.conn is conn:
            del sessions[key]
            try:
                ctx.broker.share_groups.release_member(s.group, s.member)
            except E.VQSError:
                pass


# ---------------------------------------------------------------------- requests

def _read_acks(r) -> list:
    """One partition's acknowledgement batches: [(first, last, [types])]."""
    out = []
    for _ in range(r.compact_array_len(18)):
        first = r.int64()
        last = r.int64()
        types = [r.int8() for _ in range(r.compact_array_len(1))]
        r.tagged_fields()
        out.append((first, last, types))
    return out


def _read_topics(r, with_acks: bool = True) -> list:
    """[(topic id, partition, acks)] of a request's topics."""
    out = []
    for _ in range(r.compact_array_len(18)):
        tid = r.uuid()
        for _ in range(r.compact_array_len(6)):
            p = r.int32()
            acks = _read_acks(r) if with_acks else []
            r.tagged_fields()
            out.append((tid, p, acks))
        r.tagged_fields()
    return out


def _apply_acks(sg, group: str, member: str, name: str, p: int, acks: list, now: int,
                renew: bool = False) -> int:
    """Apply one partition's acknowledgements; its acknowledgement error code. RENEW only
    when the request said it carries renewals (``renew``)."""
    top = RENEW if renew else REJECT
    if any(t > top for _, _, types in acks for t in types):
        return K.INVALID_REQUEST
    st = sg.settings_for(group)
    try:
        sp = sg.partition(group, name, p)
    except E.VQSError as e:
        return K.code_for(e)
    code = K.NONE
    prev = -1
    for first, last, types in acks:
        if first <= prev:
            return K.INVALID_REQUEST
        prev = last
        try:
            sp.acknowledge(member, first, last, types, now, st.record_lock_ms, st.delivery_limit)
        except InvalidRecordState:
            code = INVALID_RECORD_STATE
        except ValueError:
            return K.INVALID_REQUEST
    return code


def _session(ctx, conn, group: str, member: str, epoch: int, opening: bool):
    """(session, error code) for a request with ``epoch`` (module doc)."""
    sessions = _sessions(ctx)
    key = (group, member)
    s = sessions.get(key)
    if epoch == 0:
        if not opening:
            return None, INVALID_SHARE_SESSION_EPOCH
        if s is not None:
            ctx.broker.share_groups.release_member(group, member)
        elif len(sessions) >= MAX_SESSIONS:
            return None, SHARE_SESSION_LIMIT_REACHED
        s = sessions[key] = ShareSession(group, member, conn)
        conn.on_close = lambda: release_connection(ctx, conn)
        return s, K.NONE
    if s is None:
        return None, SHARE_SESSION_NOT_FOUND
    if epoch != -1 and epoch != s.epoch:
        del sessions[key]
        ctx.broker.share_groups.release_member(group, member)
        return None, INVALID_SHARE_SESSION_EPOCH
    if s.conn is not conn:
        s.conn = conn
        conn.on_close = lambda: release_connection(ctx, conn)
    return s, K.NONE


def _fetch_records(ctx, log, ranges) -> bytes:
    """The encoded batches that hold the acquired ``ranges`` (each batch once)."""
    out = []
    taken = -1  # offsets below this are in a batch already taken
    for first, last, _count in ranges:
        off = max(first, taken)
        while off <= last:
            for b in log.read_batches(off, max_bytes=1 << 20):
                if b.base_offset > last:
                    break
                end = b.base_offset + b.count
                if end > taken:
                    out.append(ctx.cache.get(log, b))
                    taken = end
            if taken <= off:  # nothing more to read there
                break
            off = taken
    return b"".join(out)


def _acquire(ctx, sg, s: ShareSession, max_records: int, max_bytes: int, now: int,
             aligned: bool = True) -> dict:
    """Acquire over the session's partitions, round robin: {(topic id, p): (ranges, records)};
    ``aligned``: fresh records to the end of a stored batch; ``max_bytes`` (module doc)."""
    st = sg.settings_for(s.group)
    parts = list(s.parts)
    out: dict = {}
    if not parts or max_bytes <= 0:
        return out
    left = max_records
    k = len(parts)
    start = s.start % k
    s.start = start + 1
    for i in range(k):
        if left <= 0 or max_bytes <= 0:
            break
        name, p = parts[(start + i) % k]
        tid = s.parts[(name, p)]
        if topic_id(ctx.broker, name) != tid:
            # the topic the client named by this id was deleted (perhaps made again under its
            # name, with another id): answered once, and dropped from the session
            out[(tid, p)] = K.UNKNOWN_TOPIC_ID
            del s.parts[(name, p)]
            continue
        try:
            sp = sg.partition(s.group, name, p)
            ranges = sp.acquire(s.member, left, now, st.record_lock_ms, st.delivery_limit,
                                 st.max_record_locks, _MAX_RECORDS if aligned else 0, max_bytes)
            if ranges:
                data = _fetch_records(ctx, sp.log, ranges)
                out[(tid, p)] = (ranges, data)
                left -= sum(last - first + 1 for first, last, _ in ranges)
                max_bytes -= len(data)
        except E.VQSError as e:
            out[(tid, p)] = K.code_for(e)
    return out


def _something_to_acquire(broker, sg, s: ShareSession, now: int) -> bool:
    """Whether an acquisition may find a record now (the wait's condition)."""
    st = sg.settings_for(s.group)
    for (name, p), tid in s.parts.items():
        if topic_id(broker, name) != tid:
            return True  # answer UNKNOWN_TOPIC_ID
        try:
            sp = sg.partition(s.group, name, p)
        except E.VQSError:
            return True  # answer the error
        t = sp.next_expiry()
        if t is not None and t <= now:
            return True
        if sp.leases.n_inflight < st.max_record_locks and (sp.log.end_offset > sp.cursor or sp.leases.n_available):
            return True
    return False


async def share_fetch(ctx, conn, v, r):
    group = r.compact_string() or ""
    member = r.compact_string() or ""
    epoch = r.int32()
    max_wait = r.int32()
    min_bytes = r.int32()  # any acquired record is answered
    max_bytes = r.int32()
    max_records = r.int32()
    r.int32()  # batch size
    # v2: the acquire mode (KIP-1206: 0 batch_optimized, v1's; 1 record_limit) and whether
    # the acknowledgements carry RENEW (KIP-1222)
    mode = r.int8() if v >= 2 else 0
    renew = r.boolean() if v >= 2 else False
    record_limit = mode == 1
    wanted = _read_topics(r)
    forgotten = []
    for _ in range(r.compact_array_len(3)):
        tid = r.uuid()
        forgotten += [(tid, r.int32()) for _ in range(r.compact_array_len(4))]
        r.tagged_fields()
    r.tagged_fields()
    sg = _shares(ctx)
    names: dict[bytes, str | None] = {}

    def name_of(tid: bytes):
        if tid not in names:
            names[tid] = topic_name(ctx.broker, tid)
        return names[tid]

    has_acks = any(acks for _, _, acks in wanted)
    if not group or not member or (epoch == 0 and has_acks) or (epoch == -1 and forgotten):
        return _fetch_error(K.INVALID_REQUEST, "malformed share fetch (acknowledgements in a session's "
                                               "first request, or forgotten topics in its last)")
    if mode not in (0, 1):
        return _fetch_error(K.INVALID_REQUEST, f"unknown share acquire mode {mode}")
    if not A.allowed(ctx, conn, A.READ, A.GROUP, group):
        return _fetch_error(K.GROUP_AUTHORIZATION_FAILED, "READ on the share group is not allowed")
    if renew and (max_wait or min_bytes or max_bytes or max_records):
        return _fetch_error(K.INVALID_REQUEST, "a share fetch that renews locks fetches nothing: "
                                               "MaxWaitMs, MinBytes, MaxBytes and MaxRecords must be 0")
    s, err = _session(ctx, conn, group, member, epoch, opening=True)
    if err:
        return _fetch_error(err, "share session: open one with epoch 0")
    now = _now_ms()
    ack_codes: dict = {}
    part_errors: dict = {}
    order: list = []  # (tid, p) in request order, then acquired ones
    for tid, p, acks in wanted:
        name = name_of(tid)
        order.append((tid, p))
        if name is None:
            part_errors[(tid, p)] = K.UNKNOWN_TOPIC_ID
            continue
        if not A.allowed(ctx, conn, A.READ, A.TOPIC, name):
            part_errors[(tid, p)] = K.TOPIC_AUTHORIZATION_FAILED
            continue
        if epoch != -1:
            s.parts[(name, p)] = tid
        if acks:
            ack_codes[(tid, p)] = await ctx.blocking(_apply_acks, sg, group, member, name, p, acks, now, renew)
    for tid, p in forgotten:
        name = name_of(tid)
        if name is not None and s.parts.pop((name, p), None) is not None:
            try:
                sp = sg.partition(group, name, p)
                await ctx.blocking(sp.release_member, member, sg.settings_for(group).delivery_limit)
            except E.VQSError:
                pass
    acquired: dict = {}
    if epoch == -1:
        _sessions(ctx).pop((group, member), None)
        await ctx.blocking(sg.release_member, group, member)
    else:
        s.epoch += 1
    if epoch != -1 and not renew:  # (a renewing fetch only acknowledges: module doc)
        limit = min(max_records if max_records > 0 else 500, _MAX_RECORDS)
        deadline = time.monotonic() + min(max(max_wait, 0) / 1000, _MAX_WAIT_S)
        while True:
            acquired = await ctx.blocking(_acquire, ctx, sg, s, limit, max_bytes, _now_ms(), not record_limit)
            left = deadline - time.monotonic()
            if acquired or left <= 0 or ctx.stopping or not s.parts:
                break
            topics = []
            for name, _p in s.parts:
                try:
                    topics.append(ctx.broker.topic(name))
                except E.VQSError:
                    pass
            try:  # woken by an append; locks that end or records others release: within a slice
                await conn.unless_closed(wait_topics(
                    topics, lambda: max_bytes > 0 and _something_to_acquire(ctx.broker, sg, s, _now_ms()),
                    min(left, _POLL_SLICE_S), lambda: ctx.stopping))
            except E.VQSError:
                pass
    rows: dict = {}
    for tid, p in order:
        rows[(tid, p)] = None
    for key, res in acquired.items():
        rows[key] = res
    w = Writer().int32(0).int16(K.NONE).compact_string(None).int32(sg.settings_for(group).record_lock_ms)
    by_topic: dict = {}
    for (tid, p) in rows:
        by_topic.setdefault(tid, []).append(p)
    w.compact_array(len(by_topic))
    for tid, ps in by_topic.items():
        w.b += tid
        w.compact_array(len(ps))
        for p in ps:
            res = rows[(tid, p)]
            err = part_errors.get((tid, p), K.NONE)
            if isinstance(res, int):
                err, res = res, None
            ack = ack_codes.get((tid, p), K.NONE)
            w.int32(p).int16(err).compact_string(None).int16(ack).compact_string(None)
            w.int32(-1).int32(-1).tags()  # current leader: unchanged
            ranges, data = res if res else ((), b"")
            w.uvarint(len(data) + 1)
            w.b += data
            w.compact_array(len(ranges))
            for first, last, count in ranges:
                w.int64(first).int64(last).int16(min(count, 0x7FFF)).tags()
            w.tags()
        w.tags()
    w.compact_array(0)  # node endpoints: one node
    return bytes(w.tags().b)


def _fetch_error(code: int, msg: str) -> bytes:
    w = Writer().int32(0).int16(code).compact_string(msg).int32(0).compact_array(0).compact_array(0)
    return bytes(w.tags().b)


async def share_acknowledge(ctx, conn, v, r):
    group = r.compact_string() or ""
    member = r.compact_string() or ""
    epoch = r.int32()
    renew = r.boolean() if v >= 2 else False
    wanted = _read_topics(r)
    r.tagged_fields()
    w = Writer().int32(0)
    if not group or not member:
        raise ProtocolError("ShareAcknowledge without a group or member id")
    s, err = _session(ctx, conn, group, member, epoch, opening=False)
    if not A.allowed(ctx, conn, A.READ, A.GROUP, group):
        err = K.GROUP_AUTHORIZATION_FAILED
    if err:
        w.int16(err).compact_string("share session: open one with a ShareFetch of epoch 0")
        if v >= 2:
            w.int32(0)
        return bytes(w.compact_array(0).compact_array(0).tags().b)
    sg = _shares(ctx)
    now = _now_ms()
    codes = []
    for tid, p, acks in wanted:
        name = topic_name(ctx.broker, tid)
        if name is None:
            codes.append((tid, p, K.UNKNOWN_TOPIC_ID))
            continue
        if not A.allowed(ctx, conn, A.READ, A.TOPIC, name):
            codes.append((tid, p, K.TOPIC_AUTHORIZATION_FAILED))
            continue
        codes.append((tid, p, await ctx.blocking(_apply_acks, sg, group, member, name, p, acks, now, renew)))
    if epoch == -1:
        _sessions(ctx).pop((group, member), None)
        await ctx.blocking(sg.release_member, group, member)
    else:
        s.epoch += 1
    w.int16(K.NONE).compact_string(None)
    if v >= 2:
        w.int32(sg.settings_for(group).record_lock_ms)
    by_topic: dict = {}
    for tid, p, code in codes:
        by_topic.setdefault(tid, []).append((p, code))
    w.compact_array(len(by_topic))
    for tid, rows in by_topic.items():
        w.b += tid
        w.compact_array(len(rows))
        for p, code in rows:
            w.int32(p).int16(code).compact_string(None).int32(-1).int32(-1).tags().tags()
        w.tags()
    return bytes(w.compact_array(0).tags().b)


