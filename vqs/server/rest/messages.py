"""REST routes for the messages of topics: produce, consume by offset (long poll), wait on many partitions.

Two bodies per route: JSON for people (values as text, or ``*_b64`` when they
are not UTF-8) and ``application/vnd.vqs.batch`` (vqs/wire.py) for speed.
The routes' work is in ``produce_messages`` and ``consume_messages`` (and
``produce_batches``, the binary body), called with checked values both by the
FastAPI routes here and by the lean dispatch (vqs/server/lean.py), which
answers the common requests without the framework because they carry the
throughput.

Invariants: a produce returns its offsets as ranges in input order; a
consume returns records from ``offset`` on (never one before it), with the
next offset to ask for; a long poll waits in slices of at most 1 s so a
shutdown is never held up.
"""

from __future__ import annotations

import base64
import binascii
import time
from typing import Literal

from fastapi import APIRouter, Query, Request, Response

from ...errors import VQSError
from ...wire import BATCH_CONTENT_TYPE, END_OFFSET, NEXT_OFFSET, START_OFFSET, decode_body, encode_records
from ..context import ServerContext
from ..errors import APIError
from .conventions import (
    MAX_WAIT_MS,
    NAME_PATTERN,
    check_name,
    jresp,
    json_bytes,
    json_loads,
    links,
    name_param,
    query_int,
    ready_broker,
)
from .models import PRODUCE_QUERY, WaitRequest, query_parameters

_JSON_FIELDS = {"value", "value_b64", "key", "key_b64", "headers", "partition", "timestamp_ms"}

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


def _partition_log(t, partition: int):
    if partition >= t.partitions:
        raise APIError(400, "invalid_argument",
                       f"topic {t.name!r} has {t.partitions} partition(s); there is no partition {partition}",
                       field="partition")
    return t.log(partition)


def _start_offset(b, lg, topic: str, partition: int, group: str | None) -> int:
    """Where a consume without ``offset`` starts: the group's committed offset, else the log start."""
    committed = None
    if group:
        committed = b.group_offsets(group).get((topic, partition))
    return committed if committed is not None else lg.start_offset


#: The integer query parameters of a consume: name -> (default, least, greatest). The
#: route's declarations (its schema and validation) and the lean dispatch both read it.
CONSUME_INTS = {
    "partition": (0, 0, 10_000),
    "offset": (None, 0, (1 << 63) - 1),
    "limit": (100, 1, 100_000),
    "max_bytes": (1 << 20, 1, 64 << 20),
    "wait_ms": (0, 0, MAX_WAIT_MS),
}


def _int_query(name: str, description: str | None = None):
    default, lo, hi = CONSUME_INTS[name]
    return Query(default, ge=lo, le=hi, description=description)


