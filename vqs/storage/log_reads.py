"""The log's reads (``Log._reads``): records and batches from an offset, waiting for
appends, offsets by time.

Invariants:
- every record returned comes from a CRC-verified batch or the write buffer;
- ``run`` (first offset, end offset, records, cumulative value bytes) is a contiguous range
  decoded from files, dropped whenever the start moves up or a segment goes away; it is read
  without the lock (one tuple, replaced whole: ``Log.read``'s fast path);
- ``hint`` (segment, offset, file position) continues a sequential read without an index
  lookup; it names a segment object, never mistaken for its successor;
- a read never steps over missing offsets unawares: where a segment's batches end before
  the next segment's base, the offsets between are a recorded gap (quarantine/) or the log
  is compacted (a clean point: a cleaned segment may end early); anything else is damage
  (a file cut at a batch boundary) and raises ``CorruptRecordError`` naming the segment.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator
from itertools import accumulate
from operator import itemgetter

from ..errors import ConfigError, CorruptRecordError, LogClosedError, OffsetOutOfRange
from ..record import Record, RecordBatch
from .log_dir import load_gaps, read_checkpoint
from .log_repair import quarantine_found
from .readonly_tail import find_tail, follow_segments, open_segments
from .segment import Segment
from .segment_reads import batches_at, first_offset_at_time, mapped_batches, segment_max_timestamp

#: bytes a run decodes: enough to amortise the lookup, few enough records that the cyclic
#: GC (which visits young objects) stays cheap for bulk reads
_RUN_BYTES = 256 << 10
_value_of = itemgetter(3)  # Record.value (a Record is a tuple underneath)


class Reads:
    __slots__ = ("run", "hint", "tail")

    def __init__(self) -> None:
        self.run = None
        self.hint = None
        self.tail = None  # readonly: where the last search for the tail ended (readonly_tail.py)

    def open_readonly(self, log) -> None:
        """A readonly log's segments, end and start."""
        log._segs.adopt(open_segments(log.path, log._segs.make))
        if not log._segs.all:
            raise ConfigError(f"{log.path} holds no log segments")
        _, lso = read_checkpoint(log.path)
        self._find_tail(log)
        log._start_offset = min(max(log._segs.bases[0], lso), log._next_offset)

    def _find_tail(self, log) -> None:
        self.tail = find_tail(log._segs.all[-1], self.tail)
        log._written_end = log._next_offset = log._sync.durable_end = self.tail[2]

    def refresh(self, log) -> None:
        """``Log.refresh``: the segments and batches the owner appended since."""
        with log._lock:
            if not follow_segments(log.path, log._segs.all, log._segs.make):
                return
            log._segs.rebase()
            self._find_tail(log)
            _, lso = read_checkpoint(log.path)
            log._start_offset = min(max(log._segs.bases[0], lso, log._start_offset), log._next_offset)
            self.run = None

    def forget(self) -> None:
        """A segment changed under the reads (repair, close)."""
        self.run = self.hint = None

    def forget_segment(self, seg) -> None:
        """``seg`` is deleted: its records and its position go."""
        self.run = None
        if self.hint is not None and self.hint[0] is seg:
            self.hint = None

    def _check_read_offset_locked(self, log, offset: int) -> None:
        """OffsetOutOfRange unless start <= offset <= end (a readonly log refreshes first)."""
        if log.readonly and offset > log._next_offset:
            log._lock.release()
            try:
                log.refresh()
            finally:
                log._lock.acquire()
        if offset < log._start_offset or offset > log._next_offset:
            raise self._out_of_range(log, offset)

    def _check_missing(self, log, seg: Segment, offset: int, seg_end: int) -> None:
        """``seg`` holds no batch at or after ``offset``, below its end ``seg_end``: the offsets
        between are a recorded gap or the log is compacted, else CorruptRecordError (the module's
        invariants)."""
        if offset >= seg_end or log._segs.gap_recorded(seg.base_offset, offset, seg_end, reload=log.readonly):
            return
        raise CorruptRecordError(
            f"{seg.log_path}: no batch holds offsets {offset}..{seg_end - 1}: the segment ends before "
            f"the next one begins (a file cut short)", path=seg.log_path, position=seg.size)

    def _segment_gone(self, log, offset: int) -> Exception:
        """The error for a read whose segment file was deleted after the read chose it."""
        if log.readonly:
            log.refresh()
        if offset < log._start_offset:
            return self._out_of_range(log, offset)
        return LogClosedError(f"log {log.path}: a segment was deleted under a read at offset {offset}")

    def _out_of_range(self, log, offset: int) -> OffsetOutOfRange:
        return OffsetOutOfRange(
            f"offset {offset} is out of range for log {log.path}: "
            f"valid offsets are {log._start_offset}..{log._next_offset} (start..end)",
            offset=offset, start_offset=log._start_offset, end_offset=log._next_offset,
        )

    def read(self, log, offset: int, max_records: int, max_bytes: int) -> list[Record]:
        if max_records < 1:
            raise ConfigError(f"max_records={max_records}: must be >= 1")
        out: list[Record] = []
        total = 0
        while len(out) < max_records and total < max_bytes:
            with log._lock:
                if log._closed:
                    raise LogClosedError(f"log {log.path} is closed")
                if not out:
                    self._check_read_offset_locked(log, offset)
                if offset >= log._next_offset:
                    break
                if offset >= log._written_end:
                    out.extend(log._buf.records(offset - log._written_end, max_records - len(out), offset))
                    break
                seg, seg_end = log._segs.find(offset, log._written_end)
            try:
                run = self._decode_run(log, seg, offset, seg_end, min(max_bytes, _RUN_BYTES))
            except CorruptRecordError:
                if out:
                    break  # the good records first; the next read reports the damage
                raise
            except FileNotFoundError:
                if out:
                    break
                raise self._segment_gone(log, offset) from None
            if run is None:
                try:
                    self._check_missing(log, seg, offset, seg_end)
                except CorruptRecordError:
                    if out:
                        break  # the good records first; the next read reports the damage
                    raise
                offset = seg_end
                continue
            first, end, recs, ends = run
            j = max(0, offset - first)
            stop = min(len(recs), j + max_records - len(out))
            before = ends[j - 1] if j else 0
            # (the record whose value brings the total to max_bytes is the last)
            k = bisect.bisect_left(ends, before + max_bytes - total, j, stop)
            if k < stop:
                stop = k + 1
            out += recs[j:stop]
            total += ends[stop - 1] - before
            offset = recs[stop - 1].offset + 1
            if stop < len(recs):
                break
        return out

    def _decode_run(self, log, seg: Segment, offset: int, seg_end: int, max_bytes: int):
        """Decode about ``max_bytes`` from the batch holding ``offset`` into a run (module doc),
        kept for the next sequential read; None if the segment has nothing there."""
        batches, next_pos = self._batches_at(log, seg, offset, max_bytes, self._hint(seg, offset))
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
            self.hint = (seg, end, next_pos)
        sizes = (0 if v is None else len(v) for v in map(_value_of, recs)) if nulls else map(len, map(_value_of, recs))
        run = first, end, recs, list(accumulate(sizes))
        self.run = run
        return run

    def _hint(self, seg: Segment, offset: int) -> tuple[int, int] | None:
        """(position, offset) where a sequential read of ``seg`` continues, if known."""
        h = self.hint
        return (h[2], offset) if h is not None and h[0] is seg and h[1] == offset else None

    def _batches_at(self, log, seg: Segment, offset: int, max_bytes: int, hint=None, mapped: bool = False):
        skip = log.recovery == "skip"
        if skip and not log.readonly:
            # the owner quarantines the damage (log_repair.py); if it cannot, stepped over below
            for _ in range(3):
                try:
                    return batches_at(seg, offset, max_bytes, hint, mapped=mapped)[:2]
                except CorruptRecordError:
                    if not quarantine_found(log, seg):
                        break
                    hint = None
        try:
            batches, next_pos, stepped = batches_at(seg, offset, max_bytes, hint, skip=skip, mapped=mapped)
        except CorruptRecordError:
            if not (log.readonly and self._follow_quarantine(log, seg)):
                raise
            batches, next_pos, stepped = batches_at(seg, offset, max_bytes, None, skip=skip, mapped=mapped)
        if stepped:
            log.quarantined_batches += 1
        return batches, next_pos

    def _follow_quarantine(self, log, seg: Segment) -> bool:
        """A readonly log met damage: its owner may have quarantined it since (file replaced,
        gap recorded). Pick both up; True if a gap was new (read again)."""
        gaps = load_gaps(log.path)
        if gaps.items() <= log._segs.gaps.items():
            return False
        with log._lock:
            log._segs.gaps.update(gaps)
            seg.release_files()  # (the replaced file is opened anew)
            seg.size = seg.file_size() if seg is not log._segs.active else min(seg.size, seg.file_size())
            seg.rebuild_indexes()
            self.forget()
        return True

    def read_batches(self, log, offset: int, *, max_bytes: int = 1 << 20, mapped: bool = False,
                     within_segment: bool = False) -> list[RecordBatch]:
        """``Log.read_batches``."""
        with log._lock:
            if log._closed:
                raise LogClosedError(f"log {log.path} is closed")
            self._check_read_offset_locked(log, offset)
            out: list[RecordBatch] = []
            if offset >= log._written_end:
                if offset < log._next_offset:
                    out.append(log._buf.batch_from(offset - log._written_end, offset))
                return out
            segs = log._segs.with_ends(log._written_end)
            written_end = log._written_end
        total = 0
        i = max(0, bisect.bisect_right([s.base_offset for s, _ in segs], offset) - 1)
        while i < len(segs) and total < max_bytes and offset < written_end:
            seg = segs[i][0]
            try:
                batches, next_pos = self._batches_at(log, seg, offset, max_bytes - total, self._hint(seg, offset),
                                                     mapped)
            except CorruptRecordError:
                if out:
                    break
                raise
            except FileNotFoundError:
                if out:
                    break
                raise self._segment_gone(log, offset) from None
            if not batches:
                try:
                    self._check_missing(log, seg, offset, segs[i][1])
                except CorruptRecordError:
                    if out:
                        break
                    raise
                i += 1
                continue
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
                self.hint = (seg, offset, next_pos)
            if total >= max_bytes or within_segment:
                break
        return out

    def scan_batches(self, log, offset: int, end_offset: int | None = None, *, maps=None) -> Iterator[RecordBatch]:
        """``Log.scan_batches``: ``mapped_batches`` per segment; where it stops (the buffer, a
        gap, damage, a deleted segment) one ``read_batches`` takes over for that offset."""
        skip = log.recovery == "skip"
        while end_offset is None or offset < end_offset:
            with log._lock:
                if log._closed:
                    raise LogClosedError(f"log {log.path} is closed")
                self._check_read_offset_locked(log, offset)
                if offset >= log._next_offset:
                    return
                seg = None
                if offset < log._written_end:
                    seg, seg_end = log._segs.find(offset, log._written_end)
                    written_end = log._written_end
            if seg is not None:
                try:
                    found = seg.find_batch(offset, skip=skip)
                    batches = mapped_batches(seg, *found, maps) if found is not None else ()
                except (CorruptRecordError, FileNotFoundError):
                    batches = ()  # (read_batches below reports it)
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
                    continue
            batches = log.read_batches(offset, max_bytes=1, mapped=True)
            if not batches:
                return
            yield from batches
            offset = batches[-1].next_offset

    def wait_for(self, log, offset: int, timeout: float | None) -> bool:
        """``Log.wait_for``."""
        if log.readonly:
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                log.refresh()
                if log._next_offset > offset:
                    return True
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                time.sleep(min(0.05, left) if left is not None else 0.05)
        with log._lock:
            if log._next_offset > offset:
                return True
            log._read_waiters += 1
            try:
                log._appended.wait_for(lambda: log._next_offset > offset or log._closed, timeout)
            finally:
                log._read_waiters -= 1
            return log._next_offset > offset

    def offset_for_time(self, log, timestamp_ms: int) -> int | None:
        """``Log.offset_for_time``."""
        with log._lock:
            segs = list(log._segs.all)
            buffered = [(log._written_end + k, t) for k, t in enumerate(log._buf.timestamps)]
        for seg in segs:
            found = first_offset_at_time(seg, timestamp_ms, log._start_offset)
            if found is not None:
                return found
        for off, t in buffered:
            if t >= timestamp_ms:
                return off
        return None

    def max_timestamp(self, log) -> tuple[int, int] | None:
        """``Log.max_timestamp``."""
        with log._lock:
            segs = list(log._segs.all)
            buffered = [(log._written_end + k, t) for k, t in enumerate(log._buf.timestamps)]
        best, seg = -1, None
        for s in segs:
            m = segment_max_timestamp(s)
            if m > best:
                best, seg = m, s
        newest = max((t for _, t in buffered), default=-1)
        if newest > best:  # (unwritten records, acknowledged: readable)
            return next(off for off, t in buffered if t == newest), newest
        found = None if seg is None else first_offset_at_time(seg, best, log._start_offset)
        return None if found is None else (found, best)
