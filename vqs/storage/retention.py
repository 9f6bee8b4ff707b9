"""Which whole segments retention deletes: by age (``retention_ms``, judged by a
segment's newest record) and by size (``retention_bytes`` of the whole log).

Invariants: only a prefix of the segments goes (the log's start offset moves
up to the first survivor); the active (last) segment never goes; time comes
first, then size is judged on what remains.
"""

from __future__ import annotations

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
