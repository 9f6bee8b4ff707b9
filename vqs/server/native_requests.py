"""How a native protocol request is answered (the connection's side: native.py): by the hot
routes' own handlers, or by the server's ASGI app in-process, with HTTP's answers.

* A plain binary produce of one record batch (``direct_produce``: vqs.Client's ``send``) is
  checked by the route's own functions and joins the append coalescer with a ``_ProduceSink``
  as its future, as the HTTP fast path's direct produce does: no task, coroutine or future.
* A plain queue send, a receive that would not wait and a delete of one handle
  (``direct_queue``: vqs.Client's) are answered as their frame is read where their writes run
  inline (``inline_writes``), by the routes' synchronous cores (rest/queues.py
  ``send_messages_inline``, ``receive_now_inline``, ``delete_one_inline``): no task.
* The other hot routes (produce, consume, queue send, receive, delete; ``handle``) call the
  handlers the HTTP fast path calls (lean.py), under the checks it makes of the query.
* Everything else under the REST API's paths, and a hot request whose body those handlers hand
  to the framework (``_Fallback``), is answered by ``VQSMiddleware`` itself, called in-process
  with a scope of the request and the connection's token (``_asgi``): the same admission,
  routing, validation and errors as over HTTP, counted with ``api="native"``. An answer larger
  than a frame closes the connection.
* The console, the API docs and the SQS endpoint are HTTP's alone: 404.

Each request's end calls the connection's ``done()`` exactly once (after its answer is written,
or with none when the connection is gone); every exception a handler raises is answered as the
app answers it (``error_answer``: never a server path or a traceback).
"""

from __future__ import annotations

import asyncio
import logging
import time
from urllib.parse import unquote

from ..native_wire import ACCEPT_BATCH
from ..wire import BATCH_CONTENT_TYPE
from .lean import (
    _consume_args,
    _Fallback,
    _handles,
    _messages,
    _receive_args,
    answer,
    idempotent_produce,
    produce_partition,
)
from .rest.conventions import json_loads
from .rest.produce import coalesce_batches, media_type, produce_answer, produce_target
from .rest.queues import delete_one_inline, receive_now_inline, send_messages_inline

logger = logging.getLogger("vqs.server.native")

#: paths answered here besides the hot routes (the REST API; not the console, docs or SQS)
API_PREFIXES = ("/topics", "/queues", "/groups", "/share-groups", "/health", "/metrics", "/producers")
_BATCH = BATCH_CONTENT_TYPE.encode()


def _route_path(route) -> str:
    return getattr(route, "path", None) or "unmatched"


class _ProduceSink:
    """A direct produce's stand-in for the coalescer's future (``done``, ``set_result``,
    ``set_exception``, ``cancel``): it answers the connection."""

    __slots__ = ("conn", "path", "route", "t0", "answered")

    def __init__(self, conn, path: str, route):
        self.conn, self.path, self.route = conn, path, route
        self.t0 = time.perf_counter()
        self.answered = False

    def done(self) -> bool:
        return self.answered

    def cancel(self, msg=None) -> bool:
        return False  # (the server stopping: the connection closes unanswered, as an HTTP one)

    def set_result(self, metas: list) -> None:
        data, hs = answer(produce_answer(metas))
        self.answer(200, hs, data)

    def set_exception(self, exc: Exception) -> None:
        self.answer(*self.conn.front.error_answer(exc, "POST", self.path))

    def answer(self, status: int, hs: list, data) -> None:
        self.answered = True
        conn = self.conn
        conn.write(status, hs, data)
        conn.front.account("native", "POST", self.path, _route_path(self.route), status, self.t0,
                           data[:4096] if status >= 400 else b"", conn.peer)
        conn.done()

    async def appends(self, appends) -> None:
        """A body of several batches, or records for several partitions: the route's appends
        (``coalesce_batches``' coroutine)."""
        try:
            out = await appends
        except Exception as exc:
            self.set_exception(exc)
            return
        data, hs = answer(out)
        self.answer(200, hs, data)


def direct_produce(conn, method: str, target: str, ctype: str | None, body) -> bool:
    """Take a plain binary produce (True: it is answered, now or by the coalescer), else False."""
    front = conn.front
    if method != "POST" or ctype != BATCH_CONTENT_TYPE or front.ctx.stopping:
        return False
    path, _, qs = target.partition("?")
    hit = front.lean.match(method, path) if "%" not in path else None
    if hit is None or hit[0] != front.lean._produce or (qs and idempotent_produce(qs.encode())):
        return False
    sink = _ProduceSink(conn, path, hit[2])
    ctx = front.ctx
    try:
        t, _ = produce_target(ctx, hit[1], ctype)
        appends = coalesce_batches(ctx, t, produce_partition(qs.encode()), bytes(body), sink)
        if appends is not None:
            asyncio.get_running_loop().create_task(sink.appends(appends))
    except Exception as exc:  # checked before anything was appended: the route's error
        sink.set_exception(exc)
    return True


