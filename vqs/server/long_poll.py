"""Long polls without a thread each: the waiters on one log, or on one queue, share one watcher thread.

A long poll used to hold a worker thread for its whole wait, so 1,000 idle
long polls were 1,000 threads (about 50 MiB of RSS, a fifth of a core spent
waking them every second, and an event loop starved under load: measured by
bench/soak.py). Here a waiting request is an asyncio future; one daemon
thread per log or queue that has waiters blocks in the storage's own wait
(``Log.wait_for``, ``Queue.receive`` with a wait: woken by appends and
sends, not by polling) and resolves the futures from the event loop's side
(``call_soon_threadsafe``). The thread ends when its last waiter is gone.

Invariants:

* A log waiter is resolved True as soon as the log holds its offset, False
  at its deadline, when the log closes, or when the server stops.
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
    __slots__ = ("arg", "deadline", "fut", "loop", "vis")

    def __init__(self, loop, fut, deadline: float, arg: int, vis=None):
        self.loop, self.fut, self.deadline, self.arg, self.vis = loop, fut, deadline, arg, vis


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


class LongPolls:
    """The watchers of one server (one event loop)."""

    def __init__(self, stopping: Callable[[], bool]):
        self._stopping = stopping
        self._lock = threading.Lock()
        self._waiters: dict[int, tuple[object, deque]] = {}  # id(log or queue) -> (it, its waiters)

    def watchers(self) -> int:
        """Watcher threads running now (one per log or queue with waiters)."""
        with self._lock:
            return len(self._waiters)

    async def wait_log(self, lg, offset: int, wait_s: float) -> bool:
        """True once log ``lg`` holds ``offset`` (``end_offset > offset``), False after ``wait_s``."""
        if lg.end_offset > offset:
            return True
        return await self._add(lg, offset, None, wait_s, self._watch_log)

    async def receive(self, q, n: int, wait_s: float, visibility) -> list:
        """``q.receive(n, ..., visibility)`` waiting up to ``wait_s``; [] when nothing came."""
        return await self._add(q, n, visibility, wait_s, self._watch_queue)

    async def _add(self, obj, arg: int, vis, wait_s: float, watch):
        loop = asyncio.get_running_loop()
        w = _Waiter(loop, loop.create_future(), time.monotonic() + wait_s, arg, vis)
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

    def _watch_log(self, lg, waiters: deque) -> None:
        try:
            while True:
                left = self._live(lg, waiters, False)
                if left is None:
                    return
                with self._lock:
                    lowest = min(w.arg for w in waiters)
                lg.wait_for(lowest, max(left, 0.001))
                end = lg.end_offset
                closed = lg.closed
                with self._lock:
                    keep = deque()
                    for w in waiters:
                        if closed or w.arg < end:
                            _resolve(w, not closed and w.arg < end)
                        else:
                            keep.append(w)
                    waiters.clear()
                    waiters.extend(keep)
        except BaseException as e:  # never leave a waiter hanging
            self._fail_all(lg, waiters, e)
            raise

    def _watch_queue(self, q, waiters: deque) -> None:
        try:
            while True:
                left = self._live(q, waiters, list)
                if left is None:
                    return
                with self._lock:
                    w = waiters[0]
                try:
                    msgs = q.receive(w.arg, max(left, 0.001), w.vis)
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
