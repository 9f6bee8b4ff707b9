"""The filesystem seam: storage writes, syncs, truncates, renames and unlinks here.

Each name is bound to the ``os`` function itself (the hot path pays one attribute lookup),
and callers look it up on this module at each call, so a test can rebind one to a wrapper
that fails as a filesystem would (ENOSPC, EDQUOT, EIO) or dies at a chosen call. The space
governor reads free space through ``statvfs`` here, so a rebound one is what it sees.

``allocate`` (``fallocate`` with ``FALLOC_FL_KEEP_SIZE``) is advice: False wherever the
blocks cannot be had.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno as _errno
import os

write = os.write
writev = os.writev
pwrite = os.pwrite
fsync = os.fsync
ftruncate = os.ftruncate
truncate = os.truncate
rename = os.rename
replace = os.replace
unlink = os.unlink
statvfs = os.statvfs

NO_SPACE = (_errno.ENOSPC, _errno.EDQUOT)

FALLOC_FL_KEEP_SIZE = 0x01


_libc = None


def libc():
    """The C library, for calls the os module lacks; False where unavailable."""
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
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


def _load_fallocate():
    fn = getattr(libc(), "fallocate", None)
    if fn is None:
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    fn.restype = ctypes.c_int
    return fn


_fallocate = _load_fallocate()


def allocate(fd: int, offset: int, length: int) -> bool:
    """Blocks for ``[offset, offset + length)`` of ``fd``, its size unchanged (module doc)."""
    if _fallocate is None or length <= 0:
        return False
    return _fallocate(fd, FALLOC_FL_KEEP_SIZE, offset, length) == 0
