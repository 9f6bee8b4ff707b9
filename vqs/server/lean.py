"""The hot REST routes without the framework: their match, their checks, their handlers.

Produce (JSON and ``application/vnd.vqs.batch``), consume (JSON and binary),
and queue send, receive and delete carry the server's request rate; FastAPI's
routing, dependency injection and pydantic validation cost more per request
than the work itself. The HTTP fast path (fast_http.py) answers their plain
requests with the handlers here, after the server's one admission
(``VQSMiddleware.admit``: bounds, browser checks, the token); every other
request to them (chunked, pipelined behind another, HTTP/1.0, the fast path
off) is FastAPI's.

Invariants:

* **The same answers as the FastAPI routes.** Both call the same cores
  (``produce_messages`` in rest/produce.py, ``consume_messages`` in rest/messages.py;
  ``send_messages``, ``receive_messages``, ``delete_messages`` in
  rest/queues.py) with the same checked values, and errors raised there are
  answered by the app's one mapping (``VQSMiddleware.error_answer``).
* **Only what passes the routes' own checks is answered here.** The bounds of
  the queue bodies are read from their pydantic models (rest/models.py), those
  of the consume parameters from ``CONSUME_INTS``; a request with anything
  else (an unknown field or parameter, a wrong type or a value FastAPI would
  coerce, a bound crossed, a duplicated parameter, JSON that does not parse,
  another content type, an empty body) raises ``_Fallback``: the fast path
  hands it, body read, to FastAPI, so every validation error is the
  framework's.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl

from ..wire import BATCH_CONTENT_TYPE
from .context import ServerContext
from .rest.conventions import json_loads
from .rest.messages import CONSUME_INTS, consume_messages
from .rest.models import MessageAttributeIn, QueueDelete, QueueMessageIn, QueueReceive, QueueSend
from .rest.produce import produce_answer_bytes, produce_messages
from .rest.queues import delete_messages, receive_messages, send_messages

_PATH = re.compile(r"/(topics|queues)/([A-Za-z0-9._-]{1,200})/(messages|receive|delete)")
_NAME = re.compile(r"[A-Za-z0-9._-]{1,200}")  # NAME_PATTERN, matched whole (no "$" before a newline)
_BATCH = BATCH_CONTENT_TYPE.encode()
_JSON_HEADERS = b"application/json"


_UNSEEN = object()
_MAX_HITS = 4096


class _Route:
    """What the middleware's metrics read of a matched route: its path template."""

    __slots__ = ("path",)

    def __init__(self, path: str):
        self.path = path


_MESSAGES = _Route("/topics/{topic}/messages")
_SEND = _Route("/queues/{queue_name}/messages")
_RECEIVE = _Route("/queues/{queue_name}/receive")
_DELETE = _Route("/queues/{queue_name}/delete")


# --------------------------------------------------------------- the models' bounds
def _bounds(model, field: str) -> tuple[int, float, int, float]:
    """(ge, le, min_length, max_length) of a pydantic model's field (open ends as 0/inf)."""
    ge, le, lo, hi = -float("inf"), float("inf"), 0, float("inf")
    for m in model.model_fields[field].metadata:  # annotated_types' Ge, Le, MinLen, MaxLen
        ge = getattr(m, "ge", ge)
        le = getattr(m, "le", le)
        lo = getattr(m, "min_length", lo)
        hi = getattr(m, "max_length", hi)
    return ge, le, lo, hi


def _int_check(model, field: str):
    ge, le, _, _ = _bounds(model, field)
    return lambda v: v.__class__ is int and ge <= v <= le  # bool, float, str: FastAPI's


def _str_check(model, field: str):
    _, _, lo, hi = _bounds(model, field)
    return lambda v: v.__class__ is str and lo <= len(v) <= hi


def _attribute_ok(v) -> bool:
    if v.__class__ is str:
        return True
    if v.__class__ is not dict or "DataType" not in v:
        return False
    for k, x in v.items():
        check = _ATTRIBUTE_CHECKS.get(k)
        if check is None or ((x is not None or k == "DataType") and not check(x)):
            return False
    return True


_ATTRIBUTE_CHECKS = {f: _str_check(MessageAttributeIn, f) for f in ("DataType", "StringValue", "BinaryValue")}
_ATTRS_MAX = _bounds(QueueMessageIn, "attributes")[3]


