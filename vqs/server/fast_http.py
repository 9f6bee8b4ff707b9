"""The HTTP fast path: the hot routes answered in uvicorn's HTTP protocol, below ASGI.

uvicorn's own per-request machinery (the ASGI scope's travel through the
middleware, a ``RequestResponseCycle``, the receive/send message dicts, two
writes) costs about as much as a whole one-message produce.
``FastHttpProtocol`` (a subclass of uvicorn's ``HttpToolsProtocol``, given to
``uvicorn.Config(http=...)`` by vqs/server/run.py) answers the hot REST
routes (lean.py) without it: produce and consume (``POST``/``GET
/topics/{topic}/messages``) and the queues' send, receive and delete; and every
request to the SQS endpoint (both protocols, every action: boto3's SendMessage,
ReceiveMessage, DeleteMessage and their batches are the hot ones). From the
parser's callbacks it starts a task that calls the hot route's handler
(``LeanRoutes._produce`` etc., i.e. ``produce_messages``, the FastAPI route's
core, ``consume_messages``, ``send_messages``, ...) or the one the SQS endpoint's
ASGI app calls (``SQSService.answer``: decoding, SigV4, the action, errors,
MD5s, its latency metric), and writes the whole answer (status line,
uvicorn's default headers, the route's headers, body) in one
``transport.write``. A long poll (a consume's ``wait_ms``, a receive's wait,
SQS's WaitTimeSeconds) waits in that task on an asyncio future
(long_poll.py), never blocking the event loop. Every other request is
uvicorn's and the ASGI app's, unchanged. ``vqs_fast_http_requests_total{api}``
counts what was answered here.

Invariants:

* **Only a request the server's admission lets through, and only a plain
  one**, is taken: ``VQSMiddleware.admit``, the one the ASGI path asks
  (header size, a Content-Length within the body's limit, the server not
  stopping, the Host and cross-site checks, the bearer token; for the SQS
  endpoint, the endpoint started: its SigV4 check is its own, in
  ``answer``), has no refusal (what it refuses, the ASGI path answers); a
  Content-Length (a GET may have none) and no Transfer-Encoding; a hot
  route's match (lean.py) or the SQS endpoint's path; HTTP/1.1, no Upgrade, no ``Expect:
  100-continue``, an ASCII path without escapes, not an idempotent produce,
  consume parameters the hot route takes (so neither handler hands the
  request to the framework), uvicorn's ``limit_concurrency`` not reached, no
  other request of the connection in progress or queued (a pipelined request
  behind a fast one is queued by uvicorn as usual and started when the fast
  one is answered), the connection's writes not paused (flow control).
  Anything else, decided before the body is read, goes down the normal path;
  a queue request whose body the lean checks refuse (they hand it to the
  framework) is handed, body read, to a ``RequestResponseCycle`` and the ASGI
  app, as uvicorn would have from the start.
* **The same answer.** Status, JSON body and headers are those of the FastAPI
  route (``lean.answer`` lays them out as Starlette does), errors are those of
  the ASGI path (``VQSMiddleware.error_answer``: never a server path or
  traceback), and the bytes on the wire are those uvicorn would write
  (``STATUS_LINE``, ``server_state.default_headers``, ``connection: close``
  when the connection does not stay open). tests/server/test_fast_http.py
  compares raw answers with the fast path on and off.
* **The same bookkeeping.** The request is counted (``vqs_http_requests``,
  the latency histogram) and logged by the middleware's ``account``; it stands in the
  connection's ``cycle`` and in uvicorn's ``server_state.tasks`` while it runs,
  so keep-alive, pipelining, ``limit_concurrency``, graceful shutdown
  (``keep_alive`` cleared: the connection closes after the answer; the server
  waits for it) and a forced stop (``cancel``) behave as for an ASGI request
  (a consume's long poll is woken by ``ctx.stopping`` as before).
  A client that leaves mid-body is counted as the ASGI path counts it (500
  under its route, no answer); one that leaves during the append gets nothing
  written and the request counts as answered, as there.
* **Acknowledged means appended.** The answer is written only after the core
  returned, which is after the coalesced append (append_coalescer.py).

It depends on uvicorn internals, so ``fast_protocol`` checks them at start-up
(the version range pinned in pyproject.toml, the attributes and methods used
here) and returns None, with a log line, when they differ: the server then
runs with uvicorn's plain protocol.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ..wire import BATCH_CONTENT_TYPE
from .http_bounds import _BODY
from .lean import _consume_args, _Fallback, _header, answer, idempotent_produce, produce_partition
from .rest.messages import StoredBody
from .rest.produce import (
    append_json_records,
    coalesce_batches,
    json_records,
    produce_answer,
    produce_target,
    text_produce_answer,
)

logger = logging.getLogger("vqs.server")

#: ``_FastRequest``'s "handler" for a request to the SQS endpoint (its ``answer`` runs it)
SQS_HIT = ("sqs", None, None)

#: uvicorn versions whose httptools protocol this module was written against (pyproject.toml pins them).
SUPPORTED_UVICORN = ((0, 30), (0, 55))

# what is used of HttpToolsProtocol: methods, and attributes its __init__ or on_message_begin sets
_METHODS = ("on_message_begin", "on_url", "on_header", "on_headers_complete", "on_body", "on_message_complete",
            "on_response_complete", "connection_lost", "shutdown", "data_received", "_start_asgi_task")
_ATTRS = ("cycle", "pipeline", "tasks", "connections", "server_state", "flow", "limit_concurrency", "url",
          "scope", "headers", "expect_100_continue", "parser", "transport", "loop", "root_path", "access_log",
          "app", "logger", "access_logger")
# RequestResponseCycle's parameters (a request the lean checks refuse is handed to one)
_CYCLE_PARAMS = ("scope", "transport", "flow", "logger", "access_logger", "access_log", "default_headers",
                 "message_event", "expect_100_continue", "keep_alive", "on_response")


def _version(text: str) -> tuple[int, ...]:
    out = []
    for part in text.split(".")[:2]:
        digits = "".join(c for c in part if c.isdigit())
        out.append(int(digits or 0))
    return tuple(out)


def unsupported_reason(config) -> str | None:
    """Why the fast path cannot run with this uvicorn and config (None: it can)."""
    try:
        import httptools  # noqa: F401
        import uvicorn
        from uvicorn.protocols.http import httptools_impl as impl
    except ImportError as e:
        return f"httptools is not importable ({e})"
    v = _version(uvicorn.__version__)
    if not SUPPORTED_UVICORN[0] <= v < SUPPORTED_UVICORN[1]:
        return f"uvicorn {uvicorn.__version__} is outside the supported range"
    base = getattr(impl, "HttpToolsProtocol", None)
    if base is None or not isinstance(getattr(impl, "STATUS_LINE", None), dict):
        return "uvicorn's httptools protocol has changed"
    missing = [m for m in _METHODS if not callable(getattr(base, m, None))]
    names = set(base.__init__.__code__.co_names) | set(base.on_message_begin.__code__.co_names)
    missing += [a for a in _ATTRS if a not in names]
    cycle = getattr(impl, "RequestResponseCycle", None)
    if cycle is None:
        missing.append("RequestResponseCycle")
    else:
        import inspect

        params = inspect.signature(cycle).parameters
        missing += [f"RequestResponseCycle({p})" for p in _CYCLE_PARAMS if p not in params]
        missing += [f"RequestResponseCycle({p})" for p in params if p not in _CYCLE_PARAMS]
    if missing:
        return f"uvicorn's httptools protocol has changed (no {', '.join(missing)})"
    if getattr(config, "root_path", ""):
        return "a root_path is set"
    return None


def fast_protocol(front, config, base=None):
    """The protocol class for ``uvicorn.Config(http=...)`` answering ``front``'s (a
    ``VQSMiddleware``) plain requests to the hot routes, or None (logged) when it cannot run here."""
    if front is None or not front.ctx.settings.fast_http:
        return None
    why = unsupported_reason(config)
    if why is not None:
        logger.warning("the HTTP fast path is off: %s; every request goes through ASGI", why,
                       extra={"vqs": {"fast_http": False, "reason": why}})
        return None
    return _make_protocol(front, base)


class _FastRequest:
    """One fast request: uvicorn's ``cycle`` for its connection while it runs (what the
    protocol and the server read of a cycle: ``response_complete``, ``keep_alive``,
    ``disconnected``, ``message_event.set()``, ``cancel()``)."""

    __slots__ = ("proto", "front", "scope", "fn", "name", "body", "parts", "held", "keep_alive", "disconnected",
                 "response_complete", "t0", "task", "started", "message_event", "api", "direct", "text")

    def __init__(self, proto, front, scope: dict, hit: tuple, keep_alive: bool, direct: bool = False):
        self.proto = proto
        self.front = front
        self.scope = scope
        self.fn, self.name, route = hit  # the hot route's handler (its core's coroutine), the name in the path
        if route is not None:
            scope["route"] = route  # labels its metrics, as FastAPI's routing does before the body is read
        self.api = "sqs" if hit is SQS_HIT else "rest"  # the SQS endpoint's request (its answer is whole)
        self.body = b""
        self.parts: list = []  # the body as it arrives (joined once, when it is complete)
        self.held = 0  # bytes of its body held (body_holds.py; given back in _account)
        self.keep_alive = keep_alive
        self.disconnected = False
        self.response_complete = False
        self.t0 = time.perf_counter()
        self.task = None
        self.started = False
        self.message_event = self  # connection_lost calls cycle.message_event.set()
        self.direct = direct  # a produce: may be answered with no task (start)
        self.text = False  # a direct produce of JSON text values (its answer's one range)

    # ------------------------------------------------------------ the request's run
    def start(self) -> None:
        """The body is complete: run the handler in a task (as uvicorn runs an ASGI app: the
        core may need a current task, e.g. anyio's worker threads), or start a direct produce."""
        self.started = True
        core = None
        if self.direct:
            core = self._produce_direct()
            if core is None:
                return
        self.task = self.proto.loop.create_task(self._run(core))

    # ------------------------------------------------------ a produce, with no task
    # A plain produce (a JSON body, or a binary one of a single record batch, whose records go
    # to one partition) is checked here, synchronously, by the route's own functions
    # (produce_target, json_records, batch_records: the same errors), and joins the coalescer
    # with this request as its "future" (set_result etc. below): the answer is written from the
    # coalescer's callback, after the group's append returned (acknowledged means appended, as
    # for the task). No task, coroutine or future is made for it: at one message a request
    # they cost about as much as the append itself.
    def _produce_direct(self):
        """None: taken (answered now or from the coalescer); else the coroutine that appends the
        records already checked, for the task (JSON messages that are more than text values,
        several record batches, records for several partitions: the route's own appends)."""
        scope = self.scope
        ctx = self.front.ctx
        ctype = _header(scope["headers"], b"content-type")
        try:
            t, media = produce_target(ctx, self.name, None if ctype is None else ctype.decode("latin-1"))
            if media == BATCH_CONTENT_TYPE:
                return coalesce_batches(ctx, t, produce_partition(scope["query_string"]), self.body, self)
            records = json_records(ctx, t, self.body)
            values, keys, _, _, _, nbytes = records
            if keys is not None:
                return append_json_records(ctx, t, records)
            self.text = True
            ctx.appends.send(t, None, values, None, None, None, nbytes, sink=self)
        except Exception as exc:  # checked before anything was appended: the route's error
            # answered from the loop, not from inside the parser's callback (uvicorn's
            # on_response_complete must not run while the parser still holds a pipelined request)
            self.proto.loop.call_soon(self.set_exception, exc)
        return None

    def done(self) -> bool:
        return self.response_complete

    def set_result(self, metas: list) -> None:
        data, headers = answer(text_produce_answer(metas) if self.text else produce_answer(metas))
        self._finish(200, headers, data)

    def set_exception(self, exc: Exception) -> None:
        if not self.response_complete:
            self._error(exc)

    async def _run(self, core=None) -> None:
        """``core``: the coroutine of a produce checked already (``_produce_direct``), else the handler's."""
        try:
            if self.api == "sqs":  # the endpoint's answer, as its ASGI app sends it (never a Fallback)
                status, headers, data = await self.front.ctx.sqs.answer(self.scope, self.body, self.t0)
                self._finish(status, headers, data, log_body=data[:4096] if status >= 400 else b"")
                return
            out = await (core if core is not None else self.fn(self.scope, self.name, self.body))
        except _Fallback:  # the handler's checks hand the request to the framework
            self._replay()
            return
        except Exception as exc:
            self._error(exc)
            return
        except BaseException:  # cancelled by a forced stop: uvicorn's 500 (the middleware
            # counts it as 500 and logs no line of its own: no status was sent)
            self._finish(500, _UVICORN_500_HEADERS, b"Internal Server Error", sent=False)
            raise
        data, headers = answer(out)
        self._finish(200, headers, data)

    def _replay(self) -> None:
        """Hand the request, body read, to uvicorn's ASGI cycle, as its ``on_headers_complete``
        would have (the concurrency limit was checked then); it goes first on the connection
        (a pipelined request behind it waits in uvicorn's queue, as behind any cycle)."""
        proto = self.proto
        self.response_complete = True  # this stand-in is done; uvicorn's cycle takes over
        proto.tasks.discard(self)
        if self.held:  # the ASGI path holds the body again (body_holds.py) for its run
            self.front.holds.release(self.scope.get("client"), self.held, self.api == "sqs")
            self.held = 0
        if self.disconnected or proto.transport.is_closing():
            self._account(500, b"", False)  # as the ASGI path counts a request whose client left
            return
        cycle = _CYCLE(
            scope=self.scope, transport=proto.transport, flow=proto.flow, logger=proto.logger,
            access_logger=proto.access_logger, access_log=proto.access_log,
            default_headers=proto.server_state.default_headers, message_event=asyncio.Event(),
            expect_100_continue=False, keep_alive=self.keep_alive, on_response=proto.on_response_complete)
        cycle.body += self.body
        cycle.more_body = False
        cycle.message_event.set()  # the whole body is there (as on_message_complete says)
        if proto.cycle is self:
            proto.cycle = cycle
        proto._start_asgi_task(cycle, proto.app)

    def _error(self, exc: Exception) -> None:
        scope = self.scope
        status, headers, body = self.front.error_answer(exc, scope["method"], scope["path"])
        self._finish(status, headers, body, log_body=body[:4096])

    def _finish(self, status: int, headers: list, body: bytes, log_body: bytes = b"", sent: bool = True) -> None:
        """Write the answer (unless the client left), then count and log the request, then
        let the connection go on (uvicorn's ``on_response_complete``)."""
        if self.response_complete:
            return
        self.response_complete = True
        proto = self.proto
        proto.tasks.discard(self)
        transport = proto.transport
        written = False
        if not self.disconnected and not transport.is_closing():
            content = [_STATUS_LINE[status]]
            close = False
            for name, value in proto.server_state.default_headers:
                content += (name, b": ", value, b"\r\n")
            for name, value in headers:
                if name == b"connection" and b"close" in [t.lower().strip() for t in value.split(b",")]:
                    close = True
                content += (name, b": ", value, b"\r\n")
            if not self.keep_alive and not close:
                content.append(b"connection: close\r\n")
            content.append(b"\r\n")
            parts = body.parts if body.__class__ is StoredBody else (body,)
            if len(body) > _BODY_APART:  # stored batches: not copied once more to join the head
                transport.write(b"".join(content))
                transport.writelines(parts)
            else:
                content += parts
                transport.write(b"".join(content))
            written = True
            if close or not self.keep_alive:
                transport.close()
        self._account(status, log_body, sent)
        if written:
            proto.on_response_complete()

    def _account(self, status: int, log_body: bytes, sent: bool) -> None:
        """As the ASGI path's: ``VQSMiddleware.account`` (status 0: none was ``sent``)."""
        scope = self.scope
        api = self.api
        front = self.front
        front.ctx.metrics.fast_http[api] += 1
        if self.held:
            front.holds.release(scope.get("client"), self.held, api == "sqs")
            self.held = 0
        route = scope.get("route")
        front.account(api, scope["method"], scope["path"],
                      getattr(route, "path", None) or ("/" if api == "sqs" else "unmatched"),
                      status if sent else 0, self.t0, log_body, scope.get("client"))

    # -------------------------------------------------- what uvicorn calls on a cycle
    def set(self) -> None:
        """``message_event.set()``: the connection was lost (or the request is complete)."""
        if self.disconnected and not self.started and not self.response_complete:
            # left mid-body: no answer; counted as the ASGI path counts it (no status sent: 500)
            self.response_complete = True
            self.proto.tasks.discard(self)
            self._account(500, b"", False)

    def cancel(self, msg=None) -> bool:
        """A forced stop (uvicorn's graceful timeout passed): as a task's cancel. uvicorn calls it
        while iterating over its task set, which the request leaves (``tasks.discard``): so the
        request ends in the loop's next round, never during that iteration."""
        if self.task is not None:
            return self.task.cancel(msg)  # the core sees CancelledError; the answer is uvicorn's 500
        self.proto.loop.call_soon(self._cancelled)
        return True

    def _cancelled(self) -> None:
        if self.started and not self.response_complete:  # a direct produce, its append not returned:
            self._finish(500, _UVICORN_500_HEADERS, b"Internal Server Error", sent=False)  # as a task's
        elif not self.started and not self.response_complete:
            self.disconnected = True
            self.set()
            self.proto.transport.close()


#: A body larger than this is written after the head rather than joined to it (the same bytes).
_BODY_APART = 64 << 10
_STATUS_LINE: dict = {}
_CYCLE = None  # uvicorn's RequestResponseCycle (set by _make_protocol)
_UVICORN_500_HEADERS = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", b"21"),
                        (b"connection", b"close")]


