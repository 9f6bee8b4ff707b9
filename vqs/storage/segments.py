"""The ordered list of a log's segments, the last one active (``Log._segs``; Kafka's
``LogSegments`` with ``LocalLog``'s roll and deletion).

Invariants (under the log's lock):
- ``all`` is never empty, changes in place and only at its ends; ``all[-1]`` is active
  (unless readonly); ``bases[i] == all[i].base_offset``, strictly increasing;
- crash order: a roll creates the next file and fsyncs the directory before it takes
  appends; deletion of a prefix unlinks oldest first (a crash leaves a suffix: no offset is
  reused); a truncating repair deletes a suffix newest first (``drop_after``);
- ``gaps`` ({expected offset: base offset that may follow it}, from quarantine/) is one
  dict shared with every segment; ``gap_recorded`` is the one rule for offsets no batch
  holds (recovery and reads ask it).
"""

from __future__ import annotations

import bisect

from .durable_file import fsync_dir
from .log_compaction import has_clean_point
from .log_dir import load_gaps, load_tail_gaps
from .segment import Segment


def index_capacity(segment_bytes: int, index_interval_bytes: int) -> int:
    """Bytes preallocated for an active segment's offset index (time index: 1.5x)."""
    return min(64 << 20, max(4096, (segment_bytes // max(index_interval_bytes, 256) + 16) * 8))


class Segments:
    __slots__ = ("path", "all", "bases", "gaps", "owner", "index_interval_bytes", "index_capacity_bytes")

    def __init__(self, path: str, *, owner: bool, segment_bytes: int, index_interval_bytes: int) -> None:
        self.path = path
        self.all: list[Segment] = []
        self.bases: list[int] = []
        self.gaps: dict[int, int] = {}
        self.owner = owner
        self.index_interval_bytes = index_interval_bytes
        self.index_capacity_bytes = index_capacity(segment_bytes, index_interval_bytes)

    def make(self, base: int, *, active: bool, create: bool = False) -> Segment:
        """Open (``create``: create) the segment at ``base`` with the log's settings."""
        return Segment(
            self.path, base, active=active, owner=self.owner, create=create, gaps=self.gaps,
            index_interval_bytes=self.index_interval_bytes, index_capacity_bytes=self.index_capacity_bytes,
        )

    def adopt(self, segments: list[Segment]) -> None:
        """Take ``segments`` as the list."""
        self.all[:] = segments
        self.rebase()

    def rebase(self) -> None:
        """``bases`` again after ``all`` changed in place."""
        self.bases[:] = [s.base_offset for s in self.all]

    @property
    def active(self) -> Segment:
        return self.all[-1]

    def gap_recorded(self, seg_base: int, start: int, end: int, reload: bool = False) -> bool:
        """May offsets ``start .. end - 1``, after the batches of the segment at ``seg_base``
        and before the next segment, be held by no batch? Yes for a recorded gap covering them
        (``reload``: read quarantine/ again first, as a readonly reader whose owner may have
        quarantined since), a quarantined segment tail (``...-{from}-end.bad``, ``from`` in
        that segment at or below ``start``) and a compacted log (a clean point: a cleaned
        segment may end early); anything else is damage. Reads files only past the first."""
        if any(a <= start and b >= end for a, b in self.gaps.items()):
            return True
        if has_clean_point(self.path):
            return True
        if reload and any(a <= start and b >= end for a, b in load_gaps(self.path).items()):
            return True
        return any(seg_base <= t <= start for t in load_tail_gaps(self.path))

    def find(self, offset: int, end: int) -> tuple[Segment, int]:
        """The segment holding ``offset`` and the end of its offsets (the next
        segment's base, or ``end`` for the active one)."""
        bases = self.bases
        i = bisect.bisect_right(bases, offset) - 1
        return self.all[max(i, 0)], bases[i + 1] if i + 1 < len(bases) else end

    def with_ends(self, end: int) -> list[tuple[Segment, int]]:
        """Every segment with the end of its offsets (a snapshot for reads outside the lock)."""
        return list(zip(self.all, self.bases[1:] + [end]))

    def roll(self, base: int) -> Segment:
        """Create the next active segment at ``base`` and seal the current one without an
        fsync (log_durability.py); returns the sealed one. OSError: nothing changed."""
        old = self.all[-1]
        new = self.make(base, active=True, create=True)
        old.seal(sync=False)
        fsync_dir(self.path)  # the new file's name is durable before it takes appends
        self.all.append(new)
        self.bases.append(base)
        return old

    def pop_first(self) -> Segment:
        """Delete the oldest segment's files (never the active one); returns it."""
        seg = self.all.pop(0)
        self.bases.pop(0)
        seg.delete()
        return seg

    def drop_after(self, i: int) -> None:
        """Delete the segments after the ``i``-th, newest first, before the ``i``-th is cut: a
        crash between leaves a prefix whose last segment still holds the damage, met again at
        the next open (after the cut, later segments' offsets would seem to follow it)."""
        for later in reversed(self.all[i + 1:]):
            later.delete()
        fsync_dir(self.path)
        del self.all[i + 1:]
        self.rebase()

    def size_bytes(self) -> int:
        return sum(s.size for s in self.all)

    def release_files(self) -> None:
        """Let go of every descriptor (reopened on use)."""
        for s in self.all:
            s.release_files()

    def close(self) -> None:
        for s in self.all:
            try:
                s.close()
            except OSError:
                pass