# ---------------------------------------------------------------------------- routes
def message_routes(ctx: ServerContext, idempotent=None) -> APIRouter:
    """``idempotent(ctx, topic, query)``: the producer of an idempotent produce request, or None
    (rest/producers.py; lean.py hands such requests to these routes)."""
    r = APIRouter(tags=["topics"])
    s = ctx.settings

    produced = {"topic": "$request.path.topic", "partition": "$response.body#/ranges/0/partition",
                "offset": "$response.body#/ranges/0/base_offset"}

    @r.post("/topics/{topic}/messages", summary="Produce messages",
            openapi_extra={"requestBody": _PRODUCE_BODY, "parameters": query_parameters(PRODUCE_QUERY)},
            responses=links(200, "The offsets given, as ranges", Consume=("get", "/topics/{topic}/messages", produced),
                            Commit=("post", "/groups/{group}/offsets", {}, {"offsets": [{
                                "topic": "$request.path.topic", "partition": "$response.body#/ranges/0/partition",
                                "offset": "$response.body#/ranges/0/base_offset"}]}),
                            Delete=("delete", "/topics/{topic}", {"topic": "$request.path.topic"})),
            description="JSON `{\"messages\": [{\"value\"|\"value_b64\", \"key\"|\"key_b64\", \"headers\", "
                        "\"partition\", \"timestamp_ms\"}]}`, or a binary body of record batches "
                        f"(`Content-Type: {BATCH_CONTENT_TYPE}`, optional `?partition=`). Returns the offsets "
                        "as ranges `{partition, base_offset, count}` in input order. With `producer_id`, "
                        "`producer_epoch`, `sequence` and `partition` (see POST /producers) the request is "
                        "idempotent: a retry of one already appended is answered with its first offsets.")
    async def produce(request: Request, topic: str = name_param("topic")):
        body = await request.body()
        q = request.query_params
        producer = None if idempotent is None else idempotent(ctx, topic, q)
        out = await produce_messages(ctx, topic, request.headers.get("content-type"), q.get("partition"), body,
                                     producer=producer)
        return jresp(out)

    @r.get("/topics/{topic}/messages", summary="Consume by offset (long poll with wait_ms)",
           responses=_MESSAGES_RESPONSES)
    async def consume(request: Request, topic: str = name_param("topic"),
                      partition: int = _int_query("partition"),
                      offset: int | None = _int_query("offset", "default: the group's committed offset, else the start"),
                      limit: int = _int_query("limit"),
                      max_bytes: int = _int_query("max_bytes"),
                      wait_ms: int = _int_query("wait_ms", "long poll, at most 20000 ms (20 s, as SQS)"),
                      group: str | None = Query(None, pattern=NAME_PATTERN),
                      encoding: Literal["text", "base64"] = Query("text")):
        data, media, headers = await consume_messages(
            ctx, topic, partition, offset, limit, max_bytes, wait_ms, group, encoding,
            BATCH_CONTENT_TYPE in request.headers.get("accept", ""))
        return Response(data, media_type=media, headers=headers)

    @r.post("/wait", summary="Wait until any of several partitions has data past an offset",
            description="Long poll for consumers of several partitions: returns as soon as one of them has a "
                        "record at or after its offset (or after wait_ms), listing those that do.")
    async def wait_any(body: WaitRequest):
        b = ready_broker(ctx)
        tps = {}
        for w in body.partitions:
            t = b.topic(check_name(w.topic, "topic"))
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

    return r


# ------------------------------------------------------------ the routes' cores
# The FastAPI routes above and the lean dispatch (vqs/server/lean.py) both call these
# with checked values, so the two answer alike by construction.
def media_type(content_type: str | None) -> str:
    """The media type of a Content-Type header (lower case, no parameters); JSON when absent."""
    return ("application/json" if content_type is None else content_type).split(";", 1)[0].strip().lower()


def produce_target(ctx: ServerContext, topic: str, content_type: str | None):
    """The topic a produce goes to and its body's media type, checked (APIError: 503 not ready,
    400 bad name, 404 no such topic, 415 another media type). Raises before anything is written."""
    b = ready_broker(ctx)
    check_name(topic, "topic")
    ctype = media_type(content_type)
    t = b.topic(topic)
    if ctype != BATCH_CONTENT_TYPE and ctype not in ("application/json", ""):
        raise APIError(415, "unsupported_media_type",
                       f"Content-Type must be application/json or {BATCH_CONTENT_TYPE}, not {ctype}")
    return t, ctype


def json_records(ctx: ServerContext, t, body: bytes) -> tuple:
    """A JSON produce body checked and decoded: ``(values, keys, headers, partitions,
    timestamps, nbytes)``, one entry per message in input order; ``keys`` (and the three after it)
    is None when every message is a plain ``{"value": "text"}`` (the common request). Raises
    ``APIError`` (400/413) naming the message and field; nothing is written before it returns."""
    limit = ctx.settings.max_message_bytes
    try:
        doc = json_loads(body)
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
    values: list = []
    keys = headers = parts = tss = None  # made at the first message that is more than a text value
    nbytes = 0
    for i, m in enumerate(msgs):
        if m.__class__ is dict and len(m) == 1:  # the common {"value": "text"}: the checks below, short
            v = m.get("value")
            if v.__class__ is str:
                v = v.encode("utf-8")
                if len(v) > limit:
                    raise APIError(413, "message_too_large",
                                   f"messages[{i}].value is {len(v)} bytes; max_message_bytes is {limit}",
                                   field="value")
                nbytes += len(v)
                values.append(v)
                if keys is not None:
                    keys.append(None)
                    headers.append(None)
                    parts.append(None)
                    tss.append(None)
                continue
        if keys is None:
            keys, headers, parts, tss = [None] * i, [None] * i, [None] * i, [None] * i
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise APIError(400, "invalid_argument", f"{where} must be an object", field="messages")
        bad = set(m) - _JSON_FIELDS
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
    return values, keys, headers, parts, tss, nbytes


