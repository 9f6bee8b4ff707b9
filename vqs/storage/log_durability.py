"""The log's durability (``Log._sync``): what is fsynced, the background fsync of sealed
segments, the checkpoint and the clean-shutdown marker.

What an acknowledged append survives (the log's ``flush`` setting):

============  ==========================================  =========================================
policy        ``append`` returns when                     what a crash can lose; a full disk
============  ==========================================  =========================================
``always``    its batch is written and fsynced (group     nothing acknowledged; a full disk
              commit: concurrent appenders share one)     refuses the append, never after
``interval``  it is in the buffer, counted as used by     at most ``flush_interval_ms`` of appends;
              the space governor; written and fsynced     nothing acknowledged on a full disk (the
              every interval by a background thread      governor kept room for the buffer)
``never``     it is in the buffer (counted as above);     since the last batch write (process
              written when a batch fills, fsynced at      crash) or the OS's last write-back;
              ``close``                                   a full disk: as ``interval``
============  ==========================================  =========================================

Invariants:
- a segment sealed by a roll is fsynced by the background flusher, oldest first and before
  the active one; ``flush()`` and ``always`` appends fsync any still pending first:
  ``durable_end`` and the checkpoint always claim a prefix;
- fsyncs run with the log's lock released, one at a time (``syncing``; others wait on ``done``);
- the recovery point only moves forward, to fsynced offsets; on a full disk it and the clean
  marker wait (the older checkpoint stays valid; without a marker the next open validates);
- an fsync failure fails the log for good (the kernel may have dropped the dirty pages).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref

from ..disk import fs
from ..errors import DiskFullError
from ..log_throttle import Throttle
from .durable_file import atomic_write, fsync_dir, remove_files
from .flusher import Flusher
from .log_dir import CLEAN_MARKER, clean_marker_bytes, write_checkpoint

logger = logging.getLogger("vqs.storage")
_full = Throttle(logger)  # a checkpoint that waits for space is retried every flush tick


class SealJob:
    """A one-shot flusher task: fsync the segments a roll sealed (holds the log weakly)."""

    __slots__ = ("_log", "__weakref__")

    def __init__(self, owner) -> None:
        self._log = weakref.ref(owner)

    def _flush_tick(self) -> bool:
        owner = self._log()
        if owner is not None:
            owner._sync.sync_sealed(owner)
        return False


class FlushJob:
    """A log's place on the shared flusher (``Durability.flush_job``; holds the log weakly).
    A log has at most one live job: registering a new one (a changed ``flush``) retires the
    last, whose next tick finds it is no longer the log's and ends."""

    __slots__ = ("_log", "__weakref__")

    def __init__(self, owner) -> None:
        self._log = weakref.ref(owner)

    def _flush_tick(self) -> bool:
        owner = self._log()
        if owner is None or owner._sync.flush_job is not self:
            return False
        return owner._sync.tick(owner)