def _attributes_ok(v) -> bool:
    return v.__class__ is dict and len(v) <= _ATTRS_MAX and all(map(_attribute_ok, v.values()))


_MESSAGE_CHECKS = {
    "body": _str_check(QueueMessageIn, "body"),
    "body_b64": _str_check(QueueMessageIn, "body_b64"),
    "delay_seconds": _int_check(QueueMessageIn, "delay_seconds"),
    "attributes": _attributes_ok,
    "group_id": _str_check(QueueMessageIn, "group_id"),
    "dedup_id": _str_check(QueueMessageIn, "dedup_id"),
}
assert set(_MESSAGE_CHECKS) == set(QueueMessageIn.model_fields)
_SEND_LEN = _bounds(QueueSend, "messages")[2:]
_DELETE_LEN = _bounds(QueueDelete, "receipt_handles")[2:]
_MAX_MESSAGES = _int_check(QueueReceive, "max_messages")
_MAX_MESSAGES_DEFAULT = QueueReceive.model_fields["max_messages"].default
_WAIT = _bounds(QueueReceive, "wait_seconds")[:2]
_VISIBILITY = _int_check(QueueReceive, "visibility_timeout")
assert set(QueueReceive.model_fields) == {"max_messages", "wait_seconds", "visibility_timeout"}


def _messages(doc) -> list | None:
    """QueueSend's ``messages`` (each a dict of QueueMessageIn's fields), or None: FastAPI's."""
    if doc.__class__ is not dict or len(doc) != 1:
        return None
    msgs = doc.get("messages")
    if msgs.__class__ is not list or not _SEND_LEN[0] <= len(msgs) <= _SEND_LEN[1]:
        return None
    for m in msgs:
        if m.__class__ is not dict:
            return None
        for k, v in m.items():
            check = _MESSAGE_CHECKS.get(k)
            if check is None or (v is not None and not check(v)):
                return None
    return msgs


def _receive_args(doc) -> tuple | None:
    """QueueReceive's (max_messages, wait_seconds, visibility_timeout), or None: FastAPI's."""
    if doc.__class__ is not dict:
        return None
    n, wait, vis = _MAX_MESSAGES_DEFAULT, None, None
    for k, v in doc.items():
        if k == "max_messages":
            if not _MAX_MESSAGES(v):
                return None
            n = v
        elif k == "wait_seconds":
            if v is not None:
                if (v.__class__ is not int and v.__class__ is not float) or not _WAIT[0] <= v <= _WAIT[1]:
                    return None
                wait = float(v)  # pydantic's float
        elif k == "visibility_timeout":
            if v is not None and not _VISIBILITY(v):
                return None
            vis = v
        else:
            return None
    return n, wait, vis


def _handles(doc) -> list | None:
    """QueueDelete's ``receipt_handles``, or None: FastAPI's."""
    if doc.__class__ is not dict or len(doc) != 1:
        return None
    hs = doc.get("receipt_handles")
    if hs.__class__ is not list or not _DELETE_LEN[0] <= len(hs) <= _DELETE_LEN[1]:
        return None
    for h in hs:
        if h.__class__ is not str:
            return None
    return hs


def _consume_args(qs: bytes) -> dict | None:
    """The consume route's query parameters, checked as its Query declarations, or None."""
    out: dict = {}
    if not qs:
        return out
    for k, v in parse_qsl(qs.decode("latin-1"), keep_blank_values=True):
        if k in out:
            return None  # a repeated parameter
        spec = CONSUME_INTS.get(k)
        if spec is not None:
            if not (v.isascii() and v.isdigit()) or len(v) > 19:
                return None
            i = int(v)
            if not spec[1] <= i <= spec[2]:
                return None
            out[k] = i
        elif k == "group":
            if _NAME.fullmatch(v) is None:
                return None
            out[k] = v
        elif k == "encoding":
            if v not in ("text", "base64"):
                return None
            out[k] = v
        else:
            return None
    return out


def _header(raw_headers, name: bytes) -> bytes | None:
    for k, v in raw_headers:
        if k == name:
            return v
    return None


def _json_doc(raw_headers, body: bytes):
    """The body as JSON when it is ``application/json``, else None (no Content-Type is read as
    JSON by some FastAPI versions and not by others: theirs)."""
    ctype = _header(raw_headers, b"content-type")
    if ctype is None or ctype.split(b";", 1)[0].strip().lower() != _JSON_HEADERS:
        return None
    if not body:
        return None
    try:
        return json_loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


