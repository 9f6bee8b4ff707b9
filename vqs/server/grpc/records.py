"""The ``vqs.v1.Records`` service: Produce, ProduceStream, Fetch and Subscribe.

Records travel in columns (the proto's RecordBatch and ProduceRequest), which
the log's reads and ``Producer.send_batch`` take and give without a per-record
message object.

Invariants:
- a produce is acknowledged (Produce's answer, ProduceStream's per-batch ack)
  only after ``Producer.send_batch`` returned, i.e. as the server's flush
  policy promises (``always``: fsynced); the acks of a stream come in the order
  of its batches, each echoing ``batch_id``. A batch refused ends the stream
  with its status: the batches acknowledged before it stay appended.
- a value over the topic's ``max_message_bytes`` (else the server's) is refused (RESOURCE_EXHAUSTED) before
  anything of its batch is appended.
- Fetch and Subscribe return records from the asked offset on, never one
  before it; Subscribe sends each partition's records in offset order, with no
  gap but the log's own (quarantined batches).
- Subscribe reads a partition only when its previous response has been handed
  to the transport (``yield`` waits for HTTP/2 flow control): a slow subscriber
  costs the server at most about one response (``max_records``/``max_bytes``)
  beyond what the transport window holds. It waits for new records without a
  thread (``Topic.add_waiter``), ends within a second of the server stopping
  (UNAVAILABLE) and at once when its topic is deleted (NOT_FOUND).
"""

from __future__ import annotations

import asyncio
import time

import grpc

from ...errors import ConfigError, LogClosedError, OffsetOutOfRange, VQSError
from ...record import check_headers
from ...wire import MAX_PRODUCE_RECORDS
from .calls import streaming, unary
from .context import STOP_CHECK_S, GrpcContext
from .errors import RpcError, invalid
from .gen import vqs_pb2 as pb
from .gen import vqs_pb2_grpc as pbg

DEFAULT_MAX_RECORDS = 500
MAX_RECORDS = 100_000
DEFAULT_MAX_BYTES = 1 << 20
MAX_BYTES = 32 << 20  # a response holds at most this plus one record
#: what every Subscribe stream's messages may hold together, per message round: a stream takes
#: a share of it when it starts (at most SUBSCRIBE_SHARE_MAX, at least SUBSCRIBE_SHARE_MIN, else
#: RESOURCE_EXHAUSTED) and gives it back when it ends. A subscriber that does not read holds up to
#: a few of its messages in the transport, so this bounds what they all hold to a few times it.
SUBSCRIBE_BUDGET = 128 << 20
SUBSCRIBE_SHARE_MAX = SUBSCRIBE_BUDGET // 16
SUBSCRIBE_SHARE_MIN = 64 << 10


def _ranges(metas) -> list:
    out: list = []
    last = None
    for m in metas:
        if last is not None and last.partition == m.partition and last.base_offset + last.count == m.offset:
            last.count += 1
            continue
        last = pb.OffsetRange(partition=m.partition, base_offset=m.offset, count=1)
        out.append(last)
    return out


def _indexes(idx, n: int, what: str) -> list[int]:
    """The record indexes of a ``null_values`` / ``null_keys`` field, each checked against ``n``."""
    for i in idx:
        if not 0 <= i < n:
            raise invalid(f"{what} names record {i}; the request has {n}")
    return list(idx)


def _headers_in(hs) -> list:
    out = [[(h.name, None if h.null_value else h.value) for h in x.headers] or None for x in hs]
    for h in out:
        try:
            check_headers(h)
        except ConfigError as e:
            raise invalid(str(e)) from None
    return out


def _header(name: str, value: bytes | None) -> pb.Header:
    return pb.Header(name=name, null_value=True) if value is None else pb.Header(name=name, value=value)


def record_batch(topic: str, partition: int, recs, next_offset: int, lg) -> pb.RecordBatch:
    """Records of one partition as a RecordBatch (columns; keys/headers only when some record has them;
    null values and null keys listed by index, their entries empty)."""
    kw = {}
    values = [r.value for r in recs]
    if recs:
        keys = [r.key for r in recs]
        if any(k is not None for k in keys):
            kw["keys"] = [b"" if k is None else k for k in keys]
            kw["null_keys"] = [i for i, k in enumerate(keys) if k is None]
        hdrs = [r.headers for r in recs]
        if any(hdrs):
            kw["headers"] = [pb.Headers(headers=[_header(n, v) for n, v in h]) for h in hdrs]
        if None in values:
            kw["null_values"] = [i for i, v in enumerate(values) if v is None]
            values = [b"" if v is None else v for v in values]
    return pb.RecordBatch(topic=topic, partition=partition, offsets=[r.offset for r in recs],
                          timestamps_ms=[r.timestamp_ms for r in recs], values=values,
                          next_offset=next_offset, start_offset=lg.start_offset, end_offset=lg.end_offset, **kw)


