"""The native protocol's frames, shared by the server (vqs/server/native.py) and the remote client.

The native protocol carries the REST API's requests over one persistent TCP connection
without HTTP: a request names a method, a target (path and query, as in HTTP), a
content type and a body; its answer is a status, the few headers the API's answers
carry (``x-vqs-*``, the content type) and a body — the same status and the same body
the REST route answers. docs/native.md specifies it; this module is its only codec.

Every frame is a big-endian ``u32`` length (of the bytes that follow it) and a kind byte:

* ``HELLO`` (client, first frame): ``u8`` version, ``u16`` token length, the token
  (the REST bearer token; empty without credentials);
* ``REQUEST`` (client): ``u8`` method, ``u8`` content type, ``u8`` accept, ``u16`` target
  length, the target (ASCII), then the body (the rest of the frame);
* ``ANSWER`` (server, one per HELLO or REQUEST, in order): ``u16`` status, ``u8`` header
  count, each header ``u8`` name length, name, ``u16`` value length, value; then the body.

Invariants: a length is checked against the reader's bound before anything is allocated
for it (``frame_length``); decoding never trusts an inner length past the frame's end
(``NativeFrameError``); the method, content type and accept codes are closed sets, so
no byte sequence names anything the tables do not list.
"""

from __future__ import annotations

import struct

VERSION = 1

HELLO, REQUEST, ANSWER = 1, 2, 3
METHODS = ("GET", "POST", "PUT", "DELETE")
METHOD_CODES = {m: i for i, m in enumerate(METHODS)}
#: content types a request body or an answer may have (0: none)
CONTENT_TYPES = (None, "application/json", "application/vnd.vqs.batch", "text/plain; charset=utf-8")
CONTENT_TYPE_CODES = {t: i for i, t in enumerate(CONTENT_TYPES)}
#: what a request accepts: 0 JSON (the API's default), 1 the binary batch type too
ACCEPT_JSON, ACCEPT_BATCH = 0, 1

LENGTH = struct.Struct(">I")
_HELLO = struct.Struct(">BBH")        # kind, version, token length
_REQUEST = struct.Struct(">BBBBH")    # kind, method, content type, accept, target length
_ANSWER = struct.Struct(">BHB")       # kind, status, header count
_NAME = struct.Struct(">B")
_VALUE = struct.Struct(">H")
#: the most headers an answer carries, and the longest target a request names
MAX_HEADERS = 32
MAX_TARGET = 8192


class NativeFrameError(ValueError):
    """A frame that does not decode (its reader closes the connection)."""


def frame_length(head: bytes, limit: int) -> int:
    """The length announced by a frame's first four bytes; NativeFrameError past ``limit``
    or below the smallest frame (a kind byte)."""
    n = LENGTH.unpack_from(head)[0]
    if n < 1 or n > limit:
        raise NativeFrameError(f"a frame of {n} bytes (the limit is {limit})")
    return n


def hello(token: bytes) -> bytes:
    return LENGTH.pack(_HELLO.size + len(token)) + _HELLO.pack(HELLO, VERSION, len(token)) + token


def request_head(method: str, target: str, content_type: str | None, accept: int, body_len: int) -> bytes:
    """A REQUEST frame up to its body (the caller sends the body after it)."""
    t = target.encode("ascii")
    if len(t) > MAX_TARGET:
        raise NativeFrameError(f"a request target of {len(t)} bytes (the limit is {MAX_TARGET})")
    return (LENGTH.pack(_REQUEST.size + len(t) + body_len)
            + _REQUEST.pack(REQUEST, METHOD_CODES[method], CONTENT_TYPE_CODES[content_type], accept, len(t)) + t)


def answer_head(status: int, headers: list, body_len: int) -> bytes:
    """An ANSWER frame up to its body; ``headers``: (name, value) bytes pairs, at most MAX_HEADERS."""
    parts = [b""]
    for name, value in headers[:MAX_HEADERS]:
        parts += (_NAME.pack(len(name)), name, _VALUE.pack(len(value)), value)
    hs = b"".join(parts)
    return LENGTH.pack(_ANSWER.size + len(hs) + body_len) + _ANSWER.pack(ANSWER, status, min(len(headers), MAX_HEADERS)) + hs


def kind(frame) -> int:
    return frame[0]


def decode_hello(frame) -> tuple[int, bytes]:
    """(version, token) of a HELLO frame (without its length prefix)."""
    if len(frame) < _HELLO.size:
        raise NativeFrameError("a short HELLO frame")
    _, version, n = _HELLO.unpack_from(frame)
    if _HELLO.size + n != len(frame):
        raise NativeFrameError("a HELLO frame whose token length does not match it")
    return version, bytes(frame[_HELLO.size:])


def decode_request(frame) -> tuple[str, str, str | None, int, memoryview]:
    """(method, target, content type, accept, body) of a REQUEST frame (without its length prefix)."""
    if len(frame) < _REQUEST.size:
        raise NativeFrameError("a short REQUEST frame")
    _, m, ct, accept, n = _REQUEST.unpack_from(frame)
    end = _REQUEST.size + n
    if m >= len(METHODS) or ct >= len(CONTENT_TYPES) or accept > ACCEPT_BATCH or end > len(frame) or n > MAX_TARGET:
        raise NativeFrameError("a REQUEST frame with an unknown code or a target past its end")
    target = bytes(frame[_REQUEST.size:end])
    if not target.isascii():
        raise NativeFrameError("a request target that is not ASCII")
    return METHODS[m], target.decode("ascii"), CONTENT_TYPES[ct], accept, memoryview(frame)[end:]


def decode_answer(frame) -> tuple[int, dict, bytes]:
    """(status, headers as lower-cased str -> str, body) of an ANSWER frame (without its length prefix)."""
    if len(frame) < _ANSWER.size or frame[0] != ANSWER:
        raise NativeFrameError("not an ANSWER frame")
    _, status, count = _ANSWER.unpack_from(frame)
    pos = _ANSWER.size
    headers = {}
    for _ in range(count):
        if pos + 1 > len(frame):
            raise NativeFrameError("an answer's headers run past its end")
        n = frame[pos]
        name = bytes(frame[pos + 1:pos + 1 + n])
        pos += 1 + n
        if pos + 2 > len(frame):
            raise NativeFrameError("an answer's headers run past its end")
        v = _VALUE.unpack_from(frame, pos)[0]
        value = bytes(frame[pos + 2:pos + 2 + v])
        pos += 2 + v
        if pos > len(frame):
            raise NativeFrameError("an answer's headers run past its end")
        headers[name.decode("latin-1").lower()] = value.decode("latin-1")
    return status, headers, bytes(frame[pos:])
