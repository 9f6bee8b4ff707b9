"""Damage found after open: the log's ``recovery`` policy applied when a read
meets a damaged batch, as recovery.py applies it at open.

Recovery at open validates only from the checkpoint's recovery point on
(recovery.py): a batch below it that was damaged on disk after it was
fsynced (a bit flip, a bad sector, a stray write) is met by a later read.
Then, in the process that owns the log (a readonly log changes no file):

- ``skip``: the read quarantines the damaged batch itself and reads on
  (``quarantine_found``, called by log_reads.py): its bytes are copied to
  ``quarantine/``, the gap is recorded in that file's name and the segment is
  rewritten without them (``segment_excise.excise``, the same path recovery at open
  takes). Once only: the next read, the next open, and readers in other
  processes (a readonly log, the Java reader) then see the same log, the gap
  and never the damage. A damaged batch in the active segment is first sealed
  by a roll, so the segment being rewritten takes no appends meanwhile.
- ``truncate``: ``Log.repair(error)`` (``repair``) cuts the log at the damaged batch: it
  and everything after it go (the later segments, the write buffer) and the
  end moves back to the damaged batch's first offset. The read does not do
  this by itself: the end moving back takes back offsets that writers were
  handed, so the one who owns them calls it when nothing of theirs is in
  flight (HybridQueue does, hybrid/disk_tier.py). Until then the read raises.
- ``fail``: the read raises CorruptRecordError naming the file and position.

Crash safety (a SIGKILL at any step leaves a log that opens):

- quarantine: the ``.bad`` file (whose name records the gap) is written
  atomically before the segment is replaced (temp file, fsync, rename, fsync
  dir). A crash between leaves the damage and the record of its gap: the next
  read or open quarantines it again (to the same file name); nothing else
  changed. A crash before the rename leaves a ``*.tmp`` that open removes.
- truncate: (1) the checkpoint's recovery point is lowered to the damaged
  segment's base offset first, so that recovery at the next open starts at
  that segment whatever step a crash interrupts; (2) the later segments are
  deleted newest first, so the files left always form a prefix of the log;
  (3) the segment is cut at the damaged batch (truncate, fsync). After a crash
  in (2) or before (3) the damage lies at or after the recovery point, where
  recovery at open sees it: a torn tail if nothing valid follows it (cut
  silently), else the ``recovery`` policy (``truncate`` finishes the cut,
  ``fail`` reports it). After (3) the log is the cut one.
"""

from __future__ import annotations

import logging
import os
import time

from ..errors import CorruptRecordError, VQSError
from .log_dir import QUARANTINE_DIR
from .record_batch import find_next_valid
from .segment import Segment
from .segment_excise import excise

logger = logging.getLogger("vqs.storage")

#: How long ``repair`` (truncate) waits for appends in flight (a group commit) to finish.
QUIESCE_S = 10.0


def find_damage(seg: Segment) -> tuple[int, int, int | None] | None:
    """The first damaged batch of ``seg``: (position, the offset expected there,
    position of the next valid batch or None); None if every batch is valid.
    A full scan of the segment (a rare event: damage was reported)."""
    valid, expected = 0, seg.base_offset
    for info in seg.iter_valid(0, seg.size, expected=seg.base_offset):
        valid, expected = info.position + info.size, info.next_offset
    if valid >= seg.size:
        return None
    rest = seg.pread(valid, min(seg.size - valid, 256 << 20))
    r = find_next_valid(rest, 1, expected)
    return valid, expected, None if r is None else valid + r


