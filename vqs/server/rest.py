"""REST routes: topics, messages by offset, consumer groups, queues, health, metrics.

JSON for people; ``application/vnd.vqs.batch`` (the log's record-batch format)
for speed on the produce and consume paths (see ``vqs/wire.py``).
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from typing import Any, Literal

from fastapi import APIRouter, Path, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from ..errors import VQSError
from ..wire import BATCH_CONTENT_TYPE, END_OFFSET, NEXT_OFFSET, START_OFFSET, decode_body, encode_records
from .context import ServerContext
from .errors import APIError

NAME_PATTERN = r"^[A-Za-z0-9._-]{1,200}$"
_json_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _name(kind: str):
    return Path(..., pattern=NAME_PATTERN, description=f"{kind} name: 1-200 of [A-Za-z0-9._-]")


def jresp(body: Any, status: int = 200, headers: dict | None = None) -> Response:
    return Response(_json_dumps(body).encode("utf-8"), status_code=status, media_type="application/json",
                    headers=headers)


def _check_name(name: str, kind: str) -> str:
    if name in (".", ".."):
        raise APIError(400, "invalid_name", f"{kind} name may not be '.' or '..'", field="name")
    return name


# ------------------------------------------------------------------------ JSON values
def _bytes_of(obj: dict, field: str, where: str, required: bool) -> bytes | None:
    v = obj.get(field)
    b64 = obj.get(field + "_b64")
    if v is not None and b64 is not None:
        raise APIError(400, "invalid_argument", f"{where}: give {field} or {field}_b64, not both", field=field)
    if b64 is not None:
        if not isinstance(b64, str):
            raise APIError(400, "invalid_argument", f"{where}.{field}_b64 must be a base64 string", field=f"{field}_b64")
        try:
            return base64.b64decode(b64, validate=True)
        except (binascii.Error, ValueError):
            raise APIError(400, "invalid_argument", f"{where}.{field}_b64 is not valid base64", field=f"{field}_b64") from None
    if v is None:
        if required:
            raise APIError(400, "invalid_argument", f"{where}.{field} is required", field=field)
        return None
    if not isinstance(v, str):
        raise APIError(400, "invalid_argument", f"{where}.{field} must be a string (or use {field}_b64)", field=field)
    return v.encode("utf-8")


def _headers_in(h, where: str):
    if h is None:
        return None
    items = h.items() if isinstance(h, dict) else h
    out = []
    try:
        for name, val in items:
            if not isinstance(name, str) or not isinstance(val, str):
                raise TypeError
            out.append((name, val.encode("utf-8")))
    except (TypeError, ValueError):
        raise APIError(400, "invalid_argument",
                       f"{where}.headers must be an object of strings or a list of [name, value] strings",
                       field="headers") from None
    return out or None


def _text(b: bytes | None, encoding: str):
    """(field suffix, value): text when asked and decodable, else base64."""
    if b is None:
        return "", None
    if encoding == "text":
        try:
            return "", b.decode("utf-8")
        except UnicodeDecodeError:
            pass
    return "_b64", base64.b64encode(b).decode("ascii")


def _record_json(r, encoding: str) -> dict:
    d = {"offset": r.offset, "timestamp_ms": r.timestamp_ms}
    sk, k = _text(r.key, encoding)
    d["key" + sk] = k
    sv, v = _text(r.value, encoding)
    d["value" + sv] = v
    if r.headers:
        d["headers"] = [[n, _text(hv, encoding)[1]] for n, hv in r.headers]
    return d


# ---------------------------------------------------------------------------- models
class TopicCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(..., pattern=NAME_PATTERN)
    partitions: int = Field(1, ge=1, le=10_000)
    retention_ms: int | None = Field(None, ge=1)
    retention_bytes: int | None = Field(None, ge=1)
    segment_bytes: int | None = Field(None, ge=4096, le=1 << 31)
    compression: Literal["zstd", "lz4"] | None = None


class OffsetCommit(BaseModel):
    model_config = ConfigDict(extra="forbid")
    topic: str = Field(..., pattern=NAME_PATTERN)
    partition: int = Field(..., ge=0, le=10_000)
    offset: int = Field(..., ge=0, le=(1 << 63) - 1)


class GroupCommit(BaseModel):
    model_config = ConfigDict(extra="forbid")
    offsets: list[OffsetCommit] = Field(..., max_length=100_000)


class WaitPartition(OffsetCommit):
    """A (topic, partition, offset) to wait on: the same fields as a commit."""


class WaitRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    partitions: list[WaitPartition] = Field(..., min_length=1, max_length=10_000)
    wait_ms: int = Field(0, ge=0, le=3_600_000)


class QueueCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(..., pattern=NAME_PATTERN)
    visibility_timeout: int = Field(30, ge=0, le=43200)
    delay_seconds: int = Field(0, ge=0, le=900)
    receive_wait_seconds: int = Field(0, ge=0, le=20)
    retention_seconds: int = Field(345600, ge=60, le=1209600)
    max_message_bytes: int = Field(1048576, ge=1024, le=1048576)
    dead_letter_queue: str | None = Field(None, pattern=NAME_PATTERN)
    max_receive_count: int | None = Field(None, ge=1, le=1000)
    fifo: bool = False
    content_based_deduplication: bool = False
    tags: dict[str, str] = Field(default_factory=dict, max_length=50)


class QueueUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    visibility_timeout: int | None = Field(None, ge=0, le=43200)
    delay_seconds: int | None = Field(None, ge=0, le=900)
    receive_wait_seconds: int | None = Field(None, ge=0, le=20)
    retention_seconds: int | None = Field(None, ge=60, le=1209600)
    max_message_bytes: int | None = Field(None, ge=1024, le=1048576)
    dead_letter_queue: str | None = Field(None, pattern=NAME_PATTERN)
    max_receive_count: int | None = Field(None, ge=1, le=1000)
    content_based_deduplication: bool | None = None


class QueueMessageIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    body: str | None = Field(None, max_length=1 << 20)
    body_b64: str | None = Field(None, max_length=(1 << 20) * 4 // 3 + 4)
    delay_seconds: int | None = Field(None, ge=0, le=900)
    attributes: dict[str, str] | None = Field(None, max_length=10)
    group_id: str | None = Field(None, max_length=128)
    dedup_id: str | None = Field(None, max_length=128)


class QueueSend(BaseModel):
    model_config = ConfigDict(extra="forbid")
    messages: list[QueueMessageIn] = Field(..., min_length=1, max_length=1000)


class QueueReceive(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_messages: int = Field(1, ge=1, le=1000)
    wait_seconds: float | None = Field(None, ge=0, le=20)
    visibility_timeout: int | None = Field(None, ge=0, le=43200)


class QueueDelete(BaseModel):
    model_config = ConfigDict(extra="forbid")
    receipt_handles: list[str] = Field(..., min_length=1, max_length=1000)


class VisibilityChange(BaseModel):
    model_config = ConfigDict(extra="forbid")
    receipt_handle: str = Field(..., min_length=1, max_length=4096)
    visibility_timeout: int = Field(..., ge=0, le=43200)


class Tags(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tags: dict[str, str] = Field(..., max_length=50)


_PRODUCE_BODY = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["messages"],
                "additionalProperties": False,
                "properties": {
                    "messages": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {
                                "value": {"type": "string"},
                                "value_b64": {"type": "string", "format": "byte"},
                                "key": {"type": ["string", "null"]},
                                "key_b64": {"type": "string", "format": "byte"},
                                "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                                "partition": {"type": "integer", "minimum": 0},
                                "timestamp_ms": {"type": "integer", "minimum": 0},
                            },
                        },
                    }
                },
            }
        },
        BATCH_CONTENT_TYPE: {"schema": {"type": "string", "format": "binary"}},
    },
}

_MESSAGES_RESPONSES = {
    200: {
        "description": "Records (JSON), or whole record batches with Accept: " + BATCH_CONTENT_TYPE,
        "content": {BATCH_CONTENT_TYPE: {"schema": {"type": "string", "format": "binary"}}},
    }
}


def _partition_ranges(metas) -> list[dict]:
    ranges: list[dict] = []
    for m in metas:
        if ranges:
            last = ranges[-1]
            if last["partition"] == m.partition and last["base_offset"] + last["count"] == m.offset:
                last["count"] += 1
                continue
        ranges.append({"partition": m.partition, "base_offset": m.offset, "count": 1})
    return ranges


def _int_param(request: Request, name: str, default, lo: int, hi: int):
    return _qint(request.query_params, name, default, lo, hi)


def build_router(ctx: ServerContext) -> APIRouter:
    r = APIRouter()
    s = ctx.settings
    metrics = ctx.metrics

    def broker():
        b = ctx.broker
        if b is None or not ctx.ready:
            raise APIError(503, "not_ready", "the server is not ready", headers={"Retry-After": "1"})
        return b

    # ------------------------------------------------------------------ health, metrics
    @r.get("/health", tags=["ops"], summary="Liveness and readiness")
    async def health():
        ready = ctx.ready and not ctx.stopping
        body = {"status": "ok" if ready else "unavailable", "live": True, "ready": ready,
                "uptime_s": round(time.time() - ctx.started, 3), "flush": s.flush}
        return jresp(body, 200 if ready else 503)

    @r.get("/health/live", tags=["ops"], summary="Liveness: the process answers")
    async def live():
        return jresp({"live": True})

    @r.get("/health/ready", tags=["ops"], summary="Readiness: the data directory is open")
    async def ready():
        ok = ctx.ready and not ctx.stopping
        return jresp({"ready": ok}, 200 if ok else 503)

    @r.get("/metrics", tags=["ops"], summary="Prometheus metrics",
           responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}})
    async def prom():
        data = await ctx.run(metrics.render)
        return Response(data, media_type="text/plain; version=0.0.4; charset=utf-8")

    # --------------------------------------------------------------------------- topics
    @r.get("/topics", tags=["topics"], summary="List topics")
    async def list_topics():
        return jresp({"topics": broker().topics()})

    @r.post("/topics", tags=["topics"], summary="Create a topic", status_code=201)
    async def create_topic(body: TopicCreate):
        _check_name(body.name, "topic")
        if body.partitions > s.max_partitions_per_topic:
            raise APIError(400, "invalid_argument", f"partitions: at most {s.max_partitions_per_topic} per topic "
                           "(max_partitions_per_topic)", field="partitions")
        b = broker()
        total = 0
        for tn in b.topics():
            try:
                total += b.topic(tn).partitions
            except VQSError:
                pass
        if total + body.partitions > s.max_total_partitions:
            raise APIError(409, "partition_limit", f"the server holds {total} partitions; {body.partitions} more "
                           f"would pass max_total_partitions ({s.max_total_partitions})", field="partitions")
        t = await ctx.run(broker().create_topic, body.name, partitions=body.partitions,
                          retention_ms=body.retention_ms, retention_bytes=body.retention_bytes,
                          segment_bytes=body.segment_bytes, compression=body.compression)
        return jresp(t.describe(), 201)

    @r.get("/topics/{topic}", tags=["topics"], summary="Describe a topic (partitions, offsets, sizes)")
    async def describe_topic(topic: str = _name("topic")):
        return jresp(broker().topic(_check_name(topic, "topic")).describe())

    @r.delete("/topics/{topic}", tags=["topics"], summary="Delete a topic and its data", status_code=204)
    async def delete_topic(topic: str = _name("topic")):
        await ctx.run(broker().delete_topic, _check_name(topic, "topic"))
        return Response(status_code=204)

    @r.get("/topics/{topic}/offsets", tags=["topics"], summary="Start and end offset of every partition")
    async def offsets(topic: str = _name("topic"),
                      timestamp_ms: int | None = Query(None, ge=0, le=(1 << 63) - 1,
                                                          description="also give the first offset at or after this time")):
        t = broker().topic(_check_name(topic, "topic"))
        parts = []
        for p in range(t.partitions):
            lg = t.log(p)
            row = {"partition": p, "start_offset": lg.start_offset, "end_offset": lg.end_offset}
            if timestamp_ms is not None:
                row["offset_for_time"] = lg.offset_for_time(timestamp_ms)
            parts.append(row)
        return jresp({"topic": t.name, "partitions": parts})

    @r.post("/topics/{topic}/messages", tags=["topics"], summary="Produce messages",
            openapi_extra={"requestBody": _PRODUCE_BODY},
            description="JSON `{\"messages\": [{\"value\"|\"value_b64\", \"key\"|\"key_b64\", \"headers\", "
                        "\"partition\", \"timestamp_ms\"}]}`, or a binary body of record batches "
                        f"(`Content-Type: {BATCH_CONTENT_TYPE}`, optional `?partition=`). Returns the offsets "
                        "as ranges `{partition, base_offset, count}` in input order.")
    async def produce(request: Request, topic: str = _name("topic")):
        b = broker()
        _check_name(topic, "topic")
        ctype = request.headers.get("content-type", "application/json").split(";", 1)[0].strip().lower()
        body = await request.body()
        producer = _producer(ctx)
        t = b.topic(topic)
        if ctype == BATCH_CONTENT_TYPE:
            return jresp(await produce_batches(ctx, topic, request.query_params.get("partition"), body))
        if ctype not in ("application/json", ""):
            raise APIError(415, "unsupported_media_type",
                           f"Content-Type must be application/json or {BATCH_CONTENT_TYPE}, not {ctype}")
        try:
            doc = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise APIError(400, "invalid_json", "the body is not valid JSON", field="body") from None
        if not isinstance(doc, dict):
            raise APIError(400, "invalid_argument", "the body must be an object {\"messages\": [...]}", field="body")
        msgs = doc.get("messages")
        extra = set(doc) - {"messages"}
        if extra:
            raise APIError(400, "invalid_argument", f"unknown field(s) {sorted(extra)}", field=sorted(extra)[0])
        if not isinstance(msgs, list) or not msgs:
            raise APIError(400, "invalid_argument", "messages must be a non-empty list", field="messages")
        values, keys, headers, parts, tss = [], [], [], [], []
        nbytes = 0
        limit = s.max_message_bytes
        known = {"value", "value_b64", "key", "key_b64", "headers", "partition", "timestamp_ms"}
        for i, m in enumerate(msgs):
            where = f"messages[{i}]"
            if not isinstance(m, dict):
                raise APIError(400, "invalid_argument", f"{where} must be an object", field="messages")
            bad = set(m) - known
            if bad:
                raise APIError(400, "invalid_argument", f"{where}: unknown field(s) {sorted(bad)}", field=sorted(bad)[0])
            v = _bytes_of(m, "value", where, True)
            if len(v) > limit:
                raise APIError(413, "message_too_large",
                               f"{where}.value is {len(v)} bytes; max_message_bytes is {limit}", field="value")
            nbytes += len(v)
            values.append(v)
            keys.append(_bytes_of(m, "key", where, False))
            headers.append(_headers_in(m.get("headers"), where))
            p = m.get("partition")
            if p is not None and (not isinstance(p, int) or isinstance(p, bool) or not 0 <= p < t.partitions):
                raise APIError(400, "invalid_argument",
                               f"{where}.partition must be an integer 0..{t.partitions - 1}", field="partition")
            parts.append(p)
            ts = m.get("timestamp_ms")
            if ts is not None and (not isinstance(ts, int) or isinstance(ts, bool) or not 0 <= ts < (1 << 62)):
                raise APIError(400, "invalid_argument", f"{where}.timestamp_ms must be a non-negative integer",
                               field="timestamp_ms")
            tss.append(ts)
        now = int(time.time() * 1000)
        tss_final = [now if x is None else x for x in tss] if any(x is not None for x in tss) else None
        anykey = any(k is not None for k in keys)
        anyhdr = any(h for h in headers)
        if len(set(parts)) == 1:
            metas = await ctx.write(producer.send_batch, topic, values, keys=keys if anykey else None,
                                    headers=headers if anyhdr else None, partition=parts[0],
                                    timestamps_ms=tss_final)
        else:  # mixed explicit partitions: one call per partition, results back in input order
            metas = [None] * len(values)
            groups: dict = {}
            for i, p in enumerate(parts):
                groups.setdefault(p, []).append(i)
            for p, idx in groups.items():
                got = await ctx.write(
                    producer.send_batch, topic, [values[i] for i in idx],
                    keys=[keys[i] for i in idx] if anykey else None,
                    headers=[headers[i] for i in idx] if anyhdr else None, partition=p,
                    timestamps_ms=None if tss_final is None else [tss_final[i] for i in idx])
                for i, md in zip(idx, got):
                    metas[i] = md
        metrics.count_in("topic", topic, len(metas), nbytes)
        return jresp({"count": len(metas), "ranges": _partition_ranges(metas)})

    @r.get("/topics/{topic}/messages", tags=["topics"], summary="Consume by offset (long poll with wait_ms)",
           responses=_MESSAGES_RESPONSES)
    async def consume(request: Request, topic: str = _name("topic"),
                      partition: int = Query(0, ge=0, le=10_000),
                      offset: int | None = Query(None, ge=0, le=(1 << 63) - 1,
                                                    description="default: the group's committed offset, else the start"),
                      limit: int = Query(100, ge=1, le=100_000),
                      max_bytes: int = Query(1 << 20, ge=1, le=64 << 20),
                      wait_ms: int = Query(0, ge=0, le=3_600_000),
                      group: str | None = Query(None, pattern=NAME_PATTERN),
                      encoding: Literal["text", "base64"] = Query("text")):
        b = broker()
        t = b.topic(_check_name(topic, "topic"))
        if partition >= t.partitions:
            raise APIError(400, "invalid_argument",
                           f"topic {topic!r} has {t.partitions} partition(s); there is no partition {partition}",
                           field="partition")
        lg = t.log(partition)
        if offset is None:
            committed = None
            if group is not None:
                committed = b.group_offsets(_check_name(group, "group")).get((topic, partition))
            offset = committed if committed is not None else lg.start_offset
        wait_s = min(wait_ms, s.max_wait_ms) / 1000
        binary = BATCH_CONTENT_TYPE in request.headers.get("accept", "")
        if binary:
            data, headers = await consume_batches(ctx, topic, request.query_params)
            return Response(data, media_type=BATCH_CONTENT_TYPE, headers=headers)
        recs = lg.read(offset, max_records=limit, max_bytes=max_bytes)
        if not recs and wait_s > 0:
            await _wait(ctx, lg, offset, wait_s)
            recs = lg.read(offset, max_records=limit, max_bytes=max_bytes)
        out = [_record_json(x, encoding) for x in recs]
        nxt = recs[-1].offset + 1 if recs else offset
        metrics.count_out("topic", topic, len(recs), sum(len(x.value) for x in recs))
        return jresp({"topic": topic, "partition": partition, "messages": out, "next_offset": nxt,
                      "start_offset": lg.start_offset, "end_offset": lg.end_offset})

    @r.post("/wait", tags=["topics"], summary="Wait until any of several partitions has data past an offset",
            description="Long poll for consumers of several partitions: returns as soon as one of them has a "
                        "record at or after its offset (or after wait_ms), listing those that do.")
    async def wait_any(body: WaitRequest):
        b = broker()
        tps = {}
        for w in body.partitions:
            t = b.topic(_check_name(w.topic, "topic"))
            if w.partition >= t.partitions:
                raise APIError(400, "invalid_argument", f"topic {w.topic!r} has no partition {w.partition}",
                               field="partition")
            tps[(w.topic, w.partition)] = w.offset

        def ready_now():
            out = []
            for (tn, p), off in tps.items():
                if b.topic(tn).log(p).end_offset > off:
                    out.append({"topic": tn, "partition": p})
            return out

        ready = ready_now()
        wait_s = min(body.wait_ms, s.max_wait_ms) / 1000
        if not ready and wait_s > 0:
            deadline = time.monotonic() + wait_s

            def waiter():
                c = b.consumer()
                try:
                    c.assign(list(tps))
                    for tp, off in tps.items():
                        c.seek(tp, off)
                    while not ctx.stopping:
                        left = deadline - time.monotonic()
                        if left <= 0 or c.poll(max_records=1, timeout=min(left, 1.0)):
                            return
                finally:
                    c.close()

            await ctx.long_poll_call(waiter)
            ready = ready_now()
        return jresp({"ready": ready})

    # --------------------------------------------------------------------------- groups
    @r.get("/groups", tags=["groups"], summary="List consumer groups")
    async def list_groups():
        return jresp({"groups": broker().groups()})

    @r.get("/groups/{group}", tags=["groups"], summary="Committed offsets and lag per partition")
    async def describe_group(group: str = _name("group")):
        b = broker()
        _check_name(group, "group")
        if group not in b.groups():
            raise APIError(404, "group_not_found", f"group {group!r} has no committed offsets", field="group")
        rows = [r_._asdict() for r_ in b.describe_group(group)]
        return jresp({"group": group, "partitions": rows, "total_lag": sum(x["lag"] for x in rows)})

    @r.post("/groups/{group}/offsets", tags=["groups"], summary="Commit offsets for a group")
    async def commit(body: GroupCommit, group: str = _name("group")):
        b = broker()
        _check_name(group, "group")
        offs = {(o.topic, o.partition): o.offset for o in body.offsets}
        for (tn, p) in offs:
            t = b.topic(tn)
            if p >= t.partitions:
                raise APIError(400, "invalid_argument", f"topic {tn!r} has no partition {p}", field="partition")
        await ctx.run(b.commit_offsets, group, offs)
        return jresp({"group": group, "committed": len(offs)})

    @r.delete("/groups/{group}", tags=["groups"], summary="Forget a group's offsets", status_code=204)
    async def delete_group(group: str = _name("group")):
        if not await ctx.run(broker().delete_group, _check_name(group, "group")):
            raise APIError(404, "group_not_found", f"group {group!r} has no committed offsets", field="group")
        return Response(status_code=204)

    # --------------------------------------------------------------------------- queues
    from .queues_rest import add_queue_routes

    add_queue_routes(r, ctx, broker)
    return r


def _producer(ctx: ServerContext):
    p = getattr(ctx, "_producer", None)
    if p is None or getattr(p, "_broker", None) is not ctx.broker:
        p = ctx.broker.producer()
        ctx._producer = p
    return p


async def _wait(ctx: ServerContext, lg, offset: int, wait_s: float) -> None:
    """Long poll: wait (in a thread, counted against the waiter limit) for data past offset.
    Waits in slices of at most 1 s so a shutdown is never held up for long."""
    deadline = time.monotonic() + wait_s

    def waiter():
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or ctx.stopping:
                return False
            if lg.wait_for(offset, min(left, 1.0)):
                return True

    await ctx.long_poll_call(waiter)


def _qint(q, name: str, default, lo: int, hi: int):
    v = q.get(name)
    if v is None or v == "":
        return default
    try:
        i = int(v)
    except ValueError:
        raise APIError(400, "invalid_argument", f"query parameter {name} must be an integer, not {v!r}", field=name) from None
    if not (lo <= i <= hi):
        raise APIError(400, "invalid_argument", f"query parameter {name} must be between {lo} and {hi}", field=name)
    return i


def _topic(ctx: ServerContext, topic: str):
    b = ctx.broker
    if b is None or not ctx.ready:
        raise APIError(503, "not_ready", "the server is not ready", headers={"Retry-After": "1"})
    return b, b.topic(_check_name(topic, "topic"))


async def produce_batches(ctx: ServerContext, topic: str, partition_raw: str | None, body: bytes) -> dict:
    """Binary produce (application/vnd.vqs.batch): every batch of the body appended in order."""
    b, t = _topic(ctx, topic)
    partition = _qint({"partition": partition_raw}, "partition", None, 0, t.partitions - 1)
    try:
        batches = decode_body(body)
    except VQSError as e:
        raise APIError(400, "corrupt_batch", str(e), field="body") from None
    if not batches:
        raise APIError(400, "invalid_argument", "the body holds no record batch", field="body")
    producer = _producer(ctx)
    metas: list = []
    nbytes = 0
    now = int(time.time() * 1000)
    limit = ctx.settings.max_message_bytes
    for bt in batches:
        values = bt.values()
        o = bt.value_offsets
        nb = o[bt.count]
        if nb > limit:  # only then can one value pass the limit
            big = max(map(len, values))
            if big > limit:
                raise APIError(413, "message_too_large",
                               f"a value of {big} bytes exceeds max_message_bytes ({limit})", field="value")
        nbytes += nb
        keys = [bt.key(i) for i in range(bt.count)] if bt.key_validity is not None else None
        hdrs = [bt.headers(i) for i in range(bt.count)] if bt.header_offsets is not None else None
        if bt.timestamps is not None:
            ts = [x if x > 0 else now for x in bt.timestamps.tolist()]
        elif bt.first_timestamp_ms > 0:
            ts = [bt.first_timestamp_ms] * bt.count
        else:
            ts = None
        metas += await ctx.write(producer.send_batch, t.name, values, keys=keys, headers=hdrs,
                                 partition=partition, timestamps_ms=ts)
    ctx.metrics.count_in("topic", t.name, len(metas), nbytes)
    return {"count": len(metas), "ranges": _partition_ranges(metas)}


async def consume_batches(ctx: ServerContext, topic: str, q) -> tuple[bytes, dict]:
    """Binary consume: exactly the records asked for, as record batches, and the position headers."""
    b, t = _topic(ctx, topic)
    partition = _qint(q, "partition", 0, 0, 10_000)
    if partition >= t.partitions:
        raise APIError(400, "invalid_argument",
                       f"topic {topic!r} has {t.partitions} partition(s); there is no partition {partition}",
                       field="partition")
    offset = _qint(q, "offset", None, 0, (1 << 63) - 1)
    limit = _qint(q, "limit", 100, 1, 100_000)
    max_bytes = _qint(q, "max_bytes", 1 << 20, 1, 64 << 20)
    wait_ms = _qint(q, "wait_ms", 0, 0, 3_600_000)
    lg = t.log(partition)
    if offset is None:
        committed = None
        group = q.get("group")
        if group:
            from ..broker.names import validate_name

            committed = b.group_offsets(validate_name(group, "group")).get((topic, partition))
        offset = committed if committed is not None else lg.start_offset
    wait_s = min(wait_ms, ctx.settings.max_wait_ms) / 1000
    # Log.read finds the offset through the sparse index and decodes only what it returns;
    # the records go back as one freshly encoded batch (offsets and timestamps preserved).
    recs = lg.read(offset, max_records=limit, max_bytes=max_bytes)
    if not recs and wait_s > 0:
        await _wait(ctx, lg, offset, wait_s)
        recs = lg.read(offset, max_records=limit, max_bytes=max_bytes)
    n = len(recs)
    parts = encode_records(recs)
    nbytes = sum([len(r.value) for r in recs])
    nxt = recs[-1].offset + 1 if n else offset
    ctx.metrics.count_out("topic", t.name, n, nbytes)
    return b"".join(parts), {NEXT_OFFSET: str(nxt), START_OFFSET: str(lg.start_offset),
                             END_OFFSET: str(lg.end_offset)}
