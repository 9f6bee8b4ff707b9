"""Bounds on HTTP connections, below ASGI: a header deadline and connection caps.

``bounded_protocol(base, settings)`` subclasses uvicorn's httptools protocol
(the fast path, fast_http.py, subclasses the result). uvicorn alone times out
only an idle keep-alive connection *after* a response: a connection that never
sends a byte, or sends half its headers, would be held for ever, and
uvicorn's ``limit_concurrency`` counted those connections, so 1,024 of them
made every other client get 503. Here:

* **Header deadline** (``http_header_timeout_s``): a request's headers must be
  complete within that many seconds of the connection opening or of the
  request's first byte. Past it, a connection that sent part of a request gets
  ``408`` and is closed; one that sent nothing is closed. Then its body must
  make progress: no part of it for that long (while the app is not behind:
  reads not paused) is ``408`` and closed, counted from the last part that
  came (the headers' end, then each part's arrival time). A request costs no
  timer: it sets its connection's deadline when it begins and clears it when
  its body is read; one sweep per server (every quarter of the timeout, at
  most a second, while connections are open) acts on the deadlines passed
  (a body deadline that finds a later part moves to that part's time plus
  the timeout). A deadline is so kept to within one sweep interval.
* **Caps at accept** (``max_connections`` in total,
  ``max_connections_per_client`` per remote address): a connection over a cap
  takes the place of the oldest connection (of that address, or of all) with
  no request in progress (idle, or its headers not complete) opened at least
  ``EVICT_AFTER_S`` (1 s) ago, which is closed; when every one has a request in progress, the new connection is
  answered ``503`` with ``Retry-After`` and closed before anything is read.
  So idle or half-sent connections can delay no one, and a client reaches
  the cap only with requests in progress.
  The total cap is also held below what the open-file limit leaves for
  connections (run.py computes it at start-up).
* uvicorn's ``limit_concurrency`` is then set above the total cap, so idle
  connections never turn other clients' requests into 503s.
* **A head that never ends** (``max_header_bytes``): neither uvicorn nor
  httptools bounds a request line or a header while it arrives (the parser
  gathers a header's name and value whole before anyone sees them), so a
  client could fill memory at line speed within the deadline. A request whose
  head is still incomplete once more than ``max_header_bytes`` of it arrived
  gets ``431`` and is closed (counted by whole reads: a read in which the head
  begins behind another request's bytes is not counted, so the most held is
  the limit and two reads). A complete head is measured exactly by the
  server's admission (``VQSMiddleware.admit``), with the same limit.

Invariant: a refused connection holds its descriptor only until the 503 is
written; a connection is counted (``every``, ``per_addr``) from
``connection_made`` until it is closed to make room or lost, whichever is
first (``_vqs_forget`` is idempotent).
"""

from __future__ import annotations

import logging

logger = logging.getLogger("vqs.server")

#: The largest body an SQS request may have, checked (app.py) before it is read and before its
#: signature is: SQS takes at most 1 MiB of message content per request (one message, or a
#: batch's together, attributes included), which its encodings make at most 4 bytes a byte
#: (a binary attribute's base64, URL-encoded), plus 256 KiB of names, ids and parameters.
SQS_MAX_BODY_BYTES = 4 * (1 << 20) + (256 << 10)
#: The SQS request bodies one client address may have the server hold at once (app.py): each is
#: read whole before its signature is checked, so without it one address could hold
#: ``max_connections_per_client`` of them (~1 GiB). Past it that address's next SQS request is
#: answered 503 (boto3 retries it); other addresses are not affected. (With credentials only:
#: without, nothing is authenticated.)
SQS_BODY_BYTES_PER_CLIENT = 64 << 20

_WAITING, _BEGUN, _BODY = 0, 1, 2
#: A connection may be closed to make room for a new one once it is this old (seconds).
EVICT_AFTER_S = 1.0
#: The longest interval between two sweeps of the deadlines (seconds).
MAX_SWEEP_S = 1.0


def _answer(status: bytes, text: str, extra: bytes = b"") -> bytes:
    body = text.encode("ascii")
    return (b"HTTP/1.1 " + status + b"\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\nconnection: close\r\n" + extra + b"\r\n" + body)


