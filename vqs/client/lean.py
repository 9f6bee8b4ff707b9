"""A lean HTTP/1.1 client for the hot paths of ``vqs.Client``: one persistent socket per thread.

Why: a one-message request through httpx/httpcore spends most of its time in
their per-request machinery (h11 state machine, header validation, pool
bookkeeping, trace hooks), and threads of one process contend for the pool's
lock. Here a request is one pre-built bytes object written with one
``sendall``; the answer is read with as few ``recv`` calls as it arrives in
(one, for a small answer) and its head parsed from that buffer.

Guarantees:
- each thread owns its connection (``threading.local``): no lock is taken on
  the request path, so N threads of a process send in parallel as far as the
  GIL allows, and a connection is never shared by two requests in flight;
- a connection is reused only when it is idle and healthy: one that the
  server closed while idle (readable before the request: EOF or stray bytes)
  is discarded before anything is written, so a request is never written to a
  dead socket and never sent twice (no retry: a POST is not idempotent);
- a connection is closed (never reused) after any failure, a timeout, an
  answer with ``Connection: close``, an answer whose framing is not
  understood, or bytes after the answer that no request asked for; a failed
  request raises ``OSError`` (a timeout is ``TimeoutError``) or
  ``LeanProtocolError`` and the caller maps both to ``ServerUnreachable``;
- every answer is bounded: its header block to ``MAX_HEADER_BYTES`` and its
  body to ``MAX_BODY_BYTES`` before anything of it is allocated;
- a request's timeout bounds each send and each receive (no wait on the
  socket lasts longer). On Linux the socket stays in blocking mode and the
  kernel applies the timeout (``SO_RCVTIMEO``/``SO_SNDTIMEO``, set only when
  it changes): Python's own timeout mode polls the socket before every send
  and receive, two system calls a request for nothing;
- connections of a ``LeanHTTP`` are all closed by ``close()`` (every live
  thread's); a finished thread's connection is held by nothing (only weakly
  listed) and is closed when its thread-local storage goes, so short-lived
  threads leak no sockets.
"""

from __future__ import annotations

import select
import socket
import struct
import sys
import threading
import weakref

MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 512 * 1024 * 1024
_READ = 65536  # the most one recv asks for
#: ``struct timeval`` for SO_RCVTIMEO/SO_SNDTIMEO (None: the platform's layout is not known
#: here, and Python's timeout mode is used)
_TIMEVAL = struct.Struct("@ll") if sys.platform.startswith("linux") else None
_NO_TIMEVAL = _TIMEVAL.pack(0, 0) if _TIMEVAL is not None else None
_NO_BODY = (204, 304)


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
    """One socket and the bytes read from it that no answer has taken yet (``buf``)."""

    __slots__ = ("sock", "buf", "timeout", "kernel", "poller", "__weakref__")

    def __init__(self, host: str, port: int, timeout: float):
        sock = socket.create_connection((host, port), timeout=timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sock = sock
            self.buf = b""
            self.timeout = None
            self.kernel = False  # the timeout is the kernel's (blocking socket), else Python's
            self.set_timeout(timeout)
            self.poller = select.poll()
            self.poller.register(sock, select.POLLIN)
        except BaseException:
            sock.close()
            raise

    def set_timeout(self, t: float) -> None:
        """Each send and receive of the socket waits at most ``t`` seconds."""
        if t == self.timeout:
            return
        sock = self.sock
        if _TIMEVAL is not None and t is not None and 0 < t < 1e9:
            sec = int(t)
            usec = int((t - sec) * 1_000_000) or (0 if sec else 1)  # (0, 0) would be no timeout at all
            tv = _TIMEVAL.pack(sec, usec)
            if not self.kernel:
                sock.settimeout(None)
                self.kernel = True
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
        else:
            if self.kernel:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _NO_TIMEVAL)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _NO_TIMEVAL)
                self.kernel = False
            sock.settimeout(t)
        self.timeout = t

    def idle_ok(self) -> bool:
        """True if nothing is readable on the idle socket (a readable idle socket is closed or
        broken, or the server sent what no request asked for)."""
        if self.buf:
            return False
        try:
            return not self.poller.poll(0)
        except (OSError, ValueError):
            return False

    # ------------------------------------------------------------------ reading
    def _more(self, buf: bytes) -> bytes:
        """``buf`` and the next bytes received (LeanProtocolError at EOF)."""
        chunk = self.sock.recv(_READ)
        if not chunk:
            raise LeanProtocolError("server closed the connection mid-answer" if buf
                                    else "server closed the connection without an answer")
        return buf + chunk if buf else chunk

    def read_response(self, head_only: bool) -> tuple[LeanResponse, bool]:
        """(the answer, whether the connection may be reused)."""
        buf = self.buf
        self.buf = b""
        while True:
            end = buf.find(b"\r\n\r\n")
            if end >= 0:
                start = end + 4
                break
            end = buf.find(b"\n\n")  # bare LF line ends (tolerated, as before)
            if end >= 0:
                start = end + 2
                break
            if len(buf) > MAX_HEADER_BYTES:
                raise LeanProtocolError("answer headers too large")
            buf = self._more(buf)
        if end > MAX_HEADER_BYTES:
            raise LeanProtocolError("answer headers too large")
        lines = buf[:end].split(b"\n")
        line = lines[0]
        parts = line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise LeanProtocolError(f"not an HTTP/1.x status line: {line[:80]!r}")
        try:
            status = int(parts[1])
        except ValueError:
            raise LeanProtocolError(f"bad status line: {line[:80]!r}") from None
        keep = parts[0] == b"HTTP/1.1"
        headers: dict = {}
        for line in lines[1:]:
            k, sep, v = line.partition(b":")
            if not sep:
                raise LeanProtocolError(f"bad header line: {line[:80]!r}")
            headers[k.strip().lower().decode("latin-1")] = v.strip().decode("latin-1")
        conn = headers.get("connection")
        if conn is not None:
            conn = conn.lower()
            if conn == "close":
                keep = False
            elif conn == "keep-alive":
                keep = True
        if head_only or status in _NO_BODY or 100 <= status < 200:
            body = b""
            rest = buf[start:]
        elif "transfer-encoding" in headers and headers["transfer-encoding"].lower() == "chunked":
            body, rest = self._chunked(buf, start)
        else:
            cl = headers.get("content-length")
            if cl is None:  # body until close
                body = buf[start:]
                while len(body) <= MAX_BODY_BYTES:
                    chunk = self.sock.recv(_READ)
                    if not chunk:
                        return LeanResponse(status, headers, body), False
                    body += chunk
                raise LeanProtocolError("answer body too large")
            try:
                n = int(cl)
            except ValueError:
                raise LeanProtocolError(f"bad Content-Length {cl[:40]!r}") from None
            if n < 0 or n > MAX_BODY_BYTES:
                raise LeanProtocolError(f"answer body of {n} bytes out of bounds")
            stop = start + n
            if len(buf) >= stop:
                body = buf[start:stop]
                rest = buf[stop:]
            else:
                body = self.rest_of(buf, start, n)
                rest = b""
        if rest:  # bytes after the answer that no request asked for: the connection is not reused
            keep = False
        return LeanResponse(status, headers, body), keep

    def rest_of(self, buf: bytes, start: int, n: int) -> bytes:
        """The body of ``n`` bytes whose first bytes are ``buf[start:]``, the rest received."""
        out = bytearray(n)
        have = len(buf) - start
        out[:have] = memoryview(buf)[start:]
        view = memoryview(out)
        recv_into = self.sock.recv_into
        while have < n:
            k = recv_into(view[have:], min(n - have, 1 << 20))
            if not k:
                raise LeanProtocolError("server closed the connection mid-answer")
            have += k
        return bytes(out)

    def _chunked(self, buf: bytes, pos: int) -> tuple[bytes, bytes]:
        """A chunked body from ``buf[pos:]`` on (more received as needed); (body, bytes after it)."""
        out = []
        total = 0
        while True:
            while (eol := buf.find(b"\n", pos)) < 0:
                if len(buf) - pos > 1024:
                    raise LeanProtocolError("bad chunk size line")
                buf = self._more(buf)
            line = buf[pos:eol]
            pos = eol + 1
            try:
                n = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise LeanProtocolError(f"bad chunk size {line[:40]!r}") from None
            if n < 0:
                raise LeanProtocolError(f"bad chunk size {line[:40]!r}")
            if n == 0:
                while True:  # trailers, until an empty line
                    while (eol := buf.find(b"\n", pos)) < 0:
                        if len(buf) - pos > MAX_HEADER_BYTES:
                            raise LeanProtocolError("answer trailers too large")
                        buf = self._more(buf)
                    t = buf[pos:eol]
                    pos = eol + 1
                    if t in (b"\r", b""):
                        return b"".join(out), buf[pos:]
            total += n
            if total > MAX_BODY_BYTES:
                raise LeanProtocolError("answer body too large")
            while len(buf) - pos < n + 2:
                buf = self._more(buf[pos:])
                pos = 0
            if buf[pos + n:pos + n + 2] != b"\r\n":
                raise LeanProtocolError("bad chunk framing")
            out.append(buf[pos:pos + n])
            pos += n + 2

    def close(self) -> None:
        self.sock.close()


