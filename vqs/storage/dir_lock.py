"""One process owns a data directory: an ``fcntl.flock`` on ``<dir>/.lock``, taken without
blocking, the holder's pid written in it for a refused opener to name. The kernel drops the
lock when the holder dies (kill -9 included), so a stale lock file never blocks a restart.
"""

from __future__ import annotations

import fcntl
import os

from ..disk import fs
from ..errors import LogLockedError
from .durable_file import raise_if_disk_full

LOCK_NAME = ".lock"


class DirLock:
    """Exclusive, or ``shared`` among cooperating processes (Spark writers) while still
    excluding an exclusive owner."""

    def __init__(self, directory: str, *, shared: bool = False, hint: str | None = None):
        self.directory = directory
        self.hint = hint  # what a refused opener can do instead
        self.path = os.path.join(directory, LOCK_NAME)
        self.shared = shared
        self._fd: int | None = None

    def acquire(self) -> DirLock:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:  # (under a spent quota even an inode needs space)
            raise_if_disk_full(e, self.path)
            raise
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = int(os.pread(fd, 32, 0).split()[0])
            except (ValueError, IndexError, OSError):
                holder = None
            os.close(fd)
            raise LogLockedError(self.directory, holder, self.hint) from None
        # fixed width: a shared holder never leaves a longer stale pid behind
        try:
            if not self.shared:
                os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid():<12d}\n".encode(), 0)
        except OSError as e:
            # a full disk must not stop an open: the lock is ours, unnamed
            if not self.shared and e.errno not in fs.NO_SPACE:
                os.close(fd)
                raise
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                if not self.shared:
                    try:
                        os.ftruncate(fd, 0)
                    except OSError as e:
                        # (btrfs under a quota; a stale pid is harmless)
                        if e.errno not in fs.NO_SPACE:
                            raise
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    def __enter__(self) -> DirLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
