"""Consumer: round trips, seeks, long poll, fairness, out-of-range, group commits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from vqs.broker import Broker, TopicPartition
from vqs.errors import ConfigError, LogClosedError, OffsetOutOfRange, TopicDoesNotExist

PYTHON = sys.executable


def drain(consumer, max_records=500):
    out = []
    while recs := consumer.poll(max_records=max_records):
        out.extend(recs)
    return out


def test_round_trip_several_partitions(broker):
    broker.create_topic("t", partitions=4)
    p = broker.producer()
    sent = {}
    for i in range(1000):
        m = p.send("t", f"v{i}".encode(), key=f"k{i % 37}".encode())
        sent[(m.partition, m.offset)] = f"v{i}".encode()
    c = broker.consumer("t")
    assert c.assignment() == [TopicPartition("t", p) for p in range(4)]
    got = drain(c, max_records=64)
    assert len(got) == 1000
    assert {(r.partition, r.offset): r.value for r in got} == sent
    for part in range(4):  # in offset order within each partition
        offs = [r.offset for r in got if r.partition == part]
        assert offs == sorted(offs) == list(range(len(offs)))
    assert all(r.topic == "t" for r in got)
    assert c.poll() == []
    assert c.lag() == {TopicPartition("t", p): 0 for p in range(4)}


def test_poll_is_fair_across_partitions(broker):
    broker.create_topic("t", partitions=3)
    p = broker.producer()
    for part in range(3):
        p.send_batch("t", [b"x"] * 1000, partition=part)
    c = broker.consumer("t")
    recs = c.poll(max_records=300)
    assert len(recs) == 300
    counts = [sum(r.partition == part for r in recs) for part in range(3)]
    assert counts == [100, 100, 100]
    # When only one partition has data, it gets the whole budget.
    c.seek_to_end([("t", 0), ("t", 1)])
    assert [r.partition for r in c.poll(max_records=300)] == [2] * 300


def test_multiple_topics_and_assign(broker):
    broker.create_topic("a", partitions=2)
    broker.create_topic("b")
    p = broker.producer()
    p.send("a", b"a0", partition=0)
    p.send("a", b"a1", partition=1)
    p.send("b", b"b0")
    c = broker.consumer(["a", "b"])
    assert sorted(r.value for r in c.poll()) == [b"a0", b"a1", b"b0"]
    c2 = broker.consumer()
    assert c2.poll() == [] and c2.assignment() == []
    c2.assign([("a", 1), ("b", 0), ("a", 1)])
    assert c2.assignment() == [("a", 1), ("b", 0)]
    assert sorted(r.value for r in c2.poll()) == [b"a1", b"b0"]
    with pytest.raises(TopicDoesNotExist):
        c2.assign([("nope", 0)])
    with pytest.raises(ConfigError):
        c2.assign([("a", 2)])
    with pytest.raises(ConfigError, match="not assigned"):
        c2.position(("a", 0))


def test_seek_apis(broker):
    broker.create_topic("t", partitions=2)
    p = broker.producer()
    base = int(time.time() * 1000)
    p.send_batch("t", [f"{i}".encode() for i in range(10)], partition=0,
                 timestamps_ms=[base + i * 1000 for i in range(10)])
    c = broker.consumer("t")
    tp = ("t", 0)
    assert c.position(tp) == 0
    c.seek(tp, 7)
    assert [r.offset for r in c.poll()] == [7, 8, 9]
    assert c.position(tp) == 10
    c.seek_to_beginning([tp])
    assert c.position(tp) == 0
    c.seek_to_end()
    assert c.position(tp) == 10 and c.position(("t", 1)) == 0
    assert c.poll() == []
    c.seek_to_timestamp(base + 4500, [tp])
    assert c.position(tp) == 5
    c.seek_to_timestamp(base + 99_000, [tp])
    assert c.position(tp) == 10
    assert c.beginning_offsets() == {("t", 0): 0, ("t", 1): 0}
    assert c.end_offsets() == {("t", 0): 10, ("t", 1): 0}
    with pytest.raises(ConfigError):
        c.seek(tp, -1)
    # latest: only records sent after the consumer's position was set
    c2 = broker.consumer("t", auto_offset_reset="latest")
    assert c2.position(tp) == 10
    p.send("t", b"new", partition=0)
    assert [r.value for r in c2.poll()] == [b"new"]


@pytest.mark.parametrize("partitions", [1, 3])
def test_poll_wakes_on_send_from_another_thread(broker, partitions):
    broker.create_topic("t", partitions=partitions)
    c = broker.consumer("t")
    p = broker.producer()
    sent_at = []

    topic, log = broker.topic("t"), broker.topic("t").log(0)

    def send_later():
        # Send once the consumer is blocked (on the log, or on the topic's waiters).
        deadline = time.monotonic() + 10
        while not (log._read_waiters or topic._waiters) and time.monotonic() < deadline:
            time.sleep(0.001)
        sent_at.append(time.monotonic())
        p.send("t", b"wake", partition=partitions - 1)

    threading.Thread(target=send_later).start()
    started = time.monotonic()
    recs = c.poll(timeout=10.0)
    returned = time.monotonic()
    assert [r.value for r in recs] == [b"wake"]
    # Woken by the append, not by the end of a wait slice (1 s) or the timeout (10 s).
    assert returned - sent_at[0] < 0.5, "poll did not wake promptly on the send"
    assert returned - started < 2.0


def test_poll_timeout_returns_empty(broker):
    broker.create_topic("t", partitions=2)
    c = broker.consumer("t")
    t0 = time.monotonic()
    assert c.poll(timeout=0.2) == []
    assert 0.19 <= time.monotonic() - t0 < 3.0


@pytest.mark.parametrize("partitions", [1, 2])
def test_broker_close_wakes_waiting_poll(data_dir, partitions):
    b = Broker(data_dir)
    b.create_topic("t", partitions=partitions)
    c = b.consumer("t")
    errors = []

    def waiter():
        try:
            c.poll(timeout=30)
        except LogClosedError as e:
            errors.append(e)

    th = threading.Thread(target=waiter)
    th.start()
    topic, log = b.topic("t"), b.topic("t").log(0)
    deadline = time.monotonic() + 10
    while not (log._read_waiters or topic._waiters) and time.monotonic() < deadline:
        time.sleep(0.001)  # until the consumer waits
    t0 = time.monotonic()
    b.close()
    th.join(5)
    assert not th.is_alive() and time.monotonic() - t0 < 2
    assert len(errors) == 1


def test_consumer_close_from_another_thread_wakes_poll(broker):
    broker.create_topic("t", partitions=2)
    c = broker.consumer("t")
    threading.Timer(0.1, c.close).start()
    t0 = time.monotonic()
    with pytest.raises(LogClosedError):
        c.poll(timeout=30)
    assert time.monotonic() - t0 < 5


def _truncated_topic(broker):
    """A topic whose first records were deleted by retention (start offset > 0)."""
    broker.create_topic("t", segment_bytes=1024, retention_bytes=1)
    p = broker.producer()
    for _ in range(10):
        p.send_batch("t", [b"x" * 200] * 2)
    broker.apply_retention()
    log = broker.topic("t").log(0)
    assert log.start_offset > 0
    return log


def test_offset_out_of_range_below_start(broker):
    log = _truncated_topic(broker)
    start, end = log.start_offset, log.end_offset
    c = broker.consumer("t")
    c.seek(("t", 0), 0)
    with pytest.raises(OffsetOutOfRange) as e:
        c.poll()
    msg = str(e.value)
    assert "t[0]" in msg and "below the start offset" in msg and str(start) in msg
    assert (e.value.offset, e.value.start_offset, e.value.end_offset) == (0, start, end)
    assert e.value.topic == "t" and e.value.partition == 0
    assert c.position(("t", 0)) == 0  # a raising poll consumes nothing
    # Above the end too.
    c.seek(("t", 0), end + 5)
    with pytest.raises(OffsetOutOfRange, match="above the end offset"):
        c.poll()
    # The default start for a new consumer is the start offset, not 0.
    assert broker.consumer("t").position(("t", 0)) == start


def test_offset_out_of_range_with_reset(broker):
    log = _truncated_topic(broker)
    c = broker.consumer("t", reset_out_of_range=True)
    c.seek(("t", 0), 0)
    recs = drain(c)
    assert recs[0].offset == log.start_offset and recs[-1].offset == log.end_offset - 1
    c2 = broker.consumer("t", reset_out_of_range=True, auto_offset_reset="latest")
    c2.seek(("t", 0), 0)
    assert c2.poll() == [] and c2.position(("t", 0)) == log.end_offset


def test_committed_below_start_raises(broker):
    broker.create_topic("t", segment_bytes=1024, retention_bytes=1)
    broker.commit_offsets("g", {("t", 0): 0})
    p = broker.producer()
    for _ in range(10):
        p.send_batch("t", [b"x" * 200] * 2)
    broker.apply_retention()
    c = broker.consumer("t", group="g")
    with pytest.raises(OffsetOutOfRange):
        c.poll()


def test_commit_and_committed(broker):
    broker.create_topic("t", partitions=2)
    p = broker.producer()
    p.send_batch("t", [b"a", b"b", b"c"], partition=0)
    p.send_batch("t", [b"d"], partition=1)
    c = broker.consumer("t", group="g")
    assert c.committed(("t", 0)) is None
    assert len(c.poll()) == 4
    c.commit()
    assert c.committed(("t", 0)) == 3 and c.committed(("t", 1)) == 1
    c.commit({("t", 0): 1})
    assert c.committed(("t", 0)) == 1 and c.committed(("t", 1)) == 1
    assert broker.groups() == ["g"]
    assert broker.group_offsets("g") == {("t", 0): 1, ("t", 1): 1}
    lag = broker.describe_group("g")
    assert [(r.topic, r.partition, r.committed, r.end_offset, r.lag) for r in lag] == [
        ("t", 0, 1, 3, 2),
        ("t", 1, 1, 1, 0),
    ]
    with pytest.raises(ConfigError):
        c.commit({("t", 0): -1})
    # The next member of the group (c left: its partitions are free) starts at the committed offsets.
    c.close()
    c2 = broker.consumer("t", group="g")
    assert [r.value for r in drain(c2)] == [b"b", b"c"]
    with pytest.raises(ConfigError, match="group"):
        broker.consumer("t").commit()
    assert broker.delete_group("g") is True
    assert broker.groups() == [] and c.committed(("t", 0)) is None
    assert broker.delete_group("g") is False


def test_group_lag_counts_never_committed_partitions_from_the_start(broker):
    """A group that committed on 2 of 3 partitions lags by everything in the third: its
    consumers start there at the start offset (auto_offset_reset="earliest")."""
    broker.create_topic("t", partitions=3)
    p = broker.producer()
    for part in range(3):
        p.send_batch("t", [b"x"] * 33_000, partition=part)
    broker.commit_offsets("g", {("t", 0): 33_000, ("t", 1): 10_000})
    rows = broker.describe_group("g")
    assert [(r.partition, r.committed, r.start_offset, r.end_offset, r.lag) for r in rows] == [
        (0, 33_000, 0, 33_000, 0),
        (1, 10_000, 0, 33_000, 23_000),
        (2, None, 0, 33_000, 33_000),
    ]
    assert sum(r.lag for r in rows) == 56_000
    # ...and that is what a consumer of the group would read.
    c = broker.consumer("t", group="g")
    assert len(drain(c)) == 56_000
    # group_offsets still lists only what was committed
    assert broker.group_offsets("g") == {("t", 0): 33_000, ("t", 1): 10_000}


def test_group_commit_survives_reopen(data_dir):
    with Broker(data_dir) as b:
        b.create_topic("t", partitions=3)
        b.producer().send_batch("t", [b"x"] * 30, keys=[str(i).encode() for i in range(30)])
        c = b.consumer("t", group="g")
        c.poll(max_records=10)
        positions = {tp: c.position(tp) for tp in c.assignment()}
        c.commit()
    with Broker(data_dir) as b:
        c = b.consumer("t", group="g")
        assert {tp: c.committed(tp) for tp in c.assignment()} == positions
        assert {tp: c.position(tp) for tp in c.assignment()} == positions
        assert len(drain(c)) == 20


def test_group_commit_survives_kill_9(data_dir, child_env):
    code = f"""
