"""Leases that extend themselves: keep received queue messages invisible while their work runs.

``LeaseKeeper`` (threads) and ``AsyncLeaseKeeper`` (asyncio) work on any queue
with the Queue API's ``receive(max_messages, wait_seconds, visibility_timeout)``,
``change_visibility(handle, seconds)`` and ``delete(handle)``: the embedded
``vqs.Broker`` queue and ``vqs.Client``'s remote queue (its methods may be
coroutines for the async keeper, or plain methods, which it runs in a worker
thread so the event loop never blocks on them).

Guarantees:
- one background thread (or task) per keeper, whatever the number of messages:
  every lease held is extended to ``visibility_timeout`` seconds again when
  half of it has passed since it was received or last extended, so a message
  whose work outlives its timeout is not redelivered while the work runs;
- ``with keeper.lease(msg):`` deletes the message when the block succeeds and
  releases it (visibility 0: redelivered at once) when the block raises; the
  exception propagates;
- a lease is **lost** when the queue refuses its extension (the message deleted,
  the handle expired or invalid) or when its time ran out before an extension
  was answered: the keeper counts a lease's time from *before* the receive (or
  extension) that gave it, so its own deadline is never later than the
  queue's, and a lease past it may already be another consumer's (a standard
  queue takes any of a message's handles, as SQS does, so the queue cannot
  tell). The error is kept on the lease (``lease.lost``); the block runs on,
  and at its end nothing is deleted or released (either could act on another
  consumer's delivery): the block raises ``lease.lost`` (or its own error), so
  the caller learns the message may be redelivered. An extension that fails
  for another reason (the server unreachable) is retried at a quarter of the
  timeout, while the lease can still be saved;
- at most ``max_in_flight`` leases are held at once: ``receive`` asks for no
  more messages than there are free places and waits (bounded by
  ``wait_seconds``) for one to free; ``lease`` of a message received
  elsewhere waits for a free place;
- ``close()`` (or leaving ``with keeper``) stops the background thread/task;
  leases still held are neither deleted nor released (their messages become
  visible when their last extension runs out).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import inspect
import threading
import time

from .. import errors as E

_LOST = (E.ReceiptHandleExpired, E.ReceiptHandleIsInvalid, E.MessageNotInflight,
         E.MessageNotAvailable)  # the queue says the lease is gone


class Lease:
    """One message held by a keeper: ``message``, ``lost`` (the error that ended the lease, or
    None); ``expires``: the monotonic time by which the queue's lease surely still holds (the
    visibility timeout counted from before the request that gave it)."""

    __slots__ = ("message", "handle", "due", "expires", "lost", "done")

    def __init__(self, message, since: float, visibility_timeout: int):
        self.message = message
        self.handle = message.receipt_handle
        self.due = since + visibility_timeout / 2
        self.expires = since + visibility_timeout
        self.lost: BaseException | None = None
        self.done = False

    def __lt__(self, other: Lease) -> bool:
        return self.due < other.due

    def check_time(self, now: float) -> bool:
        """Whether the lease still holds at ``now``; past ``expires`` it is lost (``lost`` set)."""
        if self.lost is None and now >= self.expires:
            self.lost = E.MessageNotInflight(
                f"the lease of message {getattr(self.message, 'id', '?')} ran out before it "
                f"was extended: another consumer may have received it; not deleted")
        return self.lost is None

    def extended(self, since: float, now: float, visibility_timeout: int) -> None:
        """An extension sent at ``since`` was answered at ``now``: held again, unless the answer
        came after the lease could have run out (the queue may have delivered it meanwhile)."""
        if self.check_time(now):
            self.expires = since + visibility_timeout
            self.due = since + visibility_timeout / 2


def _check(visibility_timeout, max_in_flight) -> None:
    if not isinstance(visibility_timeout, int) or isinstance(visibility_timeout, bool) or not 2 <= visibility_timeout <= 43200:
        raise E.ConfigError(f"visibility_timeout must be an int of 2..43200 seconds, got {visibility_timeout!r}")
    if not isinstance(max_in_flight, int) or isinstance(max_in_flight, bool) or not 1 <= max_in_flight <= 100_000:
        raise E.ConfigError(f"max_in_flight must be an int of 1..100000, got {max_in_flight!r}")


class LeaseKeeper:
    """Keeps leases of ``queue``'s messages extended from one background thread."""

    def __init__(self, queue, *, visibility_timeout: int = 30, max_in_flight: int = 10):
        _check(visibility_timeout, max_in_flight)
        self.queue = queue
        self.visibility_timeout = visibility_timeout
        self.max_in_flight = max_in_flight
        self._cv = threading.Condition()
        self._heap: list[Lease] = []
        self._leases: dict[str, Lease] = {}
        self._held = 0
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="vqs-lease-keeper", daemon=True)
        self._thread.start()

    @property
    def in_flight(self) -> int:
        return self._held

    def _take(self, n: int, timeout: float | None) -> int:
        """Reserve up to ``n`` (>= 1) places, waiting up to ``timeout`` (None: forever) for one."""
        with self._cv:
            if not self._cv.wait_for(lambda: self._closed or self._held < self.max_in_flight, timeout):
                return 0
            if self._closed:
                raise E.ConfigError("the lease keeper is closed")
            k = min(n, self.max_in_flight - self._held)
            self._held += k
            return k

    def _give(self, n: int) -> None:
        with self._cv:
            self._held -= n
            self._cv.notify_all()

    def _hold(self, msg, since: float) -> Lease:
        lease = Lease(msg, since, self.visibility_timeout)
        with self._cv:
            self._leases[lease.handle] = lease
            heapq.heappush(self._heap, lease)
            self._cv.notify_all()
        return lease

    def receive(self, max_messages: int = 1, wait_seconds: float | None = None) -> list:
        """Up to ``max_messages`` messages, each leased for ``visibility_timeout`` and kept
        extended until its ``lease`` block ends; no more than the free places allow."""
        k = self._take(max_messages, wait_seconds)
        if not k:
            return []
        msgs: list = []
        try:
            # (a long poll may wait: each message's lease starts no earlier than the call)
            since = time.monotonic()
            msgs = self.queue.receive(k, wait_seconds=wait_seconds, visibility_timeout=self.visibility_timeout)
        finally:
            self._give(k - len(msgs))
        for m in msgs:
            self._hold(m, since)
        return msgs

    @contextlib.contextmanager
    def lease(self, msg):
        """Keep ``msg`` leased while the block runs; delete it on success, release it on error."""
        with self._cv:
            lease = self._leases.get(msg.receipt_handle)
        if lease is None or lease.message is not msg:
            self._take(1, None)
            # (received elsewhere: its lease is counted from now, the keeper's best knowledge)
            lease = self._hold(msg, time.monotonic())
        try:
            yield lease
        except BaseException:
            self._end(lease)
            if lease.check_time(time.monotonic()):
                with contextlib.suppress(E.VQSError):
                    self.queue.change_visibility(lease.handle, 0)
            raise
        else:
            self._end(lease)
            if not lease.check_time(time.monotonic()):
                raise lease.lost
            self.queue.delete(lease.handle)

    def _end(self, lease: Lease) -> None:
        with self._cv:
            if not lease.done:
                lease.done = True
                self._leases.pop(lease.handle, None)
                self._held -= 1
                self._cv.notify_all()

    def _run(self) -> None:
        while True:
            with self._cv:
                while True:
                    while self._heap and self._heap[0].done:
                        heapq.heappop(self._heap)
                    if self._closed:
                        return
                    now = time.monotonic()
                    if self._heap and self._heap[0].due <= now:
                        lease = heapq.heappop(self._heap)
                        break
                    self._cv.wait(self._heap[0].due - now if self._heap else None)
            self._extend(lease)

    def _extend(self, lease: Lease) -> None:
        vt = self.visibility_timeout
        since = time.monotonic()
        if not lease.check_time(since):
            return
        try:
            self.queue.change_visibility(lease.handle, vt)
        except _LOST as e:
            lease.lost = e
            return
        except E.VQSError:
            lease.due = time.monotonic() + vt / 4
        else:
            lease.extended(since, time.monotonic(), vt)
            if lease.lost is not None:
                return
        with self._cv:
            if not lease.done:
                heapq.heappush(self._heap, lease)

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def __enter__(self) -> LeaseKeeper:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