def bounded_protocol(base, settings, total_cap: int, metrics=None):
    """A subclass of uvicorn's ``base`` protocol class enforcing ``settings``' HTTP bounds, at most
    ``total_cap`` connections open at once (``max_connections``, or less if the open-file limit says so)."""
    header_timeout = float(settings.http_header_timeout_s)
    per_client = int(settings.max_connections_per_client)
    busy = _answer(b"503 Service Unavailable", "too many connections: retry later\n", b"retry-after: 1\r\n")
    too_many = _answer(b"503 Service Unavailable",
                       f"too many connections from this address (max_connections_per_client {per_client}): "
                       "retry later\n", b"retry-after: 1\r\n")
    timed_out = _answer(b"408 Request Timeout",
                        f"the request's headers were not complete within {header_timeout:g} s\n")
    body_timed_out = _answer(b"408 Request Timeout",
                             f"no part of the request's body arrived for {header_timeout:g} s\n")
    max_head = int(settings.max_header_bytes)
    head_too_large = _answer(b"431 Request Header Fields Too Large",
                             f"the request's line and headers pass {max_head} bytes (max_header_bytes)\n")

    def rejected(reason: str) -> None:
        if metrics is not None:
            metrics.rejected.labels(reason).inc()

    every: dict = {}     # the connections counted, oldest first
    per_addr: dict = {}  # remote address -> its connections counted, oldest first
    sweep_s = max(0.05, min(MAX_SWEEP_S, header_timeout / 4))
    sweeping = [None]    # the loop's handle of the next sweep, while connections are open

    def sweep(loop) -> None:
        """Act on the deadlines passed; again in ``sweep_s`` while any connection is open."""
        now = loop.time()
        for p in list(every):
            d = p._vqs_deadline
            if d and d <= now:
                p._vqs_header_timeout()
        sweeping[0] = loop.call_later(sweep_s, sweep, loop) if every else None

    def _evict(conns: dict, now: float) -> bool:
        """Make room: close the oldest of ``conns`` that has no request in progress (waiting for
        one, idle or with its headers half sent) and was opened at least ``EVICT_AFTER_S`` ago
        (a burst of new connections does not close its own before their requests are read);
        False when there is none."""
        old = now - EVICT_AFTER_S
        for p in conns:
            if p._vqs_opened > old:
                return False  # oldest first: the rest are younger
            c = p.cycle
            if p._vqs_state != _BODY and (c is None or c.response_complete) and not p.pipeline:
                p._vqs_forget()
                p.transport.close()
                rejected("connection_evicted")
                return True
        return False

    class BoundedHttpProtocol(base):
        """uvicorn's protocol with a header deadline and connection caps (module docstring)."""

        _vqs_addr = None
        _vqs_deadline = 0.0  # loop time by which the request must progress; 0: none pending
        _vqs_state = _WAITING
        _vqs_last = 0.0  # loop time the last part of the request's body (or its headers' end) came
        _vqs_opened = 0.0
        _vqs_head = 0  # bytes of the incomplete head counted so far (module docstring)
        _vqs_began = 0  # requests begun during the current read

        def connection_made(self, transport) -> None:
            peer = transport.get_extra_info("peername")
            addr = peer[0] if isinstance(peer, tuple) and peer else None
            mine = per_addr.get(addr)
            now = self.loop.time()
            if mine is not None and len(mine) >= per_client and not _evict(mine, now):
                refuse, reason = too_many, "connections_per_client"
            elif len(every) >= total_cap and not _evict(every, now):
                refuse, reason = busy, "connections"
            else:
                refuse = None
            if refuse is not None:  # not counted: written and closed before anything is read
                self.transport = transport
                transport.write(refuse)
                transport.close()
                rejected(reason)
                return
            if mine is None:
                mine = per_addr[addr] = {}
            mine[self] = None
            every[self] = None
            self._vqs_opened = now
            self._vqs_addr = addr
            super().connection_made(transport)
            self._vqs_deadline = now + header_timeout
            if sweeping[0] is None:
                sweeping[0] = self.loop.call_later(sweep_s, sweep, self.loop)

        def _vqs_forget(self) -> None:
            """No longer counted (closed, or being closed to make room)."""
            every.pop(self, None)
            mine = per_addr.get(self._vqs_addr)
            if mine is not None:
                mine.pop(self, None)
                if not mine:
                    del per_addr[self._vqs_addr]

        def connection_lost(self, exc) -> None:
            if self.flow is None:  # refused in connection_made
                self.parser = None
                return
            self._vqs_forget()
            self._vqs_deadline = 0.0
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            waiting = self._vqs_state == _WAITING
            self._vqs_began = 0
            super().data_received(data)
            if self._vqs_state == _BEGUN and (self._vqs_began == 0 or (waiting and self._vqs_began == 1)):
                # every byte of this read is the head's: it began before the read, or with it
                self._vqs_head += len(data)
                if self._vqs_head > max_head:
                    self._vqs_head_too_large()

        def _vqs_head_too_large(self) -> None:
            rejected("header_size")
            transport = self.transport
            if transport.is_closing():
                return
            c = self.cycle
            if (c is None or c.response_complete) and not self.pipeline:  # no answer of another
                transport.write(head_too_large)  # request may follow it
            transport.close()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._vqs_head = 0
            self._vqs_began += 1
            self._vqs_state = _BEGUN
            if not self._vqs_deadline:
                self._vqs_deadline = self.loop.time() + header_timeout

        def on_headers_complete(self) -> None:
            # the same deadline goes on watching the body (cleared when it is read)
            self._vqs_state = _BODY
            self._vqs_last = self.loop.time()
            super().on_headers_complete()

        def on_body(self, body: bytes) -> None:
            self._vqs_last = self.loop.time()
            super().on_body(body)

        def on_message_complete(self) -> None:
            self._vqs_request_read()
            super().on_message_complete()

        def _vqs_request_read(self) -> None:
            """The whole request is read: no deadline until the next one begins."""
            self._vqs_deadline = 0.0
            self._vqs_state = _WAITING

        def _vqs_header_timeout(self) -> None:
            self._vqs_deadline = 0.0
            transport = self.transport
            if transport is None or transport.is_closing():
                return
            if self._vqs_state == _BODY:
                now = self.loop.time()
                if self.flow.read_paused:  # the app is behind: the client is not the one waiting
                    self._vqs_deadline = now + header_timeout
                    return
                if now - self._vqs_last < header_timeout:  # a part came within the timeout
                    self._vqs_deadline = self._vqs_last + header_timeout
                    return
                rejected("body_timeout")
                c = self.cycle
                if c is not None and not getattr(c, "response_started", False) and not c.response_complete:
                    transport.write(body_timed_out)
                transport.close()
                return
            rejected("header_timeout")
            if self._vqs_state == _BEGUN:
                transport.write(timed_out)
            transport.close()

    return BoundedHttpProtocol
