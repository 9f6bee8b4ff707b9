"""Deleting whole segments, under the log's lock: retention by age (``retention_ms``, by a
segment's newest record) then size (``retention_bytes``), and ``delete_before`` (a consumed
prefix: queues, HybridQueue).

Invariants:
- only a prefix goes, oldest first (segments.py);
- the active segment is rolled first, when worth its fsyncs: for ``delete_before`` once it
  holds a quarter of ``segment_bytes``, and whatever its size when wholly consumed (or
  expired) while space is short, so a drained log gives its space back on a filesystem
  smaller than a segment. A roll that finds no room is tried again (``consumed_left``).
"""

from __future__ import annotations

from ..disk import fs
from ..errors import DiskFullError
from .durable_file import fsync_dir
from .segment import Segment
from .segment_reads import segment_max_timestamp


def segments_past_retention(
    segments: list[Segment], retention_ms: int | None, retention_bytes: int | None, now_ms: int
) -> int:
    """How many leading ``segments`` are past retention at ``now_ms``."""
    n = 0
    last = len(segments) - 1
    if retention_ms is not None:
        while n < last and segment_max_timestamp(segments[n]) < now_ms - retention_ms:
            n += 1
    if retention_bytes is not None:
        total = sum(s.size for s in segments[n:])
        while n < last and total - segments[n].size >= retention_bytes:
            total -= segments[n].size
            n += 1
    return n


def delete_before_locked(log, offset: int, again: bool) -> int:
    """``Log.delete_before`` once the log is writable; ``again``: retry a consumed roll that
    found no room although the start does not move."""
    offset = min(offset, log._next_offset)
    if offset <= log._start_offset and not again:
        return 0
    if offset > log._written_end:
        try:
            log._write_buffer_locked()
        except DiskFullError:
            # a full disk: delete what is written (that frees space)
            offset = log._written_end
            if offset <= log._start_offset:
                return 0
    segs = log._segs
    if offset >= log._written_end and segs.all[-1].size and _roll_worth_it(log):
        _roll_now(log)
    n = 0
    while len(segs.all) > 1 and segs.bases[1] <= offset:
        _delete_first(log)
        n += 1
    if n:
        log._sync.forget_below(segs.bases[0])
    log._start_offset = offset
    log._reads.run = None
    log._sync.try_checkpoint(offset)
    return n


def consumed_left(log) -> bool:
    """Whether segments wholly below the start are still there (a consumed active segment
    whose roll found no room) and worth a roll, so ``delete_before(start)`` tries again."""
    segs = log._segs
    if not ((segs.all[-1].size and log._written_end <= log._start_offset)
            or (len(segs.all) > 1 and segs.bases[1] <= log._start_offset)):
        return False
    return _roll_worth_it(log)


def due(log, now_ms: int) -> bool:
    """Whether ``apply_retention`` has anything to delete."""
    return bool(segments_past_retention(log._segs.all, log.retention_ms, log.retention_bytes, now_ms)
                ) or _active_expired_short(log, now_ms)


def apply_locked(log, now_ms: int) -> int:
    """``Log.apply_retention`` once the log is writable (also after a roll)."""
    rolled = _roll_expired(log, now_ms)
    segs = log._segs
    n = segments_past_retention(segs.all, log.retention_ms, log.retention_bytes, now_ms)
    for _ in range(n):
        _delete_first(log)
    if n:
        log._start_offset = max(log._start_offset, segs.bases[0])
        fsync_dir(log.path)
        log._sync.try_checkpoint(log._start_offset)
    return n + rolled


def _delete_first(log) -> None:
    """Delete the oldest segment (the governor reads free space again)."""
    seg = log._segs.pop_first()
    log._grant.space.freed()
    log._reads.forget_segment(seg)


def _roll_worth_it(log) -> bool:
    """Whether a wholly consumed active segment is worth rolling to delete it (a queue that
    drains often would otherwise roll at every drain)."""
    size = log._segs.all[-1].size
    return size >= log.segment_bytes // 4 or log._space.short_of_space(size)


def _active_expired_short(log, now_ms: int) -> bool:
    """Whether the active segment is all past ``retention_ms`` while space is short (rolled
    so retention can delete it, or the topic stays full)."""
    seg = log._segs.all[-1]
    if log.retention_ms is None or seg.size == 0 \
            or segment_max_timestamp(seg) >= now_ms - log.retention_ms:
        return False
    return log._space.short_of_space(seg.size)


def _roll_expired(log, now_ms: int) -> int:
    """Roll an expired active segment on a full disk; 1 when rolled."""
    if not _active_expired_short(log, now_ms):
        return 0
    if log._written_end < log._next_offset:
        try:  # buffered records first, as delete_before
            log._write_buffer_locked()
        except DiskFullError:
            pass  # (the roll takes it along)
        if not _active_expired_short(log, now_ms):
            return 0  # they are within retention: the segment stays
    return int(_roll_now(log))


def _roll_now(log) -> bool:
    """Roll the active segment for deletion (a failed write's tail cut first); False when
    it found no space."""
    seg = log._segs.all[-1]
    if seg.cut_pending:
        try:
            seg.cut_tail()
        except OSError:
            return False
    try:
        return log._roll_locked()
    except OSError as e:
        if e.errno in fs.NO_SPACE:
            log._grant.space.short()
            return False
        raise
