"""Opening a log directory for writing (Kafka's ``LogLoader``; ``Log`` adopts the result).

Recovery at open (unless the clean-shutdown marker says the log was closed):

1. list the segment files; remove temp files;
2. read the checkpoint (recovery point: offsets below it were fsynced);
3. from the segment holding the recovery point on, validate batch by batch (bounds, CRC,
   increasing offsets) and rebuild the indexes;
4. an invalid batch with nothing valid after it, at or past the recovery point, is a torn
   tail: cut silently. Likewise a sealed segment whose batches end, at or past the recovery
   point, before the next segment's base (its unsynced end lost at a batch boundary): the
   later segments go. Anything else is corruption, handled by ``recovery``: ``fail``
   raises naming file and position, ``skip`` quarantines the batch (a gap; missing offsets
   between segments: a gap recorded with no bytes), ``truncate`` drops everything from it on;
5. fsync what was recovered (the caller then checkpoints).

Either way the log must end at or past the recovery point: every offset below it was
fsynced, so a log that ends below it (its last segment cut at a batch boundary, or deleted)
lost durable records. ``fail`` refuses to open, naming the last segment; ``skip`` and
``truncate`` open it as it is, with a warning.

After a clean close steps 3-4 are skipped: the last segment's end comes from its last index
entry (a short scan), or with ``defer_marker`` from the marker's record of the tail when the
file's size matches, so a reopen changes no file until the first write. Any doubt falls back
to full recovery.

Invariants of the result: the last segment is active, its ``next_offset`` the log's end; the
marker is gone before the log accepts an append.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..disk import fs
from ..errors import CorruptRecordError
from .durable_file import fsync_dir
from .log_dir import (
    CLEAN_MARKER,
    LEFTOVERS,
    QUARANTINE_DIR,
    list_segment_bases,
    load_gaps,
    read_checkpoint,
    read_clean_marker,
    remove_temp_files,
)
from .segment import Segment
from .segment_excise import excise, record_gap

if TYPE_CHECKING:
    from .segments import Segments

logger = logging.getLogger("vqs.storage")

#: make_segment(base_offset, active=..., create=...) -> Segment
SegmentFactory = Callable[..., Segment]


class LoadedLog:
    """What the loader hands the ``Log`` besides its segments."""

    __slots__ = ("start_offset", "quarantined_batches", "marker_kept", "recovery_point")

    def __init__(self, start_offset: int, quarantined_batches: int,
                 marker_kept: bool = False, recovery_point: int | None = None) -> None:
        self.start_offset = start_offset
        self.quarantined_batches = quarantined_batches
        self.marker_kept = marker_kept
        self.recovery_point = recovery_point


def adopt_loaded(log, loaded: LoadedLog) -> None:
    """The ``Log`` takes what the loader recovered: its end is the active segment's, every
    record below it durable. The checkpoint is written anew unless the marker was kept; on a
    full disk it waits (the old one stays valid): a full log must open to be drained."""
    log.quarantined_batches += loaded.quarantined_batches
    active = log._segs.all[-1]
    log._written_end = log._next_offset = log._sync.durable_end = active.next_offset
    log._start_offset = min(max(log._segs.bases[0], loaded.start_offset), log._next_offset)
    active.created_ms = log._now_ms()
    if loaded.marker_kept:
        log._sync.checkpoint.recovery_point = loaded.recovery_point
        log._clean_marker = log._blocked = True
    else:
        log._sync.try_checkpoint(log._start_offset, log._next_offset)
    log._segs.release_files()


class LogLoader:
    """Recovers the log in ``path`` into ``segs`` (on error those opened so far are there
    for the caller to close); ``recovery``: the corruption policy."""

    def __init__(self, path: str, recovery: str, segs: Segments, defer_marker: bool = False) -> None:
        self.path = path
        self.segs = segs
        self.defer_marker = defer_marker
        self.recovery = recovery
        self.make_segment = segs.make
        self.segments = segs.all  # filled in place
        self.quarantined_batches = 0

    def load(self) -> LoadedLog:
        try:
            names = os.listdir(self.path)  # one listing: segments, temp files, the marker
        except FileNotFoundError:
            os.makedirs(self.path)
            names = []
        if QUARANTINE_DIR in names:
            self.segs.gaps.update(load_gaps(self.path))
        clean = CLEAN_MARKER in names
        if not clean or not LEFTOVERS.isdisjoint(names):
            remove_temp_files(self.path, names)  # (a clean close leaves none)
        tail = read_clean_marker(self.path) if clean and self.defer_marker else None
        bases = list_segment_bases(self.path, names)
        marker = os.path.join(self.path, CLEAN_MARKER)
        segs = self.segments
        if not bases:
            recovery_point, log_start = read_checkpoint(self.path)
            segs.append(self.make_segment(log_start, active=True, create=True))
        else:
            segs.extend(self.make_segment(b, active=False) for b in bases[:-1])
            segs.append(self.make_segment(bases[-1], active=True))
            if tail is not None and segs[-1].adopt_tail(tail):
                tail_ok = True
                recovery_point, log_start = tail["recovery_point"], tail["log_start_offset"]
            else:
                recovery_point, log_start = read_checkpoint(self.path)
                tail_ok = clean and self._load_clean_tail()
            if tail_ok and self.defer_marker and recovery_point == segs[-1].next_offset:
                self.segs.rebase()
                return LoadedLog(log_start, 0, marker_kept=True, recovery_point=recovery_point)
            if not tail_ok:
                self._recover(recovery_point)
            self._check_end(recovery_point)
        if clean:
            fs.unlink(marker)
        fsync_dir(self.path)
        self.segs.rebase()
        return LoadedLog(log_start, self.quarantined_batches)

    def _load_clean_tail(self) -> bool:
        """After a clean close: the end of the last segment, scanned from its last index
        entry (not the index: loaded when a read needs it). False if anything is off."""
        seg = self.segments[-1]
        if seg.size == 0:
            seg.next_offset = seg.base_offset
            return True
        e = seg.peek_index_tail()
        if e is None:
            pos, expected = 0, seg.base_offset
        elif e is False:
            pos, expected = seg.position_for(seg.base_offset + (1 << 32) - 1)
        elif e[1] >= seg.size:
            logger.warning("%s: clean-shutdown marker present but its index points past the end; recovering",
                           seg.log_path)
            return False
        else:
            pos, expected = e[1], seg.base_offset + e[0]
        last = None
        for info in seg.iter_valid(pos, seg.size, expected=expected):
            last = info
            if info.position + info.size == seg.size:
                break
        if last is None or last.position + last.size != seg.size:
            logger.warning("%s: clean-shutdown marker present but tail invalid; recovering", seg.log_path)
            return False
        seg.resume_after(last, pos)
        return True

    def _check_end(self, recovery_point: int | None) -> None:
        """The log ends at or past its recovery point (the module's last rule)."""
        end = self.segments[-1].next_offset
        if recovery_point is None or end is None or end >= recovery_point:
            return
        where = (f"{self.segments[-1].log_path}: the log ends at offset {end}, below its recovery point "
                 f"{recovery_point}: fsynced records are missing (a segment cut short or deleted)")
        if self.recovery == "fail":
            raise CorruptRecordError(
                f"{where}; open with recovery='skip' or recovery='truncate' to open it as it is",
                path=self.segments[-1].log_path, position=self.segments[-1].size)
        logger.warning("%s; opened as it is (recovery=%r)", where, self.recovery)

    def _recover(self, recovery_point: int | None) -> None:
        """Steps 3-5 from the segment holding the recovery point on."""
        # Without a checkpoint nothing is known to be unsynced: a damaged end of
        # a sealed segment is then corruption, never a torn tail.
        known = recovery_point is not None
        recovery_point = recovery_point or 0
        segs = self.segments
        bases = [s.base_offset for s in segs]
        i = max(0, bisect.bisect_right(bases, recovery_point) - 1)
        expected = bases[i]
        while i < len(segs):
            seg = segs[i]
            valid, next_off, bad, resync = seg.recover(expected)
            is_last = i == len(segs) - 1
            if bad is None:
                seg.sync()
                expected = next_off
                i += 1
                if is_last:
                    continue
                nxt = segs[i].base_offset
                if next_off == nxt or (next_off < nxt and self.segs.gap_recorded(seg.base_offset, next_off, nxt)):
                    continue
                # its batches end before the next segment's base, and no gap is recorded
                where = f"{seg.log_path}: its batches end at offset {next_off}, the next segment begins at {nxt}"
                if known and next_off >= recovery_point:  # its unsynced end lost (as a torn tail)
                    logger.warning("%s: unsynced segment ended short; deleting the %d segments after it",
                                   where, len(segs) - i)
                    self.segs.drop_after(i - 1)
                    break
                if self.recovery == "fail":
                    raise CorruptRecordError(
                        f"{where}: offsets below the recovery point {recovery_point} are missing; open with "
                        "recovery='skip' to record them as a gap or recovery='truncate' to drop everything "
                        "from there on", path=seg.log_path, position=seg.size)
                if self.recovery == "truncate":
                    logger.warning("%s; truncating the log there (recovery='truncate')", where)
                    self.segs.drop_after(i - 1)
                    break
                logger.warning("%s; the offsets between recorded as a gap (recovery='skip')", where)
                record_gap(self.path, seg, next_off, nxt)
                continue
            # A torn tail: nothing valid follows, and it was never fsynced. A sealed segment
            # ends torn only after a power loss before its roll's background fsync; nothing
            # after it was acknowledged durable then (that fsync comes first): later
            # segments go too.
            torn = resync is None and next_off >= recovery_point and (is_last or known)
            where = f"{seg.log_path}: invalid batch at position {bad} (offset {next_off})"
            if torn:
                logger.info("%s: torn tail of %d bytes truncated", seg.log_path, seg.size - bad)
                if not is_last:
                    logger.warning("%s: unsynced segment ended torn; deleting the %d segments after it",
                                   seg.log_path, len(segs) - i - 1)
                    self.segs.drop_after(i)  # (newest first, before the cut: segments.py)
                seg.truncate(bad, may_defer=True)  # on a full disk: cut before the next append
                expected = seg.next_offset
                i += 1
                continue
            if self.recovery == "fail":
                raise CorruptRecordError(
                    f"{where} before the end of the log (recovery point {recovery_point}); "
                    "open with recovery='skip' to quarantine it or recovery='truncate' to "
                    "drop everything from it on",
                    path=seg.log_path, position=bad,
                )
            if self.recovery == "truncate":
                logger.warning("%s; truncating the log there (recovery='truncate')", where)
                self.segs.drop_after(i)  # (newest first, before the cut: segments.py)
                seg.truncate(bad)
                seg.sync()
                break
            # skip: quarantine the bad bytes, keep what follows
            stop = resync if resync is not None else seg.size
            logger.warning("%s; quarantined %d bytes (recovery='skip')", where, stop - bad)
            excise(seg, bad, stop, os.path.join(self.path, QUARANTINE_DIR), gap_from=next_off)
            self.quarantined_batches += 1
            # re-validate the same segment (there may be more damage)
        last = segs[-1]
        if not last.writable:
            base = last.base_offset
            last.close()
            segs[-1] = self.make_segment(base, active=True)
            bad = segs[-1].recover(expected if len(segs) == 1 else base)[2]
            if bad is not None:  # a cut the full disk deferred (Segment.truncate)
                segs[-1].truncate(bad, may_defer=True)
        fsync_dir(self.path)
