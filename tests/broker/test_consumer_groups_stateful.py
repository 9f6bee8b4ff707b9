"""Consumer-group offsets against a model: send, poll, seek, commit, close/reopen.

The model knows every partition's records, the consumer's positions and the
group's committed offsets. After a reopen (the broker closed and opened again,
a new consumer made for the group) positions are the committed offsets, or the
start for partitions never committed.
"""

from __future__ import annotations

import shutil
import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from vqs.broker import Broker, TopicPartition

PARTITIONS = 3
TPS = [TopicPartition("t", p) for p in range(PARTITIONS)]


def _assigned(broker):
    """A consumer of the group given every partition (no membership: two of them read the same)."""
    c = broker.consumer(group="g")
    c.assign(TPS)
    return c


class ConsumerGroupMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="vqs-groups-")
        self.data = self.dir + "/data"
        self.broker = Broker(self.data, flush="never", segment_bytes=512)
        self.broker.create_topic("t", partitions=PARTITIONS)
        self.producer = self.broker.producer()
        self.consumer = _assigned(self.broker)
        self.log = [[] for _ in range(PARTITIONS)]  # values per partition
        self.position = [0] * PARTITIONS
        self.committed: dict[int, int] = {}
        self.counter = 0

    def teardown(self):
        try:
            self.broker.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def _value(self) -> bytes:
        self.counter += 1
        return b"v%d" % self.counter

    @rule(partition=st.integers(0, PARTITIONS - 1), n=st.integers(1, 20))
    def send_batch(self, partition, n):
        values = [self._value() for _ in range(n)]
        metas = self.producer.send_batch("t", values, partition=partition)
        first = len(self.log[partition])
        assert [m.offset for m in metas] == list(range(first, first + n))
        self.log[partition].extend(values)

    # min_size=1: empty keys are covered by test_topics.py::test_empty_values_and_keys_round_trip
    # (in a child with a timeout, as a storage hang on them was seen).
    @rule(key=st.binary(min_size=1, max_size=8))
    def send_keyed(self, key):
        value = self._value()
        m = self.producer.send("t", value, key=key)
        assert m.offset == len(self.log[m.partition])
        self.log[m.partition].append(value)

    @rule(max_records=st.integers(1, 40))
    def poll(self, max_records):
        recs = self.consumer.poll(max_records=max_records)
        available = sum(len(self.log[p]) - self.position[p] for p in range(PARTITIONS))
        assert len(recs) == min(max_records, available)
        for r in recs:
            p = r.partition
            assert r.offset == self.position[p], "records of a partition come in order, none skipped"
            assert r.value == self.log[p][r.offset]
            self.position[p] += 1

    @rule()
    def commit(self):
        self.consumer.commit()
        self.committed = {p: self.position[p] for p in range(PARTITIONS)}

    @rule(partition=st.integers(0, PARTITIONS - 1), data=st.data())
    def commit_explicit(self, partition, data):
        offset = data.draw(st.integers(0, len(self.log[partition])))
        self.consumer.commit({("t", partition): offset})
        self.committed[partition] = offset

    @rule(partition=st.integers(0, PARTITIONS - 1), data=st.data())
    def seek(self, partition, data):
        offset = data.draw(st.integers(0, len(self.log[partition])))
        self.consumer.seek(("t", partition), offset)
        self.position[partition] = offset

    @rule()
    def seek_to_beginning(self):
        self.consumer.seek_to_beginning()
        self.position = [0] * PARTITIONS

    @rule()
    def reopen(self):
        self.broker.close()
        self.broker = Broker(self.data, flush="never", segment_bytes=512)
        self.producer = self.broker.producer()
        self.consumer = _assigned(self.broker)
        self.position = [self.committed.get(p, 0) for p in range(PARTITIONS)]

    @precondition(lambda self: self.committed)
    @rule()
    def second_consumer_sees_committed(self):
        other = _assigned(self.broker)
        for p in range(PARTITIONS):
            assert other.position(("t", p)) == self.committed.get(p, 0)
        other.close()

    @invariant()
    def positions_match(self):
        for p, tp in enumerate(TPS):
            assert self.consumer.position(tp) == self.position[p]

    @invariant()
    def committed_match(self):
        for p, tp in enumerate(TPS):
            assert self.consumer.committed(tp) == self.committed.get(p)
        assert self.broker.group_offsets("g") == {
            TopicPartition("t", p): off for p, off in self.committed.items()
        }

    @invariant()
    def end_offsets_match(self):
        assert self.broker.topic("t").end_offsets() == [len(v) for v in self.log]


ConsumerGroupMachine.TestCase.settings = settings(max_examples=min(60, settings().max_examples), stateful_step_count=30, deadline=None)
TestConsumerGroups = ConsumerGroupMachine.TestCase
