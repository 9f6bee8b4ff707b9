"""A hypothesis state machine for FIFO queues against a model: order within a
message group, a message in flight hides the rest of its group, the
5-minute deduplication window, FIFO receipt-handle rules, close/reopen."""

from __future__ import annotations

import shutil
import tempfile

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from vqs.broker.queue.registry import QueueRegistry
from vqs.errors import MessageNotAvailable, MessageNotInflight, ReceiptHandleExpired

VIS = 30
WINDOW = 300_000


class Clock:
    def __init__(self):
        self.ms = 1_700_000_000_000

    def __call__(self) -> float:
        return self.ms / 1000


class M:
    def __init__(self, mid, body, group, seq):
        self.id, self.body, self.group, self.seq = mid, body, group, seq
        self.until = None
        self.count = 0
        self.handles: list[str] = []
        self.deleted = False

    def in_flight(self, now):
        return not self.deleted and self.until is not None and self.until > now


class FifoMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="vqs-fsm-")
        self.clock = Clock()
        self.reg = QueueRegistry(self.dir, clock=self.clock)
        self.q = self.reg.create("q.fifo", fifo=True, visibility_timeout=VIS)
        self.msgs: list[M] = []
        self.by_handle: dict[str, M] = {}
        self.dedup: dict[str, tuple[int, str]] = {}  # dedup id -> (sent ms, message id)
        self.n = 0

    def teardown(self):
        try:
            self.reg.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def _send_model(self, body, group, dedup, got_id):
        now = self.clock.ms
        prev = self.dedup.get(dedup)
        if prev is not None and now < prev[0] + WINDOW:
            assert got_id == prev[1], "a duplicate inside the window must return the first id"
            return
        assert all(m.id != got_id for m in self.msgs)
        self.dedup[dedup] = (now, got_id)
        self.msgs.append(M(got_id, body, group, len(self.msgs)))

    @rule(group=st.sampled_from("abc"), dedup=st.sampled_from(["d1", "d2", None]))
    def send(self, group, dedup):
        self.n += 1
        body = b"m%d" % self.n
        d = dedup or "u%d" % self.n
        mid = self.q.send(body, group_id=group, dedup_id=d)
        self._send_model(body, group, d, mid)

    @rule(groups=st.lists(st.sampled_from("abc"), min_size=1, max_size=10))
    def send_batch(self, groups):
        entries = []
        for g in groups:
            self.n += 1
            entries.append({"body": b"m%d" % self.n, "group_id": g, "dedup_id": "u%d" % self.n})
        ids = self.q.send_batch(entries)
        for e, mid in zip(entries, ids):
            self._send_model(e["body"], e["group_id"], e["dedup_id"], mid)

    @rule(n=st.integers(1, 10), vis=st.sampled_from([None, 0, 5, 60]))
    def receive(self, n, vis):
        # SQS: a group delivers its messages in order from its head up to the
        # first one in flight; groups whose head is in flight deliver nothing.
        # The order of the groups (the order their heads became visible) is
        # stated by the boto3 tests; here: whole runs, cut only by n.
        now = self.clock.ms
        runs: dict[str, list[M]] = {}
        blocked = set()
        for m in self.msgs:
            if m.deleted or m.group in blocked:
                continue
            if m.in_flight(now):
                blocked.add(m.group)
                continue
            runs.setdefault(m.group, []).append(m)
        got = self.q.receive(n, visibility_timeout=vis)
        assert len(got) == min(n, sum(len(r) for r in runs.values()))
        by_id = {m.id: m for r in runs.values() for m in r}
        expect = []
        seen: list[str] = []
        for x in got:
            if not seen or seen[-1] != x.group_id:
                assert x.group_id not in seen, "a group's messages come together"
                seen.append(x.group_id)
                expect += runs[x.group_id]
        assert [x.id for x in got] == [m.id for m in expect[:len(got)]]
        lease = (VIS if vis is None else vis) * 1000
        for x in got:
            m = by_id[x.id]
            assert x.group_id == m.group
            m.count += 1
            assert x.receive_count == m.count
            m.until = now + lease
            m.handles.append(x.receipt_handle)
            self.by_handle[x.receipt_handle] = m

    @precondition(lambda self: self.by_handle)
    @rule(data=st.data())
    def delete(self, data):
        # insertion order: handles carry random nonces, so sorting them would
        # make the drawn choice differ between hypothesis replays
        h = data.draw(st.sampled_from(list(self.by_handle)))
        m = self.by_handle[h]
        now = self.clock.ms
        current = m.handles[-1] == h and m.in_flight(now)
        try:
            self.q.delete(h)
        except ReceiptHandleExpired:
            assert not m.deleted and not current
            return
        assert m.deleted or current
        m.deleted = True

    @precondition(lambda self: self.by_handle)
    @rule(data=st.data(), secs=st.sampled_from([0, 10, 100]))
    def change_visibility(self, data, secs):
        # insertion order: handles carry random nonces, so sorting them would
        # make the drawn choice differ between hypothesis replays
        h = data.draw(st.sampled_from(list(self.by_handle)))
        m = self.by_handle[h]
        now = self.clock.ms
        ok = m.handles[-1] == h and m.in_flight(now)
        try:
            self.q.change_visibility(h, secs)
        except MessageNotAvailable:  # SQS: InvalidParameterValue, the message does not exist
            assert m.deleted
            return
        except MessageNotInflight:
            assert not ok and not m.deleted
            return
        assert ok
        m.until = now + secs * 1000

    @rule(secs=st.sampled_from([1, 5, 30, 31, 120, 299, 301]))
    def advance(self, secs):
        self.clock.ms += secs * 1000

    @rule()
    def reopen(self):
        self.reg.close()
        self.reg = QueueRegistry(self.dir, clock=self.clock)
        self.q = self.reg.get("q.fifo")

    @invariant()
    def counts(self):
        now = self.clock.ms
        c = self.q.counts()
        assert c["in_flight"] == sum(m.in_flight(now) for m in self.msgs)
        assert c["visible"] == sum(not m.deleted and not m.in_flight(now) for m in self.msgs)
        assert c["delayed"] == 0


FifoMachine.TestCase.settings = settings(
    max_examples=min(40, settings().max_examples), stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestFifoStateMachine = FifoMachine.TestCase
