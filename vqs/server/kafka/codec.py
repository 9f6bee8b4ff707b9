"""Kafka wire primitives: a bounds-checked reader and an append-only writer.

Kafka is big-endian. ``Reader`` never reads past its buffer: every short or
nonsensical field (a negative length other than the -1 "null", a count larger
than the bytes left) raises ``ProtocolError``, the only exception this module
raises on input, so a malformed request can close its connection and nothing
else. Compact (flexible-version) strings/arrays are length+1 unsigned varints.

Every length is checked before anything is allocated or looped over, here and
nowhere else: a string or bytes field longer than the bytes left in the frame,
and an array of more than ``MAX_ARRAY`` elements (Kafka's own limit) or of
more elements than could fit in the bytes left (``min_item`` bytes each),
are refused when their length is read. Handlers therefore never size a list
from the wire.
"""

from __future__ import annotations

import struct

from ...errors import VQSError

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_HDR = struct.Struct(">hhi")  # api_key, api_version, correlation_id
MAX_ARRAY = 1_000_000  # Kafka refuses longer arrays before allocating (MessageUtil / ByteBufferAccessor)


class ProtocolError(VQSError):
    """A request that does not parse: its connection is closed (the reason is logged)."""


class Reader:
    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf, pos: int = 0, end: int | None = None):
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    def _take(self, n: int) -> int:
        p = self.pos
        if n < 0 or p + n > self.end:
            raise ProtocolError(f"field of {n} bytes at byte {p} runs past the {self.end}-byte frame")
        self.pos = p + n
        return p

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def int8(self) -> int:
        return _I8.unpack_from(self.buf, self._take(1))[0]

    def int16(self) -> int:
        return _I16.unpack_from(self.buf, self._take(2))[0]

    def int32(self) -> int:
        return _I32.unpack_from(self.buf, self._take(4))[0]

    def uint32(self) -> int:
        return _U32.unpack_from(self.buf, self._take(4))[0]

    def int64(self) -> int:
        return _I64.unpack_from(self.buf, self._take(8))[0]

    def boolean(self) -> bool:
        return self.int8() != 0

    def raw(self, n: int) -> bytes:
        p = self._take(n)
        return bytes(self.buf[p : p + n])

    def uuid(self) -> bytes:
        return self.raw(16)

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            b = self.buf[self._take(1)]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise ProtocolError(f"varint longer than 10 bytes at byte {self.pos}")

    def varint(self) -> int:
        v = self.uvarint()
        return (v >> 1) ^ -(v & 1)

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise ProtocolError("null where a string is required")
        return s

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n == -1:
            return None
        return self._decode(n)

    def compact_string(self) -> str | None:
        n = self.uvarint() - 1
        if n == -1:
            return None
        return self._decode(n)

    def _decode(self, n: int) -> str:
        p = self._take(n)
        try:
            return bytes(self.buf[p : p + n]).decode()
        except UnicodeDecodeError as e:
            raise ProtocolError(f"string at byte {p} is not UTF-8") from e

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        if n == -1:
            return None
        return self.raw(n)

    def bytes_(self) -> bytes:
        b = self.nullable_bytes()
        return b"" if b is None else b

    def compact_bytes(self) -> bytes | None:
        n = self.uvarint() - 1
        return None if n == -1 else self.raw(n)

    def _count(self, n: int, min_item: int) -> int:
        if n < 0 or n > MAX_ARRAY or n * min_item > self.remaining:
            raise ProtocolError(f"array of {n} items at byte {self.pos} cannot fit in the frame "
                                f"({self.remaining} bytes left; at most {MAX_ARRAY} items)")
        return n

    def nullable_array_len(self, min_item: int = 1) -> int | None:
        """An array's count, None for the -1 null; refused (before anything is allocated) when
        over ``MAX_ARRAY`` or when ``min_item`` bytes per item cannot fit in what is left."""
        n = self.int32()
        return None if n == -1 else self._count(n, min_item)

    def array_len(self, min_item: int = 1) -> int:
        """``nullable_array_len`` with null read as 0."""
        n = self.nullable_array_len(min_item)
        return 0 if n is None else n

    def compact_array_len(self, min_item: int = 1) -> int:
        n = self.uvarint() - 1
        return 0 if n <= 0 else self._count(n, min_item)

    def compact_nullable_array_len(self, min_item: int = 1) -> int | None:
        """A compact array's count, None for null (bounded as ``nullable_array_len``)."""
        n = self.uvarint() - 1
        return None if n == -1 else self._count(n, min_item)

    def tagged_fields(self) -> None:
        for _ in range(self._count(self.uvarint(), 2)):
            self.uvarint()
            self._take(self.uvarint())


