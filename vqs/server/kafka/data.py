"""Produce, Fetch, ListOffsets and OffsetForLeaderEpoch.

Produce: each partition's record batches are decoded (records.py) and
appended as one VQS batch per Kafka batch, keys, headers and timestamps
intact; an idempotent batch (producer id >= 0) goes through the broker's
producer state (duplicates answered with the first append's offset, gaps
OUT_OF_ORDER_SEQUENCE_NUMBER, old epochs INVALID_PRODUCER_EPOCH). The
response is sent after the append returns, i.e. once the batch is durable
under the topic's flush policy (fsynced for ``always``); acks=0 gets no
response at all. Writes that can fsync run in the pool, others inline.

Fetch: per partition, whole VQS batches from the fetch offset (the first
may begin below it; clients skip those records, as with Kafka's batches),
encoded once and cached (records.EncodedCache), up to the partition's
max_bytes and the response's max_bytes. As in Kafka (KIP-74), only the first
partition that answers data may exceed them, by its first batch (so a large
batch is never stuck); a batch of any later partition is sent only whole and
within what is left of the response's max_bytes, else that partition answers
no records this time (clients rotate the partitions they fetch). With less than min_bytes the fetch waits up to
max_wait_ms on the topics' new-data notification (on the loop: no thread).
Errors are per partition (OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION).
"""

from __future__ import annotations

import time

from ... import errors as E
from ..long_poll import wait_topics
from . import acls as A
from . import errors as K
from .codec import Flex, Writer
from .records import CorruptBatch, decode_batches, is_compressed

_MAX_WAIT_S = 30.0


def _append(ctx, topic, p: int, batches) -> tuple[int, int]:
    """Append decoded batches to partition ``p``; (error code, first offset)."""
    log = topic.log(p)
    first = -1
    for b in batches:
        if b.producer_id >= 0:
            status, off = ctx.broker.producer_states.append(
                topic, p, b.producer_id, b.producer_epoch, b.base_sequence, b.values, b.keys, b.headers,
                b.timestamps)
            if status == "fenced":
                return K.INVALID_PRODUCER_EPOCH, -1
            if status == "out_of_order":
                return K.OUT_OF_ORDER_SEQUENCE_NUMBER, -1
        else:
            off = log.append_batch(b.values, keys=b.keys, headers=b.headers, timestamps_ms=b.timestamps)
        if first < 0:
            first = off
    topic._notify()
    return K.NONE, first


def _check_message_sizes(batches, limit: int) -> None:
    """One message-size rule for every front: a record whose value is over the topic's
    ``max_message_bytes`` (``Topic.message_limit``: what REST, gRPC and the client refuse too)
    is MESSAGE_TOO_LARGE for its partition, nothing of the partition's batches appended."""
    for b in batches:
        big = max((len(v) for v in b.values if v is not None), default=0)  # (None: a null value)
        if big > limit:
            raise CorruptBatch(f"a value of {big} bytes exceeds max_message_bytes ({limit})", code=10)


def _refuse_legacy_produce(v, r):
    """Produce v0-2 (message sets v0/v1): advertised, because older librdkafka (2.0.2 among them) reads a
    Produce minimum above 0 as "this broker takes no gzip/snappy/lz4" and sends those batches
    uncompressed, and refused on use with UNSUPPORTED_VERSION for every partition, as Kafka 4
    does (KAFKA-18659). No client that negotiates with ApiVersions sends them (it picks the
    highest common version); the request is still parsed whole and answered in its own format."""
    acks = r.int16()
    r.int32()  # timeout
    topics = []
    for _ in range(r.array_len(6)):
        name = r.string()
        parts = []
        for _ in range(r.array_len(8)):
            parts.append(r.int32())
            r.nullable_bytes()
        topics.append((name, parts))
    if acks == 0:
        return None
    w = Writer().array(len(topics))
    for name, parts in topics:
        w.string(name).array(len(parts))
        for p in parts:
            w.int32(p).int16(K.UNSUPPORTED_VERSION).int64(-1)
            if v >= 2:
                w.int64(-1)
    if v >= 1:
        w.int32(0)
    return bytes(w.b)


