"""What every request handler shares: the broker, settings, metrics, limiters and long polls.

Invariants: at most ``max_long_poll_waiters`` requests wait at once (the next
gets 503 ``too_many_waiters``); a long poll waits in slices of at most 1 s and
gives up as soon as ``stopping`` is set, so a shutdown is never held up by a
waiting client; a queue deleted under a waiting receive answers as a queue
that does not exist (``QueueDoesNotExist``), never as a closing server; a write runs inline only when it cannot block on an fsync.
"""

from __future__ import annotations

import functools
import threading
import time

import anyio

from ..errors import LogClosedError
from .errors import APIError
from .metrics import Metrics
from .settings import Settings


class ServerContext:
    def __init__(self, settings: Settings, broker=None):
        self.settings = settings
        self.broker = broker
        self.metrics = Metrics(lambda: self.broker)
        self.started = time.time()
        self.ready = False
        self.stopping = False
        self.blocking = anyio.CapacityLimiter(settings.workers_threads)
        self.long_poll = anyio.CapacityLimiter(settings.max_long_poll_waiters)
        self._waiters = 0
        self._waiters_lock = threading.Lock()
        # blocking calls are needed when the log fsyncs on the request path
        self.inline_writes = settings.flush != "always"
        self.sqs = None  # set by the app (vqs.server.sqs.service.SQSService)
        self._producer = None
        self._producer_broker = None

    def producer(self):
        """The server's one Producer on the current broker (made on first use)."""
        if self._producer is None or self._producer_broker is not self.broker:
            self._producer = self.broker.producer()
            self._producer_broker = self.broker
        return self._producer

    async def run(self, fn, *args, **kw):
        """Run a blocking broker call in a worker thread."""
        if kw:
            fn = functools.partial(fn, *args, **kw)
            args = ()
        return await anyio.to_thread.run_sync(fn, *args, limiter=self.blocking)

    async def write(self, fn, *args, **kw):
        """A write: inline when it cannot block on an fsync, else in a thread (group commit)."""
        if self.inline_writes:
            return fn(*args, **kw)
        return await self.run(fn, *args, **kw)

    async def long_poll_call(self, fn, *args, **kw):
        """Run a call that may wait (long poll); refuse with 503 past the waiter limit."""
        with self._waiters_lock:
            if self._waiters >= self.settings.max_long_poll_waiters:
                self.metrics.rejected.labels("long_poll_waiters").inc()
                raise APIError(
                    503, "too_many_waiters",
                    f"{self._waiters} long polls are already waiting (max_long_poll_waiters); retry later",
                    headers={"Retry-After": "1"},
                )
            self._waiters += 1
        self.metrics.long_polls.inc()
        try:
            if kw:
                fn = functools.partial(fn, *args, **kw)
                args = ()
            return await anyio.to_thread.run_sync(fn, *args, limiter=self.long_poll)
        finally:
            with self._waiters_lock:
                self._waiters -= 1
            self.metrics.long_polls.dec()

    async def long_poll_log(self, lg, offset: int, wait_s: float) -> bool:
        """Wait up to ``wait_s`` until log ``lg`` holds ``offset`` (True) or not (False)."""
        deadline = time.monotonic() + wait_s

        def waiter():
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or self.stopping:
                    return False
                if lg.wait_for(offset, min(left, 1.0)):
                    return True

        return await self.long_poll_call(waiter)

    async def long_poll_receive(self, q, n: int, wait_s: float, visibility) -> list:
        """``q.receive(n)`` waiting up to ``wait_s`` for a message ([] when none came)."""
        return await self.long_poll_call(self._receive_waiting, q, n, wait_s, visibility)

    def _receive_waiting(self, q, n, wait_s, visibility) -> list:
        deadline = time.monotonic() + wait_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or self.stopping:
                return []
            try:
                msgs = q.receive(n, min(left, 1.0), visibility)
            except LogClosedError:
                if self.stopping or self.broker is None:
                    raise
                # Deleted while we waited: answer as for a queue that does not
                # exist (the broker's own QueueDoesNotExist). If the name was
                # created again meanwhile, the poll goes on on the new queue.
                q = self.broker.queue(q.name)
                continue
            if msgs:
                return msgs
