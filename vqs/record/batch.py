"""The record batch: the unit on disk and on the wire (spec: docs/FORMAT.md); its body's
compression is codecs.py's.

Invariants: decoding never trusts a length field before bounds-checking it against the
buffer it came from, and never returns a record from a batch whose CRC fails.

(Over 500 lines: the batch codec - encoder, decoder, verifier and the record types they
produce - is one format, read side by side.)
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections import namedtuple
from collections.abc import Sequence
from functools import partial
from itertools import accumulate

import crc32c as _crc32c

from ..errors import ConfigError, CorruptRecordError, MessageTooLarge
from .codecs import CODEC_NAMES, CODEC_NONE, COMPRESS, DECOMPRESS

_crc = _crc32c.crc32c

# base_offset u64 | batch_length u32 | crc u32 | magic u8 | codec u8 | attributes u16
# | record_count u32 | first_timestamp i64 | max_timestamp i64 | producer_id i64
# | producer_epoch i16 | base_sequence i32 | body_length u32 | reserved 6 bytes
HEADER = struct.Struct("<QIIBBHIqqqhiI6x")
HEADER_SIZE = HEADER.size  # 64
assert HEADER_SIZE == 64
CRC_START = 16  # the CRC covers bytes [CRC_START, 12 + batch_length)
LENGTH_OVERHEAD = 12  # base_offset + batch_length precede what batch_length counts
MIN_BATCH_LENGTH = HEADER_SIZE - LENGTH_OVERHEAD
MAGIC = 1

ATTR_KEYS = 0x1
ATTR_HEADERS = 0x2
ATTR_TIMESTAMPS = 0x4
ATTR_NULL_VALUES = 0x8
#: written by the cleaner: its base offset may lie past the previous batch's end
ATTR_COMPACTED = 0x10
ATTR_KNOWN = ATTR_KEYS | ATTR_HEADERS | ATTR_TIMESTAMPS | ATTR_NULL_VALUES | ATTR_COMPACTED

#: refused when read (a corrupt length must not allocate); writers split larger appends
MAX_BATCH_BYTES = 1 << 30

_LITTLE = sys.byteorder == "little"
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_STAMPS = struct.Struct("<qq")
_RESERVED = bytes(6)

Headers = Sequence[tuple[str, bytes | None]]
NULL_HEADER_VALUE = 0xFFFFFFFF
#: a record's headers, and a header key's bytes: their lengths are u16 in the format
MAX_HEADERS = MAX_HEADER_KEY_BYTES = 0xFFFF
_NULL_HEADER_LEN = b"\xff\xff\xff\xff"


def _offsets(items: Sequence) -> array:
    # count + 1 offsets, the first 0: an Arrow BinaryArray's
    try:
        a = array("I", accumulate(map(len, items), initial=0))
    except OverflowError:
        raise ConfigError("a record batch column exceeds 4 GiB; append smaller batches") from None
    if not _LITTLE:
        a.byteswap()
    return a


def check_headers(headers) -> None:
    """ConfigError unless ``headers`` (pairs, or None) fit the format: at most MAX_HEADERS,
    each key at most MAX_HEADER_KEY_BYTES once encoded. A front checks a request's headers
    before its records join others' in one append (encode_headers raises it too, on a length
    its u16 fields cannot hold)."""
    if not headers:
        return
    if len(headers) > MAX_HEADERS:
        raise ConfigError(f"a record has {len(headers)} headers: at most {MAX_HEADERS} (the format's count is a u16)")
    for k, _ in headers:
        n = len(k) if isinstance(k, bytes) else len(k.encode("utf-8")) if isinstance(k, str) else None
        if n is not None and n > MAX_HEADER_KEY_BYTES:
            raise ConfigError(f"a header key of {n} bytes: at most {MAX_HEADER_KEY_BYTES} (its length is a u16)")


def encode_headers(headers: Headers | None) -> bytes:
    """One record's headers (docs/FORMAT.md; a None value is Kafka's null header value)."""
    if not headers:
        return b""
    try:
        parts = [_U16.pack(len(headers))]
        for k, v in headers:
            kb = k.encode("utf-8") if isinstance(k, str) else bytes(k)
            parts.append(_U16.pack(len(kb)))
            parts.append(kb)
            if v is None:
                parts.append(_NULL_HEADER_LEN)
                continue
            vb = v.encode("utf-8") if isinstance(v, str) else bytes(v)
            parts.append(_U32.pack(len(vb)))
            parts.append(vb)
    except struct.error:  # a length a u16 cannot hold: check_headers says which (no cost before)
        check_headers(headers)
        raise
    return b"".join(parts)


def decode_headers(buf) -> tuple[tuple[str, bytes | None], ...]:
    """Inverse of encode_headers; CorruptRecordError on a malformed blob."""
    if not len(buf):
        return ()
    mv = memoryview(buf)
    try:
        (n,) = _U16.unpack_from(mv, 0)
        pos = 2
        out = []
        for _ in range(n):
            (kl,) = _U16.unpack_from(mv, pos)
            pos += 2
            k = bytes(mv[pos : pos + kl]).decode("utf-8")
            pos += kl
            (vl,) = _U32.unpack_from(mv, pos)
            pos += 4
            if vl == NULL_HEADER_VALUE:
                out.append((k, None))
                continue
            if pos + vl > len(mv):
                raise CorruptRecordError("record header value runs past its column")
            out.append((k, bytes(mv[pos : pos + vl])))
            pos += vl
        return tuple(out)
    except (struct.error, UnicodeDecodeError) as e:
        raise CorruptRecordError(f"malformed record headers: {e}") from None


_RecordFields = namedtuple("_RecordFields", ("offset", "timestamp_ms", "key", "value", "headers"), defaults=((),))


class Record(_RecordFields):
    """One record as reads return it: ``Record(offset, timestamp_ms, key, value, headers=())``;
    ``key``, ``value`` and header values are bytes or None (a null). A named tuple underneath
    (a batch's records are built in one pass of C code), equal only to a Record with equal
    fields, unordered, unhashable."""

    __slots__ = ()

    def __repr__(self) -> str:
        v = self.value if self.value is None or len(self.value) <= 32 else bytes(self.value[:32]) + b"..."
        return f"Record(offset={self.offset}, timestamp_ms={self.timestamp_ms}, key={self.key!r}, value={v!r})"

    def __eq__(self, other) -> bool:
        if not isinstance(other, Record):
            return False if isinstance(other, tuple) else NotImplemented
        return (
            self.offset == other.offset
            and self.timestamp_ms == other.timestamp_ms
            and self.key == other.key
            and self.value == other.value
            and tuple(self.headers) == tuple(other.headers)
        )

    def __ne__(self, other) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def _unordered(self, other):
        return NotImplemented

    __lt__ = __le__ = __gt__ = __ge__ = _unordered
    __hash__ = None  # type: ignore[assignment]


#: average value size up to which RecordBatch.values copies the batch's data once
_ONE_COPY_MAX_AVG = 1024

_record_from_fields = partial(tuple.__new__, Record)


def encode_batch_parts(
    base_offset: int,
    values: Sequence,
    keys: Sequence | None = None,
    headers: Sequence[Headers | None] | None = None,
    timestamps: Sequence[int] | int = 0,
    codec: int = CODEC_NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    nulls: bool = False,
    compacted: bool = False,
) -> list:
    """One batch as a list of buffers (for ``os.writev``). ``timestamps``: one int for all,
    or one per record; ``keys``/``headers``: None or one entry (maybe None) per record.
    ``nulls``: a value may be None; otherwise every value is bytes-like (the caller checked).
    ``compacted``: ATTR_COMPACTED."""
    n = len(values)
    if n == 0:
        raise ConfigError("a record batch needs at least one record")
    attrs = ATTR_COMPACTED if compacted else 0
    null_bits = None
    if nulls:
        null_bits = _validity(values)
        if null_bits is not None:
            attrs |= ATTR_NULL_VALUES
            values = [b"" if v is None else v for v in values]
    body: list = [_offsets(values), *values] if n <= 64 else [_offsets(values), b"".join(values)]
    if keys is not None and any(k is not None for k in keys):
        attrs |= ATTR_KEYS
        kvals = [b"" if k is None else k for k in keys]
        body += [_validity(keys, always=True), _offsets(kvals), b"".join(kvals)]
    if headers is not None and any(headers):
        attrs |= ATTR_HEADERS
        hblobs = [encode_headers(h) for h in headers]
        body += [_offsets(hblobs), b"".join(hblobs)]
    if isinstance(timestamps, int):
        first_ts = max_ts = timestamps
    else:
        if len(timestamps) != n:
            raise ConfigError(f"timestamps_ms has {len(timestamps)} entries for {n} values")
        first_ts = timestamps[0]
        max_ts = max(timestamps)
        if max_ts != first_ts or min(timestamps) != first_ts:
            attrs |= ATTR_TIMESTAMPS
            ts = array("q", timestamps)
            if not _LITTLE:
                ts.byteswap()
            body.append(ts)
    if null_bits is not None:
        body.append(null_bits)
    return frame_batch(base_offset, body, n, attrs, first_ts, max_ts, codec, producer_id, producer_epoch,
                       base_sequence)  # (positional: cheaper per batch)


def frame_batch(base_offset: int, body: list, n: int, attrs: int, first_ts: int, max_ts: int,
                codec: int = CODEC_NONE, producer_id: int = -1, producer_epoch: int = -1,
                base_sequence: int = -1) -> list:
    """The batch of ``n`` records whose uncompressed body is the buffers ``body`` (the columns
    ``attrs`` announces, in the order docs/FORMAT.md gives): compressed, headed and
    checksummed, as a list of buffers."""
    body_len = 0
    for part in body:
        body_len += memoryview(part).nbytes
    if codec != CODEC_NONE:
        compress = COMPRESS.get(codec)
        if compress is None:
            raise ConfigError(f"unknown codec id {codec}")
        body = [compress(b"".join(body))]
        stored = len(body[0])
    else:
        stored = body_len
    batch_length = HEADER_SIZE - LENGTH_OVERHEAD + stored
    if batch_length > MAX_BATCH_BYTES:
        raise MessageTooLarge(
            f"record batch of {batch_length} bytes exceeds the {MAX_BATCH_BYTES}-byte batch limit"
        )
    header = bytearray(
        HEADER.pack(
            base_offset, batch_length, 0, MAGIC, codec, attrs, n, first_ts, max_ts,
            producer_id, producer_epoch, base_sequence, body_len,
        )
    )
    crc = _crc(memoryview(header)[CRC_START:])
    for part in body:
        crc = _crc(part, crc)
    _U32.pack_into(header, 8 + 4, crc)
    return [header, *body]


def _decreasing(offs) -> bool:
    """Whether an offsets column goes back anywhere (C speed: timsort meets one run when it
    never does)."""
    lst = offs.tolist()
    return sorted(lst) != lst


def _full_bitmap(n: int) -> bytes:
    return b"\xff" * (n >> 3) + (bytes(((1 << (n & 7)) - 1,)) if n & 7 else b"")


def is_plain(b: RecordBatch) -> bool:
    """True when the decoded batch ``b`` is laid out as ``encode_batch_parts`` lays out its
    records with one timestamp for all and no producer: no header, null-value or timestamps
    column (``first_timestamp = max_timestamp``), keys only when every record has one, offsets
    that never decrease, zero reserved bytes, no producer numbers, attribute bit 4 clear. Such
    a batch, written as it came (given its base offset, and its timestamp when it has none),
    is what the log would have written of its records."""
    n = b.count
    if (b.attributes & ~ATTR_KEYS or b.first_timestamp_ms != b.max_timestamp_ms
            or b.producer_id != -1 or b.producer_epoch != -1 or b.base_sequence != -1
            or b.raw[HEADER_SIZE - 6 : HEADER_SIZE] != _RESERVED):
        return False
    if b.key_validity is not None and b.key_validity != _full_bitmap(n):
        return False
    return n == 1 or not any(offs is not None and _decreasing(offs) for offs in (b.value_offsets, b.key_offsets))


def stamp_batch(raw: bytearray, timestamp_ms: int) -> None:
    """Give the batch ``raw`` (one without a timestamps column) ``timestamp_ms`` as every
    record's time: its first and max timestamps set, its CRC computed again."""
    _STAMPS.pack_into(raw, 24, timestamp_ms, timestamp_ms)
    _U32.pack_into(raw, 12, _crc(memoryview(raw)[CRC_START:]))


def head_batch(buf: bytearray, base_offset: int, n: int, attrs: int, first_ts: int, max_ts: int) -> bytearray:
    """``buf``: HEADER_SIZE bytes of room, then the uncompressed body of a batch of ``n``
    records (the columns ``attrs`` announces); its header and CRC filled in place."""
    body_len = len(buf) - HEADER_SIZE
    if body_len + HEADER_SIZE - LENGTH_OVERHEAD > MAX_BATCH_BYTES:
        raise MessageTooLarge(f"record batch of {len(buf)} bytes exceeds the {MAX_BATCH_BYTES}-byte batch limit")
    HEADER.pack_into(buf, 0, base_offset, body_len + HEADER_SIZE - LENGTH_OVERHEAD, 0, MAGIC, CODEC_NONE,
                     attrs, n, first_ts, max_ts, -1, -1, -1, body_len)
    _U32.pack_into(buf, 12, _crc(memoryview(buf)[CRC_START:]))
    return buf


def _validity(items: Sequence, always: bool = False) -> bytes | None:
    """The column's validity bitmap (LSB first, 1: not None); None when no item is None,
    unless ``always``."""
    n = len(items)
    bits = bytearray((n + 7) >> 3)
    missing = False
    for i, v in enumerate(items):
        if v is not None:
            bits[i >> 3] |= 1 << (i & 7)
        else:
            missing = True
    return bytes(bits) if missing or always else None


def encode_batch(base_offset: int, values: Sequence, **kw) -> bytes:
    """``encode_batch_parts`` as one bytes object."""
    return b"".join(encode_batch_parts(base_offset, values, **kw))


class RecordBatch:
    """A decoded, CRC-verified batch: the zero-copy view of the log.

    Columns are memoryviews into the buffer read: ``value_offsets`` (uint32, ``count + 1``
    from 0) and ``value_data`` are an Arrow ``BinaryArray``'s buffers; likewise the key
    columns (None without keys) and the header columns. ``timestamps``: int64, or None when
    all are ``first_timestamp_ms``. ``value_validity``: Arrow's bitmap, or None without nulls.
    ``raw``: the batch as stored (body maybe compressed); ``body_bytes``: the body inflated.
    """

    __slots__ = (
        "base_offset", "count", "first_timestamp_ms", "max_timestamp_ms", "codec",
        "attributes", "producer_id", "producer_epoch", "base_sequence", "size_bytes", "body_bytes",
        "value_offsets", "value_data", "key_validity", "key_offsets", "key_data",
        "header_offsets", "header_data", "timestamps", "value_validity", "raw",
    )

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.count

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.count - 1

    def value(self, i: int) -> bytes | None:
        vv = self.value_validity
        if vv is not None and not (vv[i >> 3] >> (i & 7)) & 1:
            return None
        o = self.value_offsets
        return bytes(self.value_data[o[i] : o[i + 1]])

    def key(self, i: int) -> bytes | None:
        if self.key_validity is None or not (self.key_validity[i >> 3] >> (i & 7)) & 1:
            return None
        o = self.key_offsets
        return bytes(self.key_data[o[i] : o[i + 1]])

    def headers(self, i: int) -> tuple[tuple[str, bytes], ...]:
        if self.header_offsets is None:
            return ()
        o = self.header_offsets
        return decode_headers(self.header_data[o[i] : o[i + 1]])

    def timestamp(self, i: int) -> int:
        ts = self.timestamps
        return self.first_timestamp_ms if ts is None else ts[i]

    def values(self, start: int = 0, stop: int | None = None) -> list[bytes | None]:
        """Values of records [start, stop) (indexes within the batch)."""
        o = self.value_offsets.tolist()
        d = self.value_data
        stop = self.count if stop is None else stop
        if (stop - start) * 4 >= self.count and len(d) <= _ONE_COPY_MAX_AVG * self.count:
            # Most of a batch of small values: one copy, then slices of bytes (a memoryview
            # slice per value costs twice as much); large values are copied once each.
            d = d.tobytes()
            out = [d[a:b] for a, b in zip(o[start:stop], o[start + 1 : stop + 1])]
        else:
            out = [d[a:b].tobytes() for a, b in zip(o[start:stop], o[start + 1 : stop + 1])]
        vv = self.value_validity
        if vv is not None:
            for i in range(start, stop):
                if not (vv[i >> 3] >> (i & 7)) & 1:
                    out[i - start] = None
        return out

    def records(self, start: int = 0, stop: int | None = None) -> list[Record]:
        """Records [start, stop) (indexes within the batch)."""
        stop = self.count if stop is None else min(stop, self.count)
        if start >= stop:
            return []
        vals = self.values(start, stop)
        base = self.base_offset + start
        ts = self.timestamps
        if ts is None:
            tss = [self.first_timestamp_ms] * (stop - start)
        else:
            tss = ts[start:stop].tolist()
        if self.key_validity is None:
            keys = [None] * (stop - start)
        else:
            keys = [self.key(i) for i in range(start, stop)]
        if self.header_offsets is None:
            hdrs = [()] * (stop - start)
        else:
            hdrs = [self.headers(i) for i in range(start, stop)]
        return list(map(_record_from_fields, zip(range(base, base + len(vals)), tss, keys, vals, hdrs)))


def peek_header(buf, pos: int = 0) -> tuple[int, int] | None:
    """(base_offset, total_size) of the batch at pos, or None if the header is incomplete or
    its length out of bounds. No CRC check."""
    if pos + HEADER_SIZE > len(buf):
        return None
    base, length = struct.unpack_from("<QI", buf, pos)
    if length < MIN_BATCH_LENGTH or length > MAX_BATCH_BYTES:
        return None
    return base, length + LENGTH_OVERHEAD


def decode_batch(buf, pos: int = 0, *, where: str = "buffer", at: int = 0,
                 max_inflated: int | None = None, untrusted: bool = False) -> RecordBatch:
    """Decode and verify the batch at ``pos`` of ``buf``: CorruptRecordError (naming ``where``
    and ``pos + at``, ``at`` being where ``buf`` starts in its file) if it is truncated, fails
    its CRC or is malformed; MessageTooLarge, before decompressing, if its body would inflate
    past ``max_inflated``.

    ``untrusted``: a batch from outside the log (a client's body) is also refused when an
    offsets column decreases. Its CRC proves only that its sender meant these bytes: with
    offsets going back, each record's slice may span the whole column, and a body of a few
    KiB stands for values of many GiB. With offsets that never decrease, a batch's values
    (keys, headers) add up to at most its column. The log's own batches were made by the
    encoder, so reads skip this O(n) pass."""
    mv = memoryview(buf)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    end_buf = len(mv)
    at_pos = pos + at  # (where the batch starts in its file)
    if pos + HEADER_SIZE > end_buf:
        raise CorruptRecordError(f"{where}: truncated batch header at position {at_pos}", position=at_pos)
    (base, length, crc, magic, codec, attrs, n, first_ts, max_ts, pid, pepoch, bseq,
     body_len) = HEADER.unpack_from(mv, pos)
    if length < MIN_BATCH_LENGTH or length > MAX_BATCH_BYTES:
        raise CorruptRecordError(f"{where}: batch at position {at_pos} has impossible length {length}",
                                 position=at_pos)
    end = pos + LENGTH_OVERHEAD + length
    if end > end_buf:
        raise CorruptRecordError(f"{where}: batch at position {at_pos} (length {length}) runs past the end "
                                 f"({end_buf})", position=at_pos)
    if _crc(mv[pos + CRC_START : end]) != crc:
        raise CorruptRecordError(f"{where}: CRC mismatch in batch at position {at_pos} (base offset {base})",
                                 position=at_pos)
    if magic != MAGIC or n == 0 or attrs & ~ATTR_KNOWN or codec not in CODEC_NAMES:
        raise CorruptRecordError(f"{where}: batch at position {at_pos} has unsupported magic {magic}, "
                                 f"codec {codec}, attributes {attrs:#x} or count {n}", position=at_pos)
    body = mv[pos + HEADER_SIZE : end]
    if codec != CODEC_NONE:
        if body_len > MAX_BATCH_BYTES:
            raise CorruptRecordError(f"{where}: batch at {at_pos} claims body of {body_len} bytes",
                                     position=at_pos)
        if max_inflated is not None and body_len > max_inflated:
            raise MessageTooLarge(f"{where}: the compressed batch at {at_pos} inflates to {body_len} bytes, "
                                  f"more than the {max_inflated} allowed")
        try:
            raw = DECOMPRESS[codec](body, body_len)
        except Exception as e:  # codec libraries raise their own types
            raise CorruptRecordError(f"{where}: batch at {at_pos} does not decompress: {e}",
                                     position=at_pos) from None
        body = memoryview(raw)
    if len(body) != body_len:
        raise CorruptRecordError(f"{where}: batch at position {at_pos} body is {len(body)} bytes, header says "
                                 f"{body_len}", position=at_pos)
    b = RecordBatch()
    b.base_offset = base
    b.count = n
    b.first_timestamp_ms = first_ts
    b.max_timestamp_ms = max_ts
    b.codec = codec
    b.attributes = attrs
    b.producer_id = pid
    b.producer_epoch = pepoch
    b.base_sequence = bseq
    b.size_bytes = end - pos
    b.body_bytes = body_len
    b.raw = mv[pos:end]
    try:
        p = 0
        b.value_offsets, b.value_data, p = _column(body, p, n)
        if attrs & ATTR_KEYS:
            b.key_validity, p = _bitmap(body, p, n, "key")
            b.key_offsets, b.key_data, p = _column(body, p, n)
        else:
            b.key_validity = b.key_offsets = b.key_data = None
        if attrs & ATTR_HEADERS:
            b.header_offsets, b.header_data, p = _column(body, p, n)
        else:
            b.header_offsets = b.header_data = None
        if attrs & ATTR_TIMESTAMPS:
            if p + 8 * n > len(body):
                raise ValueError("timestamps column")
            t = body[p : p + 8 * n]
            b.timestamps = t.cast("q") if _LITTLE else memoryview(_swapped(t, "q"))
            p += 8 * n
        else:
            b.timestamps = None
        if attrs & ATTR_NULL_VALUES:
            b.value_validity, p = _bitmap(body, p, n, "value")
        else:
            b.value_validity = None
        if p != len(body):
            raise ValueError(f"{len(body) - p} trailing bytes")
        if untrusted:
            for name, offs in (("value", b.value_offsets), ("key", b.key_offsets), ("header", b.header_offsets)):
                if offs is not None and n > 1 and _decreasing(offs):
                    raise ValueError(f"its {name} offsets decrease")
    except ValueError as e:
        raise CorruptRecordError(f"{where}: batch at position {at_pos} (base offset {base}) is malformed: {e}",
                                 position=at_pos) from None
    return b


def _swapped(mv: memoryview, fmt: str) -> array:
    a = array(fmt, mv.tobytes())
    a.byteswap()
    return a


def _bitmap(body: memoryview, p: int, n: int, what: str):
    nb = (n + 7) >> 3
    if p + nb > len(body):
        raise ValueError(f"{what} validity bitmap")
    return body[p : p + nb], p + nb


def _column(body: memoryview, p: int, n: int):
    olen = 4 * (n + 1)
    if p + olen > len(body):
        raise ValueError("offsets column runs past the body")
    raw = body[p : p + olen]
    offs = raw.cast("I") if _LITTLE else memoryview(_swapped(raw, "I"))
    p += olen
    size = offs[n]
    if offs[0] != 0 or p + size > len(body):
        raise ValueError("column data runs past the body")
    return offs, body[p : p + size], p + size


def scan_batches(buf, pos: int = 0):
    """(position, base_offset, size) of the consecutive well-bounded batches in buf (no CRC)."""
    end = len(buf)
    while True:
        h = peek_header(buf, pos)
        if h is None or pos + h[1] > end:
            return
        yield pos, h[0], h[1]
        pos += h[1]


class BatchInfo:
    """Header facts of a verified batch at a file position."""

    __slots__ = ("position", "base_offset", "count", "size", "max_timestamp_ms", "first_timestamp_ms", "attributes")

    def __init__(self, position, base_offset, count, size, first_ts, max_ts, attributes=0):
        self.attributes = attributes
        self.position = position
        self.base_offset = base_offset
        self.count = count
        self.size = size
        self.first_timestamp_ms = first_ts
        self.max_timestamp_ms = max_ts

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.count


def verify_batch(buf, pos: int) -> BatchInfo | None:
    """BatchInfo of the batch at ``pos`` if its bounds, CRC and header hold (body not decoded)."""
    if pos + HEADER_SIZE > len(buf):
        return None
    (base, length, crc, magic, codec, attrs, n, first_ts, max_ts, _pid, _pe, _bs,
     _bl) = HEADER.unpack_from(buf, pos)
    if length < MIN_BATCH_LENGTH or length > MAX_BATCH_BYTES:
        return None
    end = pos + LENGTH_OVERHEAD + length
    if end > len(buf) or magic != MAGIC or n == 0 or codec not in CODEC_NAMES or attrs & ~ATTR_KNOWN:
        return None
    if _crc(memoryview(buf)[pos + CRC_START : end]) != crc:
        return None
    return BatchInfo(pos, base, n, end - pos, first_ts, max_ts, attrs)


def find_next_valid(buf, pos: int, min_base_offset: int = 0) -> int | None:
    """Position of the first valid batch at or after ``pos`` based at ``min_base_offset`` or
    more, or None (a torn tail, not corruption)."""
    magic = bytes([MAGIC])
    end = len(buf)
    p = pos
    while True:
        i = buf.find(magic, p + 16)  # the magic byte sits at offset 16 of a header
        if i < 0 or i - 16 + HEADER_SIZE > end:
            return None
        cand = i - 16
        if cand >= pos:
            info = verify_batch(buf, cand)
            if info is not None and info.base_offset >= min_base_offset:
                return cand
        p = cand + 1
