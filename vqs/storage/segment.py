"""A segment: ``{base:020d}.log`` plus its derived ``.index`` and ``.timeindex``
(segment_index.py), opened lazily, so opening a log costs O(segments).

Files are held through the file cache (file_cache.py), which may close them whenever the
segment is not using them (its ``_idx_lock`` free); a user of the log file holds its
``FileHandle`` for the length of a syscall, never a bare descriptor. An active segment maps
its indexes writable only once an append needs them (``appending``).

Invariants:
- ``size`` is the length of the valid prefix of the log file;
- batch base offsets are >= the segment's base and strictly increasing, with gaps allowed
  (quarantined batches, records the cleaner removed: ``continues``).

Allocation ahead (Redpanda's fallocation step): while the governor has room the file gets
blocks ``ALLOCATE_AHEAD`` past its writes, its length unchanged (advice), so buffered writes
skip per-page allocation; ``seal`` gives the rest back.

Mapped reads (``map``): views of a read-only ``MAP_SHARED`` mapping within ``size``. A
deleted file keeps its mapped pages, but past a truncation a mapping reads zeros to the end
of the page and raises SIGBUS beyond. A segment is truncated only (a) back to ``size``
after a failed append or at seal, beyond every batch a reader knows, (b) by the owner's
recovery at open, at the first invalid batch: only a reader of a crashed owner's torn tail
at that moment dies of SIGBUS, and (c) by ``Log.repair`` under ``recovery="truncate"``
(log_repair.py), at damage a read found: a reader in another process mapping that segment
past the cut meets zeros (which fail the CRC its next read checks) or SIGBUS. (c) truncates
in place rather than renaming a rewritten file over it because a follower
(readonly_tail.py) keeps reading the file it has open: it would go on returning the records
the repair discarded. The disk is untouched in every case. Each live mapping holds a
duplicate descriptor, outside the file cache's count.

(Over 500 lines: one segment's file and its two derived indexes change together - appends,
seal, rebuild and recovery must agree on them.)
"""

from __future__ import annotations

import errno
import mmap
import os
import threading

from ..disk import fs
from ..errors import CorruptRecordError
from ..record import ATTR_COMPACTED, find_next_valid, peek_header, verify_batch
from .durable_file import remove_files, write_all
from .file_cache import CACHE, FileHandle
from .segment_index import OffsetIndex, TimeIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"

SCAN_CHUNK = 8 << 20  # bytes read at a time by a scan
ALLOCATE_AHEAD = 1 << 20
_MAP_POPULATE = getattr(mmap, "MAP_POPULATE", 0)  # (Linux)


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


def segment_files(directory: str, base_offset: int) -> tuple[str, str, str]:
    """The paths of the log file and the two indexes of the segment at ``base_offset``."""
    stem = os.path.join(directory, segment_name(base_offset))
    return stem + LOG_SUFFIX, stem + INDEX_SUFFIX, stem + TIMEINDEX_SUFFIX


