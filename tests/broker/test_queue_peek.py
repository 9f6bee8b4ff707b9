"""Queue.peek: the pending messages, read without receiving them (vqs/broker/queue/peek.py).

A peek lists exactly the messages not deleted, oldest first, with their state,
and changes nothing a consumer can observe: counts, receive counts, what the
next receive returns. A stateful property test checks the listing against a
simple model (the set of pending messages) through sends, receives, deletes,
visibility changes, leases ending and reopenings.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from vqs.broker.queue.registry import QueueRegistry


@pytest.mark.parametrize("fifo", [False, True])
def test_peek_lists_pending_messages_and_changes_nothing(reg, qclock, fifo):
    kw = {"fifo": True, "content_based_deduplication": True} if fifo else {}
    q = reg.create("p.fifo" if fifo else "p", **kw)
    for i in range(6):
        q.send(f"m{i}", **({"group_id": f"g{i % 2}"} if fifo else {}), attributes={"n": str(i)})
    later = [] if fifo else ["later"]  # (a FIFO queue has no per-message delay)
    if not fifo:
        q.send("later", delay_seconds=60)
    got = q.receive(2, wait_seconds=0, visibility_timeout=30)
    q.delete(got[0].receipt_handle)
    before = q.counts()
    peeked = q.peek(100)
    assert [p.message.text for p in peeked] == [f"m{i}" for i in range(6) if f"m{i}" != got[0].text] + later
    states = {p.message.text: p.state for p in peeked}
    assert states[got[1].text] == "in_flight" and states.get("later", "delayed") == "delayed"
    assert [p.message.offset for p in peeked] == sorted(p.message.offset for p in peeked)
    inflight = next(p for p in peeked if p.state == "in_flight")
    assert inflight.receive_count == 1 and inflight.visible_at_ms == int((qclock.now + 30) * 1000)
    assert all(p.message.receipt_handle == "" for p in peeked)
    assert peeked[0].message.attributes["n"]["StringValue"] == peeked[0].message.text[1:]
    assert q.counts() == before  # nothing changed
    assert [p.message.offset for p in q.peek(2, peeked[2].message.offset)] == [p.message.offset for p in peeked[2:4]]
    assert q.oldest_sent_ms() == peeked[0].message.sent_timestamp_ms
    # the next receive gets what it would have got without the peek, first delivery included
    nxt = q.receive(1, wait_seconds=0)
    assert nxt[0].receive_count == 1
    assert nxt[0].text == next(p.message.text for p in peeked if p.state == "visible"
                               and (not fifo or p.message.group_id != got[1].group_id))
    with pytest.raises(ValueError):
        q.peek(0)
    with pytest.raises(ValueError):
        q.peek(101)


def test_peek_of_an_empty_queue(reg):
    q = reg.create("empty")
    assert q.peek(10) == [] and q.oldest_sent_ms() is None


class Clock:
    """The model's clock (seconds, like time.time): it moves only when told."""

    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class PeekModel(RuleBasedStateMachine):
    """Peek against a model: the bodies of the messages sent and not deleted or purged."""

    def __init__(self):
        super().__init__()
        self.reg = None

    @initialize(fifo=st.booleans())
    def open(self, fifo):
        # tmpfs when there is one: the model checks peek's logic, not fsync speed
        self.dir = tempfile.mkdtemp(prefix="vqs-peek-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        self.clock = Clock(1_700_000_000.0)
        self.fifo = fifo
        self.reg = QueueRegistry(self.dir, clock=self.clock)
        kw = {"fifo": True, "content_based_deduplication": True} if fifo else {}
        self.name = "m.fifo" if fifo else "m"
        self.q = self.reg.create(self.name, visibility_timeout=10, **kw)
        self.pending: dict[str, None] = {}  # bodies, in send order
        self.held: dict[str, str] = {}  # body -> receipt handle of its current lease
        self.n = 0

    def teardown(self):
        if self.reg is not None:
            self.reg.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    @rule(k=st.integers(1, 4), group=st.sampled_from(["a", "b"]))
    def send(self, k, group):
        for _ in range(k):
            body = f"b{self.n}"
            self.n += 1
            self.q.send(body, **({"group_id": group} if self.fifo else {}))
            self.pending[body] = None

    @rule(k=st.integers(1, 10))
    def receive(self, k):
        for m in self.q.receive(k, wait_seconds=0):
            self.held[m.text] = m.receipt_handle

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def delete(self, data):
        body = data.draw(st.sampled_from(sorted(self.held)))
        self.q.delete(self.held.pop(body))
        self.pending.pop(body, None)

    @rule(seconds=st.sampled_from([1, 11]))
    def time_passes(self, seconds):
        self.clock.advance(seconds)
        if seconds > 10:
            self.held.clear()  # leases ended: their handles no longer delete

    @rule()
    def reopen(self):
        self.reg.close()
        self.reg = QueueRegistry(self.dir, clock=self.clock)
        self.q = self.reg.get(self.name)
        self.held.clear()

    @invariant()
    def peek_is_the_model(self):
        if self.reg is None:
            return
        before = self.q.counts()
        got = self.q.peek(100)
        assert [p.message.text for p in got] == list(self.pending)[:100]
        assert all(p.state in ("visible", "in_flight") for p in got)
        assert self.q.counts() == before


PeekModel.TestCase.settings = settings(max_examples=12, stateful_step_count=15, deadline=None,
                                       suppress_health_check=[HealthCheck.too_slow])
test_peek_model = PeekModel.TestCase