async def _call(fn, *args, **kw):
    """``fn(*args)``: awaited if a coroutine function, else run in a worker thread."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args, **kw)
    return await asyncio.to_thread(fn, *args, **kw)


class AsyncLeaseKeeper:
    """Keeps leases of ``queue``'s messages extended from one asyncio task."""

    def __init__(self, queue, *, visibility_timeout: int = 30, max_in_flight: int = 10):
        _check(visibility_timeout, max_in_flight)
        self.queue = queue
        self.visibility_timeout = visibility_timeout
        self.max_in_flight = max_in_flight
        self._leases: dict[str, Lease] = {}
        self._places = asyncio.Semaphore(max_in_flight)
        self._held = 0
        self._wake = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task | None = None

    @property
    def in_flight(self) -> int:
        return self._held

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._closing = True  # the task sees it at its next wake and returns: no cancellation
            self._wake.set()
            task, self._task = self._task, None
            await task
            self._closing = False

    async def __aenter__(self) -> AsyncLeaseKeeper:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def _take(self, n: int, timeout: float | None) -> int:
        if timeout is None:
            await self._places.acquire()
        else:  # not wait_for: on 3.11 it can drop an acquire that completed as the timeout fired
            task = asyncio.ensure_future(self._places.acquire())
            done, _ = await asyncio.wait({task}, timeout=max(0.0, timeout))
            if not done:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                if task.cancelled():
                    return 0
                self._places.release()  # acquired while being cancelled: give it back
                return 0
        k = 1
        while k < n and not self._places.locked():
            await self._places.acquire()  # free: returns without waiting
            k += 1
        self._held += k
        return k

    def _give(self, n: int) -> None:
        self._held -= n
        for _ in range(n):
            self._places.release()

    def _hold(self, msg, since: float) -> Lease:
        lease = Lease(msg, since, self.visibility_timeout)
        self._leases[lease.handle] = lease
        self._wake.set()
        return lease

    async def receive(self, max_messages: int = 1, wait_seconds: float | None = None) -> list:
        """As ``LeaseKeeper.receive``, awaited."""
        await self.start()
        k = await self._take(max_messages, wait_seconds)
        if not k:
            return []
        msgs: list = []
        try:
            since = time.monotonic()
            msgs = await _call(self.queue.receive, k, wait_seconds=wait_seconds,
                               visibility_timeout=self.visibility_timeout)
        finally:
            self._give(k - len(msgs))
        for m in msgs:
            self._hold(m, since)
        return msgs

    @contextlib.asynccontextmanager
    async def lease(self, msg):
        """As ``LeaseKeeper.lease``: ``async with keeper.lease(msg):``."""
        await self.start()
        lease = self._leases.get(msg.receipt_handle)
        if lease is None or lease.message is not msg:
            await self._take(1, None)
            lease = self._hold(msg, time.monotonic())
        try:
            yield lease
        except BaseException:
            self._end(lease)
            if lease.check_time(time.monotonic()):
                with contextlib.suppress(E.VQSError):
                    await _call(self.queue.change_visibility, lease.handle, 0)
            raise
        else:
            self._end(lease)
            if not lease.check_time(time.monotonic()):
                raise lease.lost
            await _call(self.queue.delete, lease.handle)

    def _end(self, lease: Lease) -> None:
        if not lease.done:
            lease.done = True
            self._leases.pop(lease.handle, None)
            self._give(1)

    async def _run(self) -> None:
        vt = self.visibility_timeout
        while not self._closing:
            self._wake.clear()
            now = time.monotonic()
            due = [x for x in self._leases.values() if x.due <= now and x.lost is None]
            for lease in due:
                since = time.monotonic()
                if lease.done or not lease.check_time(since):
                    continue
                try:
                    await _call(self.queue.change_visibility, lease.handle, vt)
                except _LOST as e:
                    lease.lost = e
                except E.VQSError:
                    lease.due = time.monotonic() + vt / 4
                else:
                    lease.extended(since, time.monotonic(), vt)
            nxt = min((x.due for x in self._leases.values() if x.lost is None), default=None)
            timeout = None if nxt is None else max(0.0, nxt - time.monotonic())
            if not self._closing:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)
