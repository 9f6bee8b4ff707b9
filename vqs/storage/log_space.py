"""Free space and write health of the log: ``min_free_bytes``, ``disk_full``, ``failed``.

``LogSpace`` is a part of ``Log`` (log.py): it holds no state and works on
the log's slots (``_low_space``, ``_space_short``, ``_failed``) and its
part ``Grant`` (below: what the governor counts as the log's, and its floor).

Invariants:
- the space governor (space.py) admits bytes when they are buffered
  (log_buffer.py ``_take_locked``, once per batch): what was accepted is
  written even under the floor (the room the floor keeps is for it);
- a refusal sets ``_low_space`` (and ``_blocked``): the next appends ask the
  governor for room (``Space.room``: free space read at most every 10 ms
  while refused) before they buffer anything, and clear it once it is back;
- after a write found no space (ENOSPC/EDQUOT from the kernel:
  ``_space_short``, a soft error) an append is refused before it is buffered
  (``_check_space_back``): the buffered records are written first, and with
  nothing buffered free space is read; so a refused record is never written
  later (a client's retries leave no copies behind) and the buffer does not
  grow while the disk is full. The first successful write clears it;
- space comes back only by ``unlink`` (segments deleted: ``_delete_first_locked``
  tells the governor, ``Space.freed``); a wholly consumed active segment is
  rolled so it can go whatever its size while the log or its filesystem is
  short of space (``_roll_worth_it``), so a drained queue gives back what
  its sends need.
"""

from __future__ import annotations

import errno
import os

from ..errors import ConfigError, DiskFullError, LogClosedError, LogFailedError, ReadOnlyError
from . import fs
from .durable_file import fsync_dir
from .flusher import Flusher
from .log_dir import CLEAN_MARKER
from .retention import segments_past_retention
from .segment_reads import segment_max_timestamp
from .space import floor_of, free_bytes

DISK_FULL = (errno.ENOSPC, errno.EDQUOT)

#: after a write found no space: free space wanted beyond an append's bytes
#: before appends are taken again (and what ``disk_full`` calls no space)
SHORT_MARGIN = 64 << 10


#: Steps of room a filesystem must have over the floor for a segment to be allocated ahead.
AHEAD_MARGIN = 16


