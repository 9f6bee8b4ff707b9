"""The space governor: one per filesystem, it decides which writes the free space allows.

Two tiers of writes (Redpanda's ``storage_min_free_bytes``, made per tier):

- **data** writes (appends to a topic's or a queue's log, a HybridQueue's
  spill, creating a topic or a queue) are refused with DiskFullError once
  they would leave less than the log's ``min_free_bytes`` free: by default
  ``default_min_free(total)`` = the smaller of 64 MiB and 5 % of the
  filesystem's size (64 MiB covers the write buffers, checkpoints, snapshots
  and index preallocations of a busy broker; 5 % keeps a small filesystem
  mostly usable);
- **control** writes (a queue's lease records: deletes, receives, visibility
  changes; rolls) may go down to a quarter of that, so a full queue can
  always be drained. Checkpoints, snapshots and offset commits are small,
  bounded replacements that are never refused here (the room the floors
  keep is theirs); deletes need no space at all (``unlink``).

Bytes this process holds buffered and not yet written (a log's write buffer,
a queue's pending sends and lease records: ``Grant`` / ``Claim``) are
counted as used: the governor's ``avail`` is the free space it last read
minus every byte taken since (``take``) and not given back, so a record
acknowledged from a buffer always has room to be written, whatever else this
process writes meanwhile.

Free space is read (``statvfs``; under a btrfs quota the room under its
limit, free_space.py; a test's space fault, fs.py) at least every CHECK_S,
before any refusal (a refused write costs a ``statvfs``), and after an
``unlink`` gave space back (``freed``). A take is a lock, a clock
read, a subtraction and a comparison; logs take once per batch, not per
append (log_buffer.py).

ENOSPC or EDQUOT from the kernel (another program took the room) is a soft
error: the write raises DiskFullError, nothing is latched, ``short`` makes
the next take read free space again, and writes resume by themselves once
space is back. EIO and fsync failures latch the log (log.py), as before.
"""

from __future__ import annotations

import os
import threading
import time

from ..errors import DiskFullError
from . import fs
from .free_space import free_bytes as _fs_free_bytes
from .free_space import libc, quota_room

#: the default data floor: min(DEFAULT_MAX, size // DEFAULT_DIVISOR)
DEFAULT_MAX = 64 << 20
DEFAULT_DIVISOR = 20
#: control writes may go down to the data floor divided by this
CONTROL_DIVISOR = 4
#: free space is read at least this often while writing (and before any refusal)
CHECK_S = 0.1

_monotonic = time.monotonic


