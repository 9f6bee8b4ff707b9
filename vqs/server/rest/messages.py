"""REST routes for the messages of topics: produce, consume by offset (long poll), wait on many partitions.

Two bodies per route: JSON for people (values as text, or ``*_b64`` when they
are not UTF-8) and ``application/vnd.vqs.batch`` (vqs/wire.py) for speed.
The routes' work is in ``produce_messages`` (produce.py) and ``consume_messages``,
called with checked values both by the
FastAPI routes here and by the HTTP fast path (vqs/server/fast_http.py, lean.py), which
answers the common requests without the framework because they carry the
throughput.

Invariants: a produce returns its offsets as ranges in input order; a
consume returns records from ``offset`` on (never one before it), with the
next offset to ask for; a long poll waits in slices of at most 1 s so a
shutdown is never held up.

``stored=1`` (binary only) answers the stored batches themselves instead: the
bytes of the whole batches holding offsets >= ``offset`` as the log holds
them (the first may begin below ``offset``; compressed ones stay compressed),
each CRC-verified by the read that found it (``Log.read_batches``), none
decoded into records or encoded again. An answer holds batches of one segment, as a
Kafka fetch does (the next request goes on from ``x-vqs-next-offset``): they are views
of one mapping of that segment's file, written to the connection as they are, so a
connection whose client reads slowly holds one mapping and its descriptor at most
(counted in the open-file budget, vqs/server/run.py). The views stay readable until
sent: after open a topic's segment files are only deleted or replaced under their name,
never cut in place (the server runs no ``Log.repair``; vqs/storage/segment.py, "Mapped
reads"). A query parameter rather than a
media-type parameter: what it changes is which records the answer holds
(whole batches, and ``max_bytes`` counts their stored bytes), not how they
are represented, and it is checked, bounded and documented with the route's
other parameters (``CONSUME_INTS``), by the fast path as by the route.
"""

from __future__ import annotations

import base64
from typing import Literal

from fastapi import APIRouter, Query, Request, Response

from ...wire import BATCH_CONTENT_TYPE, END_OFFSET, NEXT_OFFSET, START_OFFSET, encode_records
from ..context import ServerContext
from ..errors import APIError
from .conventions import (
    MAX_WAIT_MS,
    NAME_PATTERN,
    JSONRoute,
    check_name,
    jresp,
    json_bytes,
    links,
    name_param,
    ready_broker,
)
from .models import PRODUCE_QUERY, WaitRequest, query_parameters
from .produce import produce_messages

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
                                "headers": {"type": "object", "additionalProperties": {"type": ["string", "null"]}},
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
#: route's declarations (its schema and validation) and the fast path (lean.py) both read it.
CONSUME_INTS = {
    "partition": (0, 0, 10_000),
    "offset": (None, 0, (1 << 63) - 1),
    "limit": (100, 1, 100_000),
    "max_bytes": (1 << 20, 1, 64 << 20),
    "wait_ms": (0, 0, MAX_WAIT_MS),
    "stored": (0, 0, 1),
}


def _int_query(name: str, description: str | None = None):
    default, lo, hi = CONSUME_INTS[name]
    return Query(default, ge=lo, le=hi, description=description)


# ---------------------------------------------------------------------------- routes
def message_routes(ctx: ServerContext, idempotent=None) -> APIRouter:
    """``idempotent(ctx, topic, query)``: the producer of an idempotent produce request, or None
    (rest/producers.py; the fast path hands such requests to these routes)."""
    r = APIRouter(tags=["topics"], route_class=JSONRoute)
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
                      encoding: Literal["text", "base64"] = Query("text"),
                      stored: int = _int_query("stored", "1: the whole stored batches as the log holds them "
                                                         f"(with Accept: {BATCH_CONTENT_TYPE})")):
        data, media, headers = await consume_messages(
            ctx, topic, partition, offset, limit, max_bytes, wait_ms, group, encoding,
            BATCH_CONTENT_TYPE in request.headers.get("accept", ""), bool(stored))
        return Response(bytes(data) if data.__class__ is StoredBody else data, media_type=media, headers=headers)

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
            topics = {tn: b.topic(tn) for tn, _ in tps}
            await ctx.long_poll_topics(tuple(topics.values()), lambda: any(
                topics[tn].log(p).end_offset > off for (tn, p), off in tps.items()), wait_s)
            ready = ready_now()
        return jresp({"ready": ready})

    return r


