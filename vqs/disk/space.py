"""The space governor: one per filesystem, it decides which writes the free space allows.

Two tiers (Redpanda's ``storage_min_free_bytes``, per tier):

- **data** writes (appends, a HybridQueue's spill, creating a topic or a queue) are refused
  with DiskFullError once they would leave less than ``min_free_bytes`` free; default: the
  smaller of 64 MiB (a busy broker's buffers, checkpoints, index preallocations) and 5 % of
  the filesystem (a small one stays usable);
- **control** writes (a queue's lease records, rolls, the cleaner) go down to a quarter of
  that, so a full queue can always be drained. Checkpoints, snapshots and offset commits are
  small replacements never refused here (the floors keep their room); deletes need no space.

Bytes this process holds buffered and not yet written (a log's grant, a ``Claim``) count as
used: ``avail`` is the free space last read less every byte taken since and not given back,
so a record acknowledged from a buffer always has room to be written.

Free space is read at least every CHECK_S, once the takes since could have used a quarter of
the room found, before any refusal, and after an ``unlink`` (``freed``; under a btrfs quota
after ``syncfs``: the group's usage drops only at a commit). What a log or claim dropped
unclosed held goes back when it is collected.

ENOSPC/EDQUOT from the kernel is soft: DiskFullError, nothing latched, writes resume once
space is back. EIO and fsync failures latch the log (log.py).

A btrfs quota group's limit does not show in ``statvfs``: where the subvolume's group
(``0/<id>``) has one, the room under it counts too (``max_referenced``/``max_exclusive`` less
usage and reservations, ``/sys/fs/btrfs/<fsid>/qgroups/0_<id>/``, kernels since 5.9, found
with two unprivileged ioctls). Higher-level groups and uncommitted usage are not seen.
"""

from __future__ import annotations

import fcntl
import os
import struct
import threading
import time
import uuid
import weakref

from ..errors import DiskFullError
from . import fs

DEFAULT_MAX = 64 << 20
DEFAULT_DIVISOR = 20
CONTROL_DIVISOR = 4
CHECK_S = 0.1

_monotonic = time.monotonic


