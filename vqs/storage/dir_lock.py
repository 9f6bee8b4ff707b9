"""One process owns a data directory: an ``fcntl.flock`` on ``<dir>/.lock``, taken without
blocking, the holder's pid written in it for a refused opener to name. The kernel drops the
lock when the holder dies (kill -9 included), so a stale lock file never blocks a restart.

An owner's directory holds logs it opens without locks of their own (a Broker's partitions,
a HybridQueue's log): ``owner_above`` finds an exclusive owner of a directory up to
``OWNER_LEVELS`` above a log, held by another process, so that a writer there opening one of
those logs directly is refused as a second owner would be (its appends would interleave with
the owner's, and the owner's next write overwrite them). Locks this process holds are its own
owners' (which open their logs below them), so the probe passes over them: within one process
the owner object is the one to go through.
"""

from __future__ import annotations

import fcntl
import os

from ..disk import fs
from ..errors import LogLockedError
from .durable_file import raise_if_disk_full

LOCK_NAME = ".lock"


#: how far above a log ``owner_above`` looks (a Broker's partition: DATA/topics/T/P)
OWNER_LEVELS = 4
#: the directories whose exclusive lock this process holds -> how many holders (absolute paths)
_HELD: dict[str, int] = {}


def owner_above(directory: str) -> tuple[str, int | None] | None:
    """(directory, holder pid) of an exclusive owner's lock in a directory up to OWNER_LEVELS
    above ``directory``, else None. A probe: a shared flock taken and let go at once (a lock
    held shared, by cooperating writers such as Spark's, is no owner)."""
    d = os.path.abspath(directory)
    for _ in range(OWNER_LEVELS):
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent
        if d in _HELD:
            continue
        try:
            fd = os.open(os.path.join(d, LOCK_NAME), os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
        except BlockingIOError:
            try:
                holder = int(os.pread(fd, 32, 0).split()[0])
            except (ValueError, IndexError, OSError):
                holder = None
            return d, holder
        finally:
            os.close(fd)
    return None


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
        if not self.shared:
            key = os.path.abspath(self.directory)
            _HELD[key] = _HELD.get(key, 0) + 1
        return self

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            if not self.shared:
                key = os.path.abspath(self.directory)
                if _HELD.get(key, 0) > 1:
                    _HELD[key] -= 1
                else:
                    _HELD.pop(key, None)
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