class Durability:
    """Under the log's lock: ``durable_end``, every record below it is fsynced; ``unsynced``,
    segments sealed at a roll and not yet fsynced, oldest first; ``syncing``, an fsync runs."""

    __slots__ = ("path", "lock", "durable_end", "unsynced", "syncing", "done", "seal_job", "flush_job", "checkpoint")

    def __init__(self, path: str, lock: threading.Lock, log, checkpoint_interval_s: float) -> None:
        self.path = path
        self.lock = lock
        self.durable_end = 0
        self.unsynced: list = []
        self.syncing = False
        self.done = threading.Condition(lock)
        self.seal_job = SealJob(log)
        self.flush_job: FlushJob | None = None
        self.checkpoint = Checkpoint(path, checkpoint_interval_s)

    def join_flusher(self, log) -> None:
        """Put ``log`` on the shared flusher every ``flush_interval_ms`` (a new FlushJob: the
        last one, if any, retires)."""
        self.flush_job = FlushJob(log)
        Flusher.shared().register(self.flush_job, log.flush_interval_ms / 1000)

    def wait_idle(self) -> None:
        """Under the log's lock: wait until no fsync runs."""
        while self.syncing:
            self.done.wait()

    def sync_log(self, log, active: bool = True) -> None:
        """Fsync the segments sealed since the last sync, then (``active``) write the buffer
        and fsync the active segment; the lock is released meanwhile (appends go on)."""
        if active:
            log._write_buffer_locked()
        sealed = self.unsynced[:]
        seg = log._segs.all[-1] if active else None
        upto = log._written_end if active else sealed[-1].next_offset if sealed else 0
        if upto <= self.durable_end and not sealed:
            return
        self.syncing = True
        err = None
        failed = seg
        self.lock.release()
        t0 = time.monotonic()
        try:
            for failed in sealed:
                failed.sync()
            if seg is not None:
                failed = seg
                seg.sync()
        except OSError as e:
            err = e
        finally:
            if not sealed:
                g = log._group
                g.fsync_seconds = 0.8 * g.fsync_seconds + 0.2 * min(time.monotonic() - t0, 0.01)
            self.lock.acquire()
            self.syncing = False
        self.done.notify_all()
        if err is not None:
            raise log._fail(err, f"fsync of {failed.log_path} failed", failed.log_path) from err
        if sealed:
            del self.unsynced[: len(sealed)]  # a roll during the fsync may have appended more
        if upto > self.durable_end:
            self.durable_end = upto
        if sealed:
            self.try_checkpoint(log._start_offset)  # the recovery point passes the sealed segments

    def sync_sealed(self, log) -> None:
        """The background half of a roll (``seal_job``): fsync the sealed segments."""
        with log._lock:
            while self.syncing and not log._closed:
                self.done.wait()
            if log._closed or log._failed is not None or not self.unsynced:
                return
            self.sync_log(log, active=False)

    def tick(self, log) -> bool:
        """One round of the flusher (an "interval" log's flush; an "always" log's checkpoint
        and grant); False once the log is closed, or idle for a whole interval with the
        checkpoint current (its next write registers it again: idle partitions cost nothing)."""
        with log._lock:
            if log._closed:
                return False
            if log._failed is None and not log._buf.values and self.idle(log._written_end):
                log._flush_idle = log._blocked = True
                log._buf.settle()  # (flush="always" keeps it between writes: log_buffer.py)
                return False
            if not self.syncing and log._failed is None:
                self.sync_log(log)
        if self.checkpoint.due(self.durable_end):
            self.try_checkpoint(log._start_offset, from_flusher=True)
        return True

    def seal_for_close(self, log) -> DiskFullError | None:
        """At close: fsync the sealed segments, then seal the active one. A full disk that
        refuses the cut a failed write left pending returns the error (no clean marker: the
        next open cuts the torn tail); an fsync error latches the log."""
        seg = active = log._segs.all[-1]
        try:
            for seg in self.unsynced:
                seg.sync()
            self.unsynced = []
            seg = active
            seg.seal()
        except OSError as e:
            if e.errno in fs.NO_SPACE and seg is active:
                return DiskFullError(f"closing {seg.log_path}: the disk is full ({e.strerror})", path=seg.log_path)
            raise log._fail(e, f"fsync of {seg.log_path} at close failed", seg.log_path) from e
        return None

    def forget_below(self, first_base: int) -> None:
        """Segments below ``first_base`` were deleted: they need no fsync."""
        if self.unsynced and not self.syncing:
            self.unsynced = [s for s in self.unsynced if s.base_offset >= first_base]

    def try_checkpoint(self, start_offset: int, recovery_point: int | None = None,
                       from_flusher: bool = False) -> bool:
        """Checkpoint the durable end (or ``recovery_point``); False on a full disk."""
        rp = self.durable_end if recovery_point is None else recovery_point
        try:
            self.checkpoint.write(rp, start_offset, from_flusher)
        except DiskFullError:  # the previous checkpoint stays: valid, older (recovery validates more)
            _full.warn(self.path, "%s: checkpoint not written, the disk is full", self.path)
            return False
        _full.clear(self.path, "%s: checkpoint written again", self.path)
        return True

    def try_clean_marker(self, active, start_offset: int) -> None:
        """Write the clean-shutdown marker after a checkpoint that matches it; left out on a
        full disk (a full xfs refuses its new directory entry where the checkpoint fitted)."""
        try:
            atomic_write(os.path.join(self.path, CLEAN_MARKER), clean_marker_bytes(
                active, self.checkpoint.recovery_point, start_offset))
        except DiskFullError:
            _full.warn(self.path, "%s: clean-shutdown marker not written, the disk is full "
                       "(the next open validates the tail)", self.path)

    def remove_clean_marker(self) -> None:
        """The first write after a clean open: the marker goes, durably, before any file
        changes. Raises OSError (the log latches it: a write now could leave a stale marker)."""
        remove_files(os.path.join(self.path, CLEAN_MARKER))
        fsync_dir(self.path)

    def idle(self, written_end: int) -> bool:
        """Nothing to fsync or checkpoint: the flusher may let the log go."""
        return (not self.syncing and not self.unsynced
                and written_end <= self.durable_end <= self.checkpoint.recovery_point)


class Checkpoint:
    """The log's checkpoint file (log_dir.py); writes are serialised by ``lock``. After
    ``retire`` (close) the flusher writes none: the directory may have a new owner by then."""

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

    def lower_to(self, offset: int, start_offset: int) -> None:
        """A truncating repair: the next open recovers from ``offset`` at the latest."""
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