async def produce(ctx, conn, v, r):
    if v < 3:
        return _refuse_legacy_produce(v, r)
    txn = r.nullable_string()
    acks = r.int16()
    r.int32()  # timeout
    now_ms = int(time.time() * 1000)
    results = []
    for _ in range(r.array_len(6)):
        name = r.string()
        parts = []
        may_write = A.allowed(ctx, conn, A.WRITE, A.TOPIC, name)
        for _ in range(r.array_len(8)):
            p = r.int32()
            data = r.nullable_bytes() or b""
            err, base = K.NONE, -1
            start = -1
            rec_errors: list = []
            message = None
            if not may_write:  # (before the topic is looked up: nothing tells it exists)
                parts.append((p, K.TOPIC_AUTHORIZATION_FAILED, base, start, rec_errors, message))
                continue
            try:
                if txn is not None:
                    raise CorruptBatch("transactions are not supported", code=K.INVALID_REQUEST)
                topic = ctx.broker.topic(name)
                cap = ctx.settings.max_body_bytes
                if is_compressed(data):  # inflating (bounded by cap) waits in the pool, not on the loop
                    batches = await ctx.blocking(decode_batches, data, now_ms, cap)
                else:
                    batches = decode_batches(data, now_ms, cap)
                _check_message_sizes(batches, topic.message_limit(ctx.settings.max_message_bytes))
                for b in batches:
                    try:
                        topic.check_keys(b.keys, len(b.values))
                    except E.InvalidRecord as e:  # INVALID_RECORD, naming the keyless records (v8+)
                        keys = b.keys or [None] * len(b.values)
                        rec_errors = [i for i, k in enumerate(keys) if k is None]
                        message = str(e)
                        raise
                if batches:
                    if ctx.inline_writes and not topic.flush_always:  # (ServerContext.inline_for_topic's rule)
                        err, base = _append(ctx, topic, p, batches)
                    else:
                        err, base = await ctx.blocking(_append, ctx, topic, p, batches)
                start = topic.log(p).start_offset
            except CorruptBatch as e:
                err = e.code
            except E.VQSError as e:
                err = K.code_for(e)
            parts.append((p, err, base, start, rec_errors, message))
        results.append((name, parts))
    if acks == 0:
        return None
    w = Writer().array(len(results))
    for name, parts in results:
        w.string(name).array(len(parts))
        for p, err, base, start, rec_errors, message in parts:
            w.int32(p).int16(err).int64(base).int64(-1)
            if v >= 5:
                w.int64(start)
            if v >= 8:  # which records of the batch were refused: the client fails the others
                w.array(len(rec_errors))  # with _INVALID_DIFFERENT_RECORD, and can resend them
                for i in rec_errors:
                    w.int32(i).string(None)
                w.string(message)
    w.int32(0)
    return bytes(w.b)


def _read_partition(ctx, topic, p: int, offset: int, max_bytes: int, min_one: bool):
    """(error, high watermark, start offset, records bytes) of one partition: whole batches
    within ``max_bytes``, or (``min_one``) at least the first batch whatever its size."""
    log = topic.log(p)
    end = log.end_offset
    start = log.start_offset
    if offset < start or offset > end:
        return K.OFFSET_OUT_OF_RANGE, end, start, b""
    if offset == end or (max_bytes <= 0 and not min_one):
        return K.NONE, end, start, b""
    out = []
    total = 0
    for b in log.read_batches(offset, max_bytes=max(max_bytes, 1)):
        enc = ctx.cache.get(log, b)
        if (out or not min_one) and total + len(enc) > max_bytes:
            break
        out.append(enc)
        total += len(enc)
    return K.NONE, end, start, b"".join(out)


