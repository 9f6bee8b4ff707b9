"""The log against free space: what the space governor (space.py) counts as
the log's (``Grant``, ``Log._grant``), and why appends are refused for space
(``SpaceGate``, ``Log._space``, asked before an append is buffered while the
log is ``_blocked``).

Invariants (under the log's lock):
- the governor admits bytes when they are buffered (once per batch): what
  was accepted is written even under the floor (the floor's room is for it);
- a refusal sets ``low`` (and ``_blocked``): later appends ask for room
  (``Space.room``) before they buffer anything, and clear it once it is back;
- after a write found no space (ENOSPC/EDQUOT: ``short``, soft) appends are
  refused before they are buffered until the buffer is written, or with
  nothing buffered free space is seen again (``space_back``): a refused
  record is never written later, and the buffer does not grow on a full
  disk. The first successful write clears it;
- space comes back only by ``unlink`` (``Space.freed``, retention.py).
"""

from __future__ import annotations

import errno

from ..errors import DiskFullError
from .log_settings import check_int
from .space import floor_of, free_bytes

#: after a write found no space: free space wanted beyond an append's bytes
#: before appends are taken again (and what ``disk_full`` calls no space)
SHORT_MARGIN = 64 << 10

#: Steps of room a filesystem must have over the floor for a segment to be allocated ahead.
AHEAD_MARGIN = 16


class Grant:
    """What the governor counts as one log's (module doc):

    - ``buffer``: granted for the write buffer (once per batch), spent as
      batches are written, the rest given back with the buffer (``settle``);
    - ``indexes``: the active segment's indexes, until allocated at its first write;
    - ``floor``: ``min_free_bytes`` at the governor (0 while closing);
      ``control``: control writes (a quarter of the floor).

    A log dropped unclosed gives it back when collected (``weakref.finalize``
    holds the grant, never the log).
    """

    __slots__ = ("space", "floor", "control", "buffer", "indexes")

    def __init__(self, space, floor: int, control: bool) -> None:
        self.space = space      # the governor of the log's filesystem; None: readonly
        self.floor = floor
        self.control = control
        self.buffer = 0
        self.indexes = 0

    def take_upto(self, more: int, step: int, path: str, file: str) -> None:
        """``more`` bytes for the buffer, and up to ``step`` when the governor allows."""
        self.buffer += self.space.take_upto(more, step, self.floor, path, file, self.control)

    def hand_over(self, claim, need: int) -> None:
        """A caller's ``space.Claim`` covers records it buffered (acknowledged):
        its bytes become the grant (``need``: what the grant must cover)."""
        self.buffer += claim.hand_over(self.control, need - self.buffer)

    def count_indexes(self, n: int, path: str) -> None:
        """The active segment's indexes (``n`` bytes) are this log's (a control
        write: never refused)."""
        self.space.take(n - self.indexes, 0, path, control=self.control)
        self.indexes = n

    def wrote(self, nbytes: int, seg) -> None:
        """A batch of ``nbytes`` is in segment ``seg``'s file: spent from the grant."""
        g = self.buffer - nbytes
        done = nbytes if g >= 0 else self.buffer
        if self.indexes and seg.indexes_allocated:
            done += self.indexes  # (allocated now: the next reading shows them)
            self.indexes = 0
        self.space.wrote(done)
        if g < 0:
            self.space.spend(-g)  # (the bound covers every batch: never, but counted if so)
            g = 0
        self.buffer = g

    def ahead(self, nbytes: int) -> bool:
        """Whether a segment may be given ``nbytes`` ahead of its writes: counted at the
        governor, and only while free space exceeds the floor by ``AHEAD_MARGIN`` steps, so
        room given ahead never competes with appends near a full disk."""
        return self.space is not None and self.space.ahead(nbytes, self.floor + AHEAD_MARGIN * nbytes)

    def settle(self) -> None:
        """The buffer is written: the grant's rest goes back."""
        if self.buffer:
            self.space.give(self.buffer)
            self.buffer = 0

    def room(self, need: int, path: str) -> bool:
        """Whether the governor has ``need`` bytes over the floor."""
        return self.space.room(self.floor + need, path, self.control)

    def release(self) -> None:
        """Close: everything goes back."""
        if self.space is not None and (self.buffer or self.indexes):
            self.space.give(self.buffer + self.indexes)
            self.buffer = self.indexes = 0

    def dropped(self) -> None:
        """The log was collected unclosed (``weakref.finalize``)."""
        if self.space is not None:
            self.space.dropped(self.buffer + self.indexes)
            self.buffer = self.indexes = 0


class SpaceGate:
    """Why the log refuses appends for space (module doc): ``low``, the
    governor refused; ``short``, the errno of a write that found no space
    (0: none). Owns the log's ``grant``."""

    __slots__ = ("path", "grant", "low", "short")

    def __init__(self, path: str, control: bool) -> None:
        self.path = path
        self.grant = Grant(None, 0, control)
        self.low = False
        self.short = 0

    def admit(self, buffered: int, nbytes: int, file: str) -> None:
        """While ``low``: an append of ``nbytes`` to a buffer bound to
        ``buffered`` bytes is refused (DiskFullError, nothing buffered) until
        the governor has room again; a grant that covers it admits it."""
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
        """While ``short`` with nothing buffered: refuse ``nbytes`` more
        (DiskFullError) unless free space holds them plus SHORT_MARGIN
        (``short`` then clears at the next write)."""
        try:
            free = free_bytes(self.path)  # (a btrfs quota's room too: space.py)
        except OSError:
            return  # let the write tell
        if free < nbytes + SHORT_MARGIN:
            raise DiskFullError(f"write to {file} refused: the disk is full ({free} bytes free on its "
                                f"filesystem; appends resume once there is room)", path=file)

    def found_short(self, seg, e: OSError) -> DiskFullError:
        """A batch write to ``seg`` found no space (``e``: ENOSPC/EDQUOT; nothing
        of it is in the file): refused until space is back; the error to raise."""
        self.short = e.errno  # (EDQUOT: ``disk_full`` trusts no statvfs)
        self.grant.space.short()
        return DiskFullError(f"write to {seg.log_path} at position {seg.size} failed: "
                             f"the disk is full ({e.strerror})", path=seg.log_path)

    def short_of_space(self, active_size: int) -> bool:
        """Writes refused or finding no space, the governor low, or less free
        than the floor and the active segment hold (one ``statvfs``)."""
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
        """``min_free_bytes`` (None: the filesystem's default); clears ``low``."""
        check_int("min_free_bytes", value, 0, optional=True)
        self.grant.floor = floor_of(self.grant.space, value, self.grant.control)
        self.low = False
