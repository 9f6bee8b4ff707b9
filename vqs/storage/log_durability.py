"""The durability half of the log: fsyncs, the background fsync of sealed
segments, ``flush``, the interval flusher's tick and the checkpoint.

The fsync state is a part with its own state (``Syncs``: what is durable,
which sealed segments wait for their fsync, whether one runs), and so is the
checkpoint (``Checkpoint``); ``LogDurability``, the methods of ``Log`` that
drive them, holds none (it writes the log's buffer and latches its failure).

Invariants:
- fsyncs run with the log's lock released (appends go on meanwhile) and at
  most one at a time (``Syncs.syncing``; others wait on ``Syncs.done``);
- sealed segments are fsynced oldest first, before the active one, so
  ``Syncs.durable_end`` always claims a prefix of the log;
- the checkpoint's recovery point only moves forward, and only to offsets
  already fsynced; on a full disk it (and the clean-shutdown marker) waits:
  the older checkpoint stays valid, and a missing marker only makes the next
  open validate the tail, as after a crash; an fsync failure fails the log for good (the kernel may
  have dropped the dirty pages: no write after it can be trusted).
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
import weakref

from ..errors import DiskFullError, LogFailedError
from .durable_file import atomic_write
from .log_dir import CLEAN_MARKER, clean_marker_bytes, write_checkpoint
from .log_throttle import Throttle

logger = logging.getLogger("vqs.storage")
_full = Throttle(logger)  # a checkpoint that waits for space is retried every flush tick


class SealJob:
    """A one-shot task for the shared flusher thread: fsync the segments a roll
    sealed. Holds the log weakly (a dropped log is not kept open by it)."""

    __slots__ = ("_log", "__weakref__")

    def __init__(self, owner: LogDurability) -> None:
        self._log = weakref.ref(owner)

    def _flush_tick(self) -> bool:
        owner = self._log()
        if owner is not None:
            owner._sync_sealed()
        return False


class Syncs:
    """The log's fsync state, a part of ``Log`` that owns it; guarded by the
    log's lock (``done`` is a condition on it).

    - ``durable_end``: every record below it is fsynced; it never passes the
      first record of a segment in ``unsynced``;
    - ``unsynced``: segments sealed at a roll whose fsync has not completed
      (oldest first), fsynced by the shared flusher thread (``seal_job``);
    - ``syncing``: an fsync runs (the lock released meanwhile); at most one.
    """

    __slots__ = ("durable_end", "unsynced", "syncing", "done", "seal_job")

    def __init__(self, lock: threading.Lock, log) -> None:
        self.durable_end = 0
        self.unsynced: list = []
        self.syncing = False
        self.done = threading.Condition(lock)
        self.seal_job = SealJob(log)

    def wait_idle(self) -> None:
        """Under the log's lock: wait until no fsync runs."""
        while self.syncing:
            self.done.wait()


class Checkpoint:
    """The log's checkpoint file (log_dir.py) and the state that keeps it
    honest; a part of ``Log`` that owns its state.

    Invariants: the recovery point only moves forward (``lower_to`` aside: a
    repair that truncates the log), and only to offsets the caller says are
    fsynced; writes are serialised by ``lock``; once ``retire`` ran (the log's
    ``close``, after its last checkpoint), the interval flusher writes none:
    the directory may have a new owner by then.
    """

    __slots__ = ("path", "lock", "recovery_point", "time", "interval_s", "retired")

    def __init__(self, path: str, interval_s: float) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.recovery_point = 0
        self.time = time.monotonic()
        self.interval_s = interval_s
        self.retired = False

    def write(self, recovery_point: int, start_offset: int, from_flusher: bool = False) -> None:
        """Persist (recovery point, log start offset) atomically."""
        with self.lock:
            if from_flusher and self.retired:
                return
            rp = max(self.recovery_point, recovery_point)
            write_checkpoint(self.path, rp, start_offset)
            self.recovery_point = rp
            self.time = time.monotonic()

    def try_write(self, recovery_point: int, start_offset: int, from_flusher: bool = False) -> bool:
        """``write`` where a missing space may wait: on a full disk the previous
        checkpoint stays (a valid, older recovery point: recovery then
        validates more) and False is returned."""
        try:
            self.write(recovery_point, start_offset, from_flusher)
        except DiskFullError:
            _full.warn(self.path, "%s: checkpoint not written, the disk is full", self.path)
            return False
        _full.clear(self.path, "%s: checkpoint written again", self.path)
        return True

    def lower_to(self, offset: int, start_offset: int) -> None:
        """A truncating repair: recovery at the next open starts at ``offset``
        at the latest. Raises OSError as the write does."""
        with self.lock:
            rp = min(self.recovery_point, offset)
            write_checkpoint(self.path, rp, start_offset)
            self.recovery_point = rp

    def due(self, durable_end: int) -> bool:
        """The interval passed and the durable end moved past the recovery point."""
        return time.monotonic() - self.time >= self.interval_s and durable_end > self.recovery_point

    def retire(self) -> None:
        with self.lock:
            self.retired = True


