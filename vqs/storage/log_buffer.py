"""The log's write buffer (``Log._buf``): records appended but not yet written, one list
per column; the log appends to the columns on the hot path and writes them as one batch.

Invariants (under the log's lock):
- the buffered records are the offsets ``[written end, next offset)``, visible to reads;
- **covered**: ``bound() <= grant.buffer`` (log_space.py), an upper bound of the encoded
  batch, so every buffered (acknowledged) record has room to be written;
- the hot path is two integer comparisons: past ``flush_bytes``/``flush_records`` (a full
  batch, or the grant's end) the log takes the next grant (at most MAX_STEP) or, refused,
  takes the record back out (``unbuffer_last``);
- writing the whole buffer gives the grant's rest back (under ``always`` once the log is
  idle): an idle log holds none;
- ``gen`` is replaced at every reset: ``drop`` stores its error there, so exactly the
  ``always`` appenders whose records it held raise it.
"""

from __future__ import annotations

from ..errors import ConfigError
from ..record import HEADER_SIZE, Record, decode_batch, encode_batch, encode_batch_parts

#: bound of a batch's fixed part: its header, the value offsets' first entry,
#: and the key bitmap's rounding and both optional columns' first entries
BATCH_FIXED = HEADER_SIZE + 32
#: bound of each record's fixed part: value offset (4), timestamp (8), key
#: bitmap bit and key offset (5), header offset (4); rounded up
RECORD_FIXED = 24
MAX_STEP = 2 << 20
_ONLY_BYTES = {bytes}


def _header_pairs(headers) -> tuple:
    """A buffered record's headers as a read of the written batch returns them
    (``decode_headers``): keys str, values bytes or None (Kafka's null header value)."""
    return tuple((k if isinstance(k, str) else bytes(k).decode("utf-8"),
                  v if v is None or isinstance(v, bytes) else v.encode("utf-8") if isinstance(v, str) else bytes(v))
                 for k, v in headers)


class _Null(bytes):
    __slots__ = ()


#: A null value in the write buffer: zero bytes for every count, told from an empty
#: value by identity (``b""`` itself is one shared object), written as a null.
NULL = _Null()


def nulls_restored(values: list) -> list:
    """The buffer's values with ``NULL`` back as None (for the encoder and for reads)."""
    return [None if v is NULL else v for v in values]


def as_bytes(v, what: str) -> bytes:
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, bytes):
        return v
    raise TypeError(f"{what} must be bytes-like, not {type(v).__name__}")


def headers_bound(headers) -> int:
    """An upper bound of ``encode_headers(headers)``'s length."""
    n = 2
    for k, v in headers:
        n += 6 + (len(k) * 4 if isinstance(k, str) else len(k)) + (
            0 if v is None else len(v) * 4 if isinstance(v, str) else len(v))
    return n


def checked_columns(values, keys, headers, timestamps_ms) -> tuple[list, list | None, bool]:
    """``append_batch``'s columns checked and made bytes: (values, keys, whether a value is None)."""
    n = len(values)
    if n == 0:
        raise ConfigError("append_batch needs at least one value")
    nulls = False
    if set(map(type, values)) != _ONLY_BYTES:
        nulls = None in values
        values = [v if v.__class__ is bytes or v is None else as_bytes(v, "value") for v in values]
    if keys is not None:
        if len(keys) != n:
            raise ConfigError(f"keys has {len(keys)} entries for {n} values")
        keys = [k if k is None or k.__class__ is bytes else as_bytes(k, "key") for k in keys]
    if headers is not None and len(headers) != n:
        raise ConfigError(f"headers has {len(headers)} entries for {n} values")
    if timestamps_ms is not None and not isinstance(timestamps_ms, int) and len(timestamps_ms) != n:
        raise ConfigError(f"timestamps_ms has {len(timestamps_ms)} entries for {n} values")
    return values, keys, nulls


