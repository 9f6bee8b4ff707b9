"""AsyncHybridQueue: ``asyncio.Queue``'s API over a HybridQueue, for one event loop.

``AsyncHybridQueue`` *is* an ``asyncio.Queue`` (a subclass): the futures of
waiting getters and putters, cancellation, the order in which waiters are
woken, ``task_done``/``join`` (``_unfinished_tasks``, ``_finished``), ``repr``
and ``maxsize`` are asyncio's own code. Only where asyncio keeps its items
does it differ: its hooks ``_init``/``_put``/``_get`` and ``qsize``/``empty``/
``full`` go to a HybridQueue through its non-blocking calls
(``put(item, False)``, ``get(False)``), so items are stored as HybridQueue
stores them (memory tier, disk tier, ``durable=True`` written through).
On Python 3.11 and 3.12 ``shutdown()`` and ``QueueShutDown`` are a backport
of 3.13's (asyncio_shutdown.py: 3.13's code); on 3.13+ they are asyncio's.

Invariants:

* One event loop. Every call runs on the loop's thread (as for
  ``asyncio.Queue``): the asyncio bookkeeping has no lock. The HybridQueue's
  own lock is still taken by each call, and by the threads below, which is
  what makes them safe together. Threads that put from outside the loop use
  a HybridQueue instead.
* The loop never waits on an fsync of a durable put. Non-durable modes put
  and get inline: a put at most appends a spill to the log (no fsync,
  ``flush="never"``), a get at most reads ahead. ``durable=True``: a put is a
  write plus an fsync, so ``await put()`` runs ``HybridQueue.put`` in the
  loop's default executor and does asyncio's bookkeeping on the loop when it
  returns; ``put_nowait`` cannot do that and raises ConfigError (a put that
  returned before its item is on disk would break what durable promises). A
  durable get is one pwrite of the consumed position (checkpoint.py); its
  periodic fsync (``checkpoint_fsync_s``) runs in the executor too, outside
  the queue's lock (the HybridQueue underneath is opened with
  ``checkpoint_fsync_s=0`` and this class syncs it). Reclaiming consumed
  segments (at the get that empties the disk tier, and every half segment
  consumed; it writes the log's recovery checkpoint and may roll its active
  segment, both with fsyncs) is deferred (``HybridQueue.defer_reclaim``): the
  get records the position and the deletion runs in the executor. Only a
  put that found the disk full reclaims inline, to make the room it needs.
* A durable put in flight counts as one item toward ``maxsize`` (``full()``)
  and in ``_unfinished_tasks`` from the moment it is admitted, so a consumer's
  ``task_done`` never runs ahead of it and concurrent puts never overshoot
  ``maxsize``; it becomes visible (``qsize``, ``get``) when its write returns.
  A failed write gives both back. A put cancelled while its write runs is
  still put: a write cannot be taken back, and its bookkeeping runs when the
  write returns whether or not anyone still awaits it.
* ``shutdown(immediate=True)`` shuts the HybridQueue down immediately: its
  items are not handed out in this process and are *not* deleted (they are
  kept for the next open, as HybridQueue's immediate shutdown does), and a
  task is marked done for each, as asyncio does.
* Items found on disk at open count as unfinished tasks (``join()`` waits for
  them), as HybridQueue counts them.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from typing import Any

from ..errors import ConfigError, LogClosedError, ShutDown
from .asyncio_shutdown import QueueShutDown, _ShutdownBackport, _wait_for_room
from .hybrid_queue import HybridQueue

__all__ = ["AsyncHybridQueue", "QueueShutDown"]

#: ``repr`` lists at most this many items from the head (asyncio.Queue lists all).
REPR_ITEMS = 20
_monotonic = time.monotonic


class _More:
    """The rest of a long queue in its repr."""

    __slots__ = ("n",)

    def __init__(self, n: int):
        self.n = n

    def __repr__(self) -> str:
        return f"...{self.n} more"


class _Items:
    """``asyncio.Queue._queue`` for ``_format`` (repr): a view of the
    HybridQueue, listing at most REPR_ITEMS from the head (peek, bounded)."""

    __slots__ = ("_hq",)

    def __init__(self, hq: HybridQueue):
        self._hq = hq

    def __len__(self) -> int:
        return 0 if self._hq.closed else self._hq.qsize()

    def __bool__(self) -> bool:
        return not self._hq.closed and not self._hq.empty()

    def __iter__(self):
        if self._hq.closed:
            return iter(())
        head = self._hq.peek_batch(REPR_ITEMS)
        n = self._hq.qsize()
        return iter(head + [_More(n - len(head))] if n > len(head) else head)


class AsyncHybridQueue(_ShutdownBackport):
    """``asyncio.Queue`` over a HybridQueue in ``directory``: the same API (``put``,
    ``get``, ``put_nowait``, ``get_nowait``, ``task_done``, ``join``, ``qsize``,
    ``empty``, ``full``, ``maxsize``, ``shutdown``), items stored by the
    HybridQueue (memory tier, disk tier, ``durable=True`` written through and
    fsynced) and kept across a restart (a clean ``close()``; durable: a crash).

    ``maxsize``: a bound in items as ``asyncio.Queue``'s (<= 0: none); the
    HybridQueue's byte budgets (``memory_items``/``memory_bytes`` +
    ``max_disk_bytes``) bound it too: ``full()`` is true when either is
    reached. ``**options``: HybridQueue's (``durable``, ``serializer``,
    ``memory_items``, ``max_disk_bytes``, ...).

    One event loop uses it, from the loop's thread (as ``asyncio.Queue``);
    for threads, use HybridQueue. The loop never waits on a durable put's
    fsync: with ``durable=True``, ``await put()`` writes in the loop's default
    executor and ``put_nowait`` raises ConfigError. Close with ``close()``
    (blocking: it writes the memory tier and fsyncs), ``await aclose()`` (in
    the executor) or ``async with``; waiters then raise LogClosedError.
    ``shutdown(immediate=True)`` keeps the undelivered items for the next open
    (as HybridQueue's does). See docs/hybrid.md ("asyncio").
    """

    def __init__(self, directory, maxsize: float = 0, **options: Any):
        if isinstance(maxsize, bool) or not isinstance(maxsize, (int, float)):
            raise ConfigError(f"maxsize={maxsize!r}: must be a number (<= 0: no bound, as asyncio.Queue)")
        if "maxsize" in options:
            raise ConfigError("maxsize is counted by the asyncio queue: pass it once")
        self._ckpt_every = 0.0
        if options.get("durable") is True:
            every = options.get("checkpoint_fsync_s", 1.0)
            if isinstance(every, bool) or not isinstance(every, (int, float)) or every < 0:
                raise ConfigError(f"checkpoint_fsync_s={every!r}: must be a number >= 0")
            self._ckpt_every = float(every)
            options = {**options, "checkpoint_fsync_s": 0}  # synced here, off the loop
        self._hq = HybridQueue(directory, **options)
        self._hq.defer_reclaim()  # consumed segments are deleted in the executor (_reclaim_soon)
        self._durable = self._hq.durable
        self._writing = 0               # durable puts admitted, their write not returned yet
        self._closed = False
        self._drained = False           # shutdown(immediate=True) done
        self._syncing = False           # a checkpoint fsync is running in the executor
        self._reclaiming = False        # a deferred reclaim is running in the executor
        self._sync_lock = threading.Lock()  # that fsync against close() (the checkpoint's fd)
        self._last_sync = _monotonic()
        try:
            super().__init__(maxsize)
        except BaseException:
            self._hq.close()
            raise
        found = self._hq.qsize()
        if found:  # items on disk at open are tasks to do, as HybridQueue counts them
            self._unfinished_tasks = found
            self._finished.clear()

    @classmethod
    async def open(cls, directory, maxsize: float = 0, **options: Any) -> AsyncHybridQueue:
        """The constructor in the executor: opening creates files and fsyncs
        them, and after a crash scans the disk tier; the loop runs meanwhile."""
        return await asyncio.to_thread(cls, directory, maxsize, **options)

    # ------------------------------------------------ asyncio.Queue's storage

    def _init(self, maxsize):
        self._queue = _Items(self._hq)

    def _put(self, item):
        try:
            self._hq.put(item, False)
        except queue.Full as e:  # the byte budgets (or a full filesystem)
            raise asyncio.QueueFull(*e.args) from e
        except ShutDown:
            raise QueueShutDown from None

    def _get(self):
        try:
            item = self._hq.get(False)
        except queue.Empty:  # recovery="truncate" cut the disk tier at damage a read met
            raise asyncio.QueueEmpty from None
        except ShutDown:
            raise QueueShutDown from None
        if self._ckpt_every and not self._syncing and _monotonic() - self._last_sync >= self._ckpt_every:
            self._sync_checkpoint_soon()
        if self._hq.reclaim_pending and not self._reclaiming:
            self._reclaim_soon()
        return item

    def qsize(self) -> int:
        """Items that a get can take now (both tiers; not durable puts still writing)."""
        return self._hq.qsize()

    def empty(self) -> bool:
        return self._hq.empty()

    def full(self) -> bool:
        """True when ``maxsize`` items are queued (durable puts being written
        count) or the HybridQueue's tiers are full (``HybridQueue.full``)."""
        if self._closed:
            return False
        if 0 < self._maxsize <= self._hq.qsize() + self._writing:
            return True
        return self._hq.full()

    # -------------------------------------------------------------- put/get

    async def put(self, item) -> None:
        """Put ``item``, waiting while the queue is full; QueueShutDown once shut
        down. Durable: returns once the item is written and fsynced (in the
        executor; the loop runs meanwhile)."""
        if self._closed:
            raise LogClosedError(f"AsyncHybridQueue {self._hq.path} is closed")
        if not self._durable:
            return await super().put(item)
        loop = self._get_loop()
        while True:
            await self._wait_room()
            self._writing += 1
            self._unfinished_tasks += 1
            self._finished.clear()
            # _put_durable, not put: it says whether an immediate shutdown that came
            # while it wrote counted the item (see _written)
            write = loop.run_in_executor(None, self._hq._put_durable, [item], False, None)
            try:
                await asyncio.shield(write)
            except BaseException as e:
                if not write.done():  # cancelled while writing: the bookkeeping runs when it returns
                    write.add_done_callback(self._written)
                    raise
                self._written(write)
                if isinstance(e, queue.Full):
                    continue  # the byte budget filled meanwhile: wait for room again
                if isinstance(e, ShutDown):
                    raise QueueShutDown from None
                raise
            # here, not in a callback: as asyncio's put_nowait, the getter it wakes
            # runs after this put has returned
            self._written(write)
            return

    async def _wait_room(self) -> None:
        """asyncio.Queue.put's wait (3.13), for the durable put."""
        await _wait_for_room(self)
        if self._closed:
            raise LogClosedError(f"AsyncHybridQueue {self._hq.path} is closed")
        if self._is_shutdown:
            raise QueueShutDown

    def _written(self, write: asyncio.Future) -> None:
        """On the loop, once a durable put's write has returned: its bookkeeping
        (by the put, or by a callback when the put was cancelled meanwhile)."""
        self._writing -= 1
        if write.cancelled() or write.exception() is not None:
            self._unfinished_tasks -= 1  # not put: the task reserved for it goes
            if self._unfinished_tasks <= 0:
                self._unfinished_tasks = 0
                self._finished.set()
        elif self._drained:
            # admitted before shutdown(immediate=True), kept on disk, not handed
            # out here: done as the rest were. Written before the shutdown, it
            # was among the items the shutdown counted done (qsize); only one
            # registered after it is still to count.
            if write.result():
                self._unfinished_tasks = max(0, self._unfinished_tasks - 1)
            if self._unfinished_tasks == 0:
                self._finished.set()
        else:
            self._wakeup_next(self._getters)
        if self._putters and not self.full():
            self._wakeup_next(self._putters)

    def put_nowait(self, item) -> None:
        """Put ``item`` now, or raise QueueFull. Durable: ConfigError (an fsync
        on the loop), use ``await put(item)``."""
        if self._closed:
            raise LogClosedError(f"AsyncHybridQueue {self._hq.path} is closed")
        if self._durable and not self._is_shutdown:
            raise ConfigError(
                f"AsyncHybridQueue {self._hq.path}: durable=True, put_nowait() would write and "
                "fsync on the event loop; use `await queue.put(item)` (written in an executor)")
        return super().put_nowait(item)

    async def get(self):
        """Remove and return the head item, waiting while the queue is empty;
        QueueShutDown once shut down and empty."""
        if self._closed:
            raise LogClosedError(f"AsyncHybridQueue {self._hq.path} is closed")
        return await super().get()

    def get_nowait(self):
        if self._closed:
            raise LogClosedError(f"AsyncHybridQueue {self._hq.path} is closed")
        return super().get_nowait()

    def shutdown(self, immediate: bool = False) -> None:
        """As ``asyncio.Queue.shutdown`` (3.13): later puts raise QueueShutDown,
        gets hand out what is queued then raise it, waiters wake up.
        ``immediate=True``: gets raise at once and a task is marked done for each
        item queued; those items are kept for the next open, not deleted."""
        if immediate and not self._drained and not self._closed:
            self._drained = True
            self._hq.shutdown(immediate=True)
            # the items it counted, under its lock: a durable write registering
            # meanwhile is either among them or reports itself fresh (_written)
            self._unfinished_tasks = max(0, self._unfinished_tasks - self._hq._drain_count)
        elif not self._closed:
            self._hq.shutdown(immediate)
        super().shutdown(immediate)

    # --------------------------------------------------- durable checkpoint

    def _sync_checkpoint_soon(self) -> None:
        """Durable: fsync the consumed position (written by each get) in the
        executor, at most every ``checkpoint_fsync_s``; inline only where no
        event loop runs (nothing to block)."""
        self._last_sync = _monotonic()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._sync_checkpoint()
            return
        self._syncing = True
        loop.run_in_executor(None, self._sync_checkpoint).add_done_callback(self._synced)

    def _sync_checkpoint(self) -> None:
        # outside the queue's lock (a get goes on meanwhile); _sync_lock keeps
        # close() from closing the checkpoint's fd under it
        with self._sync_lock:
            if not self._hq.closed:
                self._hq._ckpt.sync()

    def _reclaim_soon(self) -> None:
        """Delete consumed segments (fsyncs: the log's recovery checkpoint, a
        roll) in the executor; inline only where no event loop runs."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._reclaim()
            return
        self._reclaiming = True
        loop.run_in_executor(None, self._reclaim).add_done_callback(self._reclaimed)

    def _reclaim(self) -> None:
        with self._sync_lock:  # not under close(): it reclaims itself
            if not self._hq.closed:
                self._hq.reclaim()

    def _reclaimed(self, fut: asyncio.Future) -> None:
        # a failed deletion only keeps consumed segments longer: the next get
        # that passes a reclaim point records it again, close() reclaims
        self._reclaiming = False
        if not self._closed and self._hq.reclaim_pending:  # recorded while this one ran
            self._reclaim_soon()

    def _synced(self, fut: asyncio.Future) -> None:
        self._syncing = False
        if not fut.cancelled() and fut.exception() is not None:
            self._last_sync = float("-inf")  # the next get tries again; close() syncs and raises

    # ---------------------------------------------------------------- close

    def _fail_waiters(self) -> None:
        for waiters in (self._getters, self._putters):
            while waiters:
                w = waiters.popleft()
                if not w.done():
                    try:
                        w.set_exception(LogClosedError(f"AsyncHybridQueue {self._hq.path} is closed"))
                    except RuntimeError:  # its event loop is closed: nobody waits on it
                        pass

    def _close_hq(self) -> None:
        with self._sync_lock:
            self._hq.close()

    def close(self) -> None:
        """Close the HybridQueue (blocking: the memory tier is written and
        fsynced, as ``HybridQueue.close``); waiting getters and putters raise
        LogClosedError. Idempotent. In a coroutine prefer ``await aclose()``."""
        if self._closed:
            return
        self._closed = True
        self._fail_waiters()
        self._close_hq()

    async def aclose(self) -> None:
        """``close()`` with its writes and fsyncs in the executor."""
        if self._closed:
            return
        self._closed = True
        self._fail_waiters()
        await asyncio.to_thread(self._close_hq)

    @property
    def closed(self) -> bool:
        return self._closed

    async def __aenter__(self) -> AsyncHybridQueue:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    def __enter__(self) -> AsyncHybridQueue:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ----------------------------------------------------------------- info

    @property
    def path(self) -> str:
        return self._hq.path

    @property
    def durable(self) -> bool:
        return self._durable

    @property
    def metrics(self):
        """The HybridQueue's ``metrics`` (vqs.HybridMetrics)."""
        return self._hq.metrics
