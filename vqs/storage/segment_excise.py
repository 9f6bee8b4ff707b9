"""Quarantining a corrupt batch: cutting bytes out of a segment's log file
(recovery="skip" at open, recovery.py; damage a read finds, log_repair.py).

Crash reasoning: the bad bytes go to ``quarantine/`` first (atomically), then
the segment is rewritten without them into ``*.excise.tmp`` (fsynced) and
renamed over the log file (directory fsynced). A crash before the rename
leaves the old file (the damage is met again, the copy is harmless) and a
temp file open removes; after it, the new file, whose gap the quarantine
file's name records (log_dir.py ``load_gaps``).
"""

from __future__ import annotations

import os

from . import fs
from .durable_file import atomic_write, fsync_dir
from .record_batch import verify_batch
from .segment import SCAN_CHUNK, Segment, segment_name


def excise(seg: Segment, start: int, stop: int, quarantine_dir: str, gap_from: int,
           gap_to: int | None = None) -> None:
    """Remove bytes [start, stop) (a corrupt batch) from ``seg``'s log file: they
    are copied to ``quarantine_dir`` first, then the segment is rewritten without
    them (temp file, fsync, rename, fsync dir). The offsets they held become a
    gap, up to the batch at ``stop`` (or ``gap_to``: the next segment's base,
    when the damage runs to the end of a sealed segment)."""
    os.makedirs(quarantine_dir, exist_ok=True)
    bad = seg.pread(start, stop - start)
    # The offsets [gap_from, gap_to) are lost; the name records the gap so that
    # later scans accept exactly this discontinuity and no other.
    after = verify_batch(seg.pread(stop, 64 << 20), 0) if stop < seg.size else None
    if after is not None:
        gap_to = after.base_offset
    qname = f"{segment_name(seg.base_offset)}-{start}-{gap_from}-{gap_to if gap_to is not None else 'end'}.bad"
    atomic_write(os.path.join(quarantine_dir, qname), bad)
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
    seg.file_replaced()  # the old file: reopened on next use
