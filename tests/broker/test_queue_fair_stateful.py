"""A hypothesis state machine: a fair queue (standard queue with message group ids)
against a model of AWS's noisy-tenant rule.

The model picks each message of a receive on its own: among the visible
messages, the oldest whose tenant is not noisy (a tenant with at least 30
messages and more than 10 % of all in flight; a message without a group id is
a tenant of its own); when only noisy tenants' messages are visible, the oldest
of the tenant with the fewest in flight. Leases end (the clock moves), messages
are deleted or made visible again, per-message delays, close/reopen and
compaction are steps. Receipt handles used are always current ones.
"""

from __future__ import annotations

import shutil
import tempfile

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from vqs.broker.queue.registry import QueueRegistry

VIS = 30
GROUPS = ["A", "A", "A", "B", "C", None]


class Clock:
    def __init__(self):
        self.ms = 1_700_000_000_000

    def __call__(self) -> float:
        return self.ms / 1000


class M:
    def __init__(self, mid, body, group, seq, visible_at):
        self.id = mid
        self.body = body
        self.group = group
        self.seq = seq
        self.visible_at = visible_at
        self.until = None
        self.handle = None
        self.deleted = False

    def visible(self, now):
        return not self.deleted and self.visible_at <= now and (self.until is None or self.until <= now)

    def in_flight(self, now):
        return not self.deleted and self.until is not None and self.until > now

    def delayed(self, now):
        return not self.deleted and self.until is None and self.visible_at > now


class FairQueueMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="vqs-fair-")
        self.clock = Clock()
        self.reg = QueueRegistry(self.dir, clock=self.clock)
        self.q = self.reg.create("q", visibility_timeout=VIS)
        self.msgs: list[M] = []
        self.n = 0

    def teardown(self):
        try:
            self.reg.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    # ------------------------------------------------------------- the model

    def _inflight(self, now):
        per: dict = {}
        total = 0
        for m in self.msgs:
            if m.in_flight(now):
                total += 1
                if m.group is not None:
                    per[m.group] = per.get(m.group, 0) + 1
        return per, total

    def _pick(self, now):
        visible = sorted((m for m in self.msgs if m.visible(now)), key=lambda m: m.seq)
        if not visible:
            return None
        per, total = self._inflight(now)
        noisy = {g for g, c in per.items() if c >= 30 and c * 100 > total * 10}
        for m in visible:
            if m.group is None or m.group not in noisy:
                return m
        return min(visible, key=lambda m: (per.get(m.group, 0), m.seq))

    # ------------------------------------------------------------- the rules

    @rule(group=st.sampled_from(GROUPS), k=st.integers(1, 40), delay=st.sampled_from([None, None, 0, 5]))
    def send(self, group, k, delay):
        for i in range(0, k, 10):
            entries, bodies = [], []
            for _ in range(min(10, k - i)):
                self.n += 1
                body = b"m%d" % self.n
                e = {"body": body}
                if group is not None:
                    e["group_id"] = group
                if delay is not None:
                    e["delay_seconds"] = delay
                entries.append(e)
                bodies.append(body)
            ids = self.q.send_batch(entries)
            for mid, body in zip(ids, bodies):
                self.msgs.append(M(mid, body, group, len(self.msgs), self.clock.ms + (delay or 0) * 1000))

    @rule(k=st.integers(1, 40))
    def receive(self, k):
        while k > 0:
            n = min(10, k)
            k -= n
            now = self.clock.ms
            expect = []
            for _ in range(n):
                m = self._pick(now)
                if m is None:
                    break
                m.until = now + VIS * 1000
                expect.append(m)
            got = self.q.receive(n)
            assert [g.body for g in got] == [m.body for m in expect]
            for g, m in zip(got, expect):
                assert g.group_id == m.group
                m.handle = g.receipt_handle
            if not expect:
                return

    @rule(data=st.data(), k=st.integers(1, 10))
    def delete(self, data, k):
        now = self.clock.ms
        live = [m for m in self.msgs if m.in_flight(now)]
        if not live:
            return
        ms = data.draw(st.lists(st.sampled_from(live), min_size=1, max_size=k, unique_by=lambda m: m.seq))
        self.q.delete_batch([m.handle for m in ms])
        for m in ms:
            m.deleted = True

    @precondition(lambda self: any(m.until for m in self.msgs))
    @rule(data=st.data())
    def release(self, data):
        now = self.clock.ms
        live = [m for m in self.msgs if m.in_flight(now)]
        if not live:
            return
        m = data.draw(st.sampled_from(live))
        self.q.change_visibility(m.handle, 0)
        m.until = now

    @rule(secs=st.sampled_from([1, 6, 15, 31]))
    def advance(self, secs):
        self.clock.ms += secs * 1000

    @rule()
    def reopen(self):
        self.reg.close()
        self.reg = QueueRegistry(self.dir, clock=self.clock)
        self.q = self.reg.get("q")

    @rule()
    def compact(self):
        self.q.compact()

    # ------------------------------------------------------------- invariants

    @invariant()
    def counts_agree(self):
        now = self.clock.ms
        c = self.q.counts()
        per, total = self._inflight(now)
        assert c == {
            "visible": sum(m.visible(now) for m in self.msgs),
            "in_flight": total,
            "delayed": sum(m.delayed(now) for m in self.msgs),
        }
        fair = self.q._fair
        if fair is None:
            assert all(m.group is None for m in self.msgs)
        else:
            assert fair.inflight == per


FairQueueMachine.TestCase.settings = settings(
    max_examples=min(40, settings().max_examples), stateful_step_count=50, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_fair_queue_against_model = FairQueueMachine.TestCase
