"""A lean HTTP/1.1 client for the hot paths of ``vqs.Client``: one persistent socket per thread.

Why: a one-message request through httpx/httpcore spends most of its time in
their per-request machinery (h11 state machine, header validation, pool
bookkeeping, trace hooks), and threads of one process contend for the pool's
lock. Here a request is one pre-built bytes object written with one
``sendall``; the answer is read through a buffered reader (status line,
headers until the blank line, ``Content-Length`` or chunked body).

Guarantees:
- each thread owns its connection (``threading.local``): no lock is taken on
  the request path, so N threads of a process send in parallel as far as the
  GIL allows, and a connection is never shared by two requests in flight;
- a connection is reused only when it is idle and healthy: one that the
  server closed while idle (readable before the request: EOF or stray bytes)
  is discarded before anything is written, so a request is never written to a
  dead socket and never sent twice (no retry: a POST is not idempotent);
- a connection is closed (never reused) after any failure, a timeout, an
  answer with ``Connection: close``, or an answer whose framing is not
  understood; a failed request raises ``OSError`` (``socket.timeout`` is one)
  or ``LeanProtocolError`` and the caller maps both to ``ServerUnreachable``;
- every answer is bounded: its header block to ``MAX_HEADER_BYTES`` and its
  body to ``MAX_BODY_BYTES`` before anything of it is allocated;
- connections of a ``LeanHTTP`` are all closed by ``close()`` (every live
  thread's); a finished thread's connection is held by nothing (only weakly
  listed) and is closed when its thread-local storage goes, so short-lived
  threads leak no sockets.
"""

from __future__ import annotations

import select
import socket
import threading
import weakref

MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 512 * 1024 * 1024


class LeanProtocolError(Exception):
    """The server's answer could not be read as HTTP/1.1 (the caller maps it to ServerUnreachable)."""


class LeanResponse:
    """An answer: ``status_code``, lower-cased ``headers`` (str -> str), ``content`` bytes;
    ``json()`` and ``text`` as httpx's Response has them (enough for ``error_map``)."""

    __slots__ = ("status_code", "headers", "content")

    def __init__(self, status: int, headers: dict, content: bytes):
        self.status_code = status
        self.headers = headers
        self.content = content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self):
        import json

        return json.loads(self.content)


class _Conn:
    __slots__ = ("sock", "rfile", "__weakref__")

    def __init__(self, host: str, port: int, timeout: float):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rfile = self.sock.makefile("rb", buffering=65536)

    def idle_ok(self) -> bool:
        """True if nothing is readable on the idle socket (a readable idle socket is closed or broken)."""
        try:
            r, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return False
        return not r

    def close(self) -> None:
        try:
            self.rfile.close()
        finally:
            self.sock.close()


class LeanHTTP:
    """Requests to ``host:port`` with fixed extra header lines (``base_headers``: bytes, each
    line ending in CRLF)."""

    def __init__(self, host: str, port: int, base_headers: bytes):
        self.host = host
        self.port = port
        self._host_line = f"Host: {host}:{port}\r\n".encode("latin-1") + base_headers
        self._local = threading.local()
        self._all: weakref.WeakSet = weakref.WeakSet()  # a dead thread's connection is not kept open
        self._all_lock = threading.Lock()
        self._closed = False

    def _conn(self, timeout: float) -> _Conn:
        c = getattr(self._local, "conn", None)
        if c is not None:
            if c.idle_ok():
                c.sock.settimeout(timeout)
                return c
            self._drop(c)
        if self._closed:
            raise OSError("client closed")
        c = _Conn(self.host, self.port, timeout)
        self._local.conn = c
        with self._all_lock:
            self._all.add(c)
        return c

    def _drop(self, c: _Conn) -> None:
        if getattr(self._local, "conn", None) is c:
            self._local.conn = None
        with self._all_lock:
            self._all.discard(c)
        try:
            c.close()
        except OSError:
            pass

    def request(self, method: str, target: str, headers: bytes, body: bytes | None, timeout: float) -> LeanResponse:
        """One request (``target``: path and query, already checked and encoded); ``headers``:
        extra header lines (bytes, CRLF-ended), without Content-Length."""
        head = b"%s %s HTTP/1.1\r\n" % (method.encode("ascii"), target.encode("ascii"))
        if body is None:
            body = b""
        msg = b"".join((head, self._host_line, headers, b"Content-Length: %d\r\n\r\n" % len(body), body))
        c = self._conn(timeout)
        try:
            c.sock.sendall(msg)
            resp, keep = _read_response(c.rfile, method == "HEAD")
        except BaseException:
            self._drop(c)
            raise
        if not keep:
            self._drop(c)
        return resp

    def close(self) -> None:
        self._closed = True
        with self._all_lock:
            conns, self._all = list(self._all), weakref.WeakSet()
        for c in conns:
            try:
                c.close()
            except OSError:
                pass


