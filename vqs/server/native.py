"""The native protocol's listener (``--native-port``): the REST API over one persistent TCP
connection per client, without HTTP (frames: vqs/native_wire.py; docs/native.md).

Why: a one-message request over HTTP spends most of the server's time in HTTP itself
(parsing, the protocol's per-request machinery, the admission of headers), more than the
append it asks for. Here a request is one frame: its method, target, content type and body
are read from fixed fields, and answered with the REST route's status and body.

What answers a request (native_requests.py): the hot routes' own handlers (lean.py, as the
HTTP fast path calls them, on uvicorn's event loop, where their long polls and the append
coalescer live), or the server's ASGI app called in-process with the connection's token:
HTTP's answers, status and body. The console, the API docs and the SQS endpoint are HTTP's
alone (404 here).

Invariants:

* **Authenticated before anything is read but its HELLO**: the first frame must be a HELLO
  of at most ``PRE_AUTH_MAX_FRAME`` bytes, within ``http_header_timeout_s`` of the connect;
  with credentials configured its token is checked as a bearer token is (bearer.py). A
  failed HELLO is answered (401/403, as REST answers a missing or wrong token), counted and
  logged as every front's failed authentication (auth_failures.py) and the connection
  closed: each guess costs a connection. An unauthenticated connection so costs
  at most its socket, its slot under the connection caps and ``PRE_AUTH_MAX_FRAME`` bytes,
  for at most ``http_header_timeout_s``.
* **Bounded**: connections in total and per client address (``max_connections``,
  ``max_connections_per_client``; over either: closed at accept); a frame's length is read
  from its prefix and checked (``max_body_bytes`` plus the target's bound) before any of its
  body is buffered; a frame arrives whole within ``native_frame_timeout_s`` of its first
  byte; a connection idle for ``native_idle_timeout_s`` is closed. A frame after the HELLO
  is held against the server's request budget (``max_request_bytes_in_flight``, shared with
  every front: byte_budget.py) from its prefix until it is answered; with the budget spent
  the connection is not read until bytes come back, within its frame's time (else closed).
* **One request at a time per connection, answered in order**: reading pauses while a
  request is handled and while the answers written wait in the transport (flow control), so
  a client that sends and never reads holds one answer, not a growing queue, and that for
  at most ``http_header_timeout_s`` of reading none of it (then the connection is aborted:
  its buffers freed, its slot given back; also after a close that waits on them).
* **Acknowledged means done**: an answer is written only after the route's core returned
  (the append coalescer's group appended; as over HTTP).
* **Deadlines without timers**: a connection's deadline is a number moved as it goes (the
  HELLO's, a frame's, idleness'); one sweep of the listener every ``SWEEP_S`` closes those
  past theirs, so a request arms and cancels nothing.
* **Stopping**: a request that arrives once the server stops is answered 503 and its
  connection closed; ``stop`` closes the listener, closes idle connections and waits (at
  most the graceful timeout) for the requests in progress, before uvicorn drains HTTP and
  the broker closes.
* **Bad frames close the connection** (logged with the peer, at most once a minute per
  reason), never the server; no answer ever carries a server path or a traceback (errors
  are the app's: ``VQSMiddleware.error_answer``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time

from ..native_wire import (
    HELLO,
    MAX_TARGET,
    REQUEST,
    VERSION,
    NativeFrameError,
    answer_head,
    decode_hello,
    decode_request,
    frame_length,
)
from .conn_caps import ConnectionCaps
from .native_requests import direct_produce, direct_queue, handle
from .rest.messages import StoredBody

logger = logging.getLogger("vqs.server.native")

#: the largest frame before the HELLO is accepted (a version and a token)
PRE_AUTH_MAX_FRAME = 1024
#: what a request frame holds besides its body: the fixed fields and the target
REQUEST_OVERHEAD = 6 + MAX_TARGET
#: the answer headers passed on (the API's own; the rest are HTTP's)
_KEPT = (b"content-type", b"retry-after", b"www-authenticate")
_LOG_EVERY_S = 60.0
_DIGITS = re.compile(r"\d+")
IDLE = "idle"
#: bytes a connection may buffer past the frame being handled before its reading pauses
READ_AHEAD = 64 << 10
#: how often the connections' deadlines are checked (a deadline is met within this late)
SWEEP_S = 0.5


def _kept(headers) -> list:
    return [(k, v) for k, v in headers if k.startswith(b"x-vqs-") or k in _KEPT]


class NativeListener:
    """The native protocol's TCP server on the running (uvicorn's) loop, answering for ``front``
    (the app's ``VQSMiddleware``)."""

    def __init__(self, front, settings, sock, max_connections: int):
        self.front = front
        self.ctx = front.ctx
        self.settings = settings
        self.sock = sock
        self.max_frame = settings.max_body_bytes + REQUEST_OVERHEAD
        self.caps = ConnectionCaps(max_connections, settings.max_connections_per_client, "native", logger)
        self.connections: set = set()
        self.server = None
        self._sweeper = None
        self._logged: dict = {}

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: _Connection(self), sock=self.sock)
        self._sweeper = loop.call_later(SWEEP_S, self._sweep)

    def _sweep(self) -> None:
        """Close the connections past their deadline (one check for all, not a timer each); an idle
        one closes quietly (a client's thread that stopped sending), the others are logged."""
        now = time.monotonic()
        for c in [c for c in self.connections if c.deadline < now and not c.busy]:
            if c.why != IDLE:
                self.bad(c.peer, c.why)
            if c.closed or c.paused_writing:
                # answers the client does not read (or a close waiting on them): its buffers go now
                c.closed = True
                c.transport.abort()
            else:
                c.close()
        self._sweeper = asyncio.get_running_loop().call_later(SWEEP_S, self._sweep)

    async def stop(self, timeout: float) -> None:
        """Close the listener and the idle connections; wait up to ``timeout`` s for the rest."""
        if self.server is not None:
            self.server.close()
            self._sweeper.cancel()
        deadline = time.monotonic() + timeout
        while True:
            busy = [c for c in self.connections if c.busy]
            for c in self.connections:
                if not c.busy:
                    c.close()
            if not busy or time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.05)
        for c in list(self.connections):
            c.close()

    def bad(self, peer, why: str) -> None:
        """A connection closed for ``why``: logged at most once a minute per reason (its text with
        the numbers left out: a client cannot make the reasons, or the lines, many)."""
        now = time.monotonic()
        key = _DIGITS.sub("N", why)
        if now - self._logged.get(key, -_LOG_EVERY_S) >= _LOG_EVERY_S:
            self._logged[key] = now
            logger.warning("native connection from %s closed: %s", peer, why,
                           extra={"vqs": {"peer": str(peer), "reason": why}})


