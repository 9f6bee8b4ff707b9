"""Quarantining a corrupt batch (recovery="skip": at open, recovery.py; found by a read,
log_repair.py): cutting its bytes out of a segment's log file.

Crash reasoning: the bad bytes go to ``quarantine/`` first (atomically), then the segment is
rewritten without them into ``*.excise.tmp`` (fsynced) and renamed over the log file. A
crash before the rename leaves the old file (the damage is met again, quarantined under the
same name) and a temp file open removes; after it, the new file, whose gap the quarantine
file's name records.
"""

from __future__ import annotations

import os

from ..disk import fs
from ..record import verify_batch
from .durable_file import atomic_write, fsync_dir
from .log_dir import QUARANTINE_DIR
from .segment import SCAN_CHUNK, Segment, segment_name


def excise(seg: Segment, start: int, stop: int, quarantine_dir: str, gap_from: int,
           gap_to: int | None = None) -> None:
    """Remove bytes [start, stop) from ``seg``'s log file (module doc). The offsets they held
    become a gap up to the batch at ``stop`` (or ``gap_to``, the next segment's base, when
    the damage runs to the end)."""
    os.makedirs(quarantine_dir, exist_ok=True)
    bad = seg.pread(start, stop - start)
    after = verify_batch(seg.pread(stop, 64 << 20), 0) if stop < seg.size else None
    if after is not None:
        gap_to = after.base_offset
    atomic_write(_quarantine_path(quarantine_dir, seg, start, gap_from, gap_to), bad)
    if gap_to is not None:
        seg.gaps[gap_from] = gap_to
    tmp = seg.log_path + ".excise.tmp"
    with open(tmp, "wb") as out:
        for a, b in ((0, start), (stop, seg.size)):
            pos = a
            while pos < b:
                chunk = seg.pread(pos, min(SCAN_CHUNK, b - pos))
                if not chunk:
                    break
                out.write(chunk)
                pos += len(chunk)
        out.flush()
        fs.fsync(out.fileno())
    fs.replace(tmp, seg.log_path)
    fsync_dir(seg.directory)
    seg.file_replaced()


def record_gap(log_dir: str, seg: Segment, gap_from: int, gap_to: int) -> None:
    """Record offsets ``gap_from .. gap_to - 1``, held by no batch, as a gap (recovery="skip"
    of a segment that ends before the next one's base, ``gap_to``): an empty quarantine file
    named as ``excise`` names one (nothing is cut: no bytes held them), written atomically;
    ``seg`` is the segment they follow."""
    quarantine_dir = os.path.join(log_dir, QUARANTINE_DIR)
    os.makedirs(quarantine_dir, exist_ok=True)
    atomic_write(_quarantine_path(quarantine_dir, seg, seg.size, gap_from, gap_to), b"")
    seg.gaps[gap_from] = gap_to


def _quarantine_path(quarantine_dir: str, seg: Segment, position: int, gap_from: int, gap_to: int | None) -> str:
    """``{base}-{position}-{from}-{to}.bad`` (docs/FORMAT.md; ``to`` is ``end`` when unknown):
    the name records the gap, so later scans accept exactly this discontinuity."""
    to = gap_to if gap_to is not None else "end"
    return os.path.join(quarantine_dir, f"{segment_name(seg.base_offset)}-{position}-{gap_from}-{to}.bad")

