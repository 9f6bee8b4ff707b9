"""The read half of the log: records and batches from an offset, waiting for
appends, offsets by time.

``LogReads`` is a part of ``Log`` (log.py), not a class of its own: it holds
no state and works on the log's (segments, offsets, the write buffer and the
read caches, under ``_lock``).

Invariants:
- every record returned comes from a CRC-verified batch, or from the write
  buffer (records appended but not yet written are visible at once);
- a run (``ReadCache.run``: first offset, end offset, records, cumulative value
  bytes) is a contiguous range decoded from files; the log drops it whenever
  the start offset moves up or a segment goes away, so a read never returns
  a record below the start offset;
- ``ReadCache.hint`` (segment, offset, file position) lets a sequential reader
  continue where the last run ended without an index lookup; it names a
  segment object, so a deleted segment cannot be mistaken for its successor.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator
from itertools import accumulate
from operator import itemgetter

from ..errors import ConfigError, CorruptRecordError, LogClosedError, OffsetOutOfRange
from .log_dir import load_gaps
from .record_batch import Record, RecordBatch
from .segment import Segment
from .segment_reads import batches_at, first_offset_at_time, mapped_batches

#: Bytes of batches a read decodes and caches at a time (a run): enough to
#: amortise the lookup, few enough records that the cyclic GC (which visits
#: every live record while they are young) stays cheap for bulk reads.
_RUN_BYTES = 256 << 10
_value_of = itemgetter(3)  # Record.value (a Record is a tuple underneath)


class ReadCache:
    """What sequential reads keep between calls, a part of ``Log`` that owns
    it (module doc): ``run`` (first offset, end offset, records, cumulative
    value bytes) and ``hint`` (segment, offset, file position). ``run`` is
    read without the lock (one tuple, replaced whole); both are set under it."""

    __slots__ = ("run", "hint")

    def __init__(self) -> None:
        self.run = None
        self.hint = None

    def forget(self) -> None:
        """A segment changed under the reads (repair, close): nothing kept holds."""
        self.run = self.hint = None

    def forget_segment(self, seg) -> None:
        """``seg`` is deleted: its records and its position go."""
        self.run = None
        if self.hint is not None and self.hint[0] is seg:
            self.hint = None


class LogReads:
    """Read methods of ``Log`` (see module doc)."""

    __slots__ = ()

    @property
    def start_offset(self) -> int:
        """The first offset that can be read (moves up with retention)."""
        return self._start_offset

    @property
    def end_offset(self) -> int:
        """The next offset to be written (buffered records included)."""
        return self._next_offset

    def _check_read_offset_locked(self, offset: int) -> None:
        """Raise OffsetOutOfRange unless start <= offset <= end; a readonly log
        first looks for what its owner appended since (lock released meanwhile)."""
        if self.readonly and offset > self._next_offset:
            self._lock.release()
            try:
                self.refresh()
            finally:
                self._lock.acquire()
        if offset < self._start_offset or offset > self._next_offset:
            raise self._out_of_range(offset)

    def _segment_gone(self, offset: int) -> Exception:
        """The error for a read whose segment file was deleted (retention, or the
        owner's, for a readonly log) after the read chose it and before it
        (re)opened the file (the file cache may have closed it meanwhile)."""
        if self.readonly:
            self.refresh()
        if offset < self._start_offset:
            return self._out_of_range(offset)
        return LogClosedError(f"log {self.path}: a segment was deleted under a read at offset {offset}")

    def _out_of_range(self, offset: int) -> OffsetOutOfRange:
        return OffsetOutOfRange(
            f"offset {offset} is out of range for log {self.path}: "
            f"valid offsets are {self._start_offset}..{self._next_offset} (start..end)",
            offset=offset, start_offset=self._start_offset, end_offset=self._next_offset,
        )

    def read(self, offset: int, *, max_records: int = 500, max_bytes: int = 1 << 20) -> list[Record]:
        """Records from ``offset`` on: at most ``max_records``, and stopping once
        ``max_bytes`` of values were returned (always at least one record).

        Returns [] at the end of the log; raises OffsetOutOfRange below the start
        offset or past the end. Offsets may have gaps (quarantined batches):
        the first record returned has the smallest offset >= ``offset``.
        Every record comes from a batch whose CRC was verified.
        """
        c = self._reads.run  # invalidated whenever the start offset moves up
        if c is not None:
            lo, hi, recs, ends = c
            if lo <= offset < hi:
                i = offset - lo
                if max_records == 1:
                    return [recs[i]]
                # Served from the run when it holds all max_records and the
                # byte limit is not reached before the last of them.
                k = i + max_records - 1
                if i < k < len(recs) and ends[k - 1] - (ends[i - 1] if i else 0) < max_bytes:
                    return recs[i : k + 1]
        return self._read(offset, max_records, max_bytes)

    def _read(self, offset: int, max_records: int, max_bytes: int) -> list[Record]:
        if max_records < 1:
            raise ConfigError(f"max_records={max_records}: must be >= 1")
        out: list[Record] = []
        total = 0
        while len(out) < max_records and total < max_bytes:
            with self._lock:
                if self._closed:
                    raise LogClosedError(f"log {self.path} is closed")
                if not out:
                    self._check_read_offset_locked(offset)
                if offset >= self._next_offset:
                    break
                if offset >= self._written_end:
                    out.extend(self._buf.records(offset - self._written_end, max_records - len(out), offset))
                    break
                seg, seg_end = self._segs.find(offset, self._written_end)
            try:
                run = self._decode_run(seg, offset, seg_end, min(max_bytes, _RUN_BYTES))
            except CorruptRecordError:
                if out:
                    break  # hand out the good records; the next read reports the damage
                raise
            except FileNotFoundError:
                if out:
                    break
                raise self._segment_gone(offset) from None
            if run is None:
                # nothing at or after `offset` in this segment (a gap at its end)
                offset = seg_end
                continue
            first, end, recs, ends = run
            j = max(0, offset - first)
            stop = min(len(recs), j + max_records - len(out))
            before = ends[j - 1] if j else 0
            # The record whose value brings the total to max_bytes is the last one.
            k = bisect.bisect_left(ends, before + max_bytes - total, j, stop)
            if k < stop:
                stop = k + 1
            out += recs[j:stop]
            total += ends[stop - 1] - before
            offset = recs[stop - 1].offset + 1
            if stop < len(recs):
                break
        return out

    def _decode_run(self, seg: Segment, offset: int, seg_end: int, max_bytes: int):
        """Decode the batches from the one holding ``offset`` (reading about
        ``max_bytes``) into a contiguous run (first, end, records, value ends),
        cached for the next sequential read. ``value ends[k]`` is the byte count
        of the values of records[0..k]: reads cut at max_bytes by bisection."""
        h = self._reads.hint
        hint = (h[2], offset) if h is not None and h[0] is seg and h[1] == offset else None
        batches, next_pos = self._batches_at(seg, offset, max_bytes, hint)
        recs: list[Record] = []
        first = end = None
        nulls = False
        for b in batches:
            if b.next_offset <= offset:
                continue
            if first is None:
                first = b.base_offset
            elif b.base_offset != end:
                next_pos = None  # a gap: stop the run here
                break
            recs += b.records()
            end = b.next_offset
            nulls = nulls or b.value_validity is not None
        if first is None:
            return None
        if next_pos is not None:
            self._reads.hint = (seg, end, next_pos)
        sizes = (0 if v is None else len(v) for v in map(_value_of, recs)) if nulls else map(len, map(_value_of, recs))
        run = first, end, recs, list(accumulate(sizes))
        self._reads.run = run
        return run

    def _batches_at(self, seg: Segment, offset: int, max_bytes: int, hint=None, mapped: bool = False):
        skip = self.recovery == "skip"
        if skip and not self.readonly:
            # The owner quarantines damage a read meets (log_repair.py), once,
            # and reads on; only if that cannot be done is it stepped over below.
            for _ in range(3):
                try:
                    return batches_at(seg, offset, max_bytes, hint, mapped=mapped)[:2]
                except CorruptRecordError:
                    if not self._quarantine_found(seg):
                        break
                    hint = None
        try:
            batches, next_pos, stepped = batches_at(seg, offset, max_bytes, hint, skip=skip, mapped=mapped)
        except CorruptRecordError:
            if not (self.readonly and self._follow_quarantine(seg)):
                raise
            batches, next_pos, stepped = batches_at(seg, offset, max_bytes, None, skip=skip, mapped=mapped)
        if stepped:
            self.quarantined_batches += 1
        return batches, next_pos

    def _follow_quarantine(self, seg: Segment) -> bool:
        """A readonly log met damage or a discontinuity: its owner may have
        quarantined that batch since this log opened (log_repair.py: the
        segment file replaced, a gap recorded). Pick both up; True if a gap
        was new (then read again)."""
        gaps = load_gaps(self.path)
        if gaps.items() <= self._segs.gaps.items():
            return False
        with self._lock:
            self._segs.gaps.update(gaps)
            seg.release_files()  # the replaced file is opened anew
            seg.size = seg.file_size() if seg is not self._segs.active else min(seg.size, seg.file_size())
            seg.rebuild_indexes()  # readonly: stops using the index (positions moved)
            self._reads.forget()
        return True

    def read_batches(self, offset: int, *, max_bytes: int = 1 << 20, mapped: bool = False) -> list[RecordBatch]:
        """Whole, CRC-verified batches holding offsets >= ``offset`` (about
        ``max_bytes`` of them, at least one if any exist): the zero-copy view
        for bulk consumers. The first batch may begin below ``offset``.
        Records still buffered come back as a freshly encoded batch.

        With ``mapped`` the batches are views of a read-only mapping of the
        segment file instead of a copy (``Segment.map``: no copy, no fresh
        memory to fault in; for bulk scans such as Spark's). A read that
        continues where the previous one ended starts from the file position
        it left (``ReadCache.hint``), with no index lookup."""
        with self._lock:
            if self._closed:
                raise LogClosedError(f"log {self.path} is closed")
            self._check_read_offset_locked(offset)
            out: list[RecordBatch] = []
            if offset >= self._written_end:
                if offset < self._next_offset:
                    out.append(self._buf.batch_from(offset - self._written_end, offset))
                return out
            segs = self._segs.with_ends(self._written_end)
            written_end = self._written_end
        total = 0
        i = max(0, bisect.bisect_right([s.base_offset for s, _ in segs], offset) - 1)
        while i < len(segs) and total < max_bytes and offset < written_end:
            seg = segs[i][0]
            h = self._reads.hint
            hint = (h[2], offset) if h is not None and h[0] is seg and h[1] == offset else None
            try:
                batches, next_pos = self._batches_at(seg, offset, max_bytes - total, hint, mapped)
            except CorruptRecordError:
                if out:
                    break  # hand out the good batches; the next read reports the damage
                raise
            except FileNotFoundError:
                if out:
                    break
                raise self._segment_gone(offset) from None
            if batches:
                for b in batches:
                    if b.next_offset <= offset:
                        continue
                    if b.base_offset >= written_end:
                        next_pos = None
                        break
                    out.append(b)
                    total += b.size_bytes
                    offset = b.next_offset
                if next_pos is not None and offset == batches[-1].next_offset:
                    self._reads.hint = (seg, offset, next_pos)
                if batches:
                    if total >= max_bytes:
                        break
                    continue
            i += 1
        return out

    def scan_batches(self, offset: int, end_offset: int | None = None, *, maps=None) -> Iterator[RecordBatch]:
        """Whole, CRC-verified batches holding offsets >= ``offset`` and below
        ``end_offset`` (default: the end of the log), lazily: for bulk scans
        (Spark's source). The first batch may begin below ``offset``, the last
        may end past ``end_offset``.

        The same batches, errors and damage handling as ``read_batches(...,
        mapped=True)`` called in a loop, but each segment is mapped once
        (``segment_reads.mapped_batches``) and each batch's CRC is checked
        when the consumer asks for it, not a read ahead: the consumer then
        uses bytes still in the CPU cache. Wherever that fast path stops (the
        write buffer, a gap, damage, a deleted segment), one regular
        ``read_batches`` takes over for that offset: it raises, or with
        ``recovery="skip"`` steps over damage, exactly as it does for any
        reader. Raises OffsetOutOfRange (on the first ``next()``) as
        ``read_batches`` does; a log past its end yields nothing. ``maps``
        (a ``map_cache.MapCache``) keeps the segments' mappings for later
        scans by the same process (see map_cache.py)."""
        skip = self.recovery == "skip"
        while end_offset is None or offset < end_offset:
            with self._lock:
                if self._closed:
                    raise LogClosedError(f"log {self.path} is closed")
                self._check_read_offset_locked(offset)
                if offset >= self._next_offset:
                    return
                seg = None
                if offset < self._written_end:
                    seg, seg_end = self._segs.find(offset, self._written_end)
                    written_end = self._written_end
            if seg is not None:
                try:
                    found = seg.find_batch(offset, skip=skip)
                    batches = mapped_batches(seg, *found, maps) if found is not None else ()
                except (CorruptRecordError, FileNotFoundError):
                    batches = ()  # the regular read below reports it
                for b in batches:
                    if b.next_offset <= offset:
                        continue
                    if b.base_offset >= written_end:
                        break
                    yield b
                    offset = b.next_offset
                    if end_offset is not None and offset >= end_offset:
                        return
                if offset >= seg_end:
                    continue  # this segment is done: the next one
            batches = self.read_batches(offset, max_bytes=1, mapped=True)
            if not batches:
                return
            for b in batches:
                yield b
            offset = batches[-1].next_offset

    def wait_for(self, offset: int, timeout: float | None) -> bool:
        """Block until a record at ``offset`` or later exists (end_offset > offset)
        or ``timeout`` seconds pass; True if it exists. Woken by appends, not by
        polling (a readonly log, fed by another process, re-reads the files)."""
        if self.readonly:
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                self.refresh()
                if self._next_offset > offset:
                    return True
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                time.sleep(min(0.05, left) if left is not None else 0.05)
        with self._lock:
            if self._next_offset > offset:
                return True
            self._read_waiters += 1
            try:
                self._appended.wait_for(lambda: self._next_offset > offset or self._closed, timeout)
            finally:
                self._read_waiters -= 1
            return self._next_offset > offset

    def offset_for_time(self, timestamp_ms: int) -> int | None:
        """The first offset whose record timestamp is >= ``timestamp_ms``
        (None if there is none yet)."""
        with self._lock:
            segs = list(self._segs.all)
            buffered = [(self._written_end + k, t) for k, t in enumerate(self._buf.timestamps)]
        for seg in segs:
            found = first_offset_at_time(seg, timestamp_ms, self._start_offset)
            if found is not None:
                return found
        for off, t in buffered:
            if t >= timestamp_ms:
                return off
        return None