def repair(log, error: CorruptRecordError) -> bool:
    """Apply the log's ``recovery`` policy to the damage a read reported
    (``error`` names the segment file): ``skip`` quarantines the damaged
    batch (its offsets become a gap), ``truncate`` cuts the log there (that
    batch and everything after it go, the write buffer included; the end
    moves back). Returns True when the log changed or the damage is gone
    (read again), False under ``fail``, for a readonly log, or when
    appends in flight did not finish within QUIESCE_S. Crash-safe (module
    doc)."""
    if log.readonly or log.recovery == "fail":
        return False
    with log._lock:
        seg = next((s for s in log._segs.all if s.log_path == error.path), None)
        if seg is None:
            return True  # deleted since (retention): nothing left to repair
        log._check_writable()
        if log.recovery == "skip":
            log._sync.wait_idle()
            return _quarantine_locked(log, seg)
        # truncate: no fsync and no group commit in flight (its appenders
        # would be told of offsets the cut takes back)
        deadline = time.monotonic() + QUIESCE_S
        while log._sync.syncing or log._group.leading:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            log._sync.done.wait(min(left, 0.05))
        return _truncate_locked(log, seg)


def quarantine_found(log, seg: Segment) -> bool:
    """A read met damage in ``seg`` under ``skip``: quarantine it (module
    doc). False if it could not be done (then the read steps over it, as
    before: e.g. no space for the rewritten segment)."""
    try:
        with log._lock:
            if log._closed or seg not in log._segs.all:
                return seg not in log._segs.all  # gone: the read finds that out
            log._sync.wait_idle()
            log._check_writable()
            return _quarantine_locked(log, seg)
    except (OSError, VQSError) as e:
        logger.warning("%s: damaged batch could not be quarantined (%s); stepping over it", seg.log_path, e)
        return False


def _quarantine_locked(log, seg: Segment) -> bool:
    found = find_damage(seg)
    if found is None:
        return True  # another reader quarantined it meanwhile
    bad, gap_from, resync = found
    if seg is log._segs.active:
        # The active segment: sealed first (a roll), so that no append
        # lands in the file being rewritten.
        log._write_buffer_locked()
        log._roll_locked()
    i = log._segs.all.index(seg)
    stop = resync if resync is not None else seg.size
    # Damage up to the segment's end: the gap runs to the next segment
    # (there is one: the active segment was rolled above).
    gap_to = None if resync is not None else log._segs.bases[i + 1]
    logger.warning("%s: invalid batch at position %d (offset %d) found by a read; quarantined %d bytes "
                   "(recovery='skip')", seg.log_path, bad, gap_from, stop - bad)
    excise(seg, bad, stop, os.path.join(log.path, QUARANTINE_DIR), gap_from=gap_from, gap_to=gap_to)
    seg.rebuild_indexes()  # positions after the cut moved
    log._reads.forget()
    log.quarantined_batches += 1
    return True


def _truncate_locked(log, seg: Segment) -> bool:
    found = find_damage(seg)
    if found is None:
        return True
    bad, cut, _ = found
    segs = log._segs.all
    i = segs.index(seg)
    logger.warning("%s: invalid batch at position %d (offset %d) found by a read; truncating the log "
                   "there, %d later segment(s) deleted (recovery='truncate')",
                   seg.log_path, bad, cut, len(segs) - i - 1)
    try:
        # (1) recovery at the next open starts at this segment (module doc)
        log._sync.checkpoint.lower_to(seg.base_offset, min(log._start_offset, cut))
        # (2) the later segments, newest first: what is left is a prefix
        log._segs.drop_after(i)
        # (3) cut, as the active segment
        if not seg.writable:
            seg.close()
            seg = log._segs.make(seg.base_offset, active=True)
            segs[i] = seg
            seg.recover(seg.base_offset)
        seg.truncate(bad)
    except OSError as e:
        # half done in memory: latched (the files are safe, the next open recovers)
        log._failed = e
        log._blocked = True
        raise
    log._buf.reset()
    end = seg.next_offset
    log._written_end = log._next_offset = end
    log._sync.durable_end = min(log._sync.durable_end, end)
    log._start_offset = min(log._start_offset, end)
    log._sync.unsynced = [s for s in log._sync.unsynced if s in segs and s is not seg]
    log._reads.forget()
    seg.created_ms = log._now_ms()
    log._buf.settle(log._flush_always)
    return True