class ThreadConnections:
    """One connection per thread, made by ``connect(timeout)`` (a ``_Conn``, or anything with
    its ``idle_ok``, ``set_timeout`` and ``close``): reused while idle and healthy, dropped
    after any failure; ``close()`` closes every live thread's."""

    def __init__(self, connect):
        self._connect = connect
        self._local = threading.local()
        self._all: weakref.WeakSet = weakref.WeakSet()  # a dead thread's connection is not kept open
        self._all_lock = threading.Lock()
        self._closed = False

    def get(self, timeout: float):
        c = getattr(self._local, "conn", None)
        if c is not None:
            if c.idle_ok():
                c.set_timeout(timeout)
                return c
            self.drop(c)
        if self._closed:
            raise OSError("client closed")
        c = self._connect(timeout)
        self._local.conn = c
        with self._all_lock:
            self._all.add(c)
        return c

    def drop(self, c) -> None:
        if getattr(self._local, "conn", None) is c:
            self._local.conn = None
        with self._all_lock:
            self._all.discard(c)
        try:
            c.close()
        except OSError:
            pass

    def close(self) -> None:
        self._closed = True
        with self._all_lock:
            conns, self._all = list(self._all), weakref.WeakSet()
        for c in conns:
            try:
                c.close()
            except OSError:
                pass


class LeanHTTP:
    """Requests to ``host:port`` with fixed extra header lines (``base_headers``: bytes, each
    line ending in CRLF)."""

    def __init__(self, host: str, port: int, base_headers: bytes):
        self.host = host
        self.port = port
        self._host_line = f"Host: {host}:{port}\r\n".encode("latin-1") + base_headers
        self._conns = ThreadConnections(lambda timeout: _Conn(host, port, timeout))
        self._conn = self._conns.get
        self._drop = self._conns.drop

    def head(self, method: str, target: str, headers: bytes = b"") -> bytes:
        """A request's head without its Content-Length: the request line (``target``: path and
        query, already checked and encoded), Host, the base headers and ``headers`` (extra lines,
        bytes, CRLF-ended). Made once, it may be sent with many bodies (``send``)."""
        return b"%s %s HTTP/1.1\r\n%s%s" % (method.encode("ascii"), target.encode("ascii"), self._host_line, headers)

    def request(self, method: str, target: str, headers: bytes, body: bytes | None, timeout: float) -> LeanResponse:
        """One request (``target``: path and query, already checked and encoded); ``headers``:
        extra header lines (bytes, CRLF-ended), without Content-Length."""
        return self.send(self.head(method, target, headers), body, timeout, method == "HEAD")

    def send(self, head: bytes, body: bytes | None, timeout: float, head_only: bool = False) -> LeanResponse:
        """One request of ``head`` (``head()``'s) and ``body``."""
        if body is None:
            body = b""
        msg = b"%sContent-Length: %d\r\n\r\n%s" % (head, len(body), body)
        c = self._conn(timeout)
        try:
            c.sock.sendall(msg)
            resp, keep = c.read_response(head_only)
        except BlockingIOError as e:  # the kernel's timeout (SO_RCVTIMEO/SO_SNDTIMEO) passed
            self._drop(c)
            raise TimeoutError("timed out") from e
        except BaseException:
            self._drop(c)
            raise
        if not keep:
            self._drop(c)
        return resp

    def close(self) -> None:
        self._conns.close()
