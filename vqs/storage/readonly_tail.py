"""Following a log another process owns (``readonly=True``): it never writes a file; its end
is the consistent prefix of the last segment; ``refresh`` picks up segments the owner rolled
to, forgets those retention deleted, and reopens sealed ones its cleaner replaced.

Invariants: the end only moves forward; a segment's ``size`` is a snapshot at a batch
boundary; a damaged index is not rebuilt but no longer used (lookups scan).
"""

from __future__ import annotations

import os

from .log_compaction import has_clean_point
from .log_dir import list_segment_bases
from .recovery import SegmentFactory
from .segment import Segment

#: (last segment, file position, next offset): where the next search for the tail continues
TailHint = tuple[Segment, int, int]


def open_segments(path: str, make_segment: SegmentFactory, bases: list[int] | None = None) -> list[Segment]:
    """The segments in ``path`` (or at ``bases``), all sealed from the reader's
    view; those the owner's retention deleted meanwhile are left out."""
    segments = []
    for base in list_segment_bases(path) if bases is None else bases:
        try:
            segments.append(make_segment(base, active=False))
        except FileNotFoundError:
            pass
    return segments


def _cleaned(path: str, segments: list[Segment], bases: list[int]) -> bool:
    """Whether the owner's cleaner changed a sealed segment since we opened it (one gone from
    the middle, or a size not ours); only compacted logs pay a stat per segment."""
    if not has_clean_point(path):
        return False
    present = set(bases)
    for seg in segments[:-1]:
        if seg.base_offset not in present:
            return True
        try:
            if os.stat(seg.log_path).st_size != seg.size:
                return True
        except FileNotFoundError:
            return True
    return False


def find_tail(seg: Segment, hint: TailHint | None) -> TailHint:
    """The consistent prefix of ``seg``, the last segment (from ``hint`` if it names it);
    updates ``seg.size``, ``seg.next_offset`` and its largest timestamp."""
    if hint is not None and hint[0] is seg:
        pos, nxt = hint[1], hint[2]
    else:
        pos, nxt = seg.position_for(seg.base_offset + (1 << 32) - 1)
        if pos and next(seg.iter_valid(pos, expected=nxt), None) is None:
            # the index entry names no batch: damaged; stop using it
            seg.rebuild_indexes()
            pos, nxt = seg.position_for(seg.base_offset + (1 << 32) - 1)
    end_pos = pos
    for info in seg.iter_valid(pos, expected=nxt):
        end_pos = info.position + info.size
        nxt = info.next_offset
        seg.max_timestamp_ms = max(seg.max_timestamp_ms, info.max_timestamp_ms)
    if end_pos == 0 and pos == 0:
        nxt = seg.base_offset
    seg.size = end_pos
    seg.next_offset = nxt
    return seg, end_pos, nxt


def follow_segments(path: str, segments: list[Segment], make_segment: SegmentFactory) -> bool:
    """Update ``segments`` in place to the owner's files; False (nothing changed) if there
    is no segment at all."""
    bases = list_segment_bases(path)
    if not bases:
        return False
    known = {s.base_offset for s in segments}
    while len(segments) > 1 and segments[0].base_offset < bases[0]:
        segments.pop(0).forget()  # not close(): a read of ours may be in flight on it
    if len(segments) > 1 and _cleaned(path, segments, bases):
        for seg in segments[:-1]:
            seg.forget()
        segments[:-1] = open_segments(path, make_segment, [b for b in bases if b < segments[-1].base_offset])
    new = [b for b in bases if b > segments[-1].base_offset and b not in known]
    if new:
        # the segment that was last is complete now: it may have grown since our snapshot
        was_last = segments[-1]
        segments += open_segments(path, make_segment, new)
        if segments[-1] is not was_last:
            was_last.size = was_last.file_size()
            was_last.next_offset = None
    return True
