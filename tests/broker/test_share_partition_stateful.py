"""A hypothesis state machine: one share partition against a model of Kafka's share semantics.

Members acquire, accept, release, reject and renew; locks end as the injected time moves; a
member's records are released (its session closed); the process "crashes" (the state store is
closed without the snapshot a clean close writes, then opened again: what was written is all
there is) and reopens cleanly; records are appended meanwhile. The model predicts exactly which
records an acquisition returns and with which delivery counts: available records (released or
expired, below the delivery limit) lowest first, then fresh ones; a record at the limit is
archived instead of being made available.
"""

from __future__ import annotations

import shutil
import tempfile

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from vqs.broker.share.partition import ACCEPT, REJECT, RELEASE, RENEW, SharePartition
from vqs.errors import InvalidRecordState
from vqs.storage import Log

LIMIT = 3
LOCK = 100
MEMBERS = ("a", "b")


class Rec:
    def __init__(self):
        self.count = 0
        self.owner = None  # member holding it, while acquired
        self.until = 0
        self.settled = False


class SharePartitionMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="vqs-share-sm-")
        self.log = Log.open(self.dir + "/topic", flush="never")
        for i in range(5):
            self.log.append(b"r%d" % i)
        self.now = 1_000_000
        self.sp = self._open()
        self.model = {o: Rec() for o in range(5)}

    def _open(self):
        return SharePartition(self.dir + "/state", self.log, flush="interval", flush_interval_ms=60_000,
                              auto_offset_reset="earliest")

    def teardown(self):
        try:
            self.sp.close()
            self.log.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def _expire_model(self):
        for r in self.model.values():
            if r.owner is not None and r.until <= self.now:
                self._release_model(r)

    def _release_model(self, r):
        r.owner = None
        if r.count >= LIMIT:
            r.settled = True

    @rule(n=st.integers(1, 4), batch=st.booleans())
    def produce(self, n, batch):
        if batch:  # one stored batch of n
            self.log.append_batch([b"x"] * n)
        else:
            for _ in range(n):
                self.log.append(b"x")
        for o in range(len(self.model), self.log.end_offset):
            self.model[o] = Rec()

    @rule(ms=st.sampled_from([1, 50, 99, 100, 150]))
    def advance(self, ms):
        self.now += ms

    def _batch_end(self, o):
        return self.log.read_batches(o, max_bytes=1)[0].next_offset

    @rule(member=st.sampled_from(MEMBERS), k=st.integers(1, 6), whole=st.sampled_from([0, 0, 1, 4, 12]))
    def acquire(self, member, k, whole):
        """``whole``: whole_batches; the model reads the stored batches' bounds from the log."""
        self._expire_model()
        avail = sorted(o for o, r in self.model.items() if not r.settled and r.owner is None and r.count > 0)
        fresh = sorted(o for o, r in self.model.items() if r.count == 0 and not r.settled)
        want = []
        stop = None
        for o in avail:
            if len(want) >= k:
                if not whole or len(want) >= whole:
                    break
                stop = stop or self._batch_end(want[-1])
                if o >= stop:
                    break
            r = self.model[o]
            if r.count >= LIMIT:
                r.settled = True
            else:
                want.append(o)
        n = k - len(want)
        if n > 0 and whole and fresh:
            cursor, end = fresh[0], self.log.end_offset
            n = max(n, min(self._batch_end(min(cursor + n, end) - 1), end, cursor + whole) - cursor)
        want += fresh[: max(n, 0)]
        got = self.sp.acquire(member, k, self.now, LOCK, LIMIT, whole_batches=whole)
        flat = [(o, c) for first, last, c in got for o in range(first, last + 1)]
        assert [o for o, _ in flat] == sorted(want)
        for o, c in flat:
            r = self.model[o]
            r.count += 1
            r.owner, r.until = member, self.now + LOCK
            assert c == r.count <= LIMIT

    @rule(member=st.sampled_from(MEMBERS), pick=st.integers(0, 50),
          kind=st.sampled_from([ACCEPT, RELEASE, REJECT, RENEW]))
    def acknowledge(self, member, pick, kind):
        self._expire_model()
        offsets = sorted(self.model)
        o = offsets[pick % len(offsets)]
        r = self.model[o]
        below_start = all(self.model[x].settled for x in offsets if x <= o)
        held = r.owner == member and not r.settled
        try:
            self.sp.acknowledge(member, o, o, [kind], self.now, LOCK, LIMIT)
        except InvalidRecordState:
            assert not held and not below_start
            return
        assert held or below_start
        if held:
            self._acknowledge_model(r, kind)

    @rule(member=st.sampled_from(MEMBERS), pick=st.integers(0, 50), length=st.integers(1, 8),
          kind=st.sampled_from([ACCEPT, RELEASE, REJECT, RENEW]))
    def acknowledge_range(self, member, pick, length, kind):
        """One type for a range: all or nothing; offsets below the start offset ignored."""
        self._expire_model()
        offsets = sorted(self.model)
        first = offsets[pick % len(offsets)]
        last = min(first + length - 1, offsets[-1])
        low = min((o for o, r in self.model.items() if not r.settled), default=self.log.end_offset)
        span = range(max(first, low), last + 1)
        held = all(self.model[o].owner == member and not self.model[o].settled for o in span)
        try:
            self.sp.acknowledge(member, first, last, [kind], self.now, LOCK, LIMIT)
        except InvalidRecordState:
            assert not held
            return
        assert held
        for o in span:
            self._acknowledge_model(self.model[o], kind)

    def _acknowledge_model(self, r, kind) -> None:
        """What one acknowledgement of a held record does: ACCEPT and REJECT settle it,
        RELEASE makes it available again, RENEW extends its lock."""
        if kind in (ACCEPT, REJECT):
            r.settled, r.owner = True, None
        elif kind == RELEASE:
            self._release_model(r)
        else:
            r.until = self.now + LOCK

    @rule(member=st.sampled_from(MEMBERS))
    def release_member(self, member):
        self._expire_model()
        self.sp.release_member(member, LIMIT)
        for r in self.model.values():
            if r.owner == member:
                self._release_model(r)

    @rule()
    def crash(self):
        self.sp.store.close()  # what was written stays; no snapshot
        self.sp = self._open()
        for r in self.model.values():
            if r.owner is not None:
                r.owner = None  # every lease available again, count kept (archived at the next look)

    @rule()
    def reopen(self):
        self.sp.close()
        self.sp = self._open()
        for r in self.model.values():
            r.owner = None

    @invariant()
    def start_offset_is_the_first_unsettled_record(self):
        self.sp.expire(self.now, LIMIT)  # (a lock that ended is acted on at the next operation)
        self._expire_model()
        unsettled = [o for o, r in self.model.items() if not r.settled]
        assert self.sp.describe()["start_offset"] == min(unsettled, default=self.log.end_offset)


TestSharePartition = SharePartitionMachine.TestCase
TestSharePartition.settings = settings(max_examples=60, stateful_step_count=40, deadline=None,
                                       suppress_health_check=[HealthCheck.too_slow])
