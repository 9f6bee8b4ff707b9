"""A hypothesis state machine: a standard queue with a dead-letter queue against a
model that knows leases, delays, receive counts, receipt handles and DLQ moves.
SQS's receipt rule for standard queues: every handle ever issued for a message
stays usable (delete deletes it; change_visibility changes its lease while it
is in flight, is a no-op while it is not, and is refused once it is deleted).

Time is an injected clock (no sleeps); close/reopen is a step. The model
predicts exactly which messages a receive returns: visible messages, oldest
first, messages past max_receive_count moved to the DLQ on the way.
"""

from __future__ import annotations

import shutil
import tempfile

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from vqs.broker.queue.registry import QueueRegistry
from vqs.errors import InvalidParameterValue, MessageNotAvailable, PurgeQueueInProgress

MRC = 2
VIS = 30


class Clock:
    def __init__(self):
        self.ms = 1_700_000_000_000

    def __call__(self) -> float:
        return self.ms / 1000


class M:
    def __init__(self, mid, body, seq, visible_at):
        self.id = mid
        self.body = body
        self.seq = seq
        self.visible_at = visible_at
        self.until = None  # lease end (ms) while in flight
        self.count = 0
        self.handle = None  # current delivery's receipt handle
        self.received = None
        self.first = None
        self.deleted = False

    def visible(self, now):
        return not self.deleted and self.visible_at <= now and (self.until is None or self.until <= now)

    def in_flight(self, now):
        return not self.deleted and self.until is not None and self.until > now

    def delayed(self, now):
        return not self.deleted and self.count == 0 and self.visible_at > now


class QueueMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="vqs-qsm-")
        self.clock = Clock()
        self.reg = QueueRegistry(self.dir, clock=self.clock)
        self.dlq = self.reg.create("dlq", visibility_timeout=VIS)
        self.q = self.reg.create("q", visibility_timeout=VIS, dead_letter_queue="dlq",
                                 max_receive_count=MRC)
        self.msgs: list[M] = []
        self.by_id: dict[str, M] = {}
        self.handles: list[str] = []  # every handle ever returned (stale ones included)
        self.message_of: dict[str, M] = {}  # handle -> its message
        self.moved: dict[str, bytes] = {}  # id -> body, moved to the DLQ, not yet drained
        self.drained: set[str] = set()
        self.n = 0
        self.last_purge = None

    def teardown(self):
        try:
            self.reg.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    # ------------------------------------------------------------- sending

    def _add(self, mid, body, delay):
        assert mid not in self.by_id
        m = M(mid, body, len(self.msgs), self.clock.ms + delay * 1000)
        self.msgs.append(m)
        self.by_id[mid] = m

    @rule(delay=st.sampled_from([None, None, 0, 5, 40]))
    def send(self, delay):
        self.n += 1
        body = b"m%d" % self.n
        mid = self.q.send(body, delay_seconds=delay)
        self._add(mid, body, delay or 0)

    @rule(k=st.integers(1, 10), delays=st.booleans())
    def send_batch(self, k, delays):
        entries, meta = [], []
        for i in range(k):
            self.n += 1
            body = b"m%d" % self.n
            d = (i * 7) % 30 if delays else 0
            entries.append({"body": body, "delay_seconds": d} if delays else body)
            meta.append((body, d))
        ids = self.q.send_batch(entries)
        for mid, (body, d) in zip(ids, meta):
            self._add(mid, body, d)

    # ----------------------------------------------------------- receiving

    @rule(n=st.integers(1, 10), vis=st.sampled_from([None, 0, 0, 1, 10, 60]))
    def receive(self, n, vis):
        now = self.clock.ms
        lease = (VIS if vis is None else vis) * 1000
        expect, moved = [], []
        for m in sorted((m for m in self.msgs if m.visible(now)), key=lambda m: m.seq):
            if len(expect) == n:
                break
            if m.count >= MRC:
                moved.append(m)
                continue
            expect.append(m)
        got = self.q.receive(n, visibility_timeout=vis)
        assert [g.id for g in got] == [m.id for m in expect], (
            [g.body for g in got], [m.body for m in expect])
        for g, m in zip(got, expect):
            assert g.body == m.body
            assert g.receive_count == m.count + 1
            m.count += 1
            m.until = now + lease
            m.received = now
            m.first = m.first or now
            assert g.first_receive_timestamp_ms == m.first
            m.handle = g.receipt_handle
            self.handles.append(g.receipt_handle)
            self.message_of[g.receipt_handle] = m
        for m in moved:
            m.deleted = True
            self.moved[m.id] = m.body

    @precondition(lambda self: self.handles)
    @rule(data=st.data())
    def delete(self, data):
        h = data.draw(st.sampled_from(self.handles))
        self.q.delete(h)  # any handle of the message deletes it
        self.message_of[h].deleted = True

    @precondition(lambda self: self.handles)
    @rule(data=st.data(), k=st.integers(1, 10))
    def delete_batch(self, data, k):
        hs = [data.draw(st.sampled_from(self.handles)) for _ in range(k)]
        self.q.delete_batch(hs)
        for h in hs:
            self.message_of[h].deleted = True

    @precondition(lambda self: self.handles)
    @rule(data=st.data(), secs=st.sampled_from([0, 1, 10, 100, 43200]))
    def change_visibility(self, data, secs):
        h = data.draw(st.sampled_from(self.handles))
        now = self.clock.ms
        target = self.message_of[h]
        ok = target.in_flight(now)
        too_long = ok and now + secs * 1000 - target.received > 43200 * 1000
        try:
            self.q.change_visibility(h, secs)
        except MessageNotAvailable:
            assert target.deleted
            return
        except InvalidParameterValue:
            assert too_long
            return
        assert not target.deleted and not too_long
        if ok:  # not in flight: a success that changes nothing
            target.until = now + secs * 1000

    # ---------------------------------------------------------- the rest

    @rule(secs=st.sampled_from([0.5, 1, 5, 10, 29.5, 30, 31, 45]))
    def advance(self, secs):
        self.clock.ms += int(secs * 1000)

    @rule()
    def reopen(self):
        self.reg.close()
        self.reg = QueueRegistry(self.dir, clock=self.clock)
        self.q = self.reg.get("q")
        self.dlq = self.reg.get("dlq")
        self.last_purge = None  # the purge rate limit is per process

    @rule()
    def compact(self):
        self.q.compact()

    @rule()
    def purge(self):
        now = self.clock.ms
        try:
            self.q.purge()
        except PurgeQueueInProgress:
            assert self.last_purge is not None and now - self.last_purge < 60_000
            return
        assert self.last_purge is None or now - self.last_purge >= 60_000
        self.last_purge = now
        for m in self.msgs:
            m.deleted = True

    @rule()
    def drain_dlq(self):
        got = self.dlq.receive(10, visibility_timeout=1000)
        for g in got:
            assert g.id in self.moved, g.id
            assert g.body == self.moved.pop(g.id)
            assert g.source_queue == "q"
            self.drained.add(g.id)
        if got:
            self.dlq.delete_batch([g.receipt_handle for g in got])

    # --------------------------------------------------------- invariants

    @invariant()
    def counts(self):
        now = self.clock.ms
        c = self.q.counts()
        in_flight = sum(m.in_flight(now) for m in self.msgs)
        visible = sum(m.visible(now) for m in self.msgs)
        delayed = sum(m.delayed(now) for m in self.msgs)
        assert c["in_flight"] == in_flight
        # exact after a reopen too (SQS's ApproximateNumberOfMessagesDelayed)
        assert c["visible"] == visible
        assert c["delayed"] == delayed

    @invariant()
    def dlq_never_duplicates(self):
        assert not (set(self.moved) & self.drained)


QueueMachine.TestCase.settings = settings(
    max_examples=min(40, settings().max_examples), stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestQueueStateMachine = QueueMachine.TestCase