def _limits(max_records: int, max_bytes: int) -> tuple[int, int]:
    if max_records < 0 or max_bytes < 0:
        raise invalid("max_records and max_bytes must not be negative")
    return min(max_records or DEFAULT_MAX_RECORDS, MAX_RECORDS), min(max_bytes or DEFAULT_MAX_BYTES, MAX_BYTES)


class RecordsService(pbg.RecordsServicer):
    def __init__(self, ctx: GrpcContext):
        self.ctx = ctx

    async def _produce(self, req) -> pb.ProduceResponse:
        ctx = self.ctx
        n = len(req.values)  # (before a Python object is made of any of them)
        if not n:
            raise invalid("values is empty: a produce needs at least one record")
        if n > MAX_PRODUCE_RECORDS:
            raise invalid(f"{n} values: a produce takes at most {MAX_PRODUCE_RECORDS} records")
        values = list(req.values)
        nulls = _indexes(req.null_values, n, "null_values")
        missing = None
        try:  # the topic's own limit, else the server's
            topic = ctx.broker.topic(req.topic)
            limit = topic.message_limit(ctx.settings.max_message_bytes)
        except VQSError as e:  # no such topic (or a bad name): answered where the send would be
            topic, missing, limit = None, e, ctx.settings.max_message_bytes
        nbytes = sum(map(len, values))
        if nbytes > limit:  # only then can one value pass the limit
            big = max(map(len, values))
            if big > limit:
                raise RpcError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                               f"a value of {big} bytes exceeds max_message_bytes ({limit})")
        keys = headers = tss = None
        if req.keys:
            if len(req.keys) != n:
                raise invalid(f"keys has {len(req.keys)} entries for {n} values (give none or one per value)")
            keys = list(req.keys)
            for i in _indexes(req.null_keys, n, "null_keys"):
                keys[i] = None
        if req.headers:
            if len(req.headers) != n:
                raise invalid(f"headers has {len(req.headers)} entries for {n} values (give none or one per value)")
            headers = _headers_in(req.headers)
        if req.timestamps_ms:
            if len(req.timestamps_ms) != n:
                raise invalid(f"timestamps_ms has {len(req.timestamps_ms)} entries for {n} values")
            now = int(time.time() * 1000)
            tss = [t if t > 0 else now for t in req.timestamps_ms]
        for i in nulls:
            values[i] = None
        partition = req.partition if req.HasField("partition") else None
        if missing is not None:
            raise missing
        metas = await ctx.topic_write(topic, ctx.producer().send_batch, req.topic, values, keys=keys,
                                      headers=headers, partition=partition, timestamps_ms=tss)
        ctx.metrics.count_in("topic", req.topic, n, nbytes)
        return pb.ProduceResponse(batch_id=req.batch_id, count=n, ranges=_ranges(metas))

    @unary
    async def Produce(self, request, context):
        return await self._produce(request)

    @streaming
    async def ProduceStream(self, request_iterator, context):
        # While it waits for the client's next batch the stream is idle: a stopping server
        # cancels it then (GrpcContext.cancel_idle), never in the middle of a batch.
        idle = self.ctx.idle_streams
        task = asyncio.current_task()
        it = request_iterator.__aiter__()
        while True:
            idle.add(task)
            try:
                req = await it.__anext__()
            except StopAsyncIteration:
                return
            except asyncio.CancelledError:
                if not self.ctx.ending_idle:
                    raise  # the client left
                # cancelled by cancel_idle: end the call with a status (a cancelled handler
                # would leave it open to the end of the grace period)
                raise RpcError(grpc.StatusCode.UNAVAILABLE, "the server is stopping") from None
            finally:
                idle.discard(task)
            yield await self._produce(req)

    @unary
    async def Fetch(self, request, context):
        ctx = self.ctx
        b = ctx.broker
        t = b.topic(request.topic)
        lg = t.log(request.partition)
        max_records, max_bytes = _limits(request.max_records, request.max_bytes)
        if request.HasField("offset"):
            offset = request.offset
        else:
            committed = b.group_offsets(request.group).get((t.name, request.partition)) if request.group else None
            offset = lg.start_offset if committed is None else committed
        recs = lg.read(offset, max_records=max_records, max_bytes=max_bytes)
        wait = ctx.wait_seconds(context, request.wait_ms / 1000) if request.wait_ms > 0 else 0
        if not recs and wait > 0:
            try:  # t.log: LogClosedError once the topic is deleted (which wakes the wait)
                await ctx.wait_topic(t, lambda: t.log(request.partition).end_offset > offset, wait)
                recs = lg.read(offset, max_records=max_records, max_bytes=max_bytes)
            except LogClosedError:
                if not ctx.stopping:
                    b.topic(request.topic)  # deleted under the call: NOT_FOUND
                raise
        nxt = recs[-1].offset + 1 if recs else offset
        ctx.metrics.count_out("topic", t.name, len(recs), sum(len(r.value) for r in recs if r.value is not None))
        return record_batch(t.name, request.partition, recs, nxt, lg)

    @streaming
    async def Subscribe(self, request, context):
        ctx = self.ctx
        b = ctx.broker
        t = b.topic(request.topic)
        parts = list(dict.fromkeys(request.partitions)) or list(range(t.partitions))
        logs = {p: t.log(p) for p in parts}  # PartitionDoesNotExist for a bad number
        max_records, max_bytes = _limits(request.max_records, request.max_bytes)
        pos = _start_positions(b, t.name, logs, request)
        metrics = ctx.metrics
        left = SUBSCRIBE_BUDGET - ctx.subscribe_bytes  # (the loop's thread alone touches it)
        if left < SUBSCRIBE_SHARE_MIN:
            raise RpcError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                           "the server's subscriptions hold all it gives them: subscribe again later")
        max_bytes = min(max_bytes, SUBSCRIBE_SHARE_MAX, left)
        ctx.subscribe_bytes += max_bytes
        try:
            while not ctx.stopping:
                sent = False
                for p in parts:
                    lg = logs[p]
                    off = pos[p]
                    if off >= lg.end_offset:
                        continue
                    recs = lg.read(off, max_records=max_records, max_bytes=max_bytes)
                    if not recs:  # only a gap (quarantined batches) up to the end
                        pos[p] = lg.end_offset
                        continue
                    nxt = pos[p] = recs[-1].offset + 1
                    metrics.count_out("topic", t.name, len(recs), sum(len(r.value) for r in recs if r.value is not None))
                    yield record_batch(t.name, p, recs, nxt, lg)  # waits for flow control
                    sent = True
                if not sent:  # t.log: LogClosedError once the topic is deleted (which wakes the wait)
                    await ctx.wait_topic(t, lambda: any(t.log(p).end_offset > pos[p] for p in parts), STOP_CHECK_S)
            # not an end of the records: the client should subscribe again elsewhere or later
            raise RpcError(grpc.StatusCode.UNAVAILABLE, "the server is stopping")
        except LogClosedError:
            if not ctx.stopping:
                b.topic(request.topic)  # deleted under the stream: NOT_FOUND
            raise
        finally:
            ctx.subscribe_bytes -= max_bytes


def _start_positions(b, topic: str, logs: dict, request) -> dict[int, int]:
    """Where a Subscribe starts in each partition (SubscribeRequest's ``start``)."""
    which = request.WhichOneof("start")
    pos = {}
    committed = b.group_offsets(request.group) if which == "group" else {}
    for p, lg in logs.items():
        start, end = lg.start_offset, lg.end_offset
        if which == "offset":
            o = request.offset
            if not start <= o <= end:
                raise OffsetOutOfRange(f"offset {o} of {topic}[{p}] is out of range {start}..{end}",
                                       offset=o, start_offset=start, end_offset=end)
        elif which == "timestamp_ms":
            o = lg.offset_for_time(request.timestamp_ms)
            if o is None:
                o = end
        elif which == "group":
            o = committed.get((topic, p))
            o = start if o is None else max(o, start)
        elif which == "latest":
            o = end
        else:
            o = start
        pos[p] = o
    return pos