def default_min_free(total: int) -> int:
    """The default ``min_free_bytes`` of a filesystem of ``total`` bytes."""
    return min(DEFAULT_MAX, total // DEFAULT_DIVISOR)


def free_bytes(path: str) -> int:
    """Free bytes for an unprivileged writer at ``path``: the lesser of ``statvfs`` and the
    room under its btrfs quota group's limit."""
    st = fs.statvfs(path)
    free = st.f_bavail * st.f_frsize
    q = quota(path)
    return free if q is None else min(free, q[1])


BTRFS_SUPER_MAGIC = 0x9123683E
_FS_INFO = 0x8400941F  # _IOR(0x94, 31, struct btrfs_ioctl_fs_info_args), 1024 bytes
_INO_LOOKUP = 0xD0009412  # _IOWR(0x94, 18, struct btrfs_ioctl_ino_lookup_args), 4096 bytes
_FIRST_FREE_OBJECTID = 256
_USED = ("rsv_data", "rsv_meta_prealloc", "rsv_meta_pertrans")
_qgroup_dirs: dict[str, str | None] = {}


def _qgroup_dir(path: str) -> str | None:
    """``/sys/fs/btrfs/<fsid>/qgroups/0_<subvolume id>`` of ``path`` (cached)."""
    try:
        return _qgroup_dirs[path]
    except KeyError:
        pass
    if len(_qgroup_dirs) >= 4096:
        _qgroup_dirs.clear()  # (directories of logs long deleted; each is looked at again)
    d = _qgroup_dirs[path] = _probe_qgroup_dir(path) if fs.fs_magic(path) == BTRFS_SUPER_MAGIC else None
    return d


def _probe_qgroup_dir(path: str) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        info = bytearray(1024)
        fcntl.ioctl(fd, _FS_INFO, info)
        fsid = uuid.UUID(bytes=bytes(info[16:32]))
        args = bytearray(4096)
        struct.pack_into("<QQ", args, 0, 0, _FIRST_FREE_OBJECTID)
        fcntl.ioctl(fd, _INO_LOOKUP, args)
        (subvol,) = struct.unpack_from("<Q", args, 0)
        return f"/sys/fs/btrfs/{fsid}/qgroups/0_{subvol}"
    except OSError:
        return None
    finally:
        os.close(fd)


def _read(d: str, name: str) -> int:
    with open(os.path.join(d, name), "rb") as f:
        return int(f.read())


def quota(path: str) -> tuple[int, int] | None:
    """(smallest limit, bytes left under the limits) of ``path``'s btrfs quota group; None
    where no limit is seen."""
    d = _qgroup_dir(path)
    if d is None:
        return None
    try:
        rsv = sum(_read(d, n) for n in _USED)
        found = [(m, m - _read(d, usage) - rsv)
                 for limit, usage in (("max_referenced", "referenced"), ("max_exclusive", "exclusive"))
                 if (m := _read(d, limit))]
    except (OSError, ValueError):
        return None
    if not found:
        return None
    return min(m for m, _ in found), max(0, min(r for _, r in found))


class Space:
    """The governor of one filesystem (module doc). Thread-safe."""

    __slots__ = ("path", "total", "default_floor", "avail", "unwritten", "returned", "low", "_read_at", "_since", "_quarter",
                 "_lock", "quota")

    def __init__(self, path: str):
        self._measure(path)
        self.avail = 0          # free at the last reading, less what was taken since
        self.unwritten = 0      # taken and not yet written or given back
        self.returned: list[int] = []  # what finalizers gave back (``dropped``)
        self._since = 0          # bytes taken since the last reading
        self._quarter = 0        # a quarter of what the last reading found: read again past it
        self.low = False        # the last take was refused, or a write found no space
        self._lock = threading.Lock()

    def _measure(self, path: str) -> None:
        """Size up the filesystem holding ``path``; its free space is read at the next take."""
        self.path = path
        self.total = _size(path)
        self.default_floor = default_min_free(self.total)
        self.quota = quota(path) is not None  # a btrfs quota group's limit applies
        self._read_at = 0.0     # monotonic time of the next reading, at the latest

    def _settle_returned(self) -> None:
        r = self.returned
        while r:
            n, written = r.pop()
            self.unwritten -= n + written
            self.avail += n

    def _read(self, now: float, where: str) -> None:
        self._settle_returned()
        try:
            free = free_bytes(where)
        except OSError:
            free = self.avail + self.unwritten  # (unreadable: keep the estimate)
        self.avail = free - self.unwritten
        self._read_at = now + CHECK_S
        self._since = 0
        self._quarter = max(0, self.avail) // 4

    def take(self, nbytes: int, floor: int, where: str, extra: int = 0, path: str | None = None,
             control: bool = False, written: int = 0) -> int:
        """Count ``nbytes`` about to be buffered or written in directory ``where`` as used,
        plus up to ``extra`` more (at most an eighth of the room over the floor: a grant never
        holds what others need); returns what was taken. DiskFullError naming ``path`` (else
        ``where``), nothing counted, when ``nbytes`` would leave less than ``floor`` (0: never).
        ``written``: taken bytes that reached a file since the caller last said (``wrote``)."""
        with self._lock:
            self.unwritten -= written
            if self.returned:
                self._settle_returned()
            now = _monotonic()
            self._since += nbytes + extra
            if now >= self._read_at or self._since > self._quarter or (floor and self.avail - nbytes - extra < floor):
                self._read(now, where)
            left = self.avail - nbytes
            if floor and left < floor:
                self.low = True
                raise DiskFullError(
                    f"write to {path or where} refused: {max(0, self.avail)} bytes free on its filesystem (less what this "
                    f"process holds buffered), and it needs {nbytes} over min_free_bytes={floor} (room kept "
                    f"for deletes, checkpoints and buffered records); writes resume once there is room",
                    path=path or where)
            if left >= floor and not control:
                self.low = False
            if extra:  # (comparisons, not min/max: a log takes once per batch)
                more = (left - floor) >> 3
                nbytes += extra if more > extra else more if more > 0 else 0
            self.avail -= nbytes
            self.unwritten += nbytes
            return nbytes

    def ahead(self, nbytes: int, floor: int) -> bool:
        """Count ``nbytes`` allocated ahead of a file's writes if that leaves more than
        ``floor``; else False, nothing counted."""
        with self._lock:
            if self.avail - nbytes < floor:
                return False
            self.avail -= nbytes
            return True

    def room(self, floor: int, where: str, control: bool = False) -> bool:
        """Whether ``where`` has room over ``floor`` now; a data write's answer sets ``low``."""
        with self._lock:
            now = _monotonic()
            if now >= self._read_at or self.avail < floor:
                self._read(now, where)
            ok = self.avail >= floor
            if not control:
                self.low = not ok
            return ok

    def wrote(self, nbytes: int) -> None:
        """Taken bytes reached a file (they show in the next reading)."""
        with self._lock:
            self.unwritten -= nbytes

    def dropped(self, nbytes: int, written: int = 0) -> None:
        """``give`` for a finalizer (a log or claim collected unclosed): no lock, as a
        collection may run inside a take on this thread; counted at the next take."""
        if nbytes or written:
            self.returned.append((nbytes, written))

    def give(self, nbytes: int, written: int = 0) -> None:
        """Taken bytes that will not be written (a buffer dropped, a grant's rest), and
        ``written``: taken bytes that reached a file since the caller last said (``wrote``)."""
        if nbytes or written:
            with self._lock:
                self.unwritten -= nbytes + written
                self.avail += nbytes

    def spend(self, nbytes: int) -> None:
        """Bytes written without a take (index preallocation at a roll)."""
        with self._lock:
            self.avail -= nbytes

    def freed(self) -> None:
        """An unlink gave space back: read again at the next take (module doc)."""
        self._read_at = 0.0
        if self.quota:
            _syncfs(self.path)

    def short(self) -> None:
        """A write found no space (ENOSPC/EDQUOT): soft, read again next time."""
        self.low = True
        self._read_at = 0.0


def _size(path: str) -> int:
    """The filesystem's size, or its btrfs quota group's limit where smaller."""
    st = fs.statvfs(path)
    total = st.f_blocks * st.f_frsize
    q = quota(path)
    return total if q is None else min(total, q[0])


def _syncfs(path: str) -> None:
    lib = fs.libc()
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


def _give_cell(space: Space, cell: list) -> None:
    space.dropped(cell[0])
    cell[0] = 0


def for_path(path: str) -> Space:
    """The governor of the filesystem holding the existing directory ``path`` (by ``st_dev``)."""
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
                s._measure(path)
        else:
            s = _registry[dev] = Space(path)
    return s


def floor_of(space: Space, min_free_bytes: int | None, control: bool = False) -> int:
    """The floor for ``min_free_bytes`` (None: the filesystem's default) and the tier."""
    f = space.default_floor if min_free_bytes is None else min_free_bytes
    return f // CONTROL_DIVISOR if control else f


def check_room(path: str, min_free_bytes: int | None = None, what: str = "create") -> None:
    """A data write that buffers nothing (creating a topic or a queue under
    ``path``): DiskFullError when its filesystem is under the floor."""
    space = for_path(path)
    floor = floor_of(space, min_free_bytes)
    if floor and not space.room(floor, path):
        raise DiskFullError(f"{what} {path} refused: less than min_free_bytes={floor} free on its filesystem; "
                            "deletes and drains go on, creation resumes once there is room", path=path)


class Claim:
    """Bytes a caller buffers before handing them to a log (a queue's pending sends and
    lease records), counted as used like a log's own buffer."""

    __slots__ = ("space", "floor", "held", "path", "control", "_cell", "__weakref__")

    def __init__(self, path: str, min_free_bytes: int | None, control: bool = False):
        self.space = for_path(path)
        self.floor = floor_of(self.space, min_free_bytes, control)
        self.held = 0
        self.path = path
        self.control = control
        self._cell = [0]  # ``held`` again, given back if the claim is collected unreleased
        weakref.finalize(self, _give_cell, self.space, self._cell)

    def ensure(self, nbytes: int) -> None:
        """Hold at least ``nbytes`` (with room to grow); DiskFullError when the governor
        refuses even ``nbytes``: the caller refuses the record."""
        if nbytes <= self.held:
            return
        self.held += self.space.take(nbytes - self.held, self.floor, self.path, extra=min(nbytes, 256 << 10),
                                     control=self.control)
        self._cell[0] = self.held

    def force(self, nbytes: int) -> None:
        """Hold ``nbytes`` whatever the floor (acknowledged records a refused write handed back)."""
        if nbytes > self.held:
            self.space.take(nbytes - self.held, 0, self.path, control=self.control)
            self.held = self._cell[0] = nbytes

    def hand_over(self, control: bool, upto: int) -> int:
        """Give up to ``upto`` of what is held to a log grant of the same tier
        (``append_batch(claim=)``); returns the bytes, now the log's."""
        if control != self.control or upto <= 0:
            return 0
        n = min(self.held, upto)
        self.held -= n
        self._cell[0] = self.held
        return n

    def release(self) -> None:
        """The records were handed over (the log took its own grant for them)."""
        if self.held:
            self.space.give(self.held)
            self.held = self._cell[0] = 0
