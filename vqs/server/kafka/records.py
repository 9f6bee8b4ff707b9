"""Kafka v2 record batches (magic 2) to and from VQS's columns.

Decoding (Produce): every batch is bounds-checked, its CRC-32C (over the
attributes to the end) verified, decompressed (compression.py: to at most the
cap the caller gives), and its records turned into the columns
``Log.append_batch`` takes: values, keys, headers ``(str, bytes or None)``,
timestamps. Anything that does not parse raises ``CorruptBatch``, which the
Produce handler answers with CORRUPT_MESSAGE for that partition only.
Transactional and control batches are refused (no transactions here).

Encoding (Fetch): one VQS batch becomes one uncompressed Kafka batch with the
same base offset. Encoded batches are kept in a small LRU keyed by (log,
base offset, record count), so the hot tail that many consumers fetch is
encoded once.

The records' varint walk is a Python loop per record (no native code, no
numpy in the server's dependencies), made cheap for the common record: one-
and two-byte varints and an empty header list are read inline (``_records``),
everything else through the reference decoder's helpers
(``_records_simple``, which a property test holds ``_records`` to).
"""

from __future__ import annotations

import struct
from collections import OrderedDict

import crc32c

from .compression import CorruptBatch, compress, decompress, is_compressed  # noqa: F401 (re-exported)

_HEAD = struct.Struct(">qiibIhiqqqhii")  # 61 bytes: base_offset .. record count
HEAD_SIZE = _HEAD.size
assert HEAD_SIZE == 61
CRC_FROM = 21  # the CRC covers the attributes onwards
_CRC_AT = struct.Struct(">I")
class KafkaBatch:
    """One decoded produced batch: its idempotence fields and its records' columns."""

    __slots__ = ("producer_id", "producer_epoch", "base_sequence", "count", "values", "keys", "headers",
                 "timestamps")

    def __init__(self, producer_id, producer_epoch, base_sequence, values, keys, headers, timestamps):
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.count = len(values)
        self.values = values
        self.keys = keys
        self.headers = headers
        self.timestamps = timestamps


#: what one record may carry in VQS's format (vqs/record/batch.py: u16 header count and key length)
MAX_HEADERS = 0xFFFF
MAX_HEADER_KEY = 0xFFFF


