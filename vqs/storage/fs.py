"""The filesystem seam: storage writes, syncs, truncates, renames and unlinks here.

Each name is bound to the ``os`` function itself (the hot path pays one attribute lookup).
A test may ``install`` a :class:`Fault`, which rebinds them to wrappers that fail as a
filesystem would for writes under ``Fault.under``, and ``uninstall`` it:

- ``Fault.space(free, errno)``: ``free`` bytes are left; a write that would take more fails
  with ``errno`` (ENOSPC, EDQUOT) and writes nothing; ``unlink``/``ftruncate`` give bytes
  back, as does ``Fault.give(n)``; the governor's ``free_bytes`` on that filesystem sees it;
- ``Fault.fail(at, errno)``: the ``at``-th write from now and every later one fail (EIO).

``allocate`` (``fallocate`` with ``FALLOC_FL_KEEP_SIZE``) is advice: False wherever the
blocks cannot be had, and under a fault (whose space model counts writes only).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno as _errno
import os
import threading

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

_ORIGINAL = {name: globals()[name] for name in (
    "write", "writev", "pwrite", "fsync", "ftruncate", "truncate", "rename", "replace",
    "unlink", "statvfs")}

NO_SPACE = (_errno.ENOSPC, _errno.EDQUOT)

_fault: Fault | None = None

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
    if _fallocate is None or _fault is not None or length <= 0:
        return False
    return _fallocate(fd, FALLOC_FL_KEEP_SIZE, offset, length) == 0


class Fault:
    """A failure to inject (module doc)."""

    def __init__(self, under: str, *, free: int | None = None, at: int | None = None,
                 errno: int = _errno.ENOSPC):
        self.under = os.path.abspath(under)
        try:
            self.dev = os.stat(self.under).st_dev
        except OSError:
            self.dev = None
        self.free = free
        self.at = at
        self.errno = errno
        self.failures = 0
        self._lock = threading.Lock()

    @classmethod
    def space(cls, under: str, free: int, errno: int = _errno.ENOSPC) -> Fault:
        return cls(under, free=free, errno=errno)

    @classmethod
    def fail(cls, under: str, at: int = 1, errno: int = _errno.EIO) -> Fault:
        return cls(under, at=at, errno=errno)

    def give(self, nbytes: int) -> None:
        """Space comes back from elsewhere."""
        with self._lock:
            self.free += nbytes

    def _mine(self, path_or_fd) -> bool:
        try:
            p = os.readlink(f"/proc/self/fd/{path_or_fd}") if isinstance(path_or_fd, int) \
                else os.path.abspath(path_or_fd)
        except OSError:
            return False
        return p == self.under or p.startswith(self.under + os.sep)

    def _charge(self, fd_or_path, nbytes: int) -> None:
        """Before a write of ``nbytes``: raise as the filesystem would, or count it."""
        if not self._mine(fd_or_path):
            return
        with self._lock:
            if self.at is not None:
                self.at -= 1
                if self.at <= 0:
                    self.failures += 1
                    raise OSError(self.errno, os.strerror(self.errno))
            elif self.free is not None:
                if nbytes > self.free:
                    self.failures += 1
                    raise OSError(self.errno, os.strerror(self.errno))
                self.free -= nbytes

    def _credit(self, nbytes: int) -> None:
        if self.free is not None and nbytes > 0:
            with self._lock:
                self.free += nbytes


def _size(p) -> int:
    try:
        return (os.fstat(p) if isinstance(p, int) else os.stat(p)).st_size
    except OSError:
        return 0


def _write(fd, data):
    _fault._charge(fd, len(data))
    return _ORIGINAL["write"](fd, data)


def _writev(fd, bufs):
    _fault._charge(fd, sum(memoryview(b).nbytes for b in bufs))
    return _ORIGINAL["writev"](fd, bufs)


def _pwrite(fd, data, pos):
    grow = max(0, pos + len(data) - _size(fd))
    _fault._charge(fd, grow)
    return _ORIGINAL["pwrite"](fd, data, pos)


def _fsync(fd):
    f = _fault
    if f.at is not None and f._mine(fd):
        f._charge(fd, 0)
    return _ORIGINAL["fsync"](fd)


def _shrinking(name: str):
    """``ftruncate``/``truncate`` (``name``) that give the bytes cut back to the fault."""
    def call(fd_or_path, length):
        before = _size(fd_or_path)
        _ORIGINAL[name](fd_or_path, length)
        if _fault._mine(fd_or_path):
            _fault._credit(before - length)
    return call


def _unlink(path, *a, **k):
    n = _size(path)
    _ORIGINAL["unlink"](path, *a, **k)
    if _fault._mine(path):
        _fault._credit(n)


def install(fault: Fault) -> Fault:
    """Route storage's calls through ``fault`` (tests); returns it."""
    global _fault, write, writev, pwrite, fsync, ftruncate, truncate, unlink
    _fault = fault
    write, writev, pwrite, fsync = _write, _writev, _pwrite, _fsync
    ftruncate, truncate, unlink = _shrinking("ftruncate"), _shrinking("truncate"), _unlink
    return fault


def uninstall() -> None:
    """Back to the ``os`` functions."""
    global _fault
    _fault = None
    globals().update(_ORIGINAL)


def free_bytes_limit(path: str) -> int | None:
    """What an installed space fault leaves on ``path``'s filesystem, or None."""
    f = _fault
    if f is None or f.free is None:
        return None
    try:
        if os.stat(path).st_dev != f.dev and not f._mine(path):
            return None
    except OSError:
        return None
    return f.free