class Grant:
    """What the space governor (space.py) counts as one log's, a part of ``Log``
    that owns it; guarded by the log's lock.

    - ``buffer``: bytes granted for the write buffer, covering it (taken once
      per batch, never per append); spent as batches are written, the rest
      given back once the buffer is (``settle``);
    - ``indexes``: the active segment's indexes, counted from its first take
      until they are allocated at its first write;
    - ``floor``: the log's ``min_free_bytes`` at the governor (0 while closing:
      the room kept is for what is buffered); ``control``: its appends are
      control writes (refused only under a quarter of the floor).

    A log dropped without ``close`` gives it all back when collected
    (``weakref.finalize`` holds the grant, never the log).
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


class LogSpace:
    """min_free_bytes and write-health methods of ``Log`` (see module doc)."""

    __slots__ = ()

    def _check_writable(self) -> None:
        """Raise unless the log takes writes; the first write after a clean open
        removes the clean-shutdown marker, after an idle spell rejoins the flusher."""
        if self._closed:
            raise LogClosedError(f"log {self.path} is closed")
        if self.readonly:
            raise ReadOnlyError(f"log {self.path} was opened with readonly=True")
        if self._failed is not None:
            raise LogFailedError(
                f"log {self.path} failed earlier and accepts no writes: {self._failed!r}",
                path=self.path,
            ) from self._failed
        if self._clean_marker:
            # The first write after a clean open (defer_clean_marker): the marker
            # goes, durably, before any file changes (a crash from now on recovers).
            marker = os.path.join(self.path, CLEAN_MARKER)
            try:
                try:
                    fs.unlink(marker)
                except FileNotFoundError:
                    pass
                fsync_dir(self.path)
            except OSError as e:
                # (EIO) the marker may still be on disk: a write now could leave a stale
                # marker for the next open to trust, so the log fails, as at any fsync error
                self._failed = e
                self._blocked = True
                raise LogFailedError(f"removing {marker} failed: {e}", path=self.path) from e
            self._clean_marker = False
        if self._flush_idle:
            # Idle for a whole interval, the flusher let go of it: back on at the first write.
            self._flush_idle = False
            Flusher.shared().register(self, self.flush_interval_ms / 1000)
        # still checked per append: refused for space, or no space found
        self._blocked = self._space_short or self._low_space

    def _check_appendable(self, nbytes: int) -> None:
        """Appends, when ``_blocked``: closed, readonly or failed raise; refused
        for space, ``nbytes`` more are refused (DiskFullError, nothing buffered)
        until the governor finds room again."""
        if self._closed or self.readonly or self._failed is not None or self._clean_marker or self._flush_idle:
            self._check_writable()  # raises, or removes the clean marker / rejoins the flusher
        if self._space_short:
            self._check_space_back(nbytes)
        grant = self._grant
        if self._low_space and grant.buffer < self._buffer_bound() + nbytes:  # (a grant covers it: admitted)
            path = self._active.log_path
            if not grant.room(self._buffer_bound() + nbytes, self.path):
                raise DiskFullError(f"write to {path} refused: less than {grant.floor + nbytes} bytes free on its "
                                    f"filesystem over min_free_bytes={grant.floor} (room kept for deletes, "
                                    f"checkpoints and buffered records); appends resume once there is room",
                                    path=path)
            self._low_space = False
            self._unblock()

    def _check_space_back(self, nbytes: int) -> None:
        """The last write found no space: refuse ``nbytes`` more (DiskFullError,
        nothing buffered) unless there is space again. What is buffered is
        written first (its failure is the refusal; its success clears the
        state); with nothing buffered, free space must hold ``nbytes`` plus
        SHORT_MARGIN (``_space_short`` then clears at the next write)."""
        if self._buf_values:
            self._write_buffer_locked()
            return
        path = self._active.log_path
        try:
            free = free_bytes(self.path)  # (a btrfs quota's room too: space.py)
        except OSError:
            return  # let the write tell
        if free < nbytes + SHORT_MARGIN:
            raise DiskFullError(f"write to {path} refused: the disk is full ({free} bytes free on its "
                                f"filesystem; appends resume once there is room)", path=path)

    def _unblock(self) -> None:
        """Recompute ``_blocked`` after a reason for it went away."""
        self._blocked = (self._closed or self.readonly or self._failed is not None or self._low_space
                         or self._clean_marker or self._flush_idle or self._space_short)

    def _delete_consumed_locked(self, offset: int) -> int:
        """delete_before(offset), ``offset <= _next_offset``: roll a wholly consumed
        active segment when worth it (``_roll_worth_it``), then delete the whole
        segments below ``offset``; returns how many went."""
        seg = self._active
        if offset >= self._written_end and seg.size and self._roll_worth_it():
            self._roll_consumed_now_locked()
        return self._delete_below_locked(offset)

    def _delete_below_locked(self, offset: int) -> int:
        """Delete the whole segments below ``offset`` (never the active one),
        oldest first: a crash between leaves a suffix of the log (its start
        moves up to the first segment left; no offset is reused)."""
        n = 0
        while len(self._segments) > 1 and self._base_offsets[1] <= offset:
            self._delete_first_locked()
            n += 1
        if n:
            self._start_offset = max(self._start_offset, self._base_offsets[0])
            if self._sync.unsynced and not self._sync.syncing:
                # A deleted segment needs no fsync: its file (and space) goes as
                # soon as the last reader lets go, not at the flusher's next round.
                first = self._base_offsets[0]
                self._sync.unsynced = [s for s in self._sync.unsynced if s.base_offset >= first]
        return n

    def _delete_first_locked(self) -> None:
        """Delete the oldest segment: space comes back (the governor reads
        free space again at its next take)."""
        seg = self._segments.pop(0)
        self._base_offsets.pop(0)
        if not self.readonly:
            seg.forget()
        seg.delete()
        self._grant.space.freed()
        self._reads.forget_segment(seg)

    def _drop_buffer_locked(self, e: DiskFullError) -> None:
        """``always``: the buffer's write found no space. Its records were not
        acknowledged (each appender waits for the fsync): they are dropped and
        their offsets given back, and every appender waiting for one raises
        ``e``'s DiskFullError (``_buf_gen``; group_commit.py). Kept, they would
        be readable and counted in ``end_offset`` while unwritten, and a close
        on the full disk would lose them after a consumer read their offsets;
        so a refused record is never written later, under every flush policy."""
        self._buf_gen[0] = e
        self._next_offset = self._written_end
        self._reset_buffer()
        self._settle_grant()

    def _roll_worth_it(self) -> bool:
        """Whether a wholly consumed active segment is worth rolling to delete
        it: rolling costs fsyncs, and a queue that drains often would otherwise
        roll on every drain. It is at a quarter of ``segment_bytes``, or
        whatever its size while space is short (``_short_of_space``): the
        space is what writes need."""
        return self._active.size >= self.segment_bytes // 4 or self._short_of_space()

    def _short_of_space(self) -> bool:
        """Writes refused or finding no space, the governor low, or less free
        than the floor and the active segment hold (one ``statvfs``)."""
        if self._space_short or self._low_space or self._grant.space.low:
            return True
        try:
            return free_bytes(self.path) < self._grant.floor + max(SHORT_MARGIN, self._active.size)
        except OSError:
            return False

    def _roll_consumed_now_locked(self) -> bool:
        """Roll the wholly consumed active segment (every record is written and
        below the caller's offset); False when the roll found no space (it is
        tried again at the next ``delete_before``, ``_consumed_left``).
        Crash reasoning: the consumed segment's file stays until the new
        segment's file is in place, so at every point the directory names the
        log's end. A failed write's bytes past the end that could not be cut
        (``cut_pending``) are cut first: sealing needs the cut."""
        seg = self._active
        if seg.cut_pending:
            try:
                seg.cut_tail()
            except OSError:
                return False
        try:
            return self._roll_locked()
        except OSError as e:
            if e.errno in DISK_FULL:
                self._grant.space.short()
                return False
            raise

    def _consumed_left(self) -> bool:
        """While space is short: whether segments wholly below the log's start
        are still there (a consumed active segment whose roll found no room),
        so ``delete_before(start)`` tries again. Attribute reads, then one
        ``statvfs`` only when such a segment is there."""
        if not ((self._active.size and self._written_end <= self._start_offset)
                or (len(self._segments) > 1 and self._base_offsets[1] <= self._start_offset)):
            return False
        return self._roll_worth_it()

    def _active_expired_short(self, now_ms: int) -> bool:
        """Retention on a full disk: whether the active segment, which
        ``segments_past_retention`` never takes, is to be rolled so retention
        can delete it: its written records are all past ``retention_ms`` and
        space is short (as in ``_roll_worth_it``). Otherwise a topic whose data
        sits in its active segment (a filesystem smaller than a segment)
        stays full for good."""
        seg = self._active
        if self.retention_ms is None or seg.size == 0 \
                or segment_max_timestamp(seg) >= now_ms - self.retention_ms:
            return False
        return self._short_of_space()

    def _retention_due(self, now_ms: int) -> bool:
        return bool(segments_past_retention(self._segments, self.retention_ms, self.retention_bytes,
                                            now_ms)) or self._active_expired_short(now_ms)

    def _roll_expired_locked(self, now_ms: int) -> int:
        """Roll an expired active segment on a full disk (``_active_expired_short``);
        returns 1 when rolled (its deletion is the caller's retention pass)."""
        if not self._active_expired_short(now_ms):
            return 0
        if self._written_end < self._next_offset:
            try:  # buffered records first, as delete_before
                self._write_buffer_locked()
            except DiskFullError:
                pass  # (flush="always": the refused write waits; the roll takes it along)
            if not self._active_expired_short(now_ms):
                return 0  # they are within retention: the segment stays
        return int(self._roll_consumed_now_locked())

    @property
    def failed(self) -> BaseException | None:
        """The I/O error that failed this log (it accepts no writes), or None."""
        return self._failed

    @property
    def disk_full(self) -> bool:
        """True while writes find no space: appends are being refused under
        ``min_free_bytes``, or the last batch write failed with ENOSPC/EDQUOT
        and the filesystem still has less than 64 KiB (over the floor) free
        (``statvfs``, read only in that case)."""
        if self._low_space:
            return True
        if not self._space_short:
            return False
        if self._space_short == errno.EDQUOT:
            return True  # a quota: the filesystem's free space may not show it
        try:
            return free_bytes(self.path) < self._grant.floor + SHORT_MARGIN
        except OSError:
            return True

    @property
    def min_free_bytes(self) -> int:
        """Appends are refused under this much free space (0 = off); settable
        (None: the filesystem's default, space.py)."""
        return self._grant.floor

    @min_free_bytes.setter
    def min_free_bytes(self, value: int | None) -> None:
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise ConfigError(f"min_free_bytes={value!r}: must be None or an integer >= 0")
        with self._lock:
            self._grant.floor = floor_of(self._grant.space, value, self._grant.control)
            self._low_space = False
            self._unblock()