def _uvarint(buf, p: int, end: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if p >= end:
            raise CorruptBatch("record runs past its batch")
        b = buf[p]
        p += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, p
        shift += 7
        if shift > 63:
            raise CorruptBatch("varint longer than 10 bytes")


def _varint(buf, p: int, end: int) -> tuple[int, int]:
    v, p = _uvarint(buf, p, end)
    return (v >> 1) ^ -(v & 1), p


def decode_batches(data: bytes, now_ms: int, max_bytes: int = 64 << 20) -> list[KafkaBatch]:
    """Every batch of a Produce partition's ``records`` field (checked; see module doc); a
    compressed batch is decompressed to at most ``max_bytes``."""
    out = []
    p = 0
    n = len(data)
    while p < n:
        if n - p < HEAD_SIZE:
            raise CorruptBatch(f"{n - p} trailing bytes are shorter than a batch header")
        (_base, length, _epoch, magic, crc, attrs, _last_delta, base_ts, _max_ts, pid, pepoch, bseq,
         count) = _HEAD.unpack_from(data, p)
        end = p + 12 + length
        if length < HEAD_SIZE - 12 or end > n:
            raise CorruptBatch(f"batch length {length} at byte {p} runs past the {n}-byte records field")
        if magic != 2:
            raise CorruptBatch(f"message format v{magic} is not supported (v2 only)", code=43)
        if crc32c.crc32c(memoryview(data)[p + CRC_FROM : end]) != crc:
            raise CorruptBatch(f"batch at byte {p}: CRC-32C mismatch")
        if attrs & 0x30:
            raise CorruptBatch("transactional and control batches are not supported", code=48)
        codec = attrs & 7
        body = data[p + HEAD_SIZE : end]
        if codec:
            body = decompress(codec, body, max_bytes)
        if count < 0 or count > len(body):
            raise CorruptBatch(f"batch claims {count} records in {len(body)} bytes")
        values, keys, headers, stamps = _records(body, count, base_ts if base_ts >= 0 else now_ms)
        out.append(KafkaBatch(pid, pepoch, bseq, values, keys, headers, stamps))
        p = end
    return out


def _records_simple(body: bytes, count: int, base_ts: int):
    """The reference decoder of a batch's records: one varint at a time, every bound checked
    where it is read. ``_records`` must answer exactly as this does (a property test checks)."""
    values: list = []
    keys: list = []
    headers: list = []
    stamps: list = []
    p = 0
    end = len(body)
    any_key = any_hdr = False
    for _ in range(count):
        length, p = _varint(body, p, end)
        rend = p + length
        if length < 0 or rend > end:
            raise CorruptBatch("record length runs past its batch")
        p += 1  # attributes
        delta, p = _varint(body, p, rend)
        _, p = _varint(body, p, rend)  # offset delta: offsets are assigned here
        kl, p = _varint(body, p, rend)
        if kl >= 0:
            if p + kl > rend:
                raise CorruptBatch("record key runs past its record")
            keys.append(body[p : p + kl])
            p += kl
            any_key = True
        else:
            keys.append(None)
        vl, p = _varint(body, p, rend)
        if vl > 0 and p + vl > rend:
            raise CorruptBatch("record value runs past its record")
        values.append(body[p : p + vl] if vl > 0 else b"" if vl == 0 else None)  # -1: a null value
        p += max(vl, 0)
        nh, p = _varint(body, p, rend)
        if nh:
            if nh < 0 or nh > rend - p:
                raise CorruptBatch("record header count is impossible")
            if nh > MAX_HEADERS:
                raise CorruptBatch(f"a record has {nh} headers; at most {MAX_HEADERS}", code=87)  # INVALID_RECORD
            hs = []
            for _ in range(nh):
                hk, p = _varint(body, p, rend)
                if hk < 0 or p + hk > rend:
                    raise CorruptBatch("header key runs past its record")
                if hk > MAX_HEADER_KEY:
                    raise CorruptBatch(f"a header key of {hk} bytes; at most {MAX_HEADER_KEY}", code=87)
                try:
                    name = body[p : p + hk].decode()
                except UnicodeDecodeError:
                    raise CorruptBatch("header key is not UTF-8", code=87) from None
                p += hk
                hv, p = _varint(body, p, rend)
                if hv > 0 and p + hv > rend:
                    raise CorruptBatch("header value runs past its record")
                hs.append((name, body[p : p + hv] if hv > 0 else b"" if hv == 0 else None))  # -1: null
                p += max(hv, 0)
            headers.append(tuple(hs))
            any_hdr = True
        else:
            headers.append(None)
        if p != rend:
            raise CorruptBatch("record length does not match its fields")
        stamps.append(base_ts + delta)
    if p != end:
        raise CorruptBatch(f"{end - p} bytes after the last of {count} records")
    return values, keys if any_key else None, headers if any_hdr else None, stamps


_ZZ = [(b >> 1) ^ -(b & 1) for b in range(128)]  # a one-byte varint, zigzag-decoded


def _records(body: bytes, count: int, base_ts: int):
    """The records of a batch body, as ``_records_simple`` decodes them, faster.

    The common record (varints of one or two bytes, no headers) is read
    inline: a byte test and a table look-up per field, no call per varint.
    Bounds: the position only moves forward (negative lengths are taken as
    null, as the reference does), so a field that runs past its record leaves
    the position past the record's end, which the per-record check catches;
    a read past the body raises IndexError, caught here. Anything else (a
    varint of three bytes or more, a record with headers) goes through the
    reference helpers.
    """
    zz = _ZZ
    values: list = []
    keys: list = []
    stamps: list = []
    headers: list | None = None
    vapp = values.append
    kapp = keys.append
    sapp = stamps.append
    any_key = False
    p = 0
    end = len(body)
    try:
        for i in range(count):
            b = body[p]
            if b < 0x80:
                ln = zz[b]
                p += 1
            elif body[p + 1] < 0x80:
                v = (b & 0x7F) | (body[p + 1] << 7)
                ln = (v >> 1) ^ -(v & 1)
                p += 2
            else:
                ln, p = _varint(body, p, end)
            rend = p + ln
            if ln < 0 or rend > end:
                raise CorruptBatch("record length runs past its batch")
            b = body[p + 1]  # after the attributes: the timestamp delta
            if b < 0x80:
                delta = zz[b]
                p += 2
            else:
                delta, p = _varint(body, p + 1, rend)
            if body[p] < 0x80:  # the offset delta: offsets are assigned here
                p += 1
            elif body[p + 1] < 0x80:
                p += 2
            else:
                _, p = _varint(body, p, rend)
            b = body[p]
            if b == 1:  # zigzag(-1): no key
                kapp(None)
                p += 1
            else:
                if b < 0x80:
                    kl = zz[b]
                    p += 1
                else:
                    kl, p = _varint(body, p, rend)
                if kl >= 0:
                    kapp(body[p : p + kl])
                    p += kl
                    any_key = True
                else:
                    kapp(None)
            b = body[p]
            if b < 0x80:
                vl = zz[b]
                p += 1
            elif body[p + 1] < 0x80:
                v = (b & 0x7F) | (body[p + 1] << 7)
                vl = (v >> 1) ^ -(v & 1)
                p += 2
            else:
                vl, p = _varint(body, p, rend)
            if vl > 0:
                q = p + vl
                vapp(body[p:q])
                p = q
            else:
                vapp(b"" if vl == 0 else None)  # -1 (any negative length): a null value
            if body[p] == 0 and p + 1 == rend:  # no headers: the common end of a record
                p = rend
                if headers is not None:
                    headers.append(None)
            else:
                b = body[p]
                if b < 0x80 and p < rend:
                    nh = zz[b]
                    p += 1
                else:
                    nh, p = _varint(body, p, rend)
                if nh:
                    if headers is None:
                        headers = [None] * i
                    hs, p = _headers_at(body, nh, p, rend)
                    headers.append(hs)
                elif headers is not None:
                    headers.append(None)
                if p != rend:
                    raise CorruptBatch("record length does not match its fields")
            sapp(base_ts + delta)
    except IndexError:
        raise CorruptBatch("record runs past its batch") from None
    if p != end:
        raise CorruptBatch(f"{end - p} bytes after the last of {count} records")
    return values, keys if any_key else None, headers, stamps


def _headers_at(body, nh: int, p: int, rend: int):
    """``nh`` record headers from ``p`` (as the reference reads them): (tuple, next position)."""
    if nh < 0 or nh > rend - p:
        raise CorruptBatch("record header count is impossible")
    if nh > MAX_HEADERS:
        raise CorruptBatch(f"a record has {nh} headers; at most {MAX_HEADERS}", code=87)  # INVALID_RECORD
    hs = []
    zz = _ZZ
    for _ in range(nh):
        b = body[p]  # one-byte lengths inline; a read past the record fails the bound below
        if b < 0x80 and p < rend:
            hk = zz[b]
            p += 1
        else:
            hk, p = _varint(body, p, rend)
        if hk < 0 or p + hk > rend:
            raise CorruptBatch("header key runs past its record")
        if hk > MAX_HEADER_KEY:
            raise CorruptBatch(f"a header key of {hk} bytes; at most {MAX_HEADER_KEY}", code=87)
        try:
            name = body[p : p + hk].decode()
        except UnicodeDecodeError:
            raise CorruptBatch("header key is not UTF-8", code=87) from None
        p += hk
        b = body[p] if p < rend else 0x80
        if b < 0x80:
            hv = zz[b]
            p += 1
        else:
            hv, p = _varint(body, p, rend)
        if hv > 0 and p + hv > rend:
            raise CorruptBatch("header value runs past its record")
        hs.append((name, body[p : p + hv] if hv > 0 else b"" if hv == 0 else None))  # -1: a null value
        p += max(hv, 0)
    return tuple(hs), p


# ------------------------------------------------------------------ encoding (Fetch)



def _zz(v: int) -> bytes:
    z = (v << 1) ^ (v >> 63)
    if z < 0x80:
        return bytes((z,))
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def encode_records(base_offset: int, values, keys=None, headers=None, timestamps=None, *, codec: int = 0,
                   producer: tuple[int, int, int] = (-1, -1, -1)) -> bytes:
    """One Kafka v2 batch of these columns (``keys``/``headers``/``timestamps`` None or one entry
    per record; ``timestamps`` None or an int means every record's)."""
    count = len(values)
    if timestamps is None or isinstance(timestamps, int):
        base_ts = max_ts = timestamps or 0
        deltas = None
    else:
        base_ts = timestamps[0]
        max_ts = max(timestamps)
        deltas = timestamps
    zz = _zz
    null = b"\x01"  # zigzag(-1)
    parts = []
    for i in range(count):
        key = None if keys is None else keys[i]
        hdrs = () if headers is None else (headers[i] or ())
        v = values[i]
        rec = [b"\x00", zz(0 if deltas is None else deltas[i] - base_ts), zz(i)]
        if key is None:
            rec.append(null)
        else:
            rec += (zz(len(key)), key)
        if v is None:  # a null value (a tombstone)
            rec += (null, zz(len(hdrs)))
        else:
            rec += (zz(len(v)), v, zz(len(hdrs)))
        for name, hv in hdrs:
            nb = name.encode()
            if hv is None:  # a null header value
                rec += (zz(len(nb)), nb, null)
            else:
                rec += (zz(len(nb)), nb, zz(len(hv)), hv)
        body = b"".join(rec)
        parts.append(zz(len(body)))
        parts.append(body)
    records = b"".join(parts)
    if codec:
        records = compress(codec, records)
    head = bytearray(_HEAD.pack(base_offset, HEAD_SIZE - 12 + len(records), 0, 2, 0, codec, count - 1,
                                base_ts, max_ts, producer[0], producer[1], producer[2], count))
    crc = crc32c.crc32c(records, crc32c.crc32c(memoryview(head)[CRC_FROM:]))
    _CRC_AT.pack_into(head, 17, crc)
    return bytes(head) + records


def encode_vqs_batch(batch) -> bytes:
    """A VQS ``RecordBatch`` as one uncompressed Kafka v2 batch (same offsets, timestamps,
    keys and headers)."""
    n = batch.count
    keys = [batch.key(i) for i in range(n)] if batch.key_validity is not None else None
    headers = [batch.headers(i) for i in range(n)] if batch.header_offsets is not None else None
    ts = batch.timestamps
    stamps = batch.first_timestamp_ms if ts is None else ts.tolist()
    return encode_records(batch.base_offset, batch.values(), keys, headers, stamps)


class EncodedCache:
    """LRU of encoded Kafka batches by (log, base offset, count), bounded in bytes."""

    def __init__(self, max_bytes: int = 64 << 20):
        self.max_bytes = max_bytes
        self.size = 0
        self._d: OrderedDict = OrderedDict()

    def get(self, log, batch) -> bytes:
        k = (log, batch.base_offset, batch.count)  # the log itself: an id could be reused
        d = self._d
        hit = d.get(k)
        if hit is not None:
            d.move_to_end(k)
            return hit
        enc = encode_vqs_batch(batch)
        d[k] = enc
        self.size += len(enc)
        while self.size > self.max_bytes and d:
            _, old = d.popitem(last=False)
            self.size -= len(old)
        return enc