def _read_response(rfile, head_only: bool) -> tuple[LeanResponse, bool]:
    """(the answer, whether the connection may be reused)."""
    line = rfile.readline(MAX_HEADER_BYTES)
    if not line:
        raise LeanProtocolError("server closed the connection without an answer")
    parts = line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
        raise LeanProtocolError(f"not an HTTP/1.x status line: {line[:80]!r}")
    try:
        status = int(parts[1])
    except ValueError:
        raise LeanProtocolError(f"bad status line: {line[:80]!r}") from None
    keep = parts[0] == b"HTTP/1.1"
    headers: dict = {}
    total = len(line)
    while True:
        line = rfile.readline(MAX_HEADER_BYTES)
        total += len(line)
        if total > MAX_HEADER_BYTES or not line.endswith(b"\n"):
            raise LeanProtocolError("answer headers too large or cut short")
        if line in (b"\r\n", b"\n"):
            break
        k, sep, v = line.partition(b":")
        if not sep:
            raise LeanProtocolError(f"bad header line: {line[:80]!r}")
        headers[k.strip().lower().decode("latin-1")] = v.strip().decode("latin-1")
    conn = headers.get("connection", "").lower()
    if conn == "close":
        keep = False
    elif conn == "keep-alive":
        keep = True
    if head_only or status in (204, 304) or 100 <= status < 200:
        return LeanResponse(status, headers, b""), keep
    if headers.get("transfer-encoding", "").lower() == "chunked":
        return LeanResponse(status, headers, _read_chunked(rfile)), keep
    cl = headers.get("content-length")
    if cl is None:  # body until close
        body = rfile.read(MAX_BODY_BYTES + 1)
        if len(body) > MAX_BODY_BYTES:
            raise LeanProtocolError("answer body too large")
        return LeanResponse(status, headers, body), False
    try:
        n = int(cl)
    except ValueError:
        raise LeanProtocolError(f"bad Content-Length {cl[:40]!r}") from None
    if n < 0 or n > MAX_BODY_BYTES:
        raise LeanProtocolError(f"answer body of {n} bytes out of bounds")
    body = rfile.read(n) if n else b""
    if len(body) != n:
        raise LeanProtocolError("server closed the connection mid-answer")
    return LeanResponse(status, headers, body), keep


def _read_chunked(rfile) -> bytes:
    out = []
    total = 0
    while True:
        line = rfile.readline(1024)
        if not line.endswith(b"\n"):
            raise LeanProtocolError("bad chunk size line")
        try:
            n = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise LeanProtocolError(f"bad chunk size {line[:40]!r}") from None
        if n == 0:
            while True:  # trailers
                t = rfile.readline(MAX_HEADER_BYTES)
                if t in (b"\r\n", b"\n"):
                    return b"".join(out)
                if not t:
                    raise LeanProtocolError("server closed the connection mid-answer")
        total += n
        if n < 0 or total > MAX_BODY_BYTES:
            raise LeanProtocolError("answer body too large")
        chunk = rfile.read(n)
        if len(chunk) != n or rfile.read(2) != b"\r\n":
            raise LeanProtocolError("server closed the connection mid-answer")
        out.append(chunk)
