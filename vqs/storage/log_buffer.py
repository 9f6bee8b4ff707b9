"""The log's write buffer and its grant from the space governor.

``LogBuffer`` is a part of ``Log`` (log.py): it holds no state and works on
the log's slots (``_buf_*``, ``_grant``, ``_flush_bytes``, ``_flush_records``).

Invariants (under the log's lock):
- **covered**: ``buffer_bound() <= _grant``: the governor (space.py) counts
  ``_grant`` bytes as used by this log, so every buffered (acknowledged)
  record has room to be written whatever else the process writes.
  ``buffer_bound`` is an upper bound of the batch the buffer encodes to
  (``BATCH_FIXED + RECORD_FIXED`` per record + value, key and header bytes;
  with compression, plus the codecs' worst-case growth);
- the append hot path stays one flag test and one pair of integer
  comparisons: ``_flush_bytes`` / ``_flush_records`` are where the slow path
  (``_buffer_full_locked``) runs: the batch is full, or the grant ends. The
  slow path takes the next grant (a full batch's bound, at most MAX_STEP: one take per batch)
  or, refused, takes the record back out of the buffer and raises
  DiskFullError: nothing refused is ever written;
- a write of the whole buffer gives the grant's rest back (``_settle_grant``;
  under flush="always" the flusher does, once the log is idle): an idle log
  holds none.
"""

from __future__ import annotations

import os

from ..errors import DiskFullError
from .record_batch import HEADER_SIZE

#: bound of a batch's fixed part: its header, the value offsets' first entry,
#: and the key bitmap's rounding and both optional columns' first entries
BATCH_FIXED = HEADER_SIZE + 32
#: bound of each record's fixed part: value offset (4), timestamp (8), key
#: bitmap bit and key offset (5), header offset (4); rounded up
RECORD_FIXED = 24
#: the most a grant takes beyond what the buffer needs (a full default batch fits)
MAX_STEP = 2 << 20


class _Null(bytes):
    """The type of ``NULL``."""

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
    """An upper bound of ``encode_headers(headers)``'s length (utf-8: at most
    4 bytes per character)."""
    n = 2
    for k, v in headers:
        n += 6 + (len(k) * 4 if isinstance(k, str) else len(k)) + (len(v) * 4 if isinstance(v, str) else len(v))
    return n


def batches_bound(n: int, total: int, batch_max_bytes: int, keys=None, headers=None) -> int:
    """An upper bound of what ``n`` values of ``total`` bytes (with keys and
    headers) encode to, split into batches of at most ``batch_max_bytes``."""
    b = BATCH_FIXED * (2 + total // batch_max_bytes) + RECORD_FIXED * n + total
    if keys is not None:
        b += sum(len(k) for k in keys if k is not None)
    if headers is not None:
        b += sum(headers_bound(h) for h in headers if h)
    return b


class LogBuffer:
    """Write-buffer methods of ``Log`` (see module doc)."""

    __slots__ = ()

    def _add_extra(self, key, headers, null: bool = False) -> None:
        """A buffered record with a key, headers or a null value (or after one): the
        bytes of the first two count against the grant (they lower ``_flush_bytes``)."""
        self._buf_has_extra = True
        if null:
            self._buf_nulls = True
        if key is not None or self._buf_keys is not None:
            if self._buf_keys is None:
                self._buf_keys = [None] * (len(self._buf_values) - 1)
            if key is not None:
                if key.__class__ is not bytes:
                    key = as_bytes(key, "key")
                self._buf_extra += len(key)
                self._flush_bytes -= len(key)
            self._buf_keys.append(key)
        if headers or self._buf_headers is not None:
            if self._buf_headers is None:
                self._buf_headers = [None] * (len(self._buf_values) - 1)
            if headers:
                headers = tuple(headers)
                n = headers_bound(headers)
                self._buf_extra += n
                self._flush_bytes -= n
            self._buf_headers.append(headers or None)

    def _buffer_bound(self) -> int:
        """Upper bound of the bytes the write buffer encodes to (0 if empty)."""
        n = len(self._buf_values)
        if not n:
            return 0
        b = BATCH_FIXED + RECORD_FIXED * n + self._buf_bytes + self._buf_extra
        if self._codec_id:
            b += (b >> 7) + 128  # zstd and lz4 grow incompressible input by less
        return b

    def _set_thresholds(self) -> None:
        """Where the append hot path must call ``_buffer_full_locked`` next: a
        buffer below both thresholds is covered by the grant."""
        n = len(self._buf_values)
        room = self._grant.buffer
        if self._codec_id:
            room = (room - 128) * 128 // 129
        free = room - (BATCH_FIXED + RECORD_FIXED * n + self._buf_bytes + self._buf_extra)
        dn = max(0, min(self._batch_max_records_less_1 - n, free // (2 * RECORD_FIXED)))
        self._flush_records = n + dn
        self._flush_bytes = min(self._batch_max_bytes, self._buf_bytes + free - RECORD_FIXED * dn + 1)

    def _take_locked(self, need: int) -> None:
        """Make the grant cover ``need`` bytes (plus a full batch when the
        governor allows); DiskFullError when it refuses even ``need``."""
        grant = self._grant
        more = need - grant.buffer
        if more <= 0:
            return
        seg = self._segs.active
        if not grant.indexes and not seg.indexes_allocated and not os.path.exists(seg.index_path):
            self._count_indexes_locked()  # (log.py; a reopened segment's are allocated already)
        step = min(MAX_STEP, self._batch_max_bytes + RECORD_FIXED * self._batch_max_records + BATCH_FIXED)
        try:
            grant.take_upto(more, step, self.path, seg.log_path)
        except DiskFullError:
            if self.on_disk_short is not None:
                self.on_disk_short()
            raise

    def _settle_grant(self) -> None:
        """The buffer is written: give the grant's rest back. Under flush="always" every
        append is written at once, so the rest stays for the next appends and goes back
        when the flusher finds the log idle (``_flush_tick``): one take per busy spell,
        not one per append; an idle log still holds none."""
        if not self._flush_always:
            self._grant.settle()
        self._set_thresholds()

    def _buffer_full_locked(self) -> None:
        """The append slow path: the record just buffered took the buffer to a
        threshold. Cover the buffer (a refusal takes the record back out and
        raises DiskFullError: it was never acknowledged); write the batch when
        it is full."""
        need = self._buffer_bound()
        if need > self._grant.buffer:
            try:
                self._take_locked(need)
            except DiskFullError:
                self._unbuffer_last_locked()
                self._low_space = self._blocked = True
                raise
        if self._buf_bytes >= self._batch_max_bytes or len(self._buf_values) > self._batch_max_records_less_1:
            self._write_buffer_locked()
        else:
            self._set_thresholds()

    def _unbuffer_last_locked(self) -> None:
        """Take the last appended record back out of the buffer (refused)."""
        v = self._buf_values.pop()
        self._buf_timestamps.pop()
        if self._buf_keys is not None:
            k = self._buf_keys.pop()
            if k is not None:
                self._buf_extra -= len(k)
        if self._buf_headers is not None:
            h = self._buf_headers.pop()
            if h:
                self._buf_extra -= headers_bound(h)
        self._buf_bytes -= len(v)
        self._next_offset -= 1
        self._set_thresholds()