class Segment:
    def __init__(
        self,
        directory: str,
        base_offset: int,
        *,
        active: bool,
        owner: bool,
        gaps: dict[int, int],
        index_interval_bytes: int,
        index_capacity_bytes: int,
        create: bool,
    ):
        self.directory = directory
        self.base_offset = base_offset
        self.log_path, self.index_path, self.timeindex_path = segment_files(directory, base_offset)
        self.writable = active  # the log appends here
        self.owner = owner  # not a readonly Log's
        self.appending = create  # the indexes are mapped writable
        self._gone = False  # closed or deleted: holds nothing in the file cache
        self._deleted = False  # deleted: its files are unlinked and never reopened
        self._hot = True  # used since the file cache's hand last passed (file_cache.py)
        self._index_hint = self._ti_hint = 0  # entries of an evicted writable index
        self._index: OffsetIndex | None = None
        self._timeindex: TimeIndex | None = None
        self._index_disabled = False
        self._idx_lock = threading.RLock()  # guards creating/replacing the index objects
        self.gaps = gaps  # shared by the log's segments (segments.py)
        self.index_interval_bytes = index_interval_bytes
        self.index_capacity_bytes = index_capacity_bytes
        self._fh: FileHandle | None = None
        if create:
            fd = CACHE.open_fd(self.log_path, os.O_RDWR | os.O_APPEND | os.O_CREAT, self)
            self._fh = FileHandle(fd)
            self.size = os.fstat(fd).st_size
            CACHE.set_weight(self, 1)
        else:
            self.size = os.stat(self.log_path).st_size
        self.next_offset: int | None = base_offset if self.size == 0 else None
        self.max_timestamp_ms = -1
        self.created_ms: int | None = None
        self._since_index = 0
        self._ti_last = -1 << 63
        self._ti_checked = False
        #: bytes past ``size`` not cut yet (btrfs under a quota may refuse even a shrinking
        #: truncate): cut before the next append or seal
        self.cut_pending = False
        self.allocated = 0  # blocks were asked for up to here (``fs.allocate``)

    # -- files (file_cache.py) -----------------------------------------------------

    def handle(self) -> FileHandle:
        """The log file's handle (reopened if the file cache closed it)."""
        h = self._fh
        if h is None:
            h = self._open_handle()
        self._hot = True
        return h

    def _open_handle(self) -> FileHandle:
        with self._idx_lock:
            h = self._fh
            if h is None:
                if self._deleted:  # never reopened: the log reports the read's records as gone
                    raise FileNotFoundError(errno.ENOENT, "segment deleted", self.log_path)
                flags = os.O_RDWR | os.O_APPEND if self.writable else os.O_RDONLY
                h = self._fh = FileHandle(CACHE.open_fd(self.log_path, flags, self))
                self._recount()
            return h

    def _opener(self, path: str, flags: int) -> int:
        return CACHE.open_fd(path, flags, self)

    def _recount(self) -> None:
        """Tell the file cache what this segment holds (under ``_idx_lock``)."""
        n = 0 if self._gone else (
            (self._fh is not None) + (self._index is not None) + (self._timeindex is not None))
        CACHE.set_weight(self, n)

    def _try_evict(self) -> bool:
        """Drop the open files unless busy (called by the file cache, under its lock)."""
        if not self._idx_lock.acquire(blocking=False):
            return False
        try:
            idx, ti = self._index, self._timeindex
            if idx is not None and idx.writable:
                self._index_hint = idx.entries
            if ti is not None and ti.writable:
                self._ti_hint = ti.entries
            # Dropped, not closed: a thread still using one keeps it until done.
            self._fh = self._index = self._timeindex = None
            return True
        finally:
            self._idx_lock.release()

    def release_files(self) -> None:
        """Close the files now (reopened on next use)."""
        if self._fh is None and self._index is None and self._timeindex is None:
            return  # none open (a clean reopen opens none)
        with self._idx_lock:
            if self._try_evict():
                self._recount()

    @property
    def indexes_allocated(self) -> bool:  # both open for appends: their preallocation is done
        return self._index is not None and self._timeindex is not None and self._index.writable \
            and self._timeindex.writable

    def file_size(self) -> int:
        """The log file's size now (``size`` is the valid prefix)."""
        h = self.handle()
        return os.fstat(h.fd).st_size

    # -- indexes ---------------------------------------------------------------

    @property
    def index(self) -> OffsetIndex:
        idx = self._index
        if idx is not None:
            return idx
        with self._idx_lock:  # exactly one index object per segment
            if self._index is not None:
                return self._index
            self._index = self._open_index(OffsetIndex)
            self._recount()
            # An entry past the end of the file (not ``size``: a reader's is a snapshot) is damage.
            if (self._index.entries and self._index.last()[1] >= max(self.file_size(), 1)) \
                    or not self._sealed_file_ok(self._index):
                self.rebuild_indexes()
        return self._index

    def _open_index(self, kind, hint: int = 0, writable: bool | None = None):
        """The offset or the time index (``kind``), mapped writable while appending (or as
        ``writable`` says), else read into memory; ``hint``: entries known valid."""
        if kind is OffsetIndex:
            path, capacity = self.index_path, self.index_capacity_bytes
        else:
            path, capacity = self.timeindex_path, self.index_capacity_bytes * 3 // 2
        if writable is None:
            writable = self.writable and self.appending
        # (a mapping takes a descriptor of its own: out of them, retried once)
        idx = CACHE.retry(lambda: kind(path, self._opener, writable=writable, capacity_bytes=capacity,
                                       entries_hint=hint if writable else 0), path, self)
        last = idx.last() if kind is TimeIndex else None
        if last is not None:
            self._ti_last = max(self._ti_last, last[0])
        return idx

    @property
    def timeindex(self) -> TimeIndex:
        ti = self._timeindex
        if ti is not None:
            return ti
        with self._idx_lock:
            if self._timeindex is None:
                self._timeindex = self._open_index(TimeIndex)
                self._recount()
            return self._timeindex

    def _map_for_append(self) -> tuple[OffsetIndex, TimeIndex]:
        """Both indexes, mapped writable."""
        with self._idx_lock:
            self.appending = True
            idx, ti = self._index, self._timeindex
            if idx is None or not idx.writable:
                self._index = self._open_index(OffsetIndex, idx.entries if idx is not None else self._index_hint)
            if ti is None or not ti.writable:
                self._timeindex = self._open_index(TimeIndex, ti.entries if ti is not None else self._ti_hint)
            self._recount()
            return self._index, self._timeindex

    def _sealed_file_ok(self, idx) -> bool:
        """A sealed segment's index file was trimmed to its entries, every one valid."""
        if self.writable or not idx.exists:
            return True
        size = idx.file_size
        return size % idx.entry_size == 0 and idx.entries == size // idx.entry_size

    def checked_timeindex(self):
        """The time index, rebuilt first unless it passes a sanity check once (Kafka's): the
        last entry names the last batch (``seal`` guarantees it), its timestamp that batch's
        largest at least."""
        if not (self._ti_checked or self._index_disabled or self._timeindex_sane()):
            self.rebuild_indexes()
        self._ti_checked = True
        return None if self._index_disabled else self.timeindex

    def _timeindex_sane(self) -> bool:
        ti = self.timeindex
        if self.size == 0:
            return True
        last = ti.last()
        # (no entry: the implied (0, 0) one, segment_index.py; a rebuild scans for the max)
        if last is None or not self._sealed_file_ok(ti):
            return False
        if self.writable:
            return True  # appends keep the active segment's index exact
        lastb = self.last_batch()
        return lastb is not None and last[1] == lastb.base_offset - self.base_offset \
            and last[0] >= lastb.max_timestamp_ms

    def last_batch(self):
        """BatchInfo of the last batch (from the last offset-index entry on)."""
        pos, expected = self.position_for(self.base_offset + (1 << 32) - 1)
        last = None
        for info in self.iter_valid(pos, self.size, expected=expected):
            last = info
        return last

    def _index_batch(self, position: int, base_offset: int, max_ts_so_far: int) -> None:
        """Index maintenance for a batch written (or found) at ``position``."""
        rel = base_offset - self.base_offset
        if position == 0:
            if max_ts_so_far > self._ti_last:
                ti = self._timeindex
                if ti is None or not ti.writable:
                    ti = self._map_for_append()[1]
                ti.append(max_ts_so_far, rel)
                self._ti_last = max_ts_so_far
        elif self._since_index >= self.index_interval_bytes:
            idx, ti = self._index, self._timeindex
            if idx is None or not idx.writable or ti is None or not ti.writable:
                idx, ti = self._map_for_append()
            idx.append(rel, position)
            if max_ts_so_far > self._ti_last:
                ti.append(max_ts_so_far, rel)
                self._ti_last = max_ts_so_far
            self._since_index = 0

    def rebuild_indexes(self) -> None:
        """Recreate both indexes from the log file; a readonly log's segment stops using them
        instead (lookups scan)."""
        if not self.owner:
            self._index_disabled = True
            return
        with self._idx_lock:
            self._rebuild_indexes_locked()

    def _rebuild_indexes_locked(self) -> None:
        self._close_indexes()
        remove_files(self.index_path, self.timeindex_path)
        self._index_hint = self._ti_hint = 0
        writable = self.appending = self.writable
        self._ti_last = -1 << 63
        self._index = self._open_index(OffsetIndex, writable=True)
        self._timeindex = self._open_index(TimeIndex, writable=True)
        self._recount()
        self._since_index = 0
        self._ti_checked = True
        self.max_timestamp_ms = -1
        last_batch = None
        for info in self.iter_valid(0, expected=self.base_offset):
            self.max_timestamp_ms = max(self.max_timestamp_ms, info.max_timestamp_ms)
            self._index_batch(info.position, info.base_offset, self.max_timestamp_ms)
            self._since_index += info.size
            last_batch = info
            if info.position + info.size >= self.size:
                break
        if last_batch is not None:
            self.next_offset = last_batch.next_offset
            self._time_entry_for_last(last_batch)
        if not writable:
            self._index.trim()
            self._timeindex.trim()

    def _time_entry_for_last(self, last) -> None:
        """Make the time index's last entry name ``last``, the last batch, with the segment's
        largest timestamp (``checked_timeindex`` relies on it)."""
        if last is None:
            return
        rel = last.base_offset - self.base_offset
        ti = self.timeindex
        if ti.entries == 0 or rel > ti.last()[1]:
            if not ti.writable:
                ti = self._map_for_append()[1]
            self._ti_last = max(self.max_timestamp_ms, self._ti_last)
            ti.append(self._ti_last, rel)

    # -- writing ---------------------------------------------------------------

    def append(self, parts: list, base_offset: int, next_offset: int, max_ts: int, nbytes: int,
               ahead: bool = False) -> int:
        """Append one encoded batch; its position. ``ahead``: allocate ahead (module doc)."""
        pos = self.size
        h = self._fh
        if h is None:
            h = self._open_handle()
        if self.cut_pending:
            self.cut_tail()  # still no space: raises ENOSPC/EDQUOT, nothing written
        self._hot = True
        end = pos + nbytes
        if end > self.allocated and ahead:
            fs.allocate(h.fd, pos, end - pos + ALLOCATE_AHEAD)  # advice (module doc)
            self.allocated = end + ALLOCATE_AHEAD
        write_all(h.fd, parts, nbytes)  # first: a failed write leaves no trace in the state
        self.max_timestamp_ms = max(self.max_timestamp_ms, max_ts)
        self._index_batch(pos, base_offset, self.max_timestamp_ms)
        self.size = pos + nbytes
        self._since_index += nbytes
        self.next_offset = next_offset
        return pos

    def sync(self) -> None:
        h = self._fh
        if h is None:
            if self._deleted:
                return  # deleted before its background fsync
            h = self._open_handle()
        fs.fsync(h.fd)

    def seal(self, *, sync: bool = True) -> None:
        """Make the segment read-only (roll, close): record the final max timestamp, trim the
        indexes; with ``sync`` fsync the log file first (a roll leaves it to the flusher)."""
        if not self.writable:
            return
        if self.cut_pending:
            self.cut_tail()  # a sealed file ends at its last batch (else: corruption at open)
        elif self.allocated > self.size:
            self.allocated = 0  # the blocks past the end go back (best effort)
            try:
                fs.ftruncate(self.handle().fd, self.size)
            except OSError:
                pass
        if sync:
            self.sync()
        if self.next_offset is not None and self.next_offset > self.base_offset:
            self._time_entry_for_last(self.last_batch())
        with self._idx_lock:
            self.index.trim()
            self.timeindex.trim()
            self.writable = False

    def peek_index_tail(self):
        """``MappedIndex.peek_last`` of the offset index."""
        return OffsetIndex.peek_last(self.index_path, self._opener)

    def adopt_tail(self, t: dict) -> bool:
        """Continue appending from the tail a clean close recorded in its marker (log_dir.py):
        True if it is this segment's and matches its size (else nothing changes)."""
        if (t["segment"] != self.base_offset or t["size"] != self.size or self.size == 0
                or t["next_offset"] <= self.base_offset or not 0 <= t["since_index"] <= self.size):
            return False
        self.next_offset = t["next_offset"]
        self.max_timestamp_ms = t["max_timestamp_ms"]
        self._ti_last = t["ti_last"]
        self._since_index = t["since_index"]
        return True

    def resume_after(self, last, index_position: int) -> None:
        """After a clean close: continue appending after ``last``, the final batch, found by
        a scan from the last index entry at ``index_position``."""
        self.next_offset = last.next_offset
        # The largest timestamp must be exact before seal() records it: the trimmed time
        # index's last entry, else the checked (or rebuilt) index.
        tl = TimeIndex.peek_last(self.timeindex_path, self._opener)
        if tl:
            self.max_timestamp_ms = max(self.max_timestamp_ms, tl[0], last.max_timestamp_ms)
            self._ti_last = tl[0]
        else:
            ti = self.checked_timeindex()
            self.max_timestamp_ms = max(
                self.max_timestamp_ms, ti.last()[0] if ti is not None and ti.entries else -1, last.max_timestamp_ms
            )
            # no entry in a segment with batches: only the implied (0, 0) one (segment_index.py)
            self._ti_last = self.timeindex.last()[0] if self.timeindex.entries else (0 if self.size else -1 << 63)
        self._since_index = self.size - index_position

    def cut_tail(self) -> None:
        """Cut the file back to ``size``; OSError while the filesystem still refuses it."""
        h = self.handle()
        fs.ftruncate(h.fd, self.size)
        self.cut_pending = False
        self.allocated = 0

    def truncate(self, position: int, *, may_defer: bool = False) -> None:
        """Discard the log file from ``position`` on (recovery). ``may_defer`` (a torn tail at
        open): where the filesystem refuses even that, the bytes stay past ``size``
        (``cut_pending``), so that a full log still opens."""
        self.allocated = 0
        try:
            fs.truncate(self.log_path, position)
        except OSError as e:
            if not may_defer or e.errno not in fs.NO_SPACE:
                raise
            self.cut_pending = True
        else:
            self.sync()
        self.size = position
        self.rebuild_indexes()
        if position == 0:
            self.next_offset = self.base_offset

    # -- reading ---------------------------------------------------------------

    def pread(self, position: int, n: int) -> bytes:
        h = self._fh
        if h is None:
            h = self._open_handle()
        self._hot = True
        return os.pread(h.fd, n, position)

    def map(self, position: int, n: int, maps=None, *, populate: bool = False) -> memoryview:
        """Bytes ``[position, position + n)``, within ``size``, as a view of a read-only
        mapping (module doc), unmapped with its last view or kept by ``maps`` (map_cache.py).
        ``populate``: the caller reads it all at once (a CRC), so its pages are mapped in one
        call (MAP_POPULATE, where the platform has it) rather than faulted in one by one."""
        h = self.handle()
        if maps is not None:
            return maps.view(h.fd, position, n, self.size)
        start = position - position % mmap.ALLOCATIONGRANULARITY
        flags = mmap.MAP_SHARED | (_MAP_POPULATE if populate else 0)
        m = mmap.mmap(h.fd, position - start + n, flags, mmap.PROT_READ, offset=start)
        return memoryview(m)[position - start:]

    def continues(self, expected: int, base: int, attributes: int = 0) -> bool:
        """May a batch at ``base`` follow ``expected`` (contiguous, a quarantine's gap, the cleaner's gaps)?"""
        return base == expected or self.gaps.get(expected) == base or (
            attributes & ATTR_COMPACTED and base > expected)

    def iter_valid(self, position: int = 0, end: int | None = None, expected: int | None = None):
        """BatchInfo of the consecutive valid batches from ``position`` to the first invalid
        one (or ``end``); with ``expected`` (the base offset at ``position``) one that does
        not continue the offsets counts as invalid."""
        for info in self._iter_valid(position, end):
            if expected is not None:
                if not self.continues(expected, info.base_offset, info.attributes):
                    return
                expected = info.next_offset
            yield info

    def _iter_valid(self, position: int, end: int | None):
        end = self.file_size() if end is None else end
        pos = position
        want = 64 << 10  # lookups usually stop within an index interval: start small
        while pos < end:
            chunk = self.pread(pos, min(want, end - pos))
            want = min(want * 4, SCAN_CHUNK)
            h = peek_header(chunk, 0)
            if h is not None and h[1] > len(chunk) and pos + h[1] <= end:
                chunk = self.pread(pos, h[1])  # one batch larger than the chunk: read it whole
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
                return
            pos += p

    def position_for(self, offset: int) -> tuple[int, int]:
        """(position, base offset there) from which a forward scan finds ``offset``."""
        if self._index_disabled:
            return 0, self.base_offset
        e = self.index.floor(offset - self.base_offset)
        return (0, self.base_offset) if e is None else (e[1], self.base_offset + e[0])

    def find_batch(self, offset: int, skip: bool = False, _retry: bool = True) -> tuple[int, int] | None:
        """(position, base offset) of the batch holding ``offset`` (or the first after it);
        None if the segment ends first. An invalid batch on the way is stepped over when
        ``offset`` lies beyond it; if ``offset`` may lie inside it, CorruptRecordError, or
        with ``skip`` the first valid batch after the damage."""
        start, expected = self.position_for(offset)
        pos = start
        from_index = bool(start)
        while True:
            for info in self._iter_valid(pos, self.size):
                if not self.continues(expected, info.base_offset, info.attributes):
                    break
                if info.next_offset > offset:
                    return info.position, info.base_offset
                expected = info.next_offset
                pos = info.position + info.size
                from_index = False
            if pos >= self.size:
                return None
            if from_index and _retry:
                # the index entry named no batch: the index may be damaged; rebuild, look again
                self.rebuild_indexes()
                return self.find_batch(offset, skip, _retry=False)
            bad = pos
            nxt = self._next_valid(bad, expected + 1)
            if skip:
                if nxt is None:
                    return None
                if nxt.base_offset > offset:
                    return nxt.position, nxt.base_offset
            if nxt is None or nxt.base_offset > offset:
                raise CorruptRecordError(
                    f"{self.log_path}: invalid batch at position {bad} (expected base offset "
                    f"{expected}); offset {offset} cannot be read",
                    path=self.log_path, position=bad,
                )
            pos, expected, from_index = nxt.position, nxt.base_offset, False

    def _next_valid(self, position: int, min_base_offset: int):
        """The first valid batch after ``position`` based at ``min_base_offset`` or more
        (within 256 MiB), else None."""
        rest = self.pread(position, min(self.size - position, 256 << 20))
        r = find_next_valid(rest, 1, min_base_offset)
        if r is None:
            return None
        info = verify_batch(rest, r)
        info.position += position
        return info

    # -- recovery --------------------------------------------------------------

    def recover(self, min_base_offset: int):
        """Rebuild the indexes and validate every batch: ``(valid size, next offset, bad
        position or None, resync position)`` (``validate``)."""
        self.size = self.file_size()
        self.rebuild_indexes()
        valid, next_off, resync = self.validate(max(self.base_offset, min_base_offset))
        self.next_offset = next_off
        return valid, next_off, None if valid >= self.size else valid, resync

    def validate(self, expected: int) -> tuple[int, int, int | None]:
        """Scan every batch from the start (the first must have base offset
        ``expected``): (end of the valid prefix, the offset expected there,
        position of the first valid batch after it or None: nothing valid
        follows, a torn tail)."""
        valid = 0
        for info in self.iter_valid(0, self.size, expected=expected):
            valid, expected = info.position + info.size, info.next_offset
        if valid >= self.size:
            return valid, expected, None
        nxt = self._next_valid(valid, expected)
        return valid, expected, None if nxt is None else nxt.position

    def file_replaced(self) -> None:
        """The log file was replaced under its name (segment_excise.py)."""
        with self._idx_lock:
            self._fh = None
            self._recount()
        self.size = self.file_size()

    # -- lifecycle -------------------------------------------------------------

    def _close_indexes(self) -> None:
        for idx in (self._index, self._timeindex):
            if idx is not None:
                idx.close()
        self._index = self._timeindex = None

    def close(self) -> None:
        with self._idx_lock:
            self._close_indexes()
            if self._fh is not None:
                self._fh.close()  # as the log closes: a read racing it fails
                self._fh = None
            self._gone = True
            self._recount()

    def forget(self) -> None:
        """Let go of the files of a segment being deleted (by this log or a readonly log's
        owner): the handle is dropped, not closed, so reads in flight finish; a later reader
        gets FileNotFoundError (the log reports the offsets gone)."""
        with self._idx_lock:
            self._close_indexes()
            self._fh = None  # dropped, not closed
            self._gone = self._deleted = True
            self._recount()

    def delete(self) -> None:
        """``forget`` and unlink the files."""
        self.forget()
        remove_files(self.log_path, self.index_path, self.timeindex_path)
