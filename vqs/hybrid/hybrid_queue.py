"""HybridQueue: a ``queue.Queue`` with a memory tier and a disk tier (a storage Log).

This module is the public facade: configuration, ``put``/``get`` and the rest
of the ``queue.Queue`` API, metrics and close. The disk tier's operations
(spill, write-through, read-ahead, reclaim) are in disk_tier.py, the files of
the queue directory in directory.py. The memory tier has no module of its
own: it is a deque and a byte count whose every operation is inlined in
``put``/``get`` below (their fast paths, measured against ``queue.Queue``:
keep them inline, without extra calls or attribute hops).

Why over 500 lines: the whole ``queue.Queue`` API (put/get, their batch and
nowait forms, task_done/join, qsize/empty/full, maxsize, shutdown) with those
inlined fast paths (the subclass hooks' path is in hooks.py);
the disk tier, the directory files and the metrics are already outside.

Logical order (strictly FIFO)::

    [ read cache ][ rest of the disk backlog ][ memory tail ]
      offsets read_off .. disk_next .. end         live objects, never serialized

* The disk backlog is the log range ``[read_off, end)``: older than every item
  in the memory tail. ``read cache`` is the part of it already deserialized
  (read ahead in chunks), ``[disk_next, end)`` is still only on disk.
* The memory tail holds live objects (no serialization on the hot path) up to
  ``memory_items`` / ``memory_bytes``. When a put finds it full, the *oldest*
  tail items are serialized and appended to the log (a "spill", in chunks of
  up to a quarter of the budget), which keeps the order: they come right after
  everything already on disk. ``get`` takes from the disk backlog first, then
  from the memory tail.
* ``durable=True``: every put is written through to the log (flush
  ``always``) before it returns; the memory tail stays empty and the memory
  budget applies to the read cache instead (items put while nothing is
  waiting on disk go straight into it, so a consumer that keeps up never
  deserializes).
* ``close()`` appends the memory tail to the log, fsyncs, and checkpoints the
  consumed position; reopening resumes in the same order.

Files in ``path``: ``.lock`` (one process owns the queue), ``hybrid.json``
(format and serializer), ``hybrid.ckpt`` (consumed position, see
checkpoint.py) and ``log/`` (the storage Log); see directory.py.

What a crash can lose or redeliver, per mode (docs/hybrid.md has the table):

* ``durable=False``: a process crash loses the memory tail (never written) and
  can redeliver up to one read-ahead chunk of disk items already got (the
  consumed position is checkpointed at each read-ahead). A clean close() loses
  and redelivers nothing.
* ``durable=True``: kill -9 loses no acknowledged put and redelivers no
  acknowledged get (each get records the consumed position with one pwrite
  before it returns). Power loss loses no acknowledged put and can redeliver
  the gets of the last ``checkpoint_fsync_s`` (1 s) at most.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import warnings
import weakref
from collections import deque
from collections.abc import Iterable
from itertools import islice
from queue import Empty
from typing import Any

from ..errors import ConfigError, DiskFullError, LogClosedError, ShutDown
from ..record import codec_id
from ..storage import RECOVERY_POLICIES, DirLock, Log, make_dirs
from .checkpoint import Checkpoint
from .directory import CKPT, LOG_DIR, check_meta
from .disk_tier import DiskTier, deadline_for
from .hooks import HOOKS, QueueHooks
from .metrics import HybridMetrics, LatencyHistograms
from .serializers import Serializer, resolve, wrap_error

__all__ = ["HybridMetrics", "HybridQueue"]

_INF = float("inf")
#: A log batch may hold this many bytes of values (record_batch allows 1 GiB).
SPILL_BATCH_MAX_BYTES = 512 << 20
_monotonic = time.monotonic
#: What a non-blocking get that found nothing does before it answers: give the processor to
#: another runnable thread. CPython hands the GIL to whichever thread takes it first; a poller
#: that only released it (``time.sleep(0)``) was still running and mostly took it straight back,
#: while yielding the processor lets a runnable writer (back from its fsync) go first.
_yield = getattr(os, "sched_yield", None) or (lambda: time.sleep(0))


def _check_limit(name: str, value, *, allow_none: bool) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(
            f"{name}={value!r}: must be an integer >= 0" + (" or None" if allow_none else "")
        )


def _check_maxsize(value) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(f"maxsize={value!r}: must be an integer (<= 0: no bound, as queue.Queue)")


def _check_timeout(block: bool, timeout: float | None) -> None:
    """Refuse a negative timeout of a blocking call, as ``queue.Queue`` does, on
    every path (fast paths included) and before any work is done."""
    if block and timeout is not None and timeout < 0:
        raise ValueError("'timeout' must be a non-negative number")


class HybridQueue(QueueHooks, DiskTier):
    """A thread-safe FIFO queue of Python objects: memory first, overflow to disk,
    survives restarts. ``queue.Queue``-compatible; see the module doc and
    docs/hybrid.md.

    ``memory_items`` / ``memory_bytes``: budget of the memory tier (None = no
    limit; sizes by ``sizeof``, default ``sys.getsizeof``, which is shallow).
    ``max_disk_bytes``: budget of the disk tier in serialized bytes waiting on
    disk (None = no limit); when both tiers are full, ``put`` blocks or raises
    ``queue.Full`` as ``queue.Queue`` does at ``maxsize``.
    ``durable``: write every put through to disk (fsync) before it returns.
    ``serializer``: "pickle" (default), "json", "msgpack", "raw", or an object
    with ``dumps``/``loads``. ``compression``: None, "zstd", "lz4" or "gzip" (log batches).
    ``recovery``: "fail" (default), "skip" or "truncate", as ``Log.open``'s:
    what opening after a crash does with a damaged batch in the disk tier.
    A full filesystem (less free than ``min_free_bytes``; None, the default:
    the smaller of 64 MiB and 5 % of the filesystem, vqs.disk.space) is a
    full disk tier: ``put`` raises ``queue.Full`` (cause: the DiskFullError)
    or waits, and goes on once space is freed; ``close()`` ignores
    ``min_free_bytes`` (that room is what lets it write the memory tier).
    ``latency_histograms``: time every put/get for ``metrics`` (Prometheus).
    ``maxsize``: as ``queue.Queue(maxsize)``, a bound in items (``qsize()``,
    both tiers; <= 0: none), beside the byte budgets; keyword-only, since the
    first argument is the directory.

    ``shutdown(immediate=False)`` and ``ShutDown`` (``vqs.ShutDown``) as in
    Python 3.13's ``queue``; an immediate shutdown stops handing items out in
    this process and deletes nothing (see ``shutdown``). The subclass hooks
    ``_init``/``_qsize``/``_put``/``_get`` are honoured: a class that overrides
    one has its instances' put/get run ``queue.Queue``'s algorithm over the
    hooks (hooks.py), while this class's put/get keep their inlined fast
    paths; the batch calls never go through the hooks.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        memory_items: int | None = 100_000,
        memory_bytes: int | None = 64 << 20,
        max_disk_bytes: int | None = None,
        durable: bool = False,
        serializer: Any = "pickle",
        compression: str | None = None,
        *,
        segment_bytes: int | None = None,
        sizeof=None,
        checkpoint_fsync_s: float = 1.0,
        recovery: str = "fail",
        latency_histograms: bool = False,
        min_free_bytes: int | None = None,
        maxsize: int = 0,
    ):
        _check_limit("memory_items", memory_items, allow_none=True)
        _check_limit("memory_bytes", memory_bytes, allow_none=True)
        _check_limit("max_disk_bytes", max_disk_bytes, allow_none=True)
        if not isinstance(durable, bool):
            raise ConfigError(f"durable={durable!r}: must be True or False")
        codec_id(compression)  # ConfigError naming compression
        ser: Serializer = resolve(serializer)
        if sizeof is not None and not callable(sizeof):
            raise ConfigError(f"sizeof={sizeof!r}: must be a callable returning a size in bytes")
        if segment_bytes is None:
            segment_bytes = 32 << 20 if max_disk_bytes is None else \
                min(64 << 20, max(1 << 20, max_disk_bytes // 8))
        _check_limit("segment_bytes", segment_bytes, allow_none=False)
        _check_limit("min_free_bytes", min_free_bytes, allow_none=True)
        if not isinstance(checkpoint_fsync_s, (int, float)) or checkpoint_fsync_s < 0:
            raise ConfigError(f"checkpoint_fsync_s={checkpoint_fsync_s!r}: must be a number >= 0")
        if recovery not in RECOVERY_POLICIES:
            raise ConfigError(f"recovery={recovery!r}: must be one of {', '.join(RECOVERY_POLICIES)}")
        if not isinstance(latency_histograms, bool):
            raise ConfigError(f"latency_histograms={latency_histograms!r}: must be True or False")
        _check_maxsize(maxsize)

        self.path = os.fspath(path)
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise ConfigError(f"path={self.path!r} exists and is not a directory")
        self.durable = durable
        self.serializer = ser
        self.compression = compression
        self.memory_items = memory_items
        self.memory_bytes = memory_bytes
        self.max_disk_bytes = max_disk_bytes
        self._dumps = ser.dumps
        self._loads = ser.loads
        self._sizeof = sizeof or sys.getsizeof
        self._max_items = sys.maxsize if memory_items is None else memory_items
        self._max_bytes = _INF if memory_bytes is None else memory_bytes
        self._max_disk = _INF if max_disk_bytes is None else max_disk_bytes
        # Spill in chunks (a quarter of the budget, at most 1024 items / 1 MiB)
        # so that one append_batch serves many puts.
        self._chunk_items = max(1, min(1024, self._max_items // 4))
        self._chunk_bytes = max(1, min(1 << 20, int(min(self._max_bytes, 1 << 60)) // 4))
        self._ckpt_fsync_s = float(checkpoint_fsync_s)

        self._lock = threading.Lock()
        self._not_empty = threading.Condition(self._lock)
        self._not_full = threading.Condition(self._lock)
        self._all_done = threading.Condition(self._lock)
        self._getters = 0     # threads waiting in get (notify only when someone waits)
        self._putters = 0
        self._closed = False
        self._maxsize = maxsize
        self.is_shutdown = False        # as queue.Queue's attribute (read it, set it with shutdown())
        self._drained = False           # shutdown(immediate=True): nothing more is handed out
        self._drain_end = 0
        self._drain_count = 0           # the items that shutdown(immediate=True) marked done
        self._stopped = False           # closed or shut down: the lock-free empty get must look
        self._held_tail = None          # the memory tail while drained, for close() to write
        # put's fast path appends to the memory tail while it is under this;
        # -1 (bounded by maxsize, shut down, closed) sends every put through
        # the checking path (_admit_locked), at no cost to the unbounded fast path
        self._put_fast_max = self._max_items if maxsize <= 0 else -1
        self._inflight_items = 0        # durable: items of the puts counted in _inflight
        self._covered_ahead = 0         # durable: of those, items already under _end (group commit)
        self._hook_wait = (True, None)  # the current hooked put's (block, deadline): hooks.py
        self._init(maxsize)
        self._hooked = any(getattr(type(self), h) is not getattr(HybridQueue, h) for h in HOOKS)
        if self._hooked:
            self._use_hooks()  # instance attributes: the class's fast paths stay as they are

        self._mem: deque = deque()      # memory tail (live objects, not on disk)
        self._mem_bytes = 0
        self._cache: deque = deque()    # read cache: objects of offsets [read_off, disk_next)
        self._csz: deque = deque()      # their serialized sizes
        self._cache_bytes = 0           # sum(_csz), kept in durable mode only (its budget)
        self._unfinished = 0
        self._puts = 0
        self._spilled = 0
        self._disk_writes = 0
        self._disk_reads = 0
        self._reserved = 0              # durable: bytes of puts being written
        self._inflight = 0              # durable: puts between reservation and registration
        self._plain = not durable        # get's fast path needs no checkpoint per get
        self._last_sync = _monotonic()
        self._reclaim_every = max(1, segment_bytes // 2)
        self._reclaim_left = self._reclaim_every  # consumed bytes until the next reclaim
        self._drain_reclaim = True      # reclaim at the get that empties the disk tier (disk_tier.py)
        self._reclaim_to = None         # None: gets reclaim inline; else the deferred position (defer_reclaim)
        self._disk_full_errors = 0      # disk writes that found the filesystem full
        self._full_refusals = 0         # puts that raised queue.Full
        self._serialization_errors = 0
        self._holes: list = []          # [from, to): offsets recovery="skip" removed (ahead of read_off)
        self._hole_items = 0            # their total
        self._repairing = 0             # recovery="truncate" cutting the log: durable puts wait
        self.recovery = recovery
        self._latency = LatencyHistograms() if latency_histograms else None
        if self._latency is not None:
            # timed wrappers as instance attributes: no cost when not asked for
            self.put = self._latency.timed_put(self.put)
            self.get = self._latency.timed_get(self.get)
            self.put_batch = self._latency.timed_put(self.put_batch)
            self.get_batch = self._latency.timed_get(self.get_batch)

        make_dirs(self.path)  # (a spent quota: DiskFullError)
        self._dir_lock = DirLock(self.path, hint=(
            "a HybridQueue directory has one owner process: share the queue through that process, "
            "or give this one a directory of its own")).acquire()
        self._log: Log | None = None
        self._ckpt: Checkpoint | None = None
        try:
            check_meta(self.path, ser)
            self._log = Log.open(
                os.path.join(self.path, LOG_DIR),
                flush="always" if durable else "never",
                compression=compression,
                segment_bytes=segment_bytes,
                segment_ms=None,
                lock=False,
                recovery=recovery,
                # one spill or put_batch is one record batch, so one write: a
                # write that fails (a full disk) leaves none of it in the log
                batch_max_bytes=SPILL_BATCH_MAX_BYTES,
                min_free_bytes=min_free_bytes,
            )
            self._ckpt = Checkpoint(os.path.join(self.path, CKPT))
            self._restore()
        except BaseException:
            self._closed = True
            if self._log is not None:
                self._log.close()
            if self._ckpt is not None:
                self._ckpt.close()
            self._dir_lock.release()
            raise

    # ------------------------------------------------------------------- put

    def put(self, item, block: bool = True, timeout: float | None = None) -> None:
        """Put ``item`` at the tail. Blocks (or raises ``queue.Full`` when
        ``block`` is false or ``timeout`` passes) only when the memory tier and
        the disk tier are both full."""
        if timeout is not None:
            _check_timeout(block, timeout)
        if self.durable:
            self._put_durable([item], block, timeout)
            return
        size = self._sizeof(item)
        with self._lock:
            mem = self._mem
            if len(mem) >= self._put_fast_max or self._mem_bytes + size > self._max_bytes:
                self._admit_locked([item], [size], block, timeout)
            else:
                mem.append(item)
                self._mem_bytes += size
            self._unfinished += 1
            self._puts += 1
            if self._getters:
                self._not_empty.notify()

    def put_nowait(self, item) -> None:
        return self.put(item, False)

    def put_batch(self, items: Iterable, block: bool = True, timeout: float | None = None) -> None:
        """Put every item, in order, as one operation: all or none. ``queue.Full``
        when they do not fit in time; ``MessageTooLarge`` at once when they
        could never fit (more than the memory budget plus ``max_disk_bytes``)."""
        if timeout is not None:
            _check_timeout(block, timeout)
        items = list(items)
        if not items:
            return
        if self.durable:
            self._put_durable(items, block, timeout)
            return
        sizes = list(map(self._sizeof, items))
        with self._lock:
            self._admit_locked(items, sizes, block, timeout)
            n = len(items)
            self._unfinished += n
            self._puts += n
            if self._getters:
                self._not_empty.notify(n)

    # ------------------------------------------------------------------- get

    def get(self, block: bool = True, timeout: float | None = None):
        """Remove and return the head item (disk backlog first, then memory tail).
        Raises ``queue.Empty`` when ``block`` is false or ``timeout`` passes.

        A non-blocking get on an empty queue answers without the lock: the
        emptiness test reads two ints and a deque length, each read atomic under
        the GIL. A stale read can only say "empty" about an item put a moment
        ago, which a locked check racing that put could say too; so pollers never
        queue on the lock that writers (and a durable group commit) need. Before
        it raises ``Empty`` it yields the processor (``_yield``): threads that
        have work, such as writers back from their fsync, run first."""
        if timeout is not None:
            _check_timeout(block, timeout)
        if not block and self._end == self._read_off and not self._mem and not self._stopped:
            _yield()
            raise Empty
        with self._lock:
            if self._end != self._read_off:
                cache = self._cache
                if cache and self._plain:
                    # non-durable, read cache filled: the disk tier's fast path
                    item = cache.popleft()
                    sz = self._csz.popleft()
                    self._read_off += 1
                    self._disk_bytes -= sz
                    self._reclaim_left -= sz
                    if self._reclaim_left < 0 or (self._drain_reclaim and self._read_off >= self._end):
                        self._reclaim_locked()
                    if self._putters:
                        self._not_full.notify()
                    return item
                out = self._take_locked(1)
                if out:
                    return out[0]
                # [] only when recovery="truncate" cut the disk tier at damage the
                # read met (disk_tier.py): the queue goes on as it now stands
            mem = self._mem
            if mem:
                item = mem.popleft()
                if mem:
                    self._mem_bytes -= self._sizeof(item)
                else:
                    self._mem_bytes = 0
                if self._putters:
                    self._not_full.notify()
                return item
            while True:
                if not self._wait_not_empty(block, timeout):
                    raise Empty
                out = self._take_locked(1)
                if out:  # (as above: a truncate may leave nothing)
                    return out[0]

    def get_nowait(self):
        return self.get(False)

    def get_batch(self, n: int, timeout: float | None = None, block: bool = True) -> list:
        """Up to ``n`` items from the head, in order. Waits (up to ``timeout``
        seconds, forever if None) until at least one is there; returns ``[]``
        if none came (never raises ``queue.Empty``)."""
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"n={n!r}: must be an integer >= 1")
        if timeout is not None:
            _check_timeout(block, timeout)
        if not block and self._end == self._read_off and not self._mem and not self._stopped:
            _yield()
            return []  # lock-free, as in get()
        with self._lock:
            if self._end == self._read_off and not self._mem:
                if not self._wait_not_empty(block, timeout):
                    return []
            return self._take_locked(n)

    def _wait_not_empty(self, block: bool, timeout: float | None) -> bool:
        """Wait until an item is there; False on timeout / non-blocking."""
        if self._closed:
            raise LogClosedError(f"HybridQueue {self.path} is closed")
        if self.is_shutdown:
            raise ShutDown
        if not block:
            return False
        deadline = deadline_for(block, timeout)
        self._getters += 1
        try:
            while self._end == self._read_off and not self._mem:
                if self._closed:
                    raise LogClosedError(f"HybridQueue {self.path} is closed")
                if self.is_shutdown:
                    raise ShutDown
                if deadline is None:
                    self._not_empty.wait()
                else:
                    remaining = deadline - _monotonic()
                    if remaining <= 0:
                        return False
                    self._not_empty.wait(remaining)
        finally:
            self._getters -= 1
        return True

    def _take_locked(self, n: int) -> list:
        """Remove up to ``n`` items from the head (at least one must exist)."""
        if self._drained:
            raise ShutDown
        if self.durable and self._end != self._read_off:
            return self._take_durable_locked(n)
        out: list = []
        if self._end != self._read_off:
            if self._closed:
                raise LogClosedError(f"HybridQueue {self.path} is closed")
            cache, csz = self._cache, self._csz
            while len(out) < n and self._end != self._read_off:
                if not cache and not self._refill_locked():
                    break
                m = min(n - len(out), len(cache))
                if m == 1:
                    out.append(cache.popleft())
                    taken = csz.popleft()
                else:
                    taken = 0
                    for _ in range(m):
                        out.append(cache.popleft())
                        taken += csz.popleft()
                self._read_off += m
                self._disk_bytes -= taken
                self._cache_bytes -= taken
                self._reclaim_left -= taken
            if self._reclaim_left < 0 or (self._drain_reclaim and self._read_off >= self._end):
                self._reclaim_locked()
        if len(out) < n:
            mem = self._mem
            m = min(n - len(out), len(mem))
            if m:
                sizeof = self._sizeof
                freed = 0
                for _ in range(m):
                    item = mem.popleft()
                    freed += sizeof(item)
                    out.append(item)
                self._mem_bytes = self._mem_bytes - freed if mem else 0
        if self._putters:
            self._not_full.notify(len(out))
        return out

    def _take_durable_locked(self, n: int) -> list:
        """durable=True: the consumed position is recorded (one pwrite) before
        the items leave the queue; where that finds no space (a copy-on-write
        filesystem under a spent quota: checkpoint.py) DiskFullError is raised
        and nothing is taken."""
        if self._closed:
            raise LogClosedError(f"HybridQueue {self.path} is closed")
        cache, csz = self._cache, self._csz
        while len(cache) < n and self._disk_next < self._end:
            if not self._refill_locked(n - len(cache)):
                break
        m = min(n, len(cache))
        taken = sum(islice(csz, m))
        self._ckpt.write(self._read_off + m, self._end, self._disk_bytes - taken)
        out = [cache.popleft() for _ in range(m)]
        for _ in range(m):
            csz.popleft()
        self._read_off += m
        self._disk_bytes -= taken
        self._cache_bytes -= taken
        self._reclaim_left -= taken
        if self._ckpt_fsync_s and _monotonic() - self._last_sync >= self._ckpt_fsync_s:
            self._ckpt.sync()
            self._last_sync = _monotonic()
        if self._reclaim_left < 0 or (self._drain_reclaim and self._read_off >= self._end):
            self._reclaim_locked()
        if self._putters:
            self._not_full.notify(len(out))
        return out

    # ------------------------------------------------------------------ peek

    def peek_batch(self, n: int) -> list:
        """Up to ``n`` items from the head without removing them (never blocks)."""
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"n={n!r}: must be an integer >= 1")
        with self._lock:
            if self._closed:
                raise LogClosedError(f"HybridQueue {self.path} is closed")
            if self._drained:
                return []
            cache = self._cache
            while len(cache) < n and self._disk_next < self._end:
                if not self._refill_locked(n - len(cache)):
                    break
            out = list(islice(cache, n))
            if len(out) < n and self._disk_next == self._end:
                out.extend(islice(self._mem, n - len(out)))
            return out

    # ---------------------------------------------------------- queue.Queue API

    def qsize(self) -> int:
        """Number of items in the queue (both tiers); 0 after ``shutdown(immediate=True)``."""
        with self._lock:
            if self._drained:
                return 0
            return self._end - self._read_off - self._hole_items + len(self._mem)

    def empty(self) -> bool:
        with self._lock:
            return self._drained or (self._end == self._read_off and not self._mem)

    def full(self) -> bool:
        """True when a put would block: memory tier at its budget and disk tier
        full: at ``max_disk_bytes``, or its filesystem without space for it
        (``Log.disk_full``: a write found none, or under ``min_free_bytes``)."""
        with self._lock:
            if self._drained:
                return False
            if 0 < self._maxsize <= self._count_locked():
                return True
            disk_full = self._log.disk_full or (
                self._max_disk != _INF and self._disk_bytes + self._reserved >= self._max_disk)
            if self.durable:
                return disk_full
            return disk_full and (len(self._mem) >= self._max_items or self._mem_bytes >= self._max_bytes)

    @property
    def maxsize(self) -> int:
        """The bound in items, counted as ``queue.Queue`` counts it (``qsize()``,
        both tiers); <= 0: no bound in items. The byte budgets
        (``memory_items``/``memory_bytes`` + ``max_disk_bytes``) bound the queue
        as well. Settable, as ``queue.Queue``'s attribute: waiting putters
        look again."""
        return self._maxsize

    @maxsize.setter
    def maxsize(self, value: int) -> None:
        _check_maxsize(value)
        with self._lock:
            self._maxsize = value
            if not self._stopped:
                self._put_fast_max = self._max_items if value <= 0 else -1
            self._not_full.notify_all()

    def shutdown(self, immediate: bool = False) -> None:
        """Shut the queue down, as ``queue.Queue.shutdown`` (Python 3.13): every
        later ``put`` raises ``ShutDown`` (``vqs.ShutDown``: ``queue.ShutDown``
        on 3.13+); ``get`` hands out what is queued, then raises ``ShutDown``
        once the queue is empty; threads blocked in ``put``/``get`` wake up.

        ``immediate=True`` drains the queue *in this process*: ``get`` raises
        ``ShutDown`` at once, ``qsize()`` is 0, a task is marked done for each
        item still queued (so ``join()`` returns once the items already got
        are done). Nothing is deleted: the items are not handed out, but they
        stay queued, and ``close()`` keeps them as it keeps any backlog (the
        memory tier written to disk, the consumed position not moved past
        them), so the next open serves them in order. Durable items stay on
        disk whatever happens after; a non-durable memory tier is kept only
        by ``close()``, as always. Shutting down is for this process only and
        is not recorded: the next open takes puts again. Shut down (either
        way), then immediate: allowed, as for ``queue.Queue``."""
        with self._lock:
            self.is_shutdown = True
            self._stopped = True
            self._put_fast_max = -1
            if immediate and not self._drained and not self._closed:
                n = self._count_locked()
                self._drained = True
                self._drain_end = self._end  # what n counted (durable puts in flight: disk_tier.py)
                self._drain_count = n        # (AsyncHybridQueue's task count follows it)
                self._plain = False     # get's read-cache fast path is off
                self._held_tail, self._mem = self._mem, deque()
                self._unfinished = max(0, self._unfinished - n)
                if self._hooked:
                    self._drain_hooks_locked()
                self._all_done.notify_all()
            self._not_empty.notify_all()
            self._not_full.notify_all()

    def _count_locked(self) -> int:
        """Items queued (both tiers): what ``maxsize`` bounds, as ``qsize()``
        but regardless of a drain."""
        mem = self._mem if self._held_tail is None else self._held_tail
        return self._end - self._read_off - self._hole_items + len(mem)

    @property
    def unfinished_tasks(self) -> int:
        return self._unfinished

    def task_done(self) -> None:
        """As ``queue.Queue.task_done``: one call per item got and processed."""
        with self._lock:
            unfinished = self._unfinished - 1
            if unfinished <= 0:
                if unfinished < 0:
                    raise ValueError("task_done() called too many times")
                self._all_done.notify_all()
            self._unfinished = unfinished

    def join(self) -> None:
        """Block until every item put (or found on disk at open) was got and
        marked done with ``task_done``."""
        with self._lock:
            while self._unfinished:
                self._all_done.wait()

    # -------------------------------------------------------------- metrics

    @property
    def metrics(self) -> HybridMetrics:
        """A snapshot of the counters; also a Prometheus collector of this queue
        (``registry.register(q.metrics)``, see vqs/hybrid/metrics.py)."""
        with self._lock:
            qsize = self._count_locked()
            lg = self._log
            closed = self._closed
            return HybridMetrics(
                puts=self._puts,
                gets=self._initial + self._puts - qsize,
                spilled=self._spilled,
                disk_writes=self._disk_writes,
                disk_reads=self._disk_reads,
                memory_items=qsize - (self._end - self._read_off - self._hole_items) + len(self._cache),
                memory_bytes=self._mem_bytes + sum(self._csz),
                disk_items=self._end - self._read_off - self._hole_items,
                disk_bytes=self._disk_bytes,
                log_bytes=0 if closed else lg.size_bytes,
                log_segments=0 if closed else lg.segment_count,
                durable=self.durable,
                disk_full_errors=self._disk_full_errors,
                full_refusals=self._full_refusals,
                serialization_errors=self._serialization_errors,
                items=qsize,
                source=weakref.ref(self),
            )

    # ---------------------------------------------------------------- close

    def checkpoint(self) -> None:
        """Make the consumed position survive power loss now (fsync)."""
        with self._lock:
            if self._closed:
                return
            self._ckpt.write(self._read_off, self._end, self._disk_bytes)
            self._ckpt.sync()
            self._last_sync = _monotonic()

    def close(self) -> None:
        """Spill the memory tail to disk, fsync, checkpoint the consumed position
        and release the directory. Idempotent; threads blocked in get/put raise
        LogClosedError."""
        failed: list = []
        full: DiskFullError | None = None
        lost = 0
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._stopped = True
            self._put_fast_max = -1  # put's fast path now always takes the slow, checking path
            if self._held_tail is not None:  # drained: the tail is kept like any other
                self._mem, self._held_tail = self._held_tail, None
            self._not_empty.notify_all()
            self._not_full.notify_all()
            while self._inflight:
                self._not_full.wait()
            try:
                self._log.min_free_bytes = 0  # the room kept is there for this write
                try:
                    failed = self._spill_tail_locked()
                except DiskFullError as e:
                    # the memory tier cannot be written: the rest of close (the
                    # consumed position, the lock) still happens
                    full, lost = e, len(self._mem)
                    self._disk_full_errors += 1
                    self._mem.clear()
                    self._mem_bytes = 0
                if self._read_off > self._log.start_offset:
                    self._log.delete_before(self._read_off)
                clean = True
                try:
                    self._log.close()
                    # (no space even for the position's overwrite, copy-on-write: the next
                    # open recovers, and redelivers what was got since the last position)
                    self._ckpt.write(self._read_off, self._end, self._disk_bytes, clean=True)
                    self._ckpt.sync()
                except DiskFullError as e:
                    full, clean = full or e, False
                    self._disk_full_errors += 1
                if not clean and self._log.closed:
                    try:  # not clean: the next open counts the backlog again
                        self._ckpt.write(self._read_off, self._end, self._disk_bytes)
                    except DiskFullError:
                        pass
            finally:
                self._ckpt.close()
                if not self._log.closed:
                    self._log.close()
                self._dir_lock.release()
                self._cache.clear()
                self._csz.clear()
                self._all_done.notify_all()
        if full is not None and not lost:
            raise full  # nothing of the memory tier lost (the log's close, or the checkpoint)
        if full is not None:
            raise DiskFullError(
                f"close(): {lost} item(s) of the memory tier of HybridQueue {self.path} could not "
                f"be written, the disk is full ({full}); they are lost, as a crash would lose them "
                "(durable=True keeps none in memory)", path=full.path
            ) from full
        if failed:
            i, e = failed[0]
            raise wrap_error(
                e, f"close(): {len(failed)} item(s) of the memory tail could not be serialized "
                f"with serializer={self.serializer.name!r} and were dropped (first at position "
                f"{i} of the tail)"
            )

    @property
    def closed(self) -> bool:
        return self._closed

    def __del__(self, _warn=warnings.warn):  # bound now: at interpreter exit the module's globals may be gone
        if not getattr(self, "_closed", True) and getattr(self, "_log", None) is not None:
            _warn(
                f"HybridQueue {self.path} was not closed: its memory tier "
                f"({len(self._mem)} items) is lost; use close() or a with block",
                ResourceWarning, stacklevel=2,
            )

    def __enter__(self) -> HybridQueue:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"HybridQueue({self.path!r}, durable={self.durable}, "
                f"serializer={self.serializer.name!r}, closed={self._closed})")