def direct_queue(conn, method: str, target: str, ctype: str | None, body) -> bool:
    """Take a plain queue send, a receive that would not wait, or a delete of one handle
    (vqs.Client's ``Queue.send``, ``receive`` and ``delete``: JSON bodies the lean checks take)
    where they run inline (``inline_writes``: no fsync on their way): answered now, with no
    task or coroutine (True); else False (``handle`` answers it: a long poll, the framework's
    checks)."""
    front = conn.front
    ctx = front.ctx
    if method != "POST" or not ctx.inline_writes or ctx.stopping or ctype is None or "%" in target:
        return False
    path, _, qs = target.partition("?")
    hit = front.lean.match(method, path)
    if hit is None or qs or media_type(ctype) != "application/json":
        return False
    fn = hit[0]
    lean = front.lean
    if fn != lean._send and fn != lean._delete and fn != lean._receive:
        return False
    try:
        doc = json_loads(bytes(body)) if body else None
    except (ValueError, UnicodeDecodeError):
        return False
    if fn == lean._send:
        msgs = _messages(doc)
        if msgs is None:
            return False
        call = (send_messages_inline, msgs)
    elif fn == lean._delete:
        hs = _handles(doc)
        if hs is None or len(hs) != 1:
            return False
        call = (delete_one_inline, hs[0])
    else:
        args = _receive_args(doc)
        if args is None:
            return False
        call = (receive_now_inline, *args)
    t0 = time.perf_counter()
    try:
        out = call[0](ctx, hit[1], *call[1:])
        if out is None:
            return False  # a receive that may wait: a long poll, handle's
        status, (data, headers) = 200, answer(out)
    except Exception as exc:  # the route's error, as the app answers it
        status, headers, data = front.error_answer(exc, method, path)
    conn.write(status, headers, data)
    front.account("native", method, path, _route_path(hit[2]), status, t0, data[:4096] if status >= 400 else b"",
                  conn.peer)
    conn.done()
    return True


async def handle(conn, method: str, target: str, ctype: str | None, accept: int, body) -> None:
    """Answer one request (module docstring), then ``conn.done()``."""
    t0 = time.perf_counter()
    path, _, qs = target.partition("?")
    body = bytes(body)
    front = conn.front
    try:
        if front.ctx.stopping:
            status, headers, data = front.refusal_answer(False, 503, "shutting_down", "the server is shutting down",
                                                         None, {"Retry-After": "1"})
            conn.write(status, headers, data)
            front.account("native", method, path, "unmatched", status, t0, data[:4096], conn.peer)
            conn.close()
            return
        hit = front.lean.match(method, path) if "%" not in path else None
        if hit is not None and _hot(front.lean, hit[0], qs):
            await _lean(conn, hit, method, path, qs, ctype, accept, body, t0)
        elif path.startswith(API_PREFIXES):
            await _asgi(conn, method, path, qs, ctype, accept, body)
        else:
            status, headers, data = front.refusal_answer(
                False, 404, "not_found", f"{path[:200]} is not served over the native protocol (HTTP only)")
            conn.write(status, headers, data)
            front.account("native", method, path, "unmatched", status, t0, data[:4096], conn.peer)
    except Exception as exc:  # a bug: answered as the app answers one, never a traceback
        logger.exception("native request %s %s failed", method, path[:200])
        conn.write(*front.error_answer(exc, method, path))
    finally:
        conn.done()


def _hot(lean, fn, qs: str) -> bool:
    """A hot route whose handler answers this query itself (as the HTTP fast path asks)."""
    if fn == lean._produce:
        return not idempotent_produce(qs.encode())
    if fn == lean._consume:
        return _consume_args(qs.encode()) is not None
    return True


async def _lean(conn, hit, method, path, qs, ctype, accept, body, t0) -> None:
    fn, name, route = hit
    headers = [(b"content-type", ctype.encode())] if ctype else []
    if accept == ACCEPT_BATCH:
        headers.append((b"accept", _BATCH))
    scope = {"method": method, "path": path, "query_string": qs.encode(), "headers": headers,
             "client": conn.peer, "route": route}
    front = conn.front
    try:
        out = await fn(scope, name, body)
    except _Fallback:
        await _asgi(conn, method, path, qs, ctype, accept, body)
        return
    except Exception as exc:
        status, hs, data = front.error_answer(exc, method, path)
    else:
        status = 200
        data, hs = answer(out)
    conn.write(status, hs, data)
    front.account("native", method, path, _route_path(route), status, t0, data[:4096] if status >= 400 else b"",
                  conn.peer)


class _AnswerTooLarge(Exception):
    pass


async def _asgi(conn, method, path, qs, ctype, accept, body) -> None:
    """The request answered by the server's ASGI app, in-process, as the connection's token."""
    headers = [(b"host", b"127.0.0.1"), (b"x-vqs-client", b"native"), (b"content-length", str(len(body)).encode())]
    if ctype:
        headers.append((b"content-type", ctype.encode()))
    if accept == ACCEPT_BATCH:
        headers.append((b"accept", _BATCH))
    if conn.token:
        headers.append((b"authorization", b"Bearer " + conn.token))
    sockname = conn.transport.get_extra_info("sockname")
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": unquote(path), "raw_path": path.encode(),  # (decoded, as uvicorn gives an HTTP path)
             "query_string": qs.encode(), "root_path": "",
             "headers": headers, "client": conn.peer, "vqs_api": "native",
             "server": sockname if isinstance(sockname, tuple) else None}
    sent = [False]
    gone = conn.disconnected = asyncio.Event()
    if conn.closed:
        gone.set()

    async def receive():
        if not sent[0]:
            sent[0] = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    start: list = []
    parts: list = []
    size = [0]
    limit = conn.listener.max_frame

    async def send(message):
        if message["type"] == "http.response.start":
            start[:] = [message["status"], message.get("headers") or []]
        elif message["type"] == "http.response.body":
            chunk = message.get("body", b"")
            size[0] += len(chunk)
            if size[0] > limit:
                raise _AnswerTooLarge
            parts.append(chunk)

    try:
        await conn.front(scope, receive, send)
    except _AnswerTooLarge:
        conn.fail("an answer larger than a frame")
        return
    finally:
        conn.disconnected = None
    if start:
        conn.write(start[0], list(start[1]), b"".join(parts))