# ----------------------------------------------------------------------- dispatch
class _Fallback(Exception):
    """Raised by a handler: the request is FastAPI's."""


class LeanRoutes:
    """The hot routes' handlers: ``handler(scope, name, body)`` answers a dict (JSON) or
    ``(body, media type, headers)`` (``answer`` lays either out), or raises ``_Fallback``."""

    def __init__(self, ctx: ServerContext):
        self.ctx = ctx
        self._hits: dict = {}  # (method, path) -> match()'s answer

    def match(self, method: str, path: str):
        """(handler, the name in the path, the route as the metrics label it) of a request, or
        None (remembered for the paths seen last: a server's clients ask for the same few
        again and again)."""
        key = (method, path)
        hit = self._hits.get(key, _UNSEEN)
        if hit is _UNSEEN:
            hit = self._match(method, path)
            if len(self._hits) >= _MAX_HITS:  # the paths come from clients: bounded
                self._hits.clear()
            self._hits[key] = hit
        return hit

    def _match(self, method: str, path: str):
        m = _PATH.fullmatch(path)
        if m is None:
            return None
        kind, name, action = m.groups()
        if kind == "topics":
            if action != "messages":
                return None
            if method == "POST":
                return self._produce, name, _MESSAGES
            return (self._consume, name, _MESSAGES) if method == "GET" else None
        if method != "POST":
            return None
        if action == "messages":
            return self._send, name, _SEND
        return (self._receive, name, _RECEIVE) if action == "receive" else (self._delete, name, _DELETE)

    # ------------------------------------------------------------------ handlers
    def _produce(self, scope, topic: str, body: bytes):
        """(The core's coroutine itself, awaited by the caller: one frame less per request.)"""
        qs = scope["query_string"]
        if idempotent_produce(qs):
            raise _Fallback  # an idempotent request: the route (rest/producers.py)
        ctype = _header(scope["headers"], b"content-type")
        return produce_messages(self.ctx, topic, None if ctype is None else ctype.decode("latin-1"),
                                produce_partition(qs), body)

    async def _consume(self, scope, topic: str, body: bytes):
        q = _consume_args(scope["query_string"])
        if q is None:
            raise _Fallback
        accept = _header(scope["headers"], b"accept")
        g = q.get
        return await consume_messages(
            self.ctx, topic, g("partition", 0), g("offset"), g("limit", CONSUME_INTS["limit"][0]),
            g("max_bytes", CONSUME_INTS["max_bytes"][0]), g("wait_ms", 0), g("group"), g("encoding", "text"),
            accept is not None and _BATCH in accept, g("stored", 0) == 1)

    async def _send(self, scope, queue: str, body: bytes):
        msgs = _messages(_json_doc(scope["headers"], body))
        if msgs is None:
            raise _Fallback
        return await send_messages(self.ctx, queue, msgs)

    async def _receive(self, scope, queue: str, body: bytes):
        args = _receive_args(_json_doc(scope["headers"], body))
        if args is None:
            raise _Fallback
        return await receive_messages(self.ctx, queue, *args)

    async def _delete(self, scope, queue: str, body: bytes):
        hs = _handles(_json_doc(scope["headers"], body))
        if hs is None:
            raise _Fallback
        return await delete_messages(self.ctx, queue, hs)


def answer(out) -> tuple[bytes, list]:
    """(body, headers) of a handler's result: a dict (JSON) or (body, media type, headers),
    laid out as Starlette's Response does (the HTTP fast path, fast_http.py, sends the same)."""
    if out.__class__ is dict:
        data = produce_answer_bytes(out)  # json_bytes(out); a produce's formatted directly
        return data, [(b"content-length", str(len(data)).encode()), (b"content-type", _JSON_HEADERS)]
    data, media, extra = out
    headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in extra.items()] if extra else []
    headers += [(b"content-length", str(len(data)).encode()), (b"content-type", media.encode())]
    return data, headers


def produce_partition(query_string: bytes) -> str | None:
    """The ``partition`` query parameter of a produce, as given (checked by the route's core)."""
    if not query_string:
        return None
    return dict(parse_qsl(query_string.decode("latin-1"), keep_blank_values=True)).get("partition")


def idempotent_produce(query_string: bytes) -> bool:
    """A produce that names a producer: answered by its FastAPI route (rest/producers.py)."""
    return bool(query_string) and b"producer_id" in query_string
