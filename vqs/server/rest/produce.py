"""The produce route's core: a produce request checked and appended, one code path for every front door.

``produce_messages`` (a JSON or binary body; the FastAPI route in messages.py
and the HTTP fast path, fast_http.py, await it) is made of the synchronous
checks (``produce_target``, ``json_records``, ``batch_records``: every error a
request can get before anything is written) and the append through the
server's coalescer (append_coalescer.py). For a plain produce the fast path
calls the same checks itself and joins the coalescer without a task.

Invariants: a produce returns its offsets as ranges in input order; a body is
checked whole before any of it is appended (a JSON message or a record batch
that is refused refuses the request, and nothing of it is written); what the
answer acknowledges was appended as the flush policy says.
"""

from __future__ import annotations

import base64
import binascii
import time

from ...errors import ConfigError, MessageTooLarge, VQSError
from ...record import check_headers
from ...wire import BATCH_CONTENT_TYPE, MAX_PRODUCE_RECORDS, decode_body
from ..context import ServerContext
from ..errors import APIError
from .conventions import check_name, json_bytes, json_error, json_loads, query_int, ready_broker

_JSON_FIELDS = {"value", "value_b64", "key", "key_b64", "headers", "partition", "timestamp_ms"}


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
    if v is None:  # absent, or JSON null (a null value: a tombstone)
        if required and field not in obj:
            raise APIError(400, "invalid_argument", f"{where}.{field} is required (null for a null value)",
                           field=field)
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
            if not isinstance(name, str) or not (val is None or isinstance(val, str)):
                raise TypeError
            out.append((name, None if val is None else val.encode("utf-8")))  # null: a null value
    except (TypeError, ValueError):
        raise APIError(400, "invalid_argument",
                       f"{where}.headers must be an object of strings (or nulls) or a list of [name, value] "
                       "pairs of them", field="headers") from None
    try:
        check_headers(out)  # (before its records join other requests' in one append)
    except ConfigError as e:
        raise APIError(400, "invalid_argument", f"{where}: {e}", field="headers") from None
    return out or None


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
    limit = t.message_limit(ctx.settings.max_message_bytes)  # the topic's, else the server's
    try:
        doc = json_loads(body)
    except ValueError as e:  # (UnicodeDecodeError too)
        raise json_error(e) from None
    if not isinstance(doc, dict):
        raise APIError(400, "invalid_argument", "the body must be an object {\"messages\": [...]}", field="body")
    msgs = doc.get("messages")
    extra = set(doc) - {"messages"}
    if extra:
        raise APIError(400, "invalid_argument", f"unknown field(s) {sorted(extra)}", field=sorted(extra)[0])
    if not isinstance(msgs, list) or not msgs:
        raise APIError(400, "invalid_argument", "messages must be a non-empty list", field="messages")
    if len(msgs) > MAX_PRODUCE_RECORDS:
        raise APIError(413, "too_many_records", f"{len(msgs)} messages: a produce takes at most "
                       f"{MAX_PRODUCE_RECORDS}", field="messages")
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
        if v is not None:
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
    return await append_json_records(ctx, t, json_records(ctx, t, body), producer)


