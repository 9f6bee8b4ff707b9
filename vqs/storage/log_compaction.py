"""The log's side of compaction (cleaner.py): which segments a cleaner may read,
and the one step that replaces a run of them under the log's lock.

Invariants: only sealed segments whose every record is fsynced (below
``_sync.durable_end``, none waiting for its background fsync) are offered; a
replacement happens under ``_lock`` and only while the run is still the log's
(retention or a close since the cleaner read it: nothing changes), so reads
and appends see either the old segments or the cleaned one.
"""

from __future__ import annotations

from .segment import Segment


class LogCompaction:
    """Methods of ``Log`` for the cleaner (see module doc)."""

    __slots__ = ()

    def sealed_segments(self) -> tuple[list[Segment], list[int]]:
        """(segments, end offsets): the sealed, fsynced prefix of the log's segments; a
        segment's end is the next one's base (its last batch may end before it)."""
        with self._lock:
            if self._closed or self.readonly or self._failed is not None:
                return [], []  # (nothing to clean; the clean-shutdown marker stays until a swap)
            segs = self._segments
            pending = {id(s) for s in self._sync.unsynced}
            n = 0
            while (n < len(segs) - 1 and self._base_offsets[n + 1] <= self._sync.durable_end
                   and id(segs[n]) not in pending):
                n += 1
            return list(segs[:n]), list(self._base_offsets[1 : n + 1])

    def replace_sealed(self, old: list[Segment], commit, finish) -> bool:
        """Replace the consecutive sealed segments ``old`` by the one segment that
        ``commit()`` (cleaner.py's commit point) and then ``finish()`` (the renames and
        unlinks) put in the files of ``old[0]``; False, with nothing done, unless ``old``
        are still the log's. An error that leaves a committed swap on disk (``finish``'s,
        or a ``commit`` that could not take its swap back: marked ``swap_left``) latches
        the log failed, as EIO does: only its next open completes the swap
        (cleaner.finish_swaps), before anything else changes its segments."""
        with self._lock:
            if self._closed or self._failed is not None:
                return False
            try:
                i = next(j for j, s in enumerate(self._segments) if s is old[0])
            except StopIteration:
                return False
            k = i + len(old)
            if k >= len(self._segments) or any(a is not b for a, b in zip(self._segments[i:k], old)):
                return False
            self._check_writable()  # (the clean-shutdown marker goes before any file changes)
            try:
                commit()
                finish()
            except OSError as e:
                if getattr(e, "swap_left", False) or getattr(e, "committed", False):
                    self._failed = e
                    self._blocked = True
                raise
            new = self._segment(old[0].base_offset, active=False)
            for s in old:
                s.forget()
                self._reads.forget_segment(s)
            self._segments[i:k] = [new]
            self._base_offsets[i:k] = [new.base_offset]
            self._reads.forget()
            return True
