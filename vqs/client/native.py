"""The native protocol's client side: ``vqs.Client``'s requests as frames (vqs/native_wire.py) on
one persistent TCP connection per thread, when the server has a native port (docs/native.md).

Guarantees:
- each thread owns its connection (``lean.ThreadConnections``), as on the lean HTTP path:
  no lock on the request path; an idle connection the server closed is discarded before
  anything is written to it;
- a connection is first given the HELLO (the Client's token); one the server refuses
  raises the REST API's error for it (``from_response``: Unauthorized, Forbidden);
- ``NativeUnavailable`` is raised only when nothing of a request was sent (no connection
  could be made, or the HELLO was not answered): the caller may send that request over
  HTTP instead. A failure after a request was written is ``OSError``/``LeanProtocolError``
  (the caller's ServerUnreachable) and the request is never sent again: a POST is not
  idempotent;
- every answer is bounded (``lean.MAX_BODY_BYTES`` and its header bound) before it is
  allocated; a request's timeout bounds each send and each receive.
"""

from __future__ import annotations

import json

from ..native_wire import LENGTH, NativeFrameError, decode_answer, hello, request_head
from .lean import _READ, MAX_BODY_BYTES, LeanProtocolError, LeanResponse, ThreadConnections, _Conn

#: the largest answer frame read (a body and its headers)
MAX_ANSWER = MAX_BODY_BYTES + (64 << 10)


class NativeUnavailable(Exception):
    """No request was sent: the native port could not be reached or did not answer its HELLO
    (``lasting``), or the request is larger than its frames (not lasting: HTTP answers it)."""

    def __init__(self, message: str, lasting: bool = True):
        super().__init__(message)
        self.lasting = lasting


class NativeRefused(Exception):
    """The server answered the HELLO with an error (``response``: its answer)."""

    def __init__(self, response: LeanResponse):
        super().__init__(f"HELLO refused ({response.status_code})")
        self.response = response


def _read_answer(c: _Conn) -> LeanResponse:
    """The next answer frame (a small one in one receive)."""
    data = c.sock.recv(_READ)
    if not data:
        raise LeanProtocolError("server closed the connection without an answer")
    while len(data) < 4:
        more = c.sock.recv(_READ)
        if not more:
            raise LeanProtocolError("server closed the connection mid-answer")
        data += more
    n = LENGTH.unpack_from(data)[0]
    if n < 1 or n > MAX_ANSWER:
        raise LeanProtocolError(f"an answer frame of {n} bytes out of bounds")
    if len(data) > 4 + n:  # bytes no request asked for
        raise LeanProtocolError("bytes after an answer")
    frame = data[4:] if len(data) == 4 + n else c.rest_of(data, 4, n)
    try:
        status, headers, body = decode_answer(frame)
    except NativeFrameError as e:
        raise LeanProtocolError(str(e)) from None
    return LeanResponse(status, headers, body)


class NativeClient:
    """Requests to the native port ``host:port`` with the bearer ``token`` (bytes; empty: none)."""

    def __init__(self, host: str, port: int, token: bytes):
        self.host = host
        self.port = port
        self._hello = hello(token)
        self._conns = ThreadConnections(self._connect)
        self.max_frame = None  # what the server's HELLO answer allows (None: not known yet)

    def _connect(self, timeout: float) -> _Conn:
        try:
            c = _Conn(self.host, self.port, timeout)
        except OSError as e:
            raise NativeUnavailable(f"native port {self.host}:{self.port}: {e}") from e
        try:
            c.sock.sendall(self._hello)
            r = _read_answer(c)
        except (OSError, LeanProtocolError) as e:
            c.close()
            raise NativeUnavailable(f"native port {self.host}:{self.port}: no answer to the HELLO ({e})") from e
        if r.status_code != 200:
            c.close()
            raise NativeRefused(r)
        try:
            self.max_frame = int(json.loads(r.content)["max_frame_bytes"])
        except (ValueError, KeyError, TypeError):
            c.close()
            raise NativeUnavailable(f"native port {self.host}:{self.port}: a HELLO answer without its bounds") from None
        return c

    def request(self, method: str, target: str, content_type: str | None, accept: int, body: bytes | None,
                timeout: float) -> LeanResponse:
        """One request's answer (any status). NativeUnavailable: nothing was sent."""
        body = body or b""
        head = request_head(method, target, content_type, accept, len(body))
        c = self._conns.get(timeout)
        if self.max_frame is not None and len(head) - 4 + len(body) > self.max_frame:
            raise NativeUnavailable("a request larger than the native protocol's frames (HTTP answers it)",
                                    lasting=False)
        try:
            c.sock.sendall(head + body if len(body) < 65536 else head)
            if len(body) >= 65536:
                c.sock.sendall(body)
            return _read_answer(c)
        except BlockingIOError as e:  # the kernel's timeout (SO_RCVTIMEO/SO_SNDTIMEO) passed
            self._conns.drop(c)
            raise TimeoutError("timed out") from e
        except BaseException:
            self._conns.drop(c)
            raise

    def close(self) -> None:
        self._conns.close()