def text_produce_answer(metas: list) -> dict:
    """The answer to a produce of text values only (one append, so one range)."""
    m0 = metas[0]
    n = len(metas)
    return {"count": n, "ranges": [{"partition": m0.partition, "base_offset": m0.offset, "count": n}]}


async def produce_messages(ctx: ServerContext, topic: str, content_type: str | None, partition_raw: str | None,
                           body: bytes, producer=None) -> dict:
    """``POST /topics/{topic}/messages``: a JSON or binary body (by ``content_type``) appended
    (by ``producer``, an idempotent request's, else the server's)."""
    t, ctype = produce_target(ctx, topic, content_type)
    if ctype == BATCH_CONTENT_TYPE:
        return await produce_batches(ctx, topic, partition_raw, body, producer)
    metrics = ctx.metrics
    values, keys, headers, parts, tss, nbytes = json_records(ctx, t, body)
    if keys is None:  # text values only: one append (to the partition the producer picks), counted there
        return text_produce_answer(await _append(ctx, t, producer, None, values, None, None, None, nbytes))
    now = int(time.time() * 1000)
    tss_final = [now if x is None else x for x in tss] if any(x is not None for x in tss) else None
    anykey = any(k is not None for k in keys)
    anyhdr = any(h for h in headers)
    if len(set(parts)) == 1:  # one append, coalesced with concurrent requests' (append_coalescer.py)
        metas = await _append(ctx, t, producer, parts[0], values, keys if anykey else None,
                              headers if anyhdr else None, tss_final, nbytes)
    else:  # mixed explicit partitions: one call per partition, results back in input order
        metas = [None] * len(values)
        groups: dict = {}
        for i, p in enumerate(parts):
            groups.setdefault(p, []).append(i)
        producer = producer or ctx.producer()
        for p, idx in groups.items():
            got = await ctx.write(
                producer.send_batch, topic, [values[i] for i in idx],
                keys=[keys[i] for i in idx] if anykey else None,
                headers=[headers[i] for i in idx] if anyhdr else None, partition=p,
                timestamps_ms=None if tss_final is None else [tss_final[i] for i in idx])
            for i, md in zip(idx, got):
                metas[i] = md
        metrics.count_in("topic", topic, len(metas), nbytes)
    return produce_answer(metas)


def _append(ctx: ServerContext, t, producer, partition, values: list, keys, headers, timestamps,
            nbytes: int):
    """One request's records appended and counted (an awaitable of their RecordMetadata): through
    the coalescer (append_coalescer.py), or by ``producer`` alone when the request names one (an
    idempotent request: its sequence numbers one batch of its own, never part of a group)."""
    if producer is None:
        return ctx.appends.send(t, partition, values, keys, headers, timestamps, nbytes)
    return _append_as(ctx, t, producer, partition, values, keys, headers, timestamps, nbytes)


async def _append_as(ctx: ServerContext, t, producer, partition, values, keys, headers, timestamps,
                     nbytes: int) -> list:
    metas = await ctx.write(producer.send_batch, t.name, values, keys=keys, headers=headers,
                            partition=partition, timestamps_ms=timestamps)
    ctx.metrics.count_in("topic", t.name, len(metas), nbytes)
    return metas


def produce_answer_bytes(out: dict) -> bytes:
    """``json_bytes(out)`` (any answer), a produce answer's formatted directly: the same bytes
    (a test checks); anything else (a field added) goes through ``json_bytes``."""
    ranges = out.get("ranges")
    if len(out) != 2 or ranges.__class__ is not list or "count" not in out:
        return json_bytes(out)
    count = out["count"]
    if len(ranges) == 1:
        r = ranges[0]
        if len(r) == 3 and count.__class__ is int:
            return b'{"count":%d,"ranges":[{"partition":%d,"base_offset":%d,"count":%d}]}' % (
                count, r["partition"], r["base_offset"], r["count"])
    return json_bytes(out)


