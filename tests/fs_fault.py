"""Filesystem faults for the tests, injected through storage's filesystem seam
(``vqs.disk.fs``): ``install`` rebinds the seam's names to wrappers that fail as a
filesystem would for files under ``Fault.under``; ``uninstall`` restores them.

- ``Fault.space(under, free, errno)``: ``free`` bytes are left; a write that would take more
  fails with ``errno`` (ENOSPC, EDQUOT) and writes nothing; ``unlink``/``ftruncate`` give
  bytes back, as does ``Fault.give(n)``. ``statvfs`` on that filesystem shows what is left,
  so the space governor sees it too; ``allocate`` gets nothing (the model counts writes).
- ``Fault.fail(under, at, errno)``: the ``at``-th write from now and every later one fail
  (EIO), as do fsyncs of files under ``under`` from then on.

Child processes import it (the tests directory on their path) before the code under test runs.
"""

from __future__ import annotations

import errno as _errno
import os
import threading

from vqs.disk import fs

_NAMES = ("write", "writev", "pwrite", "fsync", "ftruncate", "truncate", "unlink", "statvfs", "allocate")
_ORIGINAL = {name: getattr(fs, name) for name in _NAMES}


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

    def mine(self, path_or_fd) -> bool:
        try:
            p = os.readlink(f"/proc/self/fd/{path_or_fd}") if isinstance(path_or_fd, int) \
                else os.path.abspath(path_or_fd)
        except OSError:
            return False
        return p == self.under or p.startswith(self.under + os.sep)

    def charge(self, fd_or_path, nbytes: int) -> None:
        """Before a write of ``nbytes``: raise as the filesystem would, or count it."""
        if not self.mine(fd_or_path):
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

    def credit(self, nbytes: int) -> None:
        if self.free is not None and nbytes > 0:
            with self._lock:
                self.free += nbytes

    def on_device(self, path) -> bool:
        """Whether ``path`` is on the filesystem this fault's space models."""
        try:
            return os.stat(path).st_dev == self.dev or self.mine(path)
        except OSError:
            return False


def _size(p) -> int:
    try:
        return (os.fstat(p) if isinstance(p, int) else os.stat(p)).st_size
    except OSError:
        return 0


def install(fault: Fault) -> Fault:
    """Route storage's calls through ``fault``; returns it."""
    orig = _ORIGINAL

    def write(fd, data):
        fault.charge(fd, len(data))
        return orig["write"](fd, data)

    def writev(fd, bufs):
        fault.charge(fd, sum(memoryview(b).nbytes for b in bufs))
        return orig["writev"](fd, bufs)

    def pwrite(fd, data, pos):
        fault.charge(fd, max(0, pos + len(data) - _size(fd)))
        return orig["pwrite"](fd, data, pos)

    def fsync(fd):
        if fault.at is not None and fault.mine(fd):
            fault.charge(fd, 0)
        return orig["fsync"](fd)

    def shrinking(name):
        def call(fd_or_path, length):
            before = _size(fd_or_path)
            orig[name](fd_or_path, length)
            if fault.mine(fd_or_path):
                fault.credit(before - length)
        return call

    def unlink(path, *a, **k):
        n = _size(path)
        orig["unlink"](path, *a, **k)
        if fault.mine(path):
            fault.credit(n)

    def statvfs(path):
        st = orig["statvfs"](path)
        if fault.free is None or not fault.on_device(path):
            return st
        # in bytes (a block of 1), so that what is left is exact
        free = min(st.f_bavail * st.f_frsize, fault.free)
        return os.statvfs_result((1, 1, st.f_blocks * st.f_frsize, free, free, st.f_files, st.f_ffree,
                                  st.f_favail, st.f_flag, st.f_namemax))

    def allocate(fd, offset, length):
        return False

    fs.write, fs.writev, fs.pwrite, fs.fsync = write, writev, pwrite, fsync
    fs.ftruncate, fs.truncate, fs.unlink = shrinking("ftruncate"), shrinking("truncate"), unlink
    fs.statvfs, fs.allocate = statvfs, allocate
    return fault


def uninstall() -> None:
    """Back to the seam's own functions."""
    for name, f in _ORIGINAL.items():
        setattr(fs, name, f)