class Writer:
    """Appends big-endian fields to one bytearray."""

    __slots__ = ("b",)

    def __init__(self):
        self.b = bytearray()

    def int8(self, v: int) -> Writer:
        self.b += _I8.pack(v)
        return self

    def int16(self, v: int) -> Writer:
        self.b += _I16.pack(v)
        return self

    def int32(self, v: int) -> Writer:
        self.b += _I32.pack(v)
        return self

    def int64(self, v: int) -> Writer:
        self.b += _I64.pack(v)
        return self

    def boolean(self, v: bool) -> Writer:
        self.b.append(1 if v else 0)
        return self

    def string(self, s: str | None) -> Writer:
        if s is None:
            self.b += b"\xff\xff"
        else:
            e = s.encode()
            self.b += _I16.pack(len(e)) + e
        return self

    def bytes_(self, v: bytes | None) -> Writer:
        if v is None:
            self.b += b"\xff\xff\xff\xff"
        else:
            self.b += _I32.pack(len(v))
            self.b += v
        return self

    def uvarint(self, v: int) -> Writer:
        b = self.b
        while v > 0x7F:
            b.append((v & 0x7F) | 0x80)
            v >>= 7
        b.append(v)
        return self

    def compact_string(self, s: str | None) -> Writer:
        if s is None:
            return self.uvarint(0)
        e = s.encode()
        self.uvarint(len(e) + 1)
        self.b += e
        return self

    def array(self, n: int) -> Writer:
        return self.int32(n)

    def compact_array(self, n: int) -> Writer:
        return self.uvarint(n + 1)

    def tags(self) -> Writer:
        self.b.append(0)
        return self


class Flex:
    """Reads (from ``r``) and writes the fields whose encoding a flexible version changes, so one
    handler serves a message's flexible and non-flexible versions."""

    def __init__(self, r, flexible: bool):
        self.r, self.flex = r, flexible

    def string(self) -> str:
        s = self.r.compact_string() if self.flex else self.r.nullable_string()
        if s is None:
            raise ProtocolError("null where a string is required")
        return s

    def nullable_string(self) -> str | None:
        return self.r.compact_string() if self.flex else self.r.nullable_string()

    def array_len(self, min_item: int) -> int:
        return self.r.compact_array_len(min_item) if self.flex else self.r.array_len(min_item)

    def nullable_array_len(self, min_item: int) -> int | None:
        if not self.flex:
            return self.r.nullable_array_len(min_item)
        return self.r.compact_nullable_array_len(min_item)

    def tags(self) -> None:
        if self.flex:
            self.r.tagged_fields()

    def w_string(self, w: Writer, s: str | None) -> Writer:
        return w.compact_string(s) if self.flex else w.string(s)

    def w_array(self, w: Writer, n: int) -> Writer:
        return w.compact_array(n) if self.flex else w.array(n)

    def w_tags(self, w: Writer) -> Writer:
        return w.tags() if self.flex else w


def read_header(buf) -> tuple[int, int, int, str | None, Reader]:
    """(api_key, api_version, correlation_id, client_id, reader at the header's end) of a
    request frame (header v1; the tagged fields of v2 are skipped by the caller)."""
    if len(buf) < 8:
        raise ProtocolError(f"request of {len(buf)} bytes is shorter than a request header")
    api_key, version, corr = _HDR.unpack_from(buf, 0)
    r = Reader(buf, 8)
    client_id = r.nullable_string()
    return api_key, version, corr, client_id, r