# ------------------------------------------------------------------- binary (hot) paths
def batch_records(ctx: ServerContext, t, partition_raw: str | None, body: bytes) -> tuple:
    """A binary produce body checked and decoded: ``(partition, appends)``, one append
    ``(values, keys, headers, timestamps, nbytes)`` per record batch of the body, in order.
    Raises ``APIError`` (400/413) before anything is written: a batch that is refused refuses
    the whole body (no batch of it appended)."""
    partition = query_int({"partition": partition_raw}, "partition", None, 0, t.partitions - 1)
    try:
        batches = decode_body(body)
    except VQSError as e:
        raise APIError(400, "corrupt_batch", str(e), field="body") from None
    if not batches:
        raise APIError(400, "invalid_argument", "the body holds no record batch", field="body")
    appends = []
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
        keys = [bt.key(i) for i in range(bt.count)] if bt.key_validity is not None else None
        hdrs = [bt.headers(i) for i in range(bt.count)] if bt.header_offsets is not None else None
        if bt.timestamps is not None:
            ts = [x if x > 0 else now for x in bt.timestamps.tolist()]
        elif bt.first_timestamp_ms > 0:
            ts = [bt.first_timestamp_ms] * bt.count
        else:
            ts = None
        appends.append((values, keys, hdrs, ts, nb))
    return partition, appends


def produce_answer(metas: list) -> dict:
    """A produce's answer: its count and offsets as ranges (one per run of consecutive offsets
    of one partition), in input order."""
    return {"count": len(metas), "ranges": _partition_ranges(metas)}


async def produce_batches(ctx: ServerContext, topic: str, partition_raw: str | None, body: bytes,
                          producer=None) -> dict:
    """Binary produce (application/vnd.vqs.batch): every batch of the body appended in order."""
    t = ready_broker(ctx).topic(check_name(topic, "topic"))
    partition, appends = batch_records(ctx, t, partition_raw, body)
    metas: list = []
    for values, keys, hdrs, ts, nb in appends:
        # one append per batch, coalesced with concurrent requests' and counted there (append_coalescer.py)
        metas += await _append(ctx, t, producer, partition, values, keys, hdrs, ts, nb)
    return produce_answer(metas)


async def consume_messages(ctx: ServerContext, topic: str, partition: int, offset: int | None, limit: int,
                           max_bytes: int, wait_ms: int, group: str | None, encoding: str,
                           binary: bool) -> tuple[bytes, str, dict]:
    """``GET /topics/{topic}/messages`` with checked parameters: (body, media type, headers).
    JSON, or exactly the records asked for as record batches with the position headers."""
    b = ready_broker(ctx)
    t = b.topic(check_name(topic, "topic"))
    lg = _partition_log(t, partition)
    if offset is None:
        offset = _start_offset(b, lg, topic, partition, None if group is None else check_name(group, "group"))
    wait_s = min(wait_ms, ctx.settings.max_wait_ms) / 1000
    # Log.read finds the offset through the sparse index and decodes only what it returns
    recs = lg.read(offset, max_records=limit, max_bytes=max_bytes)
    if not recs and wait_s > 0:
        await ctx.long_poll_log(lg, offset, wait_s)
        recs = lg.read(offset, max_records=limit, max_bytes=max_bytes)
    nxt = recs[-1].offset + 1 if recs else offset
    if binary:  # the records as freshly encoded batches (offsets and timestamps preserved)
        parts, nbytes = encode_records(recs)
        ctx.metrics.count_out("topic", t.name, len(recs), nbytes)
        return b"".join(parts), BATCH_CONTENT_TYPE, {NEXT_OFFSET: str(nxt), START_OFFSET: str(lg.start_offset),
                                                     END_OFFSET: str(lg.end_offset)}
    out = [_record_json(x, encoding) for x in recs]
    ctx.metrics.count_out("topic", topic, len(recs), sum(len(x.value) for x in recs))
    return json_bytes({"topic": topic, "partition": partition, "messages": out, "next_offset": nxt,
                       "start_offset": lg.start_offset, "end_offset": lg.end_offset}), "application/json", {}