class LogDurability:
    """Fsync, flush and checkpoint methods of ``Log`` (see module doc)."""

    __slots__ = ()

    def _try_checkpoint(self, recovery_point: int | None = None, from_flusher: bool = False) -> bool:
        """Checkpoint the durable end (or ``recovery_point``); False on a full disk."""
        rp = self._sync.durable_end if recovery_point is None else recovery_point
        return self._checkpoint.try_write(rp, self._start_offset, from_flusher)

    def _try_clean_marker(self) -> None:
        """Write the clean-shutdown marker (``close``, after a checkpoint that
        matches it). On a full disk it is left out (module doc): a full xfs
        refuses the marker's new directory entry even where the checkpoint,
        which replaces a file that exists, fitted."""
        try:
            atomic_write(os.path.join(self.path, CLEAN_MARKER), clean_marker_bytes(
                self._segs.active, self._checkpoint.recovery_point, self._start_offset))
        except DiskFullError:
            _full.warn(self.path, "%s: clean-shutdown marker not written, the disk is full "
                       "(the next open validates the tail)", self.path)

    def _sync_locked(self, active: bool = True) -> None:
        """Fsync the segments sealed since the last sync, then (``active``) write
        the buffer and fsync the active segment; the lock is released during
        the fsyncs so other threads can keep appending (group commit)."""
        if active:
            self._write_buffer_locked()
        sealed = self._sync.unsynced[:]
        seg = self._segs.active
        upto = self._written_end if active else sealed[-1].next_offset if sealed else 0
        if upto <= self._sync.durable_end and not sealed:
            return
        self._sync.syncing = True
        err = None
        failed = seg
        self._lock.release()
        t0 = time.monotonic()
        try:
            # Oldest first: ``durable_end`` claims a prefix of the log.
            for failed in sealed:
                failed.sync()
            if active:
                failed = seg
                seg.sync()
        except OSError as e:
            err = e
        finally:
            if not sealed:
                self._group.fsync_seconds = 0.8 * self._group.fsync_seconds + 0.2 * min(time.monotonic() - t0, 0.01)
            self._lock.acquire()
            self._sync.syncing = False
        if err is not None:
            # An fsync failure may have dropped dirty pages: never pretend otherwise.
            self._failed = err
            self._blocked = True
            self._sync.done.notify_all()
            raise LogFailedError(f"fsync of {failed.log_path} failed: {err}", path=failed.log_path) from err
        if sealed:
            # A roll during the fsync may have appended more; only ours are done.
            del self._sync.unsynced[: len(sealed)]
        if upto > self._sync.durable_end:
            self._sync.durable_end = upto
        self._sync.done.notify_all()
        if sealed:
            self._try_checkpoint()  # the recovery point passes the sealed segments

    def _seal_for_close(self) -> DiskFullError | None:
        """Fsync the segments sealed since the last sync, then seal (fsync) the
        active segment, at close. On a full disk that refuses the cut a failed
        write left pending (segment.py, ``cut_pending``) the error is returned:
        then no clean marker, the next open recovers (a torn tail). Any other
        error (an fsync's EIO) fails the log as anywhere else (module doc):
        ``LogFailedError`` naming the file, never a raw OSError (the caller,
        ``close``, still releases every file and the lock)."""
        seg = self._segs.active
        try:
            for seg in self._sync.unsynced:
                seg.sync()
            self._sync.unsynced = []
            seg = self._segs.active
            seg.seal()
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT) and seg is self._segs.active:
                return DiskFullError(f"closing {seg.log_path}: the disk is full ({e.strerror})", path=seg.log_path)
            self._failed = e
            self._blocked = True
            raise LogFailedError(f"fsync of {seg.log_path} at close failed: {e}", path=seg.log_path) from e
        return None

    def _sync_sealed(self) -> None:
        """The background half of a roll: fsync the sealed segments."""
        with self._lock:
            while self._sync.syncing and not self._closed:
                self._sync.done.wait()
            if self._closed or self._failed is not None or not self._sync.unsynced:
                return
            self._sync_locked(active=False)

    def flush(self) -> None:
        """Write buffered records and fsync: everything appended so far survives a crash."""
        with self._lock:
            if self._closed or self.readonly:
                return
            self._sync.wait_idle()
            self._sync_locked()

    def _flush_tick(self) -> bool:
        """One round of the flusher (an "interval" log's flush; an "always" log's checkpoint
        and grant); False once the log is closed, or
        idle: nothing was written for a whole interval and the checkpoint is
        current (then the next write registers it again, see ``_check_writable``:
        10,000 idle partitions cost the flusher thread nothing)."""
        with self._lock:
            if self._closed:
                return False
            if self._failed is None and not self._sync.syncing and not self._buf.values and not self._sync.unsynced \
                    and self._written_end <= self._sync.durable_end <= self._checkpoint.recovery_point:
                self._flush_idle = self._blocked = True
                self._buf.settle()  # (flush="always" keeps it between writes: log_buffer.py)
                return False
            if not self._sync.syncing and self._failed is None:
                self._sync_locked()
        if self._checkpoint.due(self._sync.durable_end):
            self._try_checkpoint(from_flusher=True)
        return True
