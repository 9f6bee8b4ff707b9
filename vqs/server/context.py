"""What every request handler shares: the broker, settings, metrics, limiters and long polls.

Invariants: at most ``max_long_poll_waiters`` requests wait at once (the next
gets 503 ``too_many_waiters``); a long poll waits in slices of at most 1 s and
gives up as soon as ``stopping`` is set, so a shutdown is never held up by a
waiting client; a long poll on a log or a queue holds no thread while it waits
(long_poll.py: one watcher thread per log or queue with waiters); a queue
deleted under a waiting receive answers as a queue that does not exist
(``QueueDoesNotExist``), never as a closing server; a write runs inline only
when it cannot block on an fsync.
"""

from __future__ import annotations

import functools
import threading
import time

import anyio

from ..errors import LogClosedError
from .append_coalescer import AppendCoalescer
from .auth_failures import AuthFailures
from .byte_budget import ByteBudget, in_flight_budget, pre_auth_budget
from .errors import APIError
from .long_poll import LongPolls, wait_topics
from .metrics import Metrics
from .settings import Settings
from .share_members import ShareMembers


class ServerContext:
    def __init__(self, settings: Settings, broker=None, pre_auth: ByteBudget | None = None,
                 in_flight: ByteBudget | None = None, auth_failures: AuthFailures | None = None):
        self.settings = settings
        self.broker = broker
        # bytes held for requests not authenticated yet, and for every request being read or
        # handled: each shared with the Kafka listener (byte_budget.py)
        self.pre_auth = pre_auth or pre_auth_budget(settings.max_pre_auth_bytes)
        self.in_flight = in_flight or in_flight_budget(settings.max_request_bytes_in_flight)
        # every front's failed authentications, counted and logged alike (shared with Kafka's)
        self.auth_failures = auth_failures or AuthFailures()
        self.metrics = Metrics(lambda: self.broker, self.auth_failures)
        self.started = time.time()
        self.ready = False
        self.stopping = False
        self.blocking = anyio.CapacityLimiter(settings.workers_threads)
        self._waiters = 0
        self._waiters_lock = threading.Lock()
        # blocking calls are needed when the log fsyncs on the request path
        self.inline_writes = settings.flush != "always"
        self.sqs = None  # set by the app (vqs.server.sqs.service.SQSService)
        self._producer = None
        self._producer_broker = None
        self.long_polls = LongPolls(lambda: self.stopping)
        self.appends = AppendCoalescer(self)  # produce requests' appends, coalesced per partition
        self.share_members = ShareMembers()  # share-group members of REST and gRPC clients

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

    def inline_for_topic(self, topic) -> bool:
        """Whether appends to ``topic`` may run on the event loop: only when they cannot wait on
        an fsync, by the server's ``flush`` and by the topic's own (``flush="always"`` set on
        the topic, Kafka's ``flush.messages=1``, fsyncs on an ``interval`` server too)."""
        return self.inline_writes and not topic.flush_always

    async def topic_write(self, topic, fn, *args, **kw):
        """An append to ``topic``: inline when it cannot block on an fsync (``inline_for_topic``),
        else in a thread (the log's group commit shares the fsync)."""
        if self.inline_for_topic(topic):
            return fn(*args, **kw)
        return await self.run(fn, *args, **kw)

    def inline_for(self, q) -> bool:
        """Whether queue ``q``'s writes may run on the event loop: only when they cannot wait on an
        fsync, by the server's ``flush`` and by the queue's own (a queue keeps the one it was
        created with: made under ``--flush always``, or embedded, it fsyncs on an ``interval``
        server too)."""
        return self.inline_writes and q.config.flush != "always"

    async def queue_write(self, q, fn, *args, **kw):
        """A write to queue ``q``: inline when it cannot block on an fsync (``inline_for``), else
        in a thread."""
        if self.inline_for(q):
            return fn(*args, **kw)
        return await self.run(fn, *args, **kw)

    def _enter_long_poll(self) -> None:
        """Count a waiting long poll; 503 ``too_many_waiters`` past ``max_long_poll_waiters``."""
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

    def _leave_long_poll(self) -> None:
        with self._waiters_lock:
            self._waiters -= 1
        self.metrics.long_polls.dec()

    async def long_poll_topics(self, topics, ready, wait_s: float) -> bool:
        """Wait up to ``wait_s`` until ``ready()`` (checked after every append to any of
        ``topics``), a long poll counted against ``max_long_poll_waiters``. No thread: the
        topics wake the wait (long_poll.py ``wait_topics``)."""
        self._enter_long_poll()
        try:
            return await wait_topics(topics, ready, wait_s, lambda: self.stopping)
        finally:
            self._leave_long_poll()

    def reopen_queue(self, name: str):
        """A queue deleted under a long poll: answer as for a queue that does not exist (the
        broker's own QueueDoesNotExist), or go on on the new queue if the name came back."""
        b = self.broker
        if self.stopping or b is None:
            raise LogClosedError(f"queue {name!r} is closed: the server is stopping")
        return b.queue(name)

    async def long_poll_receive(self, q, n: int, wait_s: float, visibility, attempt_id: str | None = None) -> list:
        """``q.receive(n)`` waiting up to ``wait_s`` for a message ([] when none came). A message
        already visible is taken at once; a wait holds no thread (the queue's watcher serves it).
        ``attempt_id``: a FIFO receive's ReceiveRequestAttemptId (Queue.receive)."""
        self._enter_long_poll()
        try:
            return await self.long_polls.receive_or_wait(
                q, n, wait_s, visibility, lambda q: self.queue_write(q, q.receive, n, 0, visibility, attempt_id),
                self.reopen_queue, attempt_id)
        finally:
            self._leave_long_poll()


def configure_groups(broker, settings) -> None:
    """The server's group settings on the broker: its share groups' (``kafka_share_*``) and its
    consumer-protocol groups' session and heartbeat (``kafka_consumer_*``). Applied when the
    server starts, so every front sees the same ones (Kafka's ShareConsumer, REST's and gRPC's
    members, a group's configs described over HTTP); a group's own configs still override them
    (vqs.broker.group_configs)."""
    broker.share_groups.configure(
        record_lock_ms=settings.kafka_share_record_lock_ms, delivery_limit=settings.kafka_share_delivery_limit,
        auto_offset_reset=settings.kafka_share_auto_offset_reset,
        session_timeout_ms=settings.kafka_share_session_timeout_ms,
        heartbeat_interval_ms=settings.kafka_share_heartbeat_interval_ms,
        max_record_locks=settings.kafka_share_max_record_locks)
    broker.coordinator.consumer.set_timeouts(session_timeout_ms=settings.kafka_consumer_session_timeout_ms,
                                             heartbeat_interval_ms=settings.kafka_consumer_heartbeat_interval_ms)