async def append_json_records(ctx: ServerContext, t, records: tuple, producer=None) -> dict:
    """``json_records``' result appended to topic ``t`` (by ``producer``, else the server's); the answer."""
    topic = t.name
    metrics = ctx.metrics
    values, keys, headers, parts, tss, nbytes = records
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
            got = await ctx.topic_write(
                t, producer.send_batch, topic, [values[i] for i in idx],
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
    metas = await ctx.topic_write(t, producer.send_batch, t.name, values, keys=keys, headers=headers,
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
    return partition, _appends(ctx, t, _batches(ctx, t, body))


def _batches(ctx: ServerContext, t, body: bytes) -> list:
    """The body's record batches, checked: their CRC and columns, their values' sizes."""
    try:  # compressed batches inflate to no more, together, than a request's body may hold
        batches = decode_body(body, max_inflated=ctx.settings.max_body_bytes)
    except MessageTooLarge as e:
        raise APIError(413, "body_too_large", f"{e} (max_body_bytes)", field="body") from None
    except VQSError as e:
        raise APIError(400, "corrupt_batch", str(e), field="body") from None
    if not batches:
        raise APIError(400, "invalid_argument", "the body holds no record batch", field="body")
    n = sum(bt.count for bt in batches)
    if n > MAX_PRODUCE_RECORDS:  # (columns are views: nothing made yet)
        raise APIError(413, "too_many_records", f"the body holds {n} records: a produce takes at most "
                       f"{MAX_PRODUCE_RECORDS}", field="body")
    limit = t.message_limit(ctx.settings.max_message_bytes)  # the topic's, else the server's
    for bt in batches:
        o = bt.value_offsets
        if o[bt.count] > limit:  # only then can one value pass the limit
            big = max(o[i + 1] - o[i] for i in range(bt.count))
            if big > limit:
                raise APIError(413, "message_too_large",
                               f"a value of {big} bytes exceeds max_message_bytes ({limit})", field="value")
    return batches


def _appends(ctx: ServerContext, t, batches: list) -> list:
    appends = []
    now = int(time.time() * 1000)
    for bt in batches:
        values = bt.values()
        keys = [bt.key(i) for i in range(bt.count)] if bt.key_validity is not None else None
        hdrs = [bt.headers(i) for i in range(bt.count)] if bt.header_offsets is not None else None
        if bt.timestamps is not None:
            ts = [x if x > 0 else now for x in bt.timestamps.tolist()]
        elif bt.first_timestamp_ms > 0:
            ts = [bt.first_timestamp_ms] * bt.count
        else:
            ts = None
        appends.append((values, keys, hdrs, ts, bt.value_offsets[bt.count]))
    return appends


def produce_answer(metas: list) -> dict:
    """A produce's answer: its count and offsets as ranges (one per run of consecutive offsets
    of one partition), in input order."""
    return {"count": len(metas), "ranges": _partition_ranges(metas)}


async def produce_batches(ctx: ServerContext, topic: str, partition_raw: str | None, body: bytes,
                          producer=None) -> dict:
    """Binary produce (application/vnd.vqs.batch): every batch of the body appended in order."""
    t = ready_broker(ctx).topic(check_name(topic, "topic"))
    partition, appends = batch_records(ctx, t, partition_raw, body)
    return await append_batches(ctx, t, partition, appends, producer)


def coalesce_batches(ctx: ServerContext, t, partition_raw: str | None, body: bytes, sink):
    """A binary produce body checked (``batch_records``) and, when it is one record batch for one
    partition, handed to the append coalescer with ``sink`` (a future's stand-in, answered from the
    coalescer's callback): None. Else the coroutine of its appends (``append_batches``), for the
    caller to run. Raises the route's error before anything is appended. (The HTTP fast path's
    and the native protocol's direct produce: no task or future for the common request.)"""
    partition = query_int({"partition": partition_raw}, "partition", None, 0, t.partitions - 1)
    batches = _batches(ctx, t, body)
    if len(batches) == 1 and ctx.appends.send_encoded(t, partition, batches[0], sink):
        return None
    appends = _appends(ctx, t, batches)
    if len(appends) == 1:
        values, keys, hdrs, ts, nbytes = appends[0]
        if ctx.appends.send(t, partition, values, keys, hdrs, ts, nbytes, sink=sink) is not None:
            return None
    return append_batches(ctx, t, partition, appends)


async def append_batches(ctx: ServerContext, t, partition: int | None, appends: list, producer=None) -> dict:
    """``batch_records``' result appended to topic ``t``, batch after batch; the answer."""
    metas: list = []
    for values, keys, hdrs, ts, nb in appends:
        # one append per batch, coalesced with concurrent requests' and counted there (append_coalescer.py)
        metas += await _append(ctx, t, producer, partition, values, keys, hdrs, ts, nb)
    return produce_answer(metas)
