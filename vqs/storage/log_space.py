"""The log against free space: what the governor (vqs/disk/space.py) counts as the log's (``Grant``)
and why appends are refused for space (``SpaceGate``, asked while the log is ``_blocked``).

Invariants (under the log's lock):
- bytes are admitted when they are buffered (once per batch): what was accepted is written
  even under the floor (the floor's room is for it); an acknowledged record is never refused
  later, a refused one never written;
- a refusal sets ``low``: later appends ask for room before they buffer anything;
- after a write found no space (ENOSPC/EDQUOT: ``short``, soft) appends are refused until
  the buffer is written, or, with nothing buffered, free space is seen again
  (``space_back``); the first successful write clears it;
- space comes back only by ``unlink`` (retention.py).
"""

from __future__ import annotations

import errno
import os

from ..disk import floor_of, free_bytes
from ..errors import DiskFullError
from .log_settings import check_int

#: after a write found no space: free space wanted beyond an append's bytes
SHORT_MARGIN = 64 << 10

AHEAD_MARGIN = 16


class Grant:
    """What the governor counts as one log's: ``buffer``, granted for the write buffer,
    spent as batches are written, the rest given back (``settle``); ``indexes``, the active
    segment's, until allocated at its first write. ``floor`` is 0 while closing.

    ``written``: granted bytes that reached the file since the governor was last told (at
    the take or settle of the same append, under the lock the governor takes then anyway:
    one lock fewer per append). Until then the governor counts them as unwritten, which
    can refuse early, never admit too much."""

    __slots__ = ("space", "floor", "control", "buffer", "indexes", "written")

    def __init__(self, space, floor: int, control: bool) -> None:
        self.space = space      # None: readonly
        self.floor = floor
        self.control = control
        self.buffer = 0
        self.indexes = 0
        self.written = 0

    def take_upto(self, more: int, step: int, seg, path: str, index_bytes: int) -> None:
        """``more`` bytes for the buffer, and up to ``step`` when the governor allows;
        DiskFullError when it refuses even ``more``. The active segment ``seg``'s indexes
        (``index_bytes``) are counted from its first take on (a control write)."""
        if not self.indexes and not seg.indexes_allocated and not os.path.exists(seg.index_path):
            self.count_indexes(index_bytes, path)  # (a reopened segment's are allocated already)
        written, self.written = self.written, 0
        self.buffer += self.space.take(more, self.floor, path, step, seg.log_path, self.control, written)

    def hand_over(self, claim, need: int) -> None:
        """A caller's ``space.Claim`` becomes the grant, up to ``need``."""
        self.buffer += claim.hand_over(self.control, need - self.buffer)

    def count_indexes(self, n: int, path: str) -> None:
        """The active segment's indexes (``n`` bytes) are this log's (never refused)."""
        self.space.take(n - self.indexes, 0, path, control=self.control)
        self.indexes = n

    def wrote(self, nbytes: int, seg) -> None:
        """A batch of ``nbytes`` is in segment ``seg``'s file: spent from the grant."""
        g = self.buffer - nbytes
        if g >= 0:
            self.written += nbytes
            self.buffer = g
        else:  # (the bound covers every batch: never, but counted if so)
            self.written += self.buffer
            self.space.spend(-g)
            self.buffer = 0
        if self.indexes and seg.indexes_allocated:
            self.written += self.indexes  # (allocated now: the next reading shows them)
            self.indexes = 0

    def ahead(self, nbytes: int) -> bool:
        """Whether a segment may be allocated ``nbytes`` ahead of its writes: only while free
        space exceeds the floor by ``AHEAD_MARGIN`` such steps, so that it never competes
        with appends near a full disk."""
        return self.space is not None and self.space.ahead(nbytes, self.floor + AHEAD_MARGIN * nbytes)

    def settle(self, keep: bool = False) -> None:
        """The buffer is written: the governor is told what was (``written``), and the
        grant's rest goes back unless ``keep``."""
        rest = 0 if keep else self.buffer
        if rest or self.written:
            self.space.give(rest, self.written)
            self.buffer -= rest
            self.written = 0

    def room(self, need: int, path: str) -> bool:
        """Whether the governor has ``need`` bytes over the floor."""
        return self.space.room(self.floor + need, path, self.control)

    def release(self, dropped: bool = False) -> None:
        """Close: everything goes back (``dropped``: the log was collected unclosed)."""
        if self.space is not None and (self.buffer or self.indexes or self.written):
            if dropped:
                self.space.dropped(self.buffer + self.indexes, self.written)
            else:
                self.space.give(self.buffer + self.indexes, self.written)
            self.buffer = self.indexes = self.written = 0


class SpaceGate:
    """Why the log refuses appends for space: ``low``, the governor refused; ``short``, the
    errno of a write that found no space (0: none). Owns the log's ``grant``."""

    __slots__ = ("path", "grant", "low", "short")

    def __init__(self, path: str, control: bool) -> None:
        self.path = path
        self.grant = Grant(None, 0, control)
        self.low = False
        self.short = 0

    def admit(self, buffered: int, nbytes: int, file: str) -> None:
        """While ``low``: refuse ``nbytes`` more on ``buffered`` (DiskFullError) unless the
        grant covers them or the governor has room again."""
        grant = self.grant
        need = buffered + nbytes
        if grant.buffer >= need:
            return
        if not grant.room(need, self.path):
            floor = grant.floor
            raise DiskFullError(f"write to {file} refused: less than {floor + nbytes} bytes free on its "
                                f"filesystem over min_free_bytes={floor} (room kept for deletes, "
                                f"checkpoints and buffered records); appends resume once there is room",
                                path=file)
        self.low = False

    def space_back(self, nbytes: int, file: str) -> None:
        """While ``short`` with nothing buffered: refuse ``nbytes`` (DiskFullError) unless
        free space holds them plus SHORT_MARGIN."""
        try:
            free = free_bytes(self.path)
        except OSError:
            return  # let the write tell
        if free < nbytes + SHORT_MARGIN:
            raise DiskFullError(f"write to {file} refused: the disk is full ({free} bytes free on its "
                                f"filesystem; appends resume once there is room)", path=file)

    def found_short(self, seg, e: OSError) -> DiskFullError:
        """A batch write to ``seg`` found no space (``e``); the error to raise."""
        self.short = e.errno  # (EDQUOT: ``disk_full`` trusts no statvfs)
        self.grant.space.short()
        return DiskFullError(f"write to {seg.log_path} at position {seg.size} failed: "
                             f"the disk is full ({e.strerror})", path=seg.log_path)

    def short_of_space(self, active_size: int) -> bool:
        """Writes refused, the governor low, or less free than the floor and the active
        segment hold (retention.py rolls it early then)."""
        if self.short or self.low or self.grant.space.low:
            return True
        try:
            return free_bytes(self.path) < self.grant.floor + max(SHORT_MARGIN, active_size)
        except OSError:
            return False

    def disk_full(self) -> bool:
        """``Log.disk_full`` (its doc)."""
        if self.low:
            return True
        if not self.short:
            return False
        if self.short == errno.EDQUOT:
            return True  # a quota: the filesystem's free space may not show it
        try:
            return free_bytes(self.path) < self.grant.floor + SHORT_MARGIN
        except OSError:
            return True

    def set_floor(self, value: int | None) -> None:
        """``Log.min_free_bytes = value``; clears ``low``."""
        check_int("min_free_bytes", value, 0, optional=True)
        self.grant.floor = floor_of(self.grant.space, value, self.grant.control)
        self.low = False
