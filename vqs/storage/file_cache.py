"""A process-wide bound on the files that segments keep open (``max_open_files``).

Segments open files on demand and register what they hold; past the cap the least recently
used give theirs back (CLOCK: a use sets the segment's ``_hot`` flag, the hand clears it
once, then evicts), and ``sweep_idle`` closes what was not used for IDLE_CLOSE_MS. A sealed
index holds no descriptor (it is read into memory) but counts, so memory is bounded too.

Invariants:
- a descriptor is owned by a ``FileHandle``, closed when its last reference goes: a thread
  holds the handle for a syscall, so eviction never closes a descriptor in use;
- eviction never blocks (a segment whose lock is held is passed over) and writes nothing;
- a segment's weight here equals what it holds whenever its lock is free.

Crash reasoning: closing a descriptor changes nothing durable. Linux fsyncs the inode, so a
segment evicted between its write and its fsync is made durable by the next fsync; a
write-back error not yet seen is reported to a descriptor opened later (Linux >= 4.16).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

from ..disk import FD_EXHAUSTED, open_file_limits, raise_open_file_limit, too_many_open_files
from ..errors import ConfigError

ENV_MAX_OPEN_FILES = "VQS_MAX_OPEN_FILES"
#: every writable index is a memory mapping, and vm.max_map_count is 65,530 by default
DEFAULT_CEILING = 32_768
IDLE_CLOSE_MS = 60_000


def default_max_open_files() -> int:
    """Half the soft ``RLIMIT_NOFILE`` (the rest for sockets and other files), at least 16."""
    soft, _ = open_file_limits()
    return max(16, min(DEFAULT_CEILING, soft // 2))


class FileHandle:
    """Owns one descriptor; closes it when the last reference goes."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def close(self, _os_close=os.close) -> None:
        """Close now (``Log.close``), even if a traceback still refers to the handle."""
        fd, self.fd = self.fd, -1
        if fd >= 0:
            _os_close(fd)

    def __del__(self) -> None:
        # (at interpreter exit this module's globals may be None already: ``close`` binds
        # ``os.close`` at definition and looks up no global)
        try:
            self.close()
        except OSError:  # pragma: no cover - nothing sensible to do at collection
            pass


class FileCache:
    """The segments holding open files, in CLOCK order. Owners provide ``_hot`` and
    ``_try_evict() -> bool`` (drop everything without blocking; False if busy)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owners: OrderedDict = OrderedDict()  # owner -> files it holds
        self._open = 0
        self._configured: int | None = None
        env = os.environ.get(ENV_MAX_OPEN_FILES)
        if env:
            try:
                n = int(env)
            except ValueError:
                n = -1
            if n != 0 and n < 4:
                raise ConfigError(f"{ENV_MAX_OPEN_FILES}={env!r}: must be 0 (automatic) or an integer >= 4")
            self._configured = n or None
        self.max_open_files = self._configured or default_max_open_files()
        self._idle_registered = False

    # -- settings -----------------------------------------------------------------
    def configure(self, max_open_files: int | None) -> int:
        """Set the cap (None: derived from the soft limit again); returns it."""
        if max_open_files is not None:
            if not isinstance(max_open_files, int) or isinstance(max_open_files, bool) or max_open_files < 4:
                raise ConfigError(f"max_open_files={max_open_files!r}: must be an integer >= 4")
            soft, hard = open_file_limits()
            if max_open_files > soft - 16:
                soft = raise_open_file_limit(max_open_files + 64)
                if max_open_files > soft - 16:
                    raise ConfigError(
                        f"max_open_files={max_open_files} cannot be met: the open-file limit "
                        f"(RLIMIT_NOFILE) is soft {soft}, hard {hard}; raise it (ulimit -n) or "
                        f"set max_open_files below {max(soft - 16, 4)}"
                    )
        self._configured = max_open_files
        with self._lock:
            self.max_open_files = max_open_files or default_max_open_files()
            if self._open > self.max_open_files:
                self._evict_locked(None, self.max_open_files)
        return self.max_open_files

    def limits_changed(self) -> None:
        """The soft limit was raised: a derived cap follows it."""
        if self._configured is None:
            self.max_open_files = default_max_open_files()

    @property
    def open_files(self) -> int:
        return self._open

    # -- bookkeeping (called by an owner under its own lock) ---------------------
    def set_weight(self, owner, files: int) -> None:
        """``owner`` holds ``files`` files now; evicts others if over the cap."""
        with self._lock:
            old = self._owners.pop(owner, 0)
            self._open += files - old
            if files:
                self._owners[owner] = files
                if self._open > self.max_open_files:
                    self._evict_locked(owner, self.max_open_files)
        if files and not self._idle_registered:
            self._start_idle_sweep()

    def _evict_locked(self, exclude, target: int) -> None:
        """Evict cold owners (not ``exclude``) until at most ``target`` files are
        open or every owner was seen twice."""
        owners = self._owners
        budget = 2 * len(owners)
        while self._open > target and owners and budget > 0:
            budget -= 1
            owner, files = owners.popitem(last=False)
            if owner is exclude or owner._hot or not owner._try_evict():
                owner._hot = False
                owners[owner] = files  # second chance: to the back
                continue
            self._open -= files

    # -- opening ---------------------------------------------------------------------
    def open_fd(self, path: str, flags: int, exclude=None) -> int:
        """``os.open`` through ``retry``."""
        return self.retry(lambda: os.open(path, flags, 0o644), path, exclude)

    def retry(self, fn, path: str, exclude=None):
        """``fn()`` (which opens or maps ``path``), once more after closing every file not in
        use if the process was out of descriptors; then TooManyOpenFiles."""
        try:
            return fn()
        except OSError as e:
            if e.errno not in FD_EXHAUSTED:
                raise
        self.shed(exclude)
        try:
            return fn()
        except OSError as e:
            if e.errno in FD_EXHAUSTED:
                raise too_many_open_files(path, e, held=self._open, cap=self.max_open_files) from e
            raise

    def shed(self, exclude=None) -> None:
        """Close every file not in use (the process ran out of descriptors)."""
        with self._lock:
            self._evict_locked(exclude, 0)

    # -- idle files -------------------------------------------------------------------
    def _start_idle_sweep(self) -> None:
        from .flusher import Flusher

        with self._lock:
            if self._idle_registered:
                return
            self._idle_registered = True
        Flusher.shared().register(self, IDLE_CLOSE_MS / 2000)

    def sweep_idle(self) -> None:
        """One pass of the idle sweep: close the files of every owner not used
        since the previous pass (two passes per IDLE_CLOSE_MS)."""
        with self._lock:
            for owner in list(self._owners):
                if owner._hot:
                    owner._hot = False
                elif owner._try_evict():
                    self._open -= self._owners.pop(owner)

    def _flush_tick(self) -> bool:
        """The shared flusher thread's hook (flusher.py)."""
        self.sweep_idle()
        return True


CACHE = FileCache()


def set_max_open_files(n: int | None) -> int:
    """Cap the segment files VQS keeps open in this process at ``n`` (None: half the soft
    ``RLIMIT_NOFILE``, the default; also ``VQS_MAX_OPEN_FILES``). Least recently used files
    are closed to stay under it. ConfigError when the open-file limit cannot meet ``n``."""
    return CACHE.configure(n)
