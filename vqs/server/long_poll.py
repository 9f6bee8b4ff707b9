"""The one way every front waits for data: no thread per waiting client.

- **Topics** (REST and gRPC long polls, Kafka Fetch, gRPC Subscribe):
  ``wait_topics`` registers an asyncio wake-up on the broker's public hook
  (``Topic.add_waiter``: called after every append to any partition, and at
  close) and re-checks the caller's condition on each wake-up. A waiting
  request is a coroutine; no thread is involved.
- **Queues** (SQS and REST receives with a wait, gRPC Receive): the storage
  hands messages out inside ``Queue.receive``, so ``LongPolls.receive``
  keeps one daemon watcher thread per queue that has waiters (not per
  waiter): it blocks in ``Queue.receive`` with a wait (woken by sends, not by
  polling) and resolves the waiters' futures on their loops
  (``call_soon_threadsafe``). It ends when its last waiter is gone.

Invariants:

* A topic wait returns True as soon as its condition holds (checked before
  the first wait and after every append) or a topic closed (deleted: the
  caller's next read reports it), False at its deadline or when the server
  stops.
* A queue waiter is served in arrival order: the watcher receives for the
  first live waiter (its count and visibility timeout) and hands it exactly
  what ``Queue.receive`` returned; a waiter past its deadline gets ``[]``.
  Messages received for a waiter whose request went away meanwhile stay
  leased until their visibility timeout ends, as with a thread per request.
* A queue closed under its waiters (deleted) fails every one of them with
  the queue's ``LogClosedError`` (the caller decides what that means).
* Every wait is sliced at 1 s, so a stopping server (``stopping()``) answers
  every waiter within about a second; deadlines are kept to within one slice.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable

from ..errors import LogClosedError

_SLICE = 1.0


class _Waiter:
    __slots__ = ("arg", "attempt", "deadline", "fut", "loop", "vis")

    def __init__(self, loop, fut, deadline: float, arg: int, vis=None, attempt: str | None = None):
        self.loop, self.fut, self.deadline, self.arg, self.vis = loop, fut, deadline, arg, vis
        self.attempt = attempt  # a FIFO receive's ReceiveRequestAttemptId


def _resolve(w: _Waiter, value=None, exc: BaseException | None = None) -> None:
    def done():
        if not w.fut.done():
            if exc is not None:
                w.fut.set_exception(exc)
            else:
                w.fut.set_result(value)

    try:
        w.loop.call_soon_threadsafe(done)
    except RuntimeError:  # the loop is closed: nobody waits any more
        pass


class _Wake:
    """A ``Topic.add_waiter`` waiter: ``set`` (from any thread) wakes an asyncio.Event on its loop."""

    __slots__ = ("event", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.event = asyncio.Event()

    def set(self) -> None:
        try:
            self.loop.call_soon_threadsafe(self.event.set)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass


async def wait_topics(topics, ready: Callable[[], bool], timeout: float, stopping: Callable[[], bool]) -> bool:
    """Wait up to ``timeout`` s until ``ready()``, checked at once and after every append
    to any of ``topics`` (module doc); False at the deadline or once ``stopping()``."""
    wake = _Wake(asyncio.get_running_loop())
    for t in topics:
        t.add_waiter(wake)
    try:
        deadline = time.monotonic() + timeout
        while True:
            wake.event.clear()  # before the check: an append after it sets it again
            if ready() or any(t.closed for t in topics):  # (closed: the caller's next read says so)
                return True
            left = deadline - time.monotonic()
            if left <= 0 or stopping():
                return False
            try:
                await asyncio.wait_for(wake.event.wait(), min(left, _SLICE))
            except TimeoutError:
                pass
    finally:
        for t in topics:
            t.remove_waiter(wake)


class LongPolls:
    """The queue watchers of one server (its fronts' loops share them)."""

    def __init__(self, stopping: Callable[[], bool]):
        self._stopping = stopping
        self._lock = threading.Lock()
        self._waiters: dict[int, tuple[object, deque]] = {}  # id(queue) -> (it, its waiters)

    def watchers(self) -> int:
        """Watcher threads running now (one per queue with waiters)."""
        with self._lock:
            return len(self._waiters)

    async def receive_or_wait(self, q, n: int, wait_s: float, visibility, take_now, reopen,
                              attempt_id: str | None = None) -> list:
        """``q.receive(n)`` waiting up to ``wait_s`` ([] when nothing came): what is visible
        now is taken at once (``await take_now(q)``: the front runs a receive without a wait
        its own way), then the queue's watcher serves the wait. A queue deleted meanwhile is
        looked up again (``reopen(name)``: the new queue of that name, or the front's
        not-found error, or the LogClosedError raised again when the server is stopping)."""
        deadline = time.monotonic() + wait_s
        first = True
        while True:
            try:
                if first:
                    first = False
                    msgs = await take_now(q)
                    if msgs:
                        return msgs
                left = deadline - time.monotonic()
                if left <= 0 or self._stopping():
                    return []
                return await self.receive(q, n, left, visibility, attempt_id)
            except LogClosedError:
                q = reopen(q.name)

    async def receive(self, q, n: int, wait_s: float, visibility, attempt_id: str | None = None) -> list:
        """``q.receive(n, ..., visibility, attempt_id)`` waiting up to ``wait_s``; [] when nothing
        came."""
        return await self._add(q, n, visibility, wait_s, self._watch_queue, attempt_id)

    async def _add(self, obj, arg: int, vis, wait_s: float, watch, attempt: str | None = None):
        loop = asyncio.get_running_loop()
        w = _Waiter(loop, loop.create_future(), time.monotonic() + wait_s, arg, vis, attempt)
        key = id(obj)
        with self._lock:
            entry = self._waiters.get(key)
            start = entry is None or entry[0] is not obj
            if start:
                entry = (obj, deque())
                self._waiters[key] = entry
            entry[1].append(w)
        if start:
            threading.Thread(target=watch, args=(obj, entry[1]), name=f"vqs-long-poll-{key:x}",
                             daemon=True).start()
        return await w.fut

    def _live(self, obj, waiters: deque, expired_value) -> float | None:
        """Drop the waiters that are done or past their deadline (answering the latter);
        the seconds to wait next, or None (and the watcher is unregistered) when none is left."""
        now = time.monotonic()
        stopping = self._stopping()
        with self._lock:
            keep = deque()
            for w in waiters:
                if w.fut.done():
                    continue
                if stopping or w.deadline <= now:
                    _resolve(w, expired_value() if callable(expired_value) else expired_value)
                else:
                    keep.append(w)
            waiters.clear()
            waiters.extend(keep)
            if not waiters:
                if self._waiters.get(id(obj), (None,))[0] is obj:
                    del self._waiters[id(obj)]
                return None
            return min(_SLICE, min(w.deadline for w in waiters) - now)

    def _fail_all(self, obj, waiters: deque, exc: BaseException) -> None:
        with self._lock:
            for w in waiters:
                _resolve(w, exc=exc)
            waiters.clear()
            if self._waiters.get(id(obj), (None,))[0] is obj:
                del self._waiters[id(obj)]

    def _watch_queue(self, q, waiters: deque) -> None:
        try:
            while True:
                left = self._live(q, waiters, list)
                if left is None:
                    return
                with self._lock:
                    w = waiters[0]
                try:
                    msgs = q.receive(w.arg, max(left, 0.001), w.vis, w.attempt)
                except LogClosedError as e:
                    self._fail_all(q, waiters, e)
                    return
                except Exception as e:  # this waiter's request fails (as its own receive would)
                    msgs = e
                if msgs:
                    with self._lock:
                        if waiters and waiters[0] is w:
                            waiters.popleft()
                    if isinstance(msgs, Exception):
                        _resolve(w, exc=msgs)
                    else:
                        _resolve(w, msgs)
        except BaseException as e:  # never leave a waiter hanging
            self._fail_all(q, waiters, e)
            raise