async def fetch(ctx, conn, v, r):
    r.int32()  # replica id
    max_wait = r.int32()
    min_bytes = r.int32()
    max_bytes = r.int32()
    r.int8()  # isolation level: no transactions, so read_committed reads the same
    if v >= 7:
        r.int32()  # session id: sessions are not kept (answered with 0, so every fetch is full)
        r.int32()
    wanted = []
    for _ in range(r.array_len(6)):
        name = r.string()
        parts = []
        for _ in range(r.array_len(16)):
            p = r.int32()
            if v >= 9:
                r.int32()
            off = r.int64()
            if v >= 5:
                r.int64()
            parts.append((p, off, r.int32()))
        wanted.append((name, parts))
    # forgotten topics (v7+) and rack id (v11) are not needed without sessions
    deadline = time.monotonic() + min(max(max_wait, 0) / 1000, _MAX_WAIT_S)
    broker = ctx.broker
    while True:
        results = []
        total = 0
        topics = []
        watch = []
        for name, parts in wanted:
            rows = []
            try:
                if not A.allowed(ctx, conn, A.READ, A.TOPIC, name):
                    raise A.Refused(K.TOPIC_AUTHORIZATION_FAILED)
                topic = broker.topic(name)
                topics.append(topic)
            except A.Refused as e:
                topic, code = None, e.code
            except E.VQSError as e:
                topic = None
                code = K.code_for(e)
            for p, off, pmax in parts:
                if topic is None:
                    rows.append((p, code, -1, -1, b""))
                    continue
                try:
                    err, hw, start, data = _read_partition(ctx, topic, p, off, min(pmax, max_bytes - total),
                                                           not total)
                except E.VQSError as e:
                    err, hw, start, data = K.code_for(e), -1, -1, b""
                total += len(data)
                rows.append((p, err, hw, start, data))
                if not err:  # woken by what comes after what this read saw
                    watch.append((topic, p, hw if data else off))
            results.append((name, rows))
        left = deadline - time.monotonic()
        if total >= max(min_bytes, 1) or left <= 0 or ctx.stopping or any(
                row[1] for _, rows in results for row in rows):
            break
        try:  # the check runs after registering: an append since the read is never missed
            await wait_topics(topics, lambda w=watch: any(t.log(p).end_offset > end for t, p, end in w), left,
                              lambda: ctx.stopping)
        except E.VQSError:  # a topic closed (deleted): the next read answers it
            pass
    w = Writer().int32(0)
    if v >= 7:
        w.int16(K.NONE).int32(0)
    w.array(len(results))
    for name, rows in results:
        w.string(name).array(len(rows))
        for p, err, hw, start, data in rows:
            w.int32(p).int16(err).int64(hw).int64(hw)
            if v >= 5:
                w.int64(start)
            w.array(0)  # aborted transactions: none
            if v >= 11:
                w.int32(-1)
            w.bytes_(data)
    return bytes(w.b)


def _at_time(log, ts: int) -> tuple[int, int]:
    """(the first offset stamped at or after ``ts``, its timestamp), or (-1, -1): both reads
    in the pool, since either may go to the disk."""
    found = log.offset_for_time(ts)
    if found is None:
        return -1, -1
    rec = log.read(found, max_records=1)
    return found, rec[0].timestamp_ms if rec else ts


#: ListOffsets' special timestamps -> the first version that takes each (Kafka's ReplicaManager):
#: latest (-1), earliest (-2), the largest timestamp (-3, v7), the earliest local offset (-4, v8:
#: every offset is local here, so the earliest), the latest tiered offset (-5, v9: nothing is
#: tiered, answered -1 as Kafka answers a topic without tiered storage)
SPECIAL_TIMESTAMPS = {-1: 1, -2: 1, -3: 7, -4: 8, -5: 9}


