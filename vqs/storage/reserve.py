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
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os

FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02

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
    return ctypes.get_errno() or errno.EIO


def reserve(fd: int, offset: int, length: int) -> bool:
    """Allocate ``length`` bytes at ``offset`` past the end, keeping the size."""
    return _call(fd, FALLOC_FL_KEEP_SIZE, offset, length)


def release(fd: int, offset: int, length: int) -> bool:
    """Free the blocks of ``[offset, offset + length)`` (past the end of the file)."""
    return _call(fd, FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE, offset, length)


def allocated_end(fd: int) -> int:
    """How far the file's allocated blocks reach (an estimate from ``st_blocks``)."""
    st = os.fstat(fd)
    return max(st.st_size, st.st_blocks * 512)