class _Connection(asyncio.Protocol):
    """One client connection (module docstring). Its deadline (``deadline``, ``why``) is moved,
    never armed as a timer: the listener's sweep closes it once past (``SWEEP_S`` late at most)."""

    def __init__(self, listener: NativeListener):
        self.listener = listener
        self.front = listener.front
        self.settings = listener.settings
        self.transport = None
        self.peer = None
        self.addr = None
        self.buf = bytearray()
        self.need = None  # the length of the frame being read (its prefix read), or None
        self.token = None  # the HELLO's token, once accepted (None: not yet)
        self.busy = False  # a request is being handled
        self.paused_reading = False
        self.paused_writing = False
        self.closed = False
        self.admitted = False
        self.deadline = float("inf")
        self.why = ""
        self.disconnected = None  # set when the connection is lost (an in-process ASGI call's disconnect)
        self.held = 0  # bytes of the frame in hand taken from the request budget (byte_budget.py)
        self.waiting = None  # the budget's future this connection waits on, or None

    # ------------------------------------------------------------------ connection
    def connection_made(self, transport) -> None:
        self.transport = transport
        self.peer = transport.get_extra_info("peername")
        self.addr = self.peer[0] if isinstance(self.peer, tuple) else self.peer
        if not self.listener.caps.admit(self.addr):
            self.closed = True
            transport.abort()
            return
        self.admitted = True
        self.listener.connections.add(self)
        self._due(self.settings.http_header_timeout_s, "no HELLO in time")

    def connection_lost(self, exc) -> None:
        self.closed = True
        if not self.busy:  # (a request still running holds its frame's bytes until done())
            self._give()
        if self.admitted:
            self.admitted = False
            self.listener.caps.release(self.addr)
            self.listener.connections.discard(self)
        if self.disconnected is not None:
            self.disconnected.set()

    def close(self) -> None:
        """Close once what was written is sent; a client that does not read it within
        ``http_header_timeout_s`` is cut off (the sweep aborts it: its answers' memory freed)."""
        if not self.closed:
            self.closed = True
            self.transport.close()
            if self.transport.get_write_buffer_size():
                self._due(self.settings.http_header_timeout_s, "closed with its answers unread")

    def _due(self, seconds: float, why: str) -> None:
        self.deadline = time.monotonic() + seconds
        self.why = why

    def fail(self, why: str) -> None:
        self.listener.bad(self.peer, why)
        self.close()

    def pause_writing(self) -> None:
        """The client reads its answers slower than they come: no request is read meanwhile,
        and one that reads none for ``http_header_timeout_s`` is cut off (the sweep aborts it:
        a client that never reads holds no answer's memory for longer)."""
        self.paused_writing = True
        self._pause()
        self._due(self.settings.http_header_timeout_s, "its answers unread")

    def resume_writing(self) -> None:
        self.paused_writing = False
        if not self.busy and not self.closed:
            self._resume()
            self._idle()
            self._next()

    def _pause(self) -> None:
        if not self.paused_reading:
            self.paused_reading = True
            self.transport.pause_reading()

    def _resume(self) -> None:
        if self.paused_reading:
            self.paused_reading = False
            self.transport.resume_reading()

    # ------------------------------------------------------------------ reading
    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.buf += data
        if self.busy or self.paused_writing:
            if len(self.buf) > READ_AHEAD:  # a client sending ahead of its answers: read no more
                self._pause()
            return
        self._next()

    def _next(self) -> None:
        """Take the next frame from the buffer, if whole (else wait for more, bounded)."""
        if self.waiting is not None:  # for the request budget (_given calls again)
            return
        buf = self.buf
        if self.need is None:
            if len(buf) < 4:
                if buf and self.token is not None:  # a frame has begun: it arrives whole in time
                    self._due(self.settings.native_frame_timeout_s, "a frame not whole in time")
                return
            limit = PRE_AUTH_MAX_FRAME if self.token is None else self.listener.max_frame
            try:
                self.need = frame_length(buf, limit)
            except NativeFrameError as e:
                self.fail(str(e) + (" before its HELLO" if self.token is None else ""))
                return
            if self.token is not None:
                self._due(self.settings.native_frame_timeout_s, "a frame not whole in time")
        if self.token is not None and not self.held:
            waiting = self.listener.ctx.in_flight.take_or_wait(4 + self.need)
            if waiting is not None:  # the budget is spent: read nothing until some comes back
                self._pause()
                # its frame's time runs on: a wait past it closes the connection (the client retries)
                self._due(self.settings.native_frame_timeout_s,
                          "a frame not read in time: the server's request budget stayed spent")
                self.waiting = waiting
                waiting.add_done_callback(self._given)
                return
            self.held = 4 + self.need
        if len(buf) < 4 + self.need:
            return
        frame = bytes(memoryview(buf)[4:4 + self.need])
        del buf[:4 + self.need]
        self.need = None
        if self.token is None:
            self._hello(frame)
            return
        if frame[0] != REQUEST:
            self.fail(f"a frame of kind {frame[0]} after the HELLO")
            return
        try:
            method, target, ctype, accept, body = decode_request(frame)
        except NativeFrameError as e:
            self.fail(str(e))
            return
        self.busy = True
        self.deadline = float("inf")
        if len(buf) > READ_AHEAD:
            self._pause()
        if not direct_produce(self, method, target, ctype, body) and not direct_queue(self, method, target, ctype, body):
            asyncio.get_running_loop().create_task(handle(self, method, target, ctype, accept, body))

    def _hello(self, frame: bytes) -> None:
        if frame[0] != HELLO:
            self.fail("the first frame is not a HELLO")
            return
        try:
            version, token = decode_hello(frame)
        except NativeFrameError as e:
            self.fail(str(e))
            return
        front = self.front
        if version != VERSION:
            self.write(*front.refusal_answer(False, 400, "unsupported_version",
                                              f"native protocol version {version} (this server speaks {VERSION})"))
            self.close()
            return
        refusal = front.check_bearer([(b"authorization", b"Bearer " + token)] if token else []) \
            if front.rest_auth else None
        if refusal is not None:
            self.write(*front.refusal_answer(False, *refusal))
            front.ctx.auth_failures.failed("native", self.peer, f"{refusal[1]} (HELLO)")
            self.close()
            return
        self.token = token
        body = json.dumps({"version": VERSION, "max_frame_bytes": self.listener.max_frame}).encode()
        self.write(200, [(b"content-type", b"application/json")], body)
        self._idle()

    def _given(self, _fut) -> None:
        """Bytes came back to the request budget: try again for the frame whose prefix was read."""
        self.waiting = None
        if self.closed:
            return
        if not self.paused_writing:
            self._resume()
        self._next()

    def _give(self) -> None:
        if self.held:
            self.listener.ctx.in_flight.give(self.held)
            self.held = 0

    def done(self) -> None:
        """The request is answered (native_requests.py): read the next one."""
        self._give()
        self.busy = False
        if not self.closed:
            if not self.paused_writing:
                self._resume()
            self._idle()

    def _idle(self) -> None:
        self._due(self.settings.native_idle_timeout_s, IDLE)
        if self.buf:  # a request sent ahead: taken in the loop's next round (an answer given
            # synchronously, e.g. an error, must not recurse through the requests behind it)
            asyncio.get_running_loop().call_soon(self._resume_next)

    def _resume_next(self) -> None:
        if not self.busy and not self.closed and not self.paused_writing:
            self._next()

    # ------------------------------------------------------------------ answering
    def write(self, status: int, headers: list, data) -> None:
        """One answer: ``status``, the API's headers among ``headers``, ``data`` (bytes or a
        StoredBody); nothing once the connection is closed."""
        if self.closed:
            return
        parts = data.parts if data.__class__ is StoredBody else (data,)
        head = answer_head(status, _kept(headers), len(data))
        self.transport.writelines([head, *parts])

