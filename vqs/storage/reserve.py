"""Space kept allocated past the end of a file, for writes on a full disk.

``reserve(fd, offset, length)`` allocates ``[offset, offset + length)`` without
changing the file's size (``fallocate`` with ``FALLOC_FL_KEEP_SIZE``): appends
then land on blocks the file already owns, so they go on when the filesystem
is full. ``release`` gives such blocks back (a hole punched past the end).

Invariants: neither changes the file's size or content (a reader, and
recovery, see the same bytes); both are best effort: where the filesystem or
platform cannot do it they return False and nothing changed. The blocks stay
allocated across a close and a crash (the reserve of a log survives a restart
on a full disk), and go with the file.

Reserving blocks the file already holds succeeds on a full disk: xfs refuses
such a ``fallocate`` (ENOSPC) when the filesystem has less free space than the
range, though it would allocate nothing (it reserves the whole range's blocks
for its transaction before it looks at the extents), while ext4, tmpfs and
btrfs allocate only what is missing. So a refusal is checked against the
file's extent map (``FS_IOC_FIEMAP``): a range wholly allocated already is
reserved; one allocated up to some point is asked again for the rest only.
Extents the map marks delayed or unknown do not count (they are not blocks
yet). Without the check a log reopened on a full xfs could not use the
reserve it kept (a queue's receives and deletes), nor a spare file its space.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import os
import struct

FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)

#: linux/fiemap.h: _IOWR('f', 11, struct fiemap); the request head and one extent
FS_IOC_FIEMAP = 0xC020660B
_FIEMAP_HEAD = struct.Struct("=QQIIII")  # start, length, flags, mapped extents, extent count, reserved
_FIEMAP_EXTENT = struct.Struct("=QQQ16xI12x")  # logical, physical, length, (reserved), flags, (reserved)
_FIEMAP_BATCH = 32
FIEMAP_EXTENT_LAST = 0x1
#: not blocks on disk yet: unknown location, delayed allocation
_NOT_ALLOCATED = 0x2 | 0x4

_libc = None


def _fallocate():
    global _libc
    if _libc is None:
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
            fn = lib.fallocate
            fn.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
            fn.restype = ctypes.c_int
            _libc = fn
        except (OSError, AttributeError):
            _libc = False
    return _libc


def _call(fd: int, mode: int, offset: int, length: int) -> bool:
    fn = _fallocate()
    if not fn or length <= 0:
        return False
    if fn(fd, mode, offset, length) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSPC, errno.EDQUOT, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
        return False
    raise OSError(err, os.strerror(err))


def allocated_through(fd: int, offset: int, length: int) -> int:
    """How far from ``offset`` (at most ``offset + length``) the file's blocks
    are allocated without a gap, per its extent map; ``offset`` when nothing
    is, or the map cannot be read here (tmpfs has none)."""
    end = offset + length
    pos = offset
    while pos < end:
        req = bytearray(_FIEMAP_HEAD.size + _FIEMAP_EXTENT.size * _FIEMAP_BATCH)
        _FIEMAP_HEAD.pack_into(req, 0, pos, end - pos, 0, 0, _FIEMAP_BATCH, 0)
        try:
            fcntl.ioctl(fd, FS_IOC_FIEMAP, req)
        except OSError:
            return pos
        mapped = _FIEMAP_HEAD.unpack_from(req, 0)[3]
        if not mapped:
            return pos
        for i in range(mapped):
            logical, _, ext_len, flags = _FIEMAP_EXTENT.unpack_from(req, _FIEMAP_HEAD.size + i * _FIEMAP_EXTENT.size)
            if logical > pos or flags & _NOT_ALLOCATED:
                return pos  # a hole, or not on disk yet
            pos = max(pos, logical + ext_len)
            if pos >= end or flags & FIEMAP_EXTENT_LAST:
                return min(pos, end)
    return min(pos, end)


def reserve_errno(fd: int, offset: int, length: int) -> int:
    """``reserve``, telling why it failed: 0 when ``[offset, offset + length)``
    is allocated, else the errno (ENOSPC/EDQUOT: no space; anything else, or
    ENOTSUP when the platform has no ``fallocate``: it cannot be done here)."""
    fn = _fallocate()
    if not fn:
        return errno.ENOTSUP
    if length <= 0:
        return 0
    if fn(fd, FALLOC_FL_KEEP_SIZE, offset, length) == 0:
        return 0
    err = ctypes.get_errno() or errno.EIO
    if err in NO_SPACE:
        # xfs refuses blocks the file holds already (module doc): ask for the rest only
        have = allocated_through(fd, offset, length)
        if have >= offset + length:
            return 0
        if have > offset:
            if fn(fd, FALLOC_FL_KEEP_SIZE, have, offset + length - have) == 0:
                return 0
            err = ctypes.get_errno() or errno.EIO
    return err


def reserve(fd: int, offset: int, length: int) -> bool:
    """Allocate ``length`` bytes at ``offset`` past the end, keeping the size."""
    if length <= 0 or not _fallocate():
        return False
    err = reserve_errno(fd, offset, length)
    if err in (0, errno.ENOSPC, errno.EDQUOT, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
        return not err
    raise OSError(err, os.strerror(err))


def release(fd: int, offset: int, length: int) -> bool:
    """Free the blocks of ``[offset, offset + length)`` (past the end of the file)."""
    return _call(fd, FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE, offset, length)


def allocated_end(fd: int) -> int:
    """How far the file's allocated blocks reach (an estimate from ``st_blocks``)."""
    st = os.fstat(fd)
    return max(st.st_size, st.st_blocks * 512)