import sys, time
from vqs.broker import Broker
b = Broker({data_dir!r}, flush="always")
b.create_topic("t", partitions=2)
p = b.producer()
p.send_batch("t", [b"x"] * 10, partition=0)
p.send_batch("t", [b"y"] * 5, partition=1)
c = b.consumer("t", group="g")
for i in range(1, 8):
    c.commit({{("t", 0): i, ("t", 1): min(i, 5)}})
print("committed", flush=True)
time.sleep(60)
"""
    proc = subprocess.Popen([PYTHON, "-c", code], env=child_env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "committed"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    with Broker(data_dir) as b:
        assert b.group_offsets("g") == {("t", 0): 7, ("t", 1): 5}
        c = b.consumer("t", group="g")
        assert [r.value for r in drain(c)] == [b"x"] * 3
        assert b.topic("t").end_offsets() == [10, 5]  # flush="always": acknowledged sends kept


def test_multithreaded_producers_and_consumers_no_loss_no_dups(broker):
    partitions, producers, per_producer = 4, 4, 3000
    broker.create_topic("t", partitions=partitions)
    total = producers * per_producer
    errors = []

    def produce(pid):
        try:
            p = broker.producer()
            for i in range(0, per_producer, 50):
                if i % 100:
                    p.send_batch("t", [f"{pid}:{j}".encode() for j in range(i, i + 50)],
                                 keys=[f"{pid}".encode()] * 50)
                else:
                    for j in range(i, i + 50):
                        p.send("t", f"{pid}:{j}".encode(), key=f"{pid}".encode())
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    received: list[list] = [[], []]

    def consume(idx, parts):
        try:
            c = broker.consumer()
            c.assign([("t", p) for p in parts])
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                recs = c.poll(max_records=200, timeout=0.5)
                received[idx].extend(recs)
                if sum(map(len, received)) >= total:
                    break
        except Exception as e:  # pragma: no cover
            errors.append(e)

    consumers = [
        threading.Thread(target=consume, args=(0, [0, 1])),
        threading.Thread(target=consume, args=(1, [2, 3])),
    ]
    for th in consumers:
        th.start()
    prods = [threading.Thread(target=produce, args=(i,)) for i in range(producers)]
    for th in prods:
        th.start()
    for th in prods + consumers:
        th.join(90)
    assert not errors, errors
    got = received[0] + received[1]
    values = [r.value for r in got]
    assert len(values) == total and len(set(values)) == total
    # Per producer (one key, so one partition) the order of sends is kept.
    by_producer: dict[str, list[int]] = {}
    for r in got:
        pid, seq = r.value.decode().split(":")
        by_producer.setdefault(pid, []).append(int(seq))
    for seqs in by_producer.values():
        assert seqs == list(range(per_producer))
    for part in range(partitions):
        offs = [r.offset for r in got if r.partition == part]
        assert offs == list(range(len(offs)))


def test_consumer_close_and_iteration(broker):
    broker.create_topic("t")
    broker.producer().send_batch("t", [b"1", b"2", b"3"])
    c = broker.consumer("t")
    seen = []
    for r in c:
        seen.append(r.value)
        if len(seen) == 3:
            c.close()
    assert seen == [b"1", b"2", b"3"]
    with pytest.raises(LogClosedError):
        c.poll()


def test_topic_read_stateless(broker):
    t = broker.create_topic("t")
    assert t.read(0, 0) == []
    threading.Timer(0.1, lambda: broker.producer().send("t", b"x")).start()
    t0 = time.monotonic()
    recs = t.read(0, 0, timeout=10)
    assert [r.value for r in recs] == [b"x"] and time.monotonic() - t0 < 2
    with pytest.raises(OffsetOutOfRange):
        t.read(0, 5)
