"""A segment: ``{base:020d}.log`` plus its ``.index`` and ``.timeindex``.

The log file holds whole record batches back to back, in increasing offset
order. The indexes are derived data (see offset_index.py, time_index.py): they
are opened lazily, so opening a log costs O(segments), not O(bytes), and
memory does not grow with the size of the log.

Invariants:
- ``size`` is the byte length of the valid prefix of the log file; everything
  VQS wrote beyond it was discarded by recovery.
- batches in a segment have base offsets >= the segment's base and strictly
  increasing; gaps are allowed (a batch quarantined by recovery="skip").
"""

from __future__ import annotations

import os

from ..errors import CorruptRecordError
from .durable_file import write_all
from .offset_index import OffsetIndex
from .record_batch import (
    RecordBatch,
    decode_batch,
    find_next_valid,
    peek_header,
    verify_batch,
)
from .time_index import TimeIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"

#: Bytes read at a time when a segment is scanned (recovery, tail discovery).
SCAN_CHUNK = 8 << 20


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class Segment:
    """One segment of a log (see module doc)."""

    def __init__(
        self,
        directory: str,
        base_offset: int,
        *,
        active: bool,
        owner: bool = True,
        index_interval_bytes: int = 4096,
        index_capacity_bytes: int = 1 << 20,
        create: bool = False,
    ):
        self.directory = directory
        self.base_offset = base_offset
        stem = os.path.join(directory, segment_name(base_offset))
        self.log_path = stem + LOG_SUFFIX
        self.index_path = stem + INDEX_SUFFIX
        self.timeindex_path = stem + TIMEINDEX_SUFFIX
        # active: the log appends to this segment; its indexes are preallocated and
        # mapped writable. owner: this process may change files (not a readonly Log).
        self.writable = active
        self.owner = owner
        self._index_disabled = False
        self.index_interval_bytes = index_interval_bytes
        self.index_capacity_bytes = index_capacity_bytes
        if active:
            flags = os.O_RDWR | os.O_APPEND | (os.O_CREAT if create else 0)
        else:
            flags = os.O_RDONLY
        # A FileIO owns the descriptor: readers keep a reference to the segment
        # while they pread, so a segment deleted by retention meanwhile closes
        # its descriptor only after the last reader lets go (no fd reuse race).
        self.file = open(os.open(self.log_path, flags, 0o644), "rb", buffering=0, closefd=True)
        self.fd = self.file.fileno()
        self.size = os.fstat(self.fd).st_size
        self.next_offset: int | None = base_offset if self.size == 0 else None
        self.max_timestamp_ms = -1
        self.created_ms: int | None = None
        self._index: OffsetIndex | None = None
        self._timeindex: TimeIndex | None = None
        self._since_index = 0
        self._ti_last = -1 << 63

    # -- indexes ---------------------------------------------------------------

    @property
    def index(self) -> OffsetIndex:
        if self._index is None:
            self._index = OffsetIndex(
                self.index_path, writable=self.writable, capacity_bytes=self.index_capacity_bytes
            )
            # An entry pointing past the end of the file is damage. (Compare with the
            # file, not self.size: a readonly reader's size is a snapshot.)
            if self._index.entries and self._index.last()[1] >= max(os.fstat(self.fd).st_size, 1):
                self.rebuild_indexes()
        return self._index

    @property
    def timeindex(self) -> TimeIndex:
        if self._timeindex is None:
            self._timeindex = TimeIndex(
                self.timeindex_path, writable=self.writable,
                capacity_bytes=self.index_capacity_bytes * 3 // 2,
            )
            last = self._timeindex.last()
            if last is not None:
                self._ti_last = last[0]
        return self._timeindex

    def _index_batch(self, position: int, base_offset: int, max_ts_so_far: int) -> None:
        """Index maintenance for a batch written (or found) at ``position``."""
        rel = base_offset - self.base_offset
        if position == 0:
            if max_ts_so_far > self._ti_last:
                self.timeindex.append(max_ts_so_far, rel)
                self._ti_last = max_ts_so_far
        elif self._since_index >= self.index_interval_bytes:
            self.index.append(rel, position)
            if max_ts_so_far > self._ti_last:
                self.timeindex.append(max_ts_so_far, rel)
                self._ti_last = max_ts_so_far
            self._since_index = 0

    def rebuild_indexes(self) -> None:
        """Recreate both indexes from the log file (they are derived data).

        A readonly log never writes: it stops using the index instead (lookups
        then scan from the segment start)."""
        if not self.owner:
            self._index_disabled = True
            return
        for idx in (self._index, self._timeindex):
            if idx is not None:
                idx.close()
        for p in (self.index_path, self.timeindex_path):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
        writable = self.writable
        self._index = OffsetIndex(self.index_path, writable=True, capacity_bytes=self.index_capacity_bytes)
        self._timeindex = TimeIndex(
            self.timeindex_path, writable=True, capacity_bytes=self.index_capacity_bytes * 3 // 2
        )
        self._since_index = 0
        self._ti_last = -1 << 63
        self.max_timestamp_ms = -1
        last_batch = None
        for info in self.iter_valid(0):
            self.max_timestamp_ms = max(self.max_timestamp_ms, info.max_timestamp_ms)
            self._index_batch(info.position, info.base_offset, self.max_timestamp_ms)
            self._since_index += info.size
            last_batch = info
            if info.position + info.size >= self.size:
                break
        if last_batch is not None:
            self.next_offset = last_batch.next_offset
        if not writable:
            self._index.trim()
            self._timeindex.trim()

    # -- writing ---------------------------------------------------------------

    def append(self, parts: list, base_offset: int, next_offset: int, max_ts: int, nbytes: int) -> int:
        """Append one encoded batch (as buffers); return its position."""
        pos = self.size
        self.max_timestamp_ms = max(self.max_timestamp_ms, max_ts)
        self._index_batch(pos, base_offset, self.max_timestamp_ms)
        write_all(self.fd, parts)
        self.size = pos + nbytes
        self._since_index += nbytes
        self.next_offset = next_offset
        return pos

    def sync(self) -> None:
        os.fsync(self.fd)

    def seal(self) -> None:
        """Make the segment durable and read-only (at roll and close): fsync the
        log, record the final max timestamp, trim and fsync the indexes."""
        if not self.writable:
            return
        os.fsync(self.fd)
        if self.next_offset is not None and self.next_offset > self.base_offset:
            ti = self.timeindex
            if self.max_timestamp_ms > self._ti_last:
                last_rel = self._last_batch_relative_offset()
                if last_rel is not None and (ti.entries == 0 or last_rel > ti.last()[1]):
                    ti.append(self.max_timestamp_ms, last_rel)
                    self._ti_last = self.max_timestamp_ms
        self.index.trim()
        self.timeindex.trim()
        self.writable = False

    def _last_batch_relative_offset(self) -> int | None:
        last = None
        for info in self.iter_valid(self.index.lookup(1 << 32)):
            last = info
        return None if last is None else last.base_offset - self.base_offset

    def truncate(self, position: int) -> None:
        """Discard the log file from ``position`` on (recovery), and index entries past it."""
        os.truncate(self.log_path, position)
        os.fsync(self.fd)
        self.size = position
        self.rebuild_indexes()
        if position == 0:
            self.next_offset = self.base_offset

    # -- reading ---------------------------------------------------------------

    def pread(self, position: int, n: int) -> bytes:
        return os.pread(self.fd, n, position)

    def iter_valid(self, position: int = 0, end: int | None = None):
        """Yield BatchInfo for consecutive valid batches from ``position`` up to the
        first invalid or incomplete one (or ``end``). Reads in bounded chunks."""
        end = os.fstat(self.fd).st_size if end is None else end
        pos = position
        while pos < end:
            chunk = self.pread(pos, min(SCAN_CHUNK, end - pos))
            p = 0
            while True:
                h = peek_header(chunk, p)
                if h is None or p + h[1] > len(chunk):
                    break
                info = verify_batch(chunk, p)
                if info is None:
                    return
                info.position = pos + p
                yield info
                p += h[1]
            if p == 0:
                # One batch larger than the chunk: read it whole (bounded by the file).
                h = peek_header(chunk, 0)
                if h is None or pos + h[1] > end:
                    return
                big = self.pread(pos, h[1])
                info = verify_batch(big, 0)
                if info is None:
                    return
                info.position = pos
                yield info
                p = h[1]
            pos += p

    def position_for(self, offset: int) -> int:
        """File position from which a forward scan finds ``offset``."""
        if self._index_disabled:
            return 0
        return self.index.lookup(offset - self.base_offset)

    def read_batches_from(self, position: int, max_bytes: int, where: str | None = None):
        """Decode whole batches starting at ``position``, at least one, until
        ``max_bytes`` is reached; returns (batches, next_position)."""
        where = where or self.log_path
        size = self.size
        if position >= size:
            return [], position
        want = min(max(max_bytes, 4096), size - position)
        buf = self.pread(position, want)
        h = peek_header(buf, 0)
        if h is None:
            raise CorruptRecordError(
                f"{where}: invalid batch header at position {position}", path=where, position=position
            )
        if h[1] > len(buf):
            if position + h[1] > size:
                raise CorruptRecordError(
                    f"{where}: batch at position {position} runs past the segment end",
                    path=where, position=position,
                )
            buf = self.pread(position, h[1])
        out: list[RecordBatch] = []
        p = 0
        n = len(buf)
        while p < n:
            h = peek_header(buf, p)
            if h is None or p + h[1] > n:
                break
            try:
                b = decode_batch(buf, p, where=where)
            except CorruptRecordError as e:
                raise CorruptRecordError(
                    f"{where}: {str(e).split(': ', 1)[-1].replace(f'position {p}', f'position {position + p}')}",
                    path=where, position=position + p,
                ) from None
            out.append(b)
            p += h[1]
        return out, position + p

    def find_batch_position(self, offset: int) -> int | None:
        """Position of the batch containing ``offset`` (or the first batch after it,
        across a gap); None if the segment has no such batch."""
        start = self.position_for(offset)
        for info in self.iter_valid(start, self.size):
            if info.next_offset > offset:
                if info.base_offset > offset and start and info.position == start:
                    # The index pointed past the target: it is damaged. Rebuild, retry.
                    self.rebuild_indexes()
                    return self.find_batch_position(offset)
                return info.position
        return None

    # -- recovery --------------------------------------------------------------

    def recover(self, min_base_offset: int):
        """Validate every batch, rebuild the indexes and find the valid prefix.

        Returns ``(valid_size, next_offset, bad_position, resync_position)``:
        ``bad_position`` is None when the whole file is valid; otherwise
        ``resync_position`` is the first valid batch after it (None = nothing
        valid follows: a torn tail).
        """
        self.size = os.fstat(self.fd).st_size
        next_off = max(self.base_offset, min_base_offset)
        self.rebuild_indexes()
        valid = 0
        last = None
        for info in self.iter_valid(0, self.size):
            if info.base_offset < next_off:
                break  # offsets must increase: treat as invalid
            valid = info.position + info.size
            next_off = info.next_offset
            last = info
        if last is not None or valid == 0:
            # rebuild_indexes indexed every valid batch; drop entries past `valid`.
            pass
        if valid >= self.size:
            self.next_offset = next_off
            return valid, next_off, None, None
        # Something invalid at `valid`: does anything valid follow in this file?
        rest = self.pread(valid, self.size - valid) if self.size - valid <= (256 << 20) else None
        resync = None
        if rest is not None:
            r = find_next_valid(rest, 1, next_off)
            resync = None if r is None else valid + r
        self.next_offset = next_off
        return valid, next_off, valid, resync

    def excise(self, start: int, stop: int, quarantine_dir: str) -> None:
        """Remove bytes [start, stop) (a corrupt batch) from the log file: they are
        copied to ``quarantine_dir`` first, then the segment is rewritten without
        them (temp file, fsync, rename, fsync dir). The offsets they held become a gap."""
        from .durable_file import atomic_write, fsync_dir

        os.makedirs(quarantine_dir, exist_ok=True)
        bad = self.pread(start, stop - start)
        qpath = os.path.join(quarantine_dir, f"{segment_name(self.base_offset)}-{start}.bad")
        atomic_write(qpath, bad)
        tmp = self.log_path + ".excise.tmp"
        with open(tmp, "wb") as out:
            pos = 0
            for a, b in ((0, start), (stop, self.size)):
                pos = a
                while pos < b:
                    chunk = self.pread(pos, min(SCAN_CHUNK, b - pos))
                    if not chunk:
                        break
                    out.write(chunk)
                    pos += len(chunk)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.log_path)
        fsync_dir(self.directory)
        flags = os.O_RDWR | os.O_APPEND if self.writable else os.O_RDONLY
        self.file.close()
        self.file = open(os.open(self.log_path, flags), "rb", buffering=0, closefd=True)
        self.fd = self.file.fileno()
        self.size = os.fstat(self.fd).st_size

    # -- lifecycle -------------------------------------------------------------

    def close(self) -> None:
        for idx in (self._index, self._timeindex):
            if idx is not None:
                idx.close()
        self._index = self._timeindex = None
        self.file.close()

    def delete(self) -> None:
        """Unlink the files; open readers keep reading until they let go."""
        for idx in (self._index, self._timeindex):
            if idx is not None:
                idx.close()
        self._index = self._timeindex = None
        for p in (self.log_path, self.index_path, self.timeindex_path):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
