"""What the gRPC handlers share: the server's broker and settings, thread pools, waits.

The gRPC front runs on its own asyncio loop in its own thread (front.py); the
broker, the stopping flag and the metrics are the HTTP server's
(``ServerContext``), so both fronts see the same topics, groups and queues.

Invariants: a call that may block on an fsync (``flush="always"``, commits,
admin) runs in a worker thread (``workers_threads`` of them), never on the
loop; under ``interval``/``never`` an append only fills the write buffer and
runs inline (as REST's ``ServerContext.write``). At most
``max_long_poll_waiters`` queue receives wait at once on this front (the next
is refused with RESOURCE_EXHAUSTED). No wait holds a thread: a queue receive
waits on the queue's watcher that the HTTP fronts share (long_poll.py), a
wait on a topic (Fetch, Subscribe) on the topic's waiter hook
(``Topic.add_waiter``). Every wait is cut to the call's deadline and ends
within a second of ``stopping``.
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor

import grpc

from ..long_poll import wait_topics
from .errors import RpcError

STOP_CHECK_S = 1.0  # a waiting call looks at `stopping` at least this often


class GrpcContext:
    def __init__(self, server_ctx):
        self.server = server_ctx
        self.settings = s = server_ctx.settings
        self.metrics = server_ctx.metrics
        self.pool = ThreadPoolExecutor(s.workers_threads, thread_name_prefix="vqs-grpc")
        self.waiters = 0  # touched on the loop thread only
        self.subscribe_bytes = 0  # the Subscribe streams' shares (records.py), on the loop thread only
        self.idle_streams: set[asyncio.Task] = set()  # ProduceStream calls waiting for the client
        self.ending_idle = False  # cancel_idle was called: a cancelled idle stream answers UNAVAILABLE
        self._producer = None
        self._producer_broker = None

    @property
    def stopping(self) -> bool:
        return self.server.stopping

    @property
    def broker(self):
        b = self.server.broker
        if b is None or self.server.stopping:
            raise RpcError(grpc.StatusCode.UNAVAILABLE, "the server is stopping")
        return b

    def producer(self):
        """This front's one Producer on the current broker."""
        b = self.broker
        if self._producer is None or self._producer_broker is not b:
            self._producer = b.producer()
            self._producer_broker = b
        return self._producer

    async def run(self, fn, *args, **kw):
        """A blocking broker call, in a worker thread."""
        return await asyncio.get_running_loop().run_in_executor(self.pool, functools.partial(fn, *args, **kw))

    async def topic_write(self, topic, fn, *args, **kw):
        """An append to ``topic``: inline when it cannot block on an fsync
        (``ServerContext.inline_for_topic``), else in a worker thread."""
        if self.server.inline_for_topic(topic):
            return fn(*args, **kw)
        return await self.run(fn, *args, **kw)

    async def queue_write(self, q, fn, *args, **kw):
        """A write to queue ``q``: inline when it cannot block on an fsync
        (``ServerContext.inline_for``), else in a worker thread."""
        if self.server.inline_for(q):
            return fn(*args, **kw)
        return await self.run(fn, *args, **kw)

    async def receive_waiting(self, q, n: int, wait_s: float, visibility) -> list:
        """``q.receive(n)`` waiting up to ``wait_s`` ([] when nothing came), refused with
        RESOURCE_EXHAUSTED past ``max_long_poll_waiters``. What is visible now is taken at
        once; the wait holds no thread: the queue's watcher, shared with the HTTP fronts
        (the server's ``long_polls``), serves it. Follows a queue deleted and created
        again (a deleted queue that is not back answers as missing, as on the other fronts)."""
        if self.waiters >= self.settings.max_long_poll_waiters:
            self.metrics.rejected.labels("long_poll_waiters").inc()
            raise RpcError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                           f"{self.waiters} long polls are already waiting (max_long_poll_waiters); retry later")
        self.waiters += 1
        self.metrics.long_polls.inc()
        try:
            return await self.server.long_polls.receive_or_wait(
                q, n, wait_s, visibility, lambda q: self.queue_write(q, q.receive, n, 0, visibility), self.server.reopen_queue)
        finally:
            self.waiters -= 1
            self.metrics.long_polls.dec()

    def wait_seconds(self, context, wanted_s: float) -> float:
        """``wanted_s`` cut to the server's long-poll cap and the call's deadline.

        The empty answer has to leave before the deadline, through an event loop that other
        calls keep busy: the wait ends 50 ms plus a tenth of the time left (at most 1 s in
        all) before it, so a 1 s deadline leaves the answer 150 ms, a 20 s one 1 s."""
        wait = min(wanted_s, self.settings.max_wait_ms / 1000)
        left = context.time_remaining()
        if left is not None:
            wait = min(wait, left - min(1.0, 0.05 + left / 10))
        return max(0.0, wait)

    async def wait_topic(self, topic, ready, timeout: float) -> bool:
        """Wait up to ``timeout`` s until ``ready()`` (checked after every append to ``topic``;
        no thread: long_poll.py ``wait_topics``)."""
        return await wait_topics((topic,), ready, timeout, lambda: self.stopping)

    def cancel_idle(self) -> None:
        """Stopping: end with UNAVAILABLE the ProduceStream calls that wait for their client's
        next batch (an idle stream would hold the shutdown for the whole grace period, as an
        idle HTTP keep-alive connection does not); those in the middle of a batch finish it."""
        self.ending_idle = True
        for task in list(self.idle_streams):
            task.cancel()

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