# ------------------------------------------------------------ the consume route's core
# The FastAPI route above and the fast path (vqs/server/lean.py) both call it (and
# produce.py's produce_messages) with checked values, so the two answer alike by construction.
async def consume_messages(ctx: ServerContext, topic: str, partition: int, offset: int | None, limit: int,
                           max_bytes: int, wait_ms: int, group: str | None, encoding: str,
                           binary: bool, stored: bool = False) -> tuple[bytes | StoredBody, str, dict]:
    """``GET /topics/{topic}/messages`` with checked parameters: (body, media type, headers).
    JSON, or exactly the records asked for as record batches with the position headers,
    or (``stored``) the stored batches holding them (module doc)."""
    if stored and not binary:
        raise APIError(400, "invalid_argument", f"stored=1 answers stored record batches: it needs "
                                                f"Accept: {BATCH_CONTENT_TYPE}", field="stored")
    b = ready_broker(ctx)
    t = b.topic(check_name(topic, "topic"))
    lg = _partition_log(t, partition)
    if offset is None:
        offset = _start_offset(b, lg, topic, partition, None if group is None else check_name(group, "group"))
    wait_s = min(wait_ms, ctx.settings.max_wait_ms) / 1000
    if stored:
        data, nxt, n, nbytes = _stored_batches(lg, offset, limit, max_bytes)
        if not data and wait_s > 0:
            await ctx.long_poll_topics((t,), lambda: lg.end_offset > offset, wait_s)
            data, nxt, n, nbytes = _stored_batches(lg, offset, limit, max_bytes)
        ctx.metrics.count_out("topic", t.name, n, nbytes)
        return data, BATCH_CONTENT_TYPE, {NEXT_OFFSET: str(nxt), START_OFFSET: str(lg.start_offset),
                                          END_OFFSET: str(lg.end_offset)}
    # Log.read finds the offset through the sparse index and decodes only what it returns
    recs = lg.read(offset, max_records=limit, max_bytes=max_bytes)
    if not recs and wait_s > 0:
        await ctx.long_poll_topics((t,), lambda: lg.end_offset > offset, wait_s)
        recs = lg.read(offset, max_records=limit, max_bytes=max_bytes)
    nxt = recs[-1].offset + 1 if recs else offset
    if binary:  # the records as freshly encoded batches (offsets and timestamps preserved)
        parts, nbytes = encode_records(recs)
        ctx.metrics.count_out("topic", t.name, len(recs), nbytes)
        return b"".join(parts), BATCH_CONTENT_TYPE, {NEXT_OFFSET: str(nxt), START_OFFSET: str(lg.start_offset),
                                                     END_OFFSET: str(lg.end_offset)}
    out = [_record_json(x, encoding) for x in recs]
    ctx.metrics.count_out("topic", topic, len(recs), sum(len(x.value) for x in recs if x.value is not None))
    return json_bytes({"topic": topic, "partition": partition, "messages": out, "next_offset": nxt,
                       "start_offset": lg.start_offset, "end_offset": lg.end_offset}), "application/json", {}


def _stored_batches(lg, offset: int, limit: int, max_bytes: int) -> tuple[StoredBody, int, int, int]:
    """(body, next offset, records, value bytes) of a ``stored=1`` consume: the stored bytes of
    the whole batches holding offsets >= ``offset``, at least one if any exist, then more while
    their stored bytes stay within ``max_bytes`` and fewer than ``limit`` records at or after
    ``offset`` were taken. Every batch was CRC-verified by the read (``Log.read_batches``: a
    damaged first batch raises CorruptRecordError, a damaged later one ends the answer before
    it); the next offset is the end of the last batch taken. Records and value bytes count
    those at or after ``offset`` (the metrics)."""
    parts = []
    total = n = nbytes = 0
    nxt = offset
    for bt in lg.read_batches(offset, max_bytes=max_bytes, mapped=True, within_segment=True):
        if parts and (total + bt.size_bytes > max_bytes or n >= limit):
            break
        parts.append(bt.raw)
        total += bt.size_bytes
        skip = offset - bt.base_offset if offset > bt.base_offset else 0
        n += bt.count - skip
        vo = bt.value_offsets
        nbytes += vo[bt.count] - vo[skip]
        nxt = bt.next_offset
    return StoredBody(parts, total), nxt, n, nbytes


class StoredBody:
    """A ``stored=1`` answer's body: the batches' views (module doc), sent as they are, not
    joined into one buffer; ``len`` is their total size, ``bytes`` joins them."""

    __slots__ = ("parts", "size")

    def __init__(self, parts: list, size: int):
        self.parts = parts
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __bytes__(self) -> bytes:
        return b"".join(self.parts)
