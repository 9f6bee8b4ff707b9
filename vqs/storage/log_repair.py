"""Damage found after open (below the recovery point, where recovery.py did not look): the
log's ``recovery`` policy, applied by the process that owns the log:

- ``skip``: the read quarantines the batch and reads on (segment_excise.py, as recovery
  does), once: later reads, opens and other processes' readers see the gap. A damaged batch
  in the active segment is first sealed by a roll.
- ``truncate``: ``Log.repair(error)`` cuts the log at the damaged batch (later segments and
  the write buffer go; the end moves back). Not done by the read: it takes back offsets
  handed to writers, so their owner calls it when none are in flight. Until then reads raise.
- ``fail``: the read raises CorruptRecordError naming the file and position.

Crash safety of truncate: (1) the recovery point is lowered to the damaged segment's base;
(2) later segments are deleted newest first; (3) the segment is cut and fsynced. A crash
before (3) leaves the damage at or past the recovery point, where open applies the policy.
"""

from __future__ import annotations

import logging
import os
import time

from ..errors import CorruptRecordError, VQSError
from .log_dir import QUARANTINE_DIR
from .segment import Segment
from .segment_excise import excise

logger = logging.getLogger("vqs.storage")

#: how long ``repair`` (truncate) waits for appends in flight to finish
QUIESCE_S = 10.0


def find_damage(seg: Segment) -> tuple[int, int, int | None] | None:
    """The first damaged batch of ``seg`` (``Segment.validate``), None if every
    batch is valid. A full scan (a rare event: damage was reported)."""
    found = seg.validate(seg.base_offset)
    return None if found[0] >= seg.size else found


def repair(log, error: CorruptRecordError) -> bool:
    """``Log.repair`` (its doc); appends in flight get QUIESCE_S to finish."""
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
        # truncate: no fsync or group commit in flight (its appenders would be told of
        # offsets the cut takes back)
        deadline = time.monotonic() + QUIESCE_S
        while log._sync.syncing or log._group.leading:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            log._sync.done.wait(min(left, 0.05))
        return _truncate_locked(log, seg)


def quarantine_found(log, seg: Segment) -> bool:
    """A read met damage in ``seg`` under ``skip``: quarantine it; False if that could not
    be done (no space for the rewritten segment: the read steps over it)."""
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
        # sealed first: no append lands in the file being rewritten
        log._write_buffer_locked()
        log._roll_locked()
    i = log._segs.all.index(seg)
    stop = resync if resync is not None else seg.size
    # damage up to the segment's end: the gap runs to the next segment's base
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
        # (1), (2), (3): module doc
        log._sync.checkpoint.lower_to(seg.base_offset, min(log._start_offset, cut))
        log._segs.drop_after(i)
        if not seg.writable:
            seg.close()
            seg = log._segs.make(seg.base_offset, active=True)
            segs[i] = seg
            seg.recover(seg.base_offset)
        seg.truncate(bad)
    except OSError as e:
        # half done in memory: latched (the next open recovers)
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