def default_min_free(total: int) -> int:
    """The default ``min_free_bytes`` of a filesystem of ``total`` bytes."""
    return min(DEFAULT_MAX, total // DEFAULT_DIVISOR)


def free_bytes(path: str) -> int:
    """Free bytes for this process at ``path`` (statvfs, a btrfs quota's room,
    a test's space fault: the least)."""
    free = _fs_free_bytes(path)
    limit = fs.free_bytes_limit(path)
    return free if limit is None else min(free, limit)


class Space:
    """The governor of one filesystem (module doc). Thread-safe."""

    __slots__ = ("path", "total", "default_floor", "avail", "unwritten", "low", "_read_at",
                 "_lock", "quota")

    def __init__(self, path: str):
        st = fs.statvfs(path)
        self.path = path
        self.total = st.f_blocks * st.f_frsize
        self.default_floor = default_min_free(self.total)
        self.avail = 0          # free at the last reading, less what was taken since
        self.unwritten = 0      # taken and not yet written or given back
        self.low = False        # the last take was refused, or a write found no space
        self._read_at = 0.0     # monotonic time of the next reading, at the latest
        self.quota = quota_room(path) is not None  # a btrfs quota group's limit applies
        self._lock = threading.Lock()

    def _read(self, now: float, where: str) -> None:
        try:
            free = free_bytes(where)
        except OSError:
            free = self.avail + self.unwritten  # (unreadable: keep the estimate)
        self.avail = free - self.unwritten
        self._read_at = now + CHECK_S

    def take(self, nbytes: int, floor: int, where: str, path: str | None = None) -> None:
        """Count ``nbytes`` about to be buffered or written in directory
        ``where`` (on this filesystem) as used; raise DiskFullError naming
        ``path`` (else ``where``), nothing counted, when that would leave less
        than ``floor`` (0: never refused)."""
        path = path or where
        with self._lock:
            now = _monotonic()
            left = self.avail - nbytes
            if now >= self._read_at or (floor and left < floor):
                self._read(now, where)
                left = self.avail - nbytes
            if floor and left < floor:
                self.low = True
                raise DiskFullError(
                    f"write to {path} refused: {max(0, self.avail)} bytes free on its filesystem (less what this "
                    f"process holds buffered), and it needs {nbytes} over min_free_bytes={floor} (room kept "
                    f"for deletes, checkpoints and buffered records); writes resume once there is room",
                    path=path)
            if left >= floor:
                self.low = False
            self.avail = left
            self.unwritten += nbytes

    def room(self, floor: int, where: str) -> bool:
        """Whether a data write over ``floor`` has room now in directory
        ``where`` (reads free space when due); sets ``low`` when not."""
        with self._lock:
            now = _monotonic()
            if now >= self._read_at or self.avail < floor:
                self._read(now, where)
            ok = self.avail >= floor
            self.low = not ok
            return ok

    def wrote(self, nbytes: int) -> None:
        """Taken bytes reached a file (they show in the next reading)."""
        with self._lock:
            self.unwritten -= nbytes

    def give(self, nbytes: int) -> None:
        """Taken bytes that will not be written (a buffer dropped, a grant's rest)."""
        if nbytes:
            with self._lock:
                self.unwritten -= nbytes
                self.avail += nbytes

    def spend(self, nbytes: int) -> None:
        """Bytes written without a take (index preallocation at a roll)."""
        with self._lock:
            self.avail -= nbytes

    def freed(self) -> None:
        """An unlink gave space back: read again at the next take. Under a
        btrfs quota the group's usage drops only at the transaction's commit:
        committed now (``syncfs``), so writes resume at once."""
        self._read_at = 0.0
        if self.quota:
            _syncfs(self.path)

    def _note_short(self) -> None:
        self._read_at = 0.0

    def short(self) -> None:
        """A write found no space (ENOSPC/EDQUOT): soft, read again next time."""
        self.low = True
        self._note_short()


def _syncfs(path: str) -> None:
    lib = libc()
    if not lib:
        return
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        lib.syncfs(fd)
    finally:
        os.close(fd)


_registry: dict[int, Space] = {}
_registry_lock = threading.Lock()


def for_path(path: str) -> Space:
    """The governor of the filesystem holding the existing directory ``path``
    (keyed by ``st_dev``). Raises OSError as ``stat`` does."""
    dev = os.stat(path).st_dev
    with _registry_lock:
        s = _registry.get(dev)
        if s is not None:
            try:
                same = os.stat(s.path).st_dev == dev
            except OSError:
                same = False
            if not same:
                # the directory it was made for went (and, maybe, its filesystem:
                # a device number is reused after an unmount): measured afresh
                st = fs.statvfs(path)
                s.path = path
                s.total = st.f_blocks * st.f_frsize
                s.default_floor = default_min_free(s.total)
                s.quota = quota_room(path) is not None
                s._note_short()
        else:
            s = _registry[dev] = Space(path)
    return s


def floor_of(space: Space, min_free_bytes: int | None, control: bool = False) -> int:
    """The floor a writer with ``min_free_bytes`` (None: the filesystem's
    default) takes against; control writes a quarter of it."""
    f = space.default_floor if min_free_bytes is None else min_free_bytes
    return f // CONTROL_DIVISOR if control else f


def check_room(path: str, min_free_bytes: int | None = None, what: str = "create") -> None:
    """A data write that buffers nothing (creating a topic or a queue under
    ``path``, an existing directory): DiskFullError when its filesystem is
    under the floor."""
    space = for_path(path)
    floor = floor_of(space, min_free_bytes)
    if floor and not space.room(floor, path):
        raise DiskFullError(f"{what} {path} refused: less than min_free_bytes={floor} free on its filesystem; "
                            "deletes and drains go on, creation resumes once there is room", path=path)


class Claim:
    """Bytes a caller keeps buffered before it hands them to a log (a queue's
    pending sends, its pending lease records): counted as used, like a log's
    own buffer, so what the caller acknowledged from it has room."""

    __slots__ = ("space", "floor", "held", "path")

    def __init__(self, path: str, min_free_bytes: int | None, control: bool = False):
        self.space = for_path(path)
        self.floor = floor_of(self.space, min_free_bytes, control)
        self.held = 0
        self.path = path

    def ensure(self, nbytes: int) -> None:
        """Hold at least ``nbytes`` (with room to grow); DiskFullError when
        the governor refuses even ``nbytes``: the caller refuses the record."""
        if nbytes <= self.held:
            return
        more = nbytes - self.held
        try:
            self.space.take(more + min(nbytes, 256 << 10), self.floor, self.path)
            self.held = nbytes + min(nbytes, 256 << 10)
        except DiskFullError:
            self.space.take(more, self.floor, self.path)  # (the directory it buffers for)
            self.held = nbytes

    def force(self, nbytes: int) -> None:
        """Count ``nbytes`` again whatever the floor (records already
        acknowledged, handed back by a refused write)."""
        if nbytes > self.held:
            self.space.take(nbytes - self.held, 0, self.path)
            self.held = nbytes

    def release(self) -> None:
        """The records were handed over (the log took its own grant for them)."""
        if self.held:
            self.space.give(self.held)
            self.held = 0
