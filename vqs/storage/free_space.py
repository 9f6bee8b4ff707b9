"""Free space as a writer sees it: the filesystem's, or less under a btrfs quota.

``statvfs`` shows the filesystem's free blocks; a btrfs quota group's limit
(``btrfs qgroup limit``) does not show there, so ``min_free_bytes`` and
``/health`` would see room a write then finds spent (EDQUOT). Where the path
is on btrfs and its subvolume's quota group (level 0, ``0/<subvolume id>``)
has a limit, ``free_bytes`` is the least of the filesystem's free space and
the room under the limit: ``max_referenced`` (and ``max_exclusive``) minus
what the group uses and has reserved (``referenced`` / ``exclusive`` plus
``rsv_data``, ``rsv_meta_prealloc``, ``rsv_meta_pertrans``), read from
``/sys/fs/btrfs/<fsid>/qgroups/0_<id>/`` (world-readable, kernels since 5.9).
The directory is found once per path with two ioctls that need no
privilege: BTRFS_IOC_FS_INFO (the fsid) and BTRFS_IOC_INO_LOOKUP with tree
id 0 (the id of the subvolume holding the path).

Not seen: limits on higher-level groups (``1/x`` ...: sysfs does not say
which subvolumes they hold), and usage btrfs has not yet counted (the group's
numbers move at transaction commits). Where anything is missing (not btrfs,
quotas off, an older kernel, no limit) the filesystem's free space is used,
as before. Cost: one ``statvfs`` and, under a quota, a few small sysfs reads
per call; callers read free space only now and then (log_space.py).

It also tells which directories are on btrfs (``on_btrfs``: one ``statfs``
per directory, cached).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import os
import struct
import uuid

BTRFS_SUPER_MAGIC = 0x9123683E
_btrfs: dict[str, bool] = {}  # directory -> on btrfs

_FS_INFO = 0x8400941F  # _IOR(0x94, 31, struct btrfs_ioctl_fs_info_args), 1024 bytes
_INO_LOOKUP = 0xD0009412  # _IOWR(0x94, 18, struct btrfs_ioctl_ino_lookup_args), 4096 bytes
_FIRST_FREE_OBJECTID = 256
_USED = ("rsv_data", "rsv_meta_prealloc", "rsv_meta_pertrans")

_qgroup_dirs: dict[str, str | None] = {}


_libc = None


def libc():
    """The C library (statfs, syncfs: calls the os module lacks); False where unavailable."""
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        except OSError:
            _libc = False
    return _libc


def fs_magic(path: str) -> int | None:
    """The ``statfs`` f_type of ``path``'s filesystem; None where unknown."""
    lib = libc()
    if not lib:
        return None
    buf = ctypes.create_string_buffer(512)  # struct statfs; f_type is its first field (a long)
    try:
        if lib.statfs(os.fsencode(path), buf) == 0:
            return ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF
    except (AttributeError, TypeError):
        pass
    return None


def on_btrfs(path: str) -> bool:
    """Whether directory ``path`` is on btrfs (one ``statfs`` per directory)."""
    b = _btrfs.get(path)
    if b is None:
        if len(_btrfs) >= 65536:
            _btrfs.clear()  # (directories of logs long deleted; each is looked at again)
        b = _btrfs[path] = fs_magic(path) == BTRFS_SUPER_MAGIC
    return b


def _qgroup_dir(path: str) -> str | None:
    """``/sys/fs/btrfs/<fsid>/qgroups/0_<subvolume id>`` of ``path`` (cached)."""
    try:
        return _qgroup_dirs[path]
    except KeyError:
        pass
    d = None
    if on_btrfs(path):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            fd = -1
        if fd >= 0:
            try:
                info = bytearray(1024)
                fcntl.ioctl(fd, _FS_INFO, info)
                fsid = uuid.UUID(bytes=bytes(info[16:32]))
                args = bytearray(4096)
                struct.pack_into("<QQ", args, 0, 0, _FIRST_FREE_OBJECTID)
                fcntl.ioctl(fd, _INO_LOOKUP, args)
                (subvol,) = struct.unpack_from("<Q", args, 0)
                d = f"/sys/fs/btrfs/{fsid}/qgroups/0_{subvol}"
            except OSError:
                d = None
            finally:
                os.close(fd)
    if len(_qgroup_dirs) >= 4096:
        _qgroup_dirs.clear()
    _qgroup_dirs[path] = d
    return d


def _read(d: str, name: str) -> int:
    with open(os.path.join(d, name), "rb") as f:
        return int(f.read())


def quota_room(path: str) -> int | None:
    """Bytes left under the limit of ``path``'s btrfs quota group (module
    doc); None where there is no such limit to see."""
    d = _qgroup_dir(path)
    if d is None:
        return None
    try:
        rsv = sum(_read(d, n) for n in _USED)
        room = None
        for limit, usage in (("max_referenced", "referenced"), ("max_exclusive", "exclusive")):
            m = _read(d, limit)
            if m:
                r = m - _read(d, usage) - rsv
                room = r if room is None else min(room, r)
    except (OSError, ValueError):
        return None  # quotas turned off (the directory went), or an older kernel
    return None if room is None else max(0, room)


def quota_limit(path: str) -> int | None:
    """The smallest limit of ``path``'s btrfs quota group; None where none is seen."""
    d = _qgroup_dir(path)
    if d is None:
        return None
    try:
        limits = [m for m in (_read(d, "max_referenced"), _read(d, "max_exclusive")) if m]
    except (OSError, ValueError):
        return None
    return min(limits) if limits else None


def free_bytes(path: str) -> int:
    """Free bytes for an unprivileged writer at ``path``: the filesystem's
    (``statvfs``), or the room under its btrfs quota group's limit where that
    is less. Raises OSError as ``statvfs`` does."""
    st = os.statvfs(path)
    free = st.f_bavail * st.f_frsize
    room = quota_room(path)
    return free if room is None else min(free, room)
