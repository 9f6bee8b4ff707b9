"""HybridQueue against collections.deque: a hypothesis state machine.

Tiny memory budgets (so that items spill), tiny segments (so that the log rolls
and consumed segments are reclaimed), optional disk budget (so that Full
happens), and close + reopen, possibly with another mode and other budgets.
"""

from __future__ import annotations

import queue
import shutil
import tempfile
from collections import deque

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from vqs.hybrid import HybridQueue

memory_items = st.sampled_from([0, 1, 2, 3, 8, None])
memory_bytes = st.sampled_from([None, 120, 400])
max_disk = st.sampled_from([None, None, 600])
blobs = st.binary(min_size=0, max_size=150)


class HybridMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="vqs-hybrid-sm-")
        self.model: deque = deque()
        self.counter = 0
        self.q = None

    def _open(self, mi, mb, md, durable):
        self.cfg = (mi, mb, md, durable)
        self.q = HybridQueue(self.dir, memory_items=mi, memory_bytes=mb, max_disk_bytes=md,
                             durable=durable, segment_bytes=512)

    @initialize(mi=memory_items, mb=memory_bytes, md=max_disk, durable=st.booleans())
    def start(self, mi, mb, md, durable):
        self._open(mi, mb, md, durable)

    def _item(self, blob):
        self.counter += 1
        return (self.counter, blob)

    @rule(blob=blobs)
    def put(self, blob):
        item = self._item(blob)
        try:
            self.q.put_nowait(item)
        except queue.Full:
            assert self.cfg[2] is not None
            return
        self.model.append(item)

    @rule(data=st.lists(blobs, min_size=1, max_size=12))
    def put_batch(self, data):
        items = [self._item(b) for b in data]
        try:
            self.q.put_batch(items, block=False)
        except queue.Full:
            assert self.cfg[2] is not None
            return
        self.model.extend(items)

    @rule()
    def get(self):
        if self.model:
            assert self.q.get_nowait() == self.model.popleft()
        else:
            try:
                self.q.get_nowait()
            except queue.Empty:
                pass
            else:
                raise AssertionError("get from an empty queue returned an item")

    @rule(n=st.integers(1, 20))
    def get_batch(self, n):
        got = self.q.get_batch(n, block=False)
        want = [self.model.popleft() for _ in range(min(n, len(self.model)))]
        assert got == want

    @rule(n=st.integers(1, 20))
    def peek(self, n):
        assert self.q.peek_batch(n) == list(self.model)[:n]

    @rule(mi=memory_items, mb=memory_bytes, md=max_disk, durable=st.booleans())
    def reopen(self, mi, mb, md, durable):
        self.q.close()
        self._open(mi, mb, md, durable)

    @precondition(lambda self: self.q is not None)
    @rule()
    def reopen_same(self):
        self.q.close()
        self._open(*self.cfg)

    @invariant()
    def sizes_agree(self):
        if self.q is None:
            return
        assert self.q.qsize() == len(self.model)
        assert self.q.empty() == (not self.model)
        m = self.q.metrics
        assert m.disk_items + len(self.q._mem) == len(self.model)
        assert m.disk_bytes >= 0
        if self.cfg[0] is not None and not self.cfg[3]:
            assert len(self.q._mem) <= self.cfg[0]

    def teardown(self):
        try:
            if self.q is not None:
                self.q.close()
                # one last reopen: what is left is exactly the model
                with HybridQueue(self.dir) as q:
                    rest = q.get_batch(100_000, block=False)
                assert rest == list(self.model)
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


HybridMachine.TestCase.settings = settings(
    max_examples=min(60, settings().max_examples),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestHybridQueue = HybridMachine.TestCase