def _make_protocol(front, base=None):
    """``base``: uvicorn's ``HttpToolsProtocol`` or a subclass of it (http_bounds.py's)."""
    import httptools
    from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol, RequestResponseCycle

    global _CYCLE
    _CYCLE = RequestResponseCycle
    _STATUS_LINE.update(STATUS_LINE)
    lean = front.lean
    produce = lean._produce
    consume = lean._consume
    queue_routes = (lean._send, lean._receive, lean._delete)  # their checks read the body: may replay
    parse_url = httptools.parse_url
    methods = {b"POST": "POST", b"GET": "GET"}

    base = base or HttpToolsProtocol
    request_read = getattr(base, "_vqs_request_read", None)  # http_bounds.py's deadline, if any
    admit = front.admit
    hold = front.holds.hold
    is_sqs = front.is_sqs
    match = lean.match

    def fast_hit(method: str, path: str, qs: bytes, raw_headers, client):
        """The handler of a request to take here (``SQS_HIT`` for the SQS endpoint) and the bytes
        held for its body (``VQSMiddleware.holds``), or None: a hot route whose handler
        never hands the request to the framework for this query, the server's admission passed
        (``VQSMiddleware.admit``: what it refuses, ASGI answers; likewise a body ``holds`` refuses),
        a Content-Length (a GET may have none) and no Transfer-Encoding."""
        if is_sqs(method, path):
            if not qs and method == "GET":  # no SQS request: the root page
                return None
            hit = SQS_HIT
        else:
            hit = match(method, path)
            if hit is None:
                return None
            fn = hit[0]
            if not ((fn == produce and not idempotent_produce(qs)) or (fn == consume and _consume_args(qs) is not None)
                    or fn in queue_routes):
                return None
        _, _, _, chunked, clen, refusal = admit(method, path, raw_headers, False,
                                                len(path) + (len(qs) + 1 if qs else 0))
        if refusal is not None or chunked or (clen is None and method != "GET") or (clen is not None and clen < 0):
            return None
        if clen:
            if hold(client, clen, hit is SQS_HIT) is not None:  # refused: the ASGI path answers it
                return None
            return hit, clen
        return hit, 0

    class FastHttpProtocol(base):
        """uvicorn's httptools protocol, answering plain requests to the hot routes itself (module docstring)."""

        def on_headers_complete(self) -> None:
            parser = self.parser
            method = methods.get(parser.get_method())
            if method is not None and not self.expect_100_continue and not parser.should_upgrade() \
                    and parser.get_http_version() == "1.1":
                c = self.cycle
                lc = self.limit_concurrency
                if (c is None or c.response_complete) and not self.pipeline and not self.flow.write_paused \
                        and (lc is None or (len(self.connections) < lc and len(self.tasks) < lc)):
                    url = parse_url(self.url)
                    raw = url.path
                    qs = url.query or b""
                    if b"%" not in raw and raw.isascii():
                        path = raw.decode("ascii")
                        taken = fast_hit(method, path, qs, self.headers, self.client)
                        if taken is not None:
                            hit, held = taken
                            scope = self.scope
                            scope["method"] = method
                            scope["path"] = path
                            scope["raw_path"] = raw
                            scope["query_string"] = qs
                            req = _FastRequest(self, front, scope, hit, parser.should_keep_alive(),
                                               direct=hit[0] == produce)
                            req.held = held
                            self.cycle = req
                            self.tasks.add(req)
                            self._vqs_state = _BODY  # http_bounds.py's deadline: now the body's
                            self._vqs_last = self.loop.time()
                            return
            super().on_headers_complete()

        def on_body(self, body: bytes) -> None:
            c = self.cycle
            if c.__class__ is _FastRequest:
                c.parts.append(body)  # at most Content-Length <= its limit (the parser holds it to that)
                self._vqs_last = self.loop.time()
                return
            super().on_body(body)

        def on_message_complete(self) -> None:
            c = self.cycle
            if c.__class__ is _FastRequest:
                if request_read is not None:
                    request_read(self)
                parts = c.parts
                c.body = parts[0] if len(parts) == 1 else b"".join(parts)
                c.parts = None
                c.start()
                return
            super().on_message_complete()

    return FastHttpProtocol