async def list_offsets(ctx, conn, v, r):
    """ListOffsets v1-10 (flexible from v6). A negative timestamp a version does not take is
    UNSUPPORTED_VERSION for its partition, as Kafka answers it."""
    f = Flex(r, v >= 6)
    r.int32()  # replica id
    if v >= 2:
        r.int8()  # isolation level: no transactions, every record is committed
    out = []
    for _ in range(f.array_len(6)):
        name = f.string()
        parts = []
        for _ in range(f.array_len(12)):
            p = r.int32()
            if v >= 4:
                r.int32()  # current leader epoch
            parts.append((p, r.int64()))
            f.tags()
        f.tags()
        out.append((name, parts))
    if v >= 10:
        r.int32()  # timeout for reads from tiered storage: none here
    f.tags()
    w = Writer()
    if v >= 2:
        w.int32(0)
    f.w_array(w, len(out))
    for name, parts in out:
        f.w_string(w, name)
        f.w_array(w, len(parts))
        for p, ts in parts:
            err, off, found_ts = K.NONE, -1, -1
            if not A.allowed(ctx, conn, A.DESCRIBE, A.TOPIC, name):
                err = K.TOPIC_AUTHORIZATION_FAILED
            elif ts < 0 and v < SPECIAL_TIMESTAMPS.get(ts, v + 1):
                err = K.UNSUPPORTED_VERSION
            else:
                try:
                    log = ctx.broker.topic(name).log(p)
                    if ts == -1:
                        off = log.end_offset
                    elif ts in (-2, -4):
                        off = log.start_offset
                    elif ts == -3:
                        found = await ctx.blocking(log.max_timestamp)
                        if found is not None:
                            off, found_ts = found
                    elif ts >= 0:  # (-5: nothing is tiered: -1, as Kafka answers without tiered storage)
                        off, found_ts = await ctx.blocking(_at_time, log, ts)
                except E.VQSError as e:
                    err = K.code_for(e)
            w.int32(p).int16(err).int64(found_ts).int64(off)
            if v >= 4:
                w.int32(0 if off >= 0 else -1)  # the one leader epoch (Metadata), -1: no offset
            f.w_tags(w)
        f.w_tags(w)
    return bytes(f.w_tags(w).b)


async def offset_for_leader_epoch(ctx, conn, v, r):
    """OffsetForLeaderEpoch: every partition has had one leader, epoch 0 (Metadata and Fetch say
    so), so the end offset of any epoch a client asks about (>= 0) is the partition's end offset:
    a consumer validating its position after a metadata change finds no truncation unless its
    position is past the end. An undefined epoch (-1) is answered undefined (-1, -1), as Kafka."""
    f = Flex(r, v >= 4)
    if v >= 3:
        r.int32()  # replica id: a consumer's -1 (or a debug -2); no followers here
    topics = []
    for _ in range(f.array_len(6)):
        name = f.string()
        parts = []
        for _ in range(f.array_len(12 if v >= 2 else 8)):
            p = r.int32()
            current = r.int32() if v >= 2 else -1
            parts.append((p, current, r.int32()))
            f.tags()
        f.tags()
        topics.append((name, parts))
    w = Writer()
    if v >= 2:
        w.int32(0)
    f.w_array(w, len(topics))
    for name, parts in topics:
        f.w_string(w, name)
        f.w_array(w, len(parts))
        for p, current, epoch in parts:
            err, leader, end = K.NONE, -1, -1
            try:
                if not A.allowed(ctx, conn, A.DESCRIBE, A.TOPIC, name):
                    raise A.Refused(K.TOPIC_AUTHORIZATION_FAILED)
                log = ctx.broker.topic(name).log(p)
                if current > 0:  # a newer epoch than this partition ever had
                    err = K.UNKNOWN_LEADER_EPOCH
                elif epoch >= 0:
                    leader, end = 0, log.end_offset
            except A.Refused as e:
                err = e.code
            except E.VQSError as e:
                err = K.code_for(e)
            w.int16(err).int32(p)
            if v >= 1:
                w.int32(leader)
            f.w_tags(w.int64(end))
        f.w_tags(w)
    return bytes(f.w_tags(w).b)
