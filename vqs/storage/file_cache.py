"""A process-wide bound on the files that segments keep open (``max_open_files``).

A segment opens its log file and indexes on demand and registers what it
holds here; past ``max_open_files`` the least recently used give theirs back,
and ``sweep_idle`` closes what was not used for IDLE_CLOSE_MS. Eviction
is CLOCK (second chance): a use sets the segment's ``_hot`` flag (one store,
no lock, per call); the hand clears it once, then evicts. The cap counts
files: a log file or a writable (mapped) index is one descriptor, a sealed
index none (read into memory) but counts, so memory is bounded too.

Invariants:
- a descriptor is owned by a ``FileHandle``, closed when its last reference
  goes: a thread holds the handle for a syscall, so eviction never closes a
  descriptor in use and its number is never reused meanwhile;
- eviction never blocks: a segment whose lock is held is passed over (the cap
  can be exceeded briefly);
- a segment's weight here equals what it holds whenever its lock is free;
- eviction writes nothing: what it drops is reopened from the files.

Crash reasoning: closing a descriptor changes nothing durable. Linux fsyncs
the inode, so a segment evicted between its write and its fsync is made
durable by the next fsync; a write-back error not yet seen is reported to a
descriptor opened later (Linux >= 4.16), and the log latches it.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

from ..errors import ConfigError
from .fd_limit import FD_EXHAUSTED, open_file_limits, raise_open_file_limit, too_many_open_files

#: Environment variable that sets ``max_open_files`` (read at import).
ENV_MAX_OPEN_FILES = "VQS_MAX_OPEN_FILES"
#: The derived default is half the soft limit (the other half is left to
#: sockets, checkpoints, queue locks), and at most this many: every writable
#: index is a memory mapping, and vm.max_map_count is 65,530 by default.
DEFAULT_CEILING = 32_768
#: A file not used for this long is closed by the idle sweep.
IDLE_CLOSE_MS = 60_000


def default_max_open_files() -> int:
    """Half the soft ``RLIMIT_NOFILE`` (at least 16, at most ``DEFAULT_CEILING``)."""
    soft, _ = open_file_limits()
    return max(16, min(DEFAULT_CEILING, soft // 2))


class FileHandle:
    """Owns one descriptor; closes it when the last reference goes (see module doc)."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def close(self, _os_close=os.close) -> None:
        """Close now (``Log.close``: the files go with the log, even if an
        exception's traceback still refers to the handle)."""
        fd, self.fd = self.fd, -1
        if fd >= 0:
            _os_close(fd)

    def __del__(self) -> None:
        # A handle abandoned until interpreter exit (its log never closed, held from another
        # module or a cycle the exit's collection leaves) can be freed after this module's
        # globals were cleared to None: ``close`` therefore binds ``os.close`` when it is
        # defined and looks up no global here.
        try:
            self.close()
        except OSError:  # pragma: no cover - nothing sensible to do at collection
            pass


class FileCache:
    """The segments holding open files, in CLOCK order (see module doc).

    Owners (segments) provide ``_hot`` (set on use) and ``_try_evict() ->
    bool`` (drop everything without blocking; False if busy).
    """

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
        """Set the cap (None: derived from the soft limit again); returns it.
        Files above a lowered cap are closed now, where not in use."""
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
        """Files the cache counts as open now."""
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
        """``os.open`` that, when the process is out of descriptors, closes every
        file not in use and tries once more; then raises TooManyOpenFiles."""
        return self.retry(lambda: os.open(path, flags, 0o644), path, exclude)

    def retry(self, fn, path: str, exclude=None):
        """``fn()`` (which opens or maps ``path``), once more after closing every
        file not in use if the process was out of descriptors."""
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
        """The shared flusher thread's hook (flusher.py): the idle sweep."""
        self.sweep_idle()
        return True


#: The process's file cache.
CACHE = FileCache()


def set_max_open_files(n: int | None) -> int:
    """Cap the segment files VQS keeps open in this process at ``n`` (None:
    half the soft ``RLIMIT_NOFILE``, the default; also set by the environment
    variable ``VQS_MAX_OPEN_FILES``). Least recently used files are closed to
    stay under it and reopened on demand. Raises ConfigError when ``n`` cannot
    be met under the open-file limit. Returns the cap in force."""
    return CACHE.configure(n)