def batches_bound(n: int, total: int, batch_max_bytes: int, keys=None, headers=None) -> int:
    """An upper bound of what ``n`` values of ``total`` bytes encode to, in batches of at
    most ``batch_max_bytes``."""
    b = BATCH_FIXED * (2 + total // batch_max_bytes) + RECORD_FIXED * n + total
    if keys is not None:
        b += sum(len(k) for k in keys if k is not None)
    if headers is not None:
        b += sum(headers_bound(h) for h in headers if h)
    return b


class WriteBuffer:
    __slots__ = ("values", "timestamps", "keys", "headers", "has_extra", "nulls", "bytes", "extra", "gen",
                 "flush_bytes", "flush_records", "grant", "codec", "max_bytes", "max_records_less_1", "step")

    def __init__(self, grant, codec: int, max_bytes: int, max_records: int) -> None:
        self.grant = grant
        self.codec = codec
        self.max_bytes = max_bytes
        self.max_records_less_1 = max_records - 1
        self.step = min(MAX_STEP, max_bytes + RECORD_FIXED * max_records + BATCH_FIXED)
        self.flush_bytes = self.flush_records = 0
        self.reset()

    def reset(self) -> None:
        """Empty (written, dropped or cut by a repair); a new ``gen``."""
        self.values: list = []
        self.timestamps: list = []
        self.keys: list | None = None
        self.headers: list | None = None
        self.has_extra = False  # some buffered record has a key, headers or a null value
        self.nulls = False  # some buffered value is NULL
        self.bytes = 0  # the buffered values' bytes
        self.extra = 0  # bound of the buffered keys' and headers' bytes
        self.gen: list = [None]  # [the DiskFullError] once dropped unwritten (``drop``)

    def add_extra(self, key, headers, null: bool = False) -> None:
        """The record just appended has a key, headers or a null value (or one
        before it had): its key and header bytes count against the grant (they
        lower ``flush_bytes``)."""
        self.has_extra = True
        if null:
            self.nulls = True
        if key is not None or self.keys is not None:
            if self.keys is None:
                self.keys = [None] * (len(self.values) - 1)
            if key is not None:
                if key.__class__ is not bytes:
                    key = as_bytes(key, "key")
                self.extra += len(key)
                self.flush_bytes -= len(key)
            self.keys.append(key)
        if headers or self.headers is not None:
            if self.headers is None:
                self.headers = [None] * (len(self.values) - 1)
            if headers:
                headers = tuple(headers)
                n = headers_bound(headers)
                self.extra += n
                self.flush_bytes -= n
            self.headers.append(headers or None)

    def unbuffer_last(self) -> None:
        """Take the last appended record back out (refused: never acknowledged)."""
        v = self.values.pop()
        self.timestamps.pop()
        if self.keys is not None:
            k = self.keys.pop()
            if k is not None:
                self.extra -= len(k)
        if self.headers is not None:
            h = self.headers.pop()
            if h:
                self.extra -= headers_bound(h)
        self.bytes -= len(v)
        self.set_thresholds()

    def bound(self) -> int:
        """Upper bound of the bytes the buffer encodes to (0 if empty)."""
        n = len(self.values)
        if not n:
            return 0
        b = BATCH_FIXED + RECORD_FIXED * n + self.bytes + self.extra
        if self.codec:
            b += (b >> 7) + 128  # zstd and lz4 grow incompressible input by less
        return b

    def full(self) -> bool:
        """A whole batch is buffered: write it."""
        return self.bytes >= self.max_bytes or len(self.values) > self.max_records_less_1

    def set_thresholds(self) -> None:
        """Where the append hot path must take the slow path next: a buffer
        below both thresholds is covered by the grant and not a full batch."""
        # (comparisons, not min/max: the append slow path)
        n = len(self.values)
        room = self.grant.buffer
        if self.codec:
            room = (room - 128) * 128 // 129
        nbytes = self.bytes
        free = room - (BATCH_FIXED + RECORD_FIXED * n + nbytes + self.extra)
        dn = free // (2 * RECORD_FIXED)
        if dn > self.max_records_less_1 - n:
            dn = self.max_records_less_1 - n
        if dn < 0:
            dn = 0
        self.flush_records = n + dn
        fb = nbytes + free - RECORD_FIXED * dn + 1
        self.flush_bytes = fb if fb < self.max_bytes else self.max_bytes

    def settle(self, keep: bool = False) -> None:
        """The buffer was written (it is empty): the governor is told what was, and the
        grant's rest goes back, unless ``keep`` (flush="always": kept for the next appends
        until the flusher finds the log idle, one take per busy spell); then the thresholds."""
        grant = self.grant
        if grant.written or (grant.buffer and not keep):
            grant.settle(keep)
        room = grant.buffer
        if not room:  # (what set_thresholds finds without a grant: the next append takes one)
            self.flush_bytes = self.flush_records = 0
            return
        # set_thresholds with nothing buffered (inline: called after every write)
        if self.codec:
            room = (room - 128) * 128 // 129
        free = room - BATCH_FIXED
        dn = free // (2 * RECORD_FIXED)
        if dn > self.max_records_less_1:
            dn = self.max_records_less_1
        if dn < 0:
            dn = 0
        self.flush_records = dn
        fb = free - RECORD_FIXED * dn + 1
        self.flush_bytes = fb if fb < self.max_bytes else self.max_bytes

    def encode(self, base: int) -> list:
        """The buffer as one batch's encoded parts, its first offset ``base``."""
        bv = self.values
        nulls = self.nulls
        return encode_batch_parts(base, nulls_restored(bv) if nulls else bv, self.keys, self.headers,
                                  self.timestamps, self.codec, -1, -1, -1, nulls)

    def drop(self, e) -> None:
        """Drop every buffered record unwritten (flush="always", a full disk):
        their appenders raise ``e`` (``gen``, group_commit.py)."""
        self.gen[0] = e
        self.reset()
        self.set_thresholds()  # (the grant stays: flush="always" keeps it between writes)

    def records(self, i: int, n: int, offset: int) -> list[Record]:
        """Up to ``n`` buffered records from the ``i``-th on, which has ``offset``."""
        j = min(len(self.values), i + n)
        bk, bh, bt, bv = self.keys, self.headers, self.timestamps, self.values
        return [
            Record(
                offset + (k - i), bt[k], None if bk is None else bk[k], None if bv[k] is NULL else bv[k],
                () if bh is None or not bh[k] else _header_pairs(bh[k]),
            )
            for k in range(i, j)
        ]

    def batch_from(self, i: int, offset: int):
        """The buffered records from the ``i``-th on (which has ``offset``) as one
        freshly encoded, decoded batch."""
        nulls = self.nulls
        buf = encode_batch(
            offset, nulls_restored(self.values[i:]) if nulls else self.values[i:],
            keys=None if self.keys is None else self.keys[i:],
            headers=None if self.headers is None else self.headers[i:],
            timestamps=self.timestamps[i:], nulls=nulls,
        )
        return decode_batch(buf)
