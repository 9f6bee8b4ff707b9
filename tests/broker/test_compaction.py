"""Compacted topics on the embedded broker: the contract of Kafka's cleanup.policy=compact.

After cleaning, a reader from any offset sees, for every key, its latest value at or after
that offset, plus every record of the uncleaned tail; offsets are the ones the records were
appended at (gaps allowed); tombstones stay for delete_retention_ms after a clean, then go;
keyless records are refused; the active segment is never cleaned."""

from __future__ import annotations

import os

import pytest

from vqs.broker import Broker
from vqs.errors import ConfigError, InvalidRecord


def _produce(broker, name, items, clock=None):
    """items: (key, value); returns [(offset, key, value)] as appended."""
    prod = broker.producer()
    out = []
    for k, v in items:
        m = prod.send(name, v, key=k)
        out.append((m.offset, k, v))
        if clock is not None:
            clock.advance(0.001)
    broker.flush()
    return out


def _read_all(topic, start=0):
    out = []
    off = start
    while off < topic.end_offset(0):
        recs = topic.read(0, off, max_records=1000)
        if not recs:
            break
        out += [(r.offset, r.key, r.value) for r in recs]
        off = recs[-1].offset + 1
    return out


def _expected_from(produced, start, active_base):
    """What a cleaned log holds from ``start``: the latest record per key among the cleaned
    records (below the active segment), plus every record of the active segment."""
    latest = {}
    for off, k, _ in produced:
        if off < active_base:
            latest[k] = off
    return [(o, k, v) for o, k, v in produced if o >= start and (o >= active_base or latest[k] == o)]


@pytest.fixture
def broker(tmp_path, clock):
    b = Broker(str(tmp_path / "data"), clock=clock, segment_bytes=600, batch_max_records=4)
    yield b
    b.close()


def test_latest_value_per_key_offsets_kept(broker, clock):
    broker.create_topic("t", cleanup_policy="compact", delete_retention_ms=10**9)
    produced = _produce(broker, "t", [(b"k%d" % (i % 7), b"v%d" % i) for i in range(200)], clock)
    t = broker.topic("t")
    before = t.log(0).segment_count
    stats = broker.compact("t", force=True)
    assert stats.records_removed > 0 and stats.segments_in > 0
    got = _read_all(t)
    active_base = t.log(0)._segs.all[-1].base_offset
    assert got == _expected_from(produced, 0, active_base)
    # every key's latest value survives; offsets only ever increase
    assert {k: v for _, k, v in got} == {k: v for _, k, v in produced}
    assert [o for o, _, _ in got] == sorted({o for o, _, _ in got})
    assert t.log(0).segment_count <= before
    assert t.end_offset(0) == 200  # the end does not move
    # a reader from an offset inside a removed run starts at the next kept record
    mid = got[0][0] + 1 if got[0][0] + 1 < got[1][0] else got[1][0]
    assert _read_all(t, mid)[0][0] == min(o for o, _, _ in got if o >= mid)


def test_consumer_from_zero_and_reopen(tmp_path, clock):
    path = str(tmp_path / "data")
    with Broker(path, clock=clock, segment_bytes=600, batch_max_records=4) as b:
        b.create_topic("t", cleanup_policy="compact")
        produced = _produce(b, "t", [(b"k%d" % (i % 5), b"x" * 20 + b"%d" % i) for i in range(150)], clock)
        b.compact("t", force=True)
        after = _read_all(b.topic("t"))
        c = b.consumer("t", group="g", auto_offset_reset="earliest")
        seen = []
        while len(seen) < len(after):
            seen += [(r.offset, r.key, r.value) for r in c.poll(timeout=1.0)]
        assert seen == after
        c.close()
    with Broker(path, clock=clock, segment_bytes=600, batch_max_records=4) as b:  # the cleaned segments reopen as they were
        t = b.topic("t")
        assert t.config["cleanup_policy"] == "compact"
        assert _read_all(t) == after
        assert {k: v for _, k, v in after} == {k: v for _, k, v in produced}
        b.producer().send("t", b"new", key=b"k1")  # appends go on after the gaps
        assert _read_all(t)[-1][1:] == (b"k1", b"new")


def test_tombstones_kept_for_delete_retention_then_removed(broker, clock):
    broker.create_topic("t", cleanup_policy="compact", delete_retention_ms=60_000)
    _produce(broker, "t", [(b"a", b"1"), (b"b", b"1")] * 20, clock)
    _produce(broker, "t", [(b"a", None)], clock)  # a tombstone
    _produce(broker, "t", [(b"c", b"%d" % i) for i in range(60)], clock)  # rolls it into a sealed segment
    t = broker.topic("t")
    broker.compact("t", force=True)
    got = _read_all(t)
    assert (b"a", None) in [(k, v) for _, k, v in got]  # the tombstone stays: a reader must see the delete
    assert b"1" not in [v for _, k, v in got if k == b"a"]  # what it deleted is gone
    # a second clean within delete_retention_ms keeps it
    _produce(broker, "t", [(b"d", b"%d" % i) for i in range(60)], clock)
    broker.compact("t", force=True)
    assert (b"a", None) in [(k, v) for _, k, v in _read_all(t)]
    # past delete_retention_ms (its segment's newest record older than that) it goes
    clock.advance(120)
    _produce(broker, "t", [(b"e", b"%d" % i) for i in range(60)], clock)
    broker.compact("t", force=True)
    keys = [k for _, k, _ in _read_all(t)]
    assert b"a" not in keys and b"b" in keys


def test_keyless_records_refused(broker):
    broker.create_topic("t", cleanup_policy="compact")
    prod = broker.producer()
    with pytest.raises(InvalidRecord, match="compacted"):
        prod.send("t", b"no key")
    with pytest.raises(InvalidRecord):
        prod.send_batch("t", [b"1", b"2"], keys=[b"k", None])
    with pytest.raises(InvalidRecord):
        prod.send_batch("t", [b"1"])
    assert broker.topic("t").end_offset(0) == 0  # nothing appended
    prod.send_batch("t", [b"1", b"2"], keys=[b"k", b"j"])
    assert broker.topic("t").end_offset(0) == 2


def test_active_segment_never_cleaned(broker, clock):
    broker.create_topic("t", cleanup_policy="compact", segment_bytes=1 << 20)
    produced = _produce(broker, "t", [(b"k", b"%d" % i) for i in range(50)], clock)
    stats = broker.compact("t", force=True)
    assert stats.segments_in == 0
    assert _read_all(broker.topic("t")) == produced


def test_min_compaction_lag_and_dirty_ratio(broker, clock):
    broker.create_topic("lag", cleanup_policy="compact", min_compaction_lag_ms=3_600_000)
    _produce(broker, "lag", [(b"k", b"%d" % i) for i in range(100)], clock)
    assert broker.compact("lag", force=True).segments_in == 0  # too young
    clock.advance(7200)
    assert broker.compact("lag", force=True).segments_in > 0
    broker.create_topic("ratio", cleanup_policy="compact", min_cleanable_dirty_ratio=1.0)
    _produce(broker, "ratio", [(b"k", b"%d" % i) for i in range(100)], clock)
    assert broker.compact("ratio").segments_in > 0  # all dirty: ratio 1.0 reached
    _produce(broker, "ratio", [(b"k", b"%d" % i) for i in range(100)], clock)
    assert broker.compact("ratio").segments_in == 0  # part clean now: under 1.0


def test_table_read_like_consumer_offsets(broker, clock):
    """A KTable / __consumer_offsets-style read: replay the compacted topic from its start and
    keep the last value per key (None deletes it); equal to the replay of everything written."""
    broker.create_topic("__offsets", cleanup_policy="compact", delete_retention_ms=10**9)
    writes = []
    for i in range(300):
        key = b"group-%d/topic/%d" % (i % 4, i % 3)
        writes.append((key, None if i % 37 == 0 else b"%d" % i))
    _produce(broker, "__offsets", writes, clock)
    broker.compact("__offsets", force=True)

    def table(records):
        state = {}
        for _, k, v in records:
            if v is None:
                state.pop(k, None)
            else:
                state[k] = v
        return state

    expected = table([(0, k, v) for k, v in writes])
    assert table(_read_all(broker.topic("__offsets"))) == expected
    assert len(_read_all(broker.topic("__offsets"))) < len(writes)


def test_compact_delete_keeps_retention(broker, clock):
    broker.create_topic("both", cleanup_policy="delete,compact", retention_ms=1000)
    t = broker.topic("both")
    assert t.config["cleanup_policy"] == "compact,delete" and t.config["retention_ms"] == 1000
    broker.create_topic("only", cleanup_policy="compact", retention_ms=1000)
    assert broker.topic("only").log(0).retention_ms is None  # compaction alone deletes nothing by age


@pytest.mark.parametrize("bad", [{"cleanup_policy": "purge"}, {"min_cleanable_dirty_ratio": 1.5},
                                 {"delete_retention_ms": -1}, {"max_compaction_lag_ms": 0}])
def test_invalid_settings_refused(broker, bad):
    with pytest.raises(ConfigError):
        broker.create_topic("t", **bad)
    assert "t" not in broker.topics()


def test_cleaner_leaves_no_scratch_files(broker, clock):
    broker.create_topic("t", cleanup_policy="compact")
    _produce(broker, "t", [(b"k%d" % (i % 3), b"v") for i in range(200)], clock)
    broker.compact("t", force=True)
    d = broker.topic("t").log(0).path
    assert not [n for n in os.listdir(d) if n.endswith((".cleaned", ".swap"))]


_CRASH_AFTER_CLEANING = """
import os, signal, sys
from vqs.broker import Broker
with Broker(sys.argv[1], segment_bytes=600, batch_max_records=4) as b:
    t = b.create_topic("t", cleanup_policy="compact")
    pids = []
    for n in range(10):  # short-lived idempotent producers, each writing k0 and k1 once
        pid, epoch = b.producer_states.new_producer()
        pids.append(pid)
        for seq in range(2):
            status, _ = b.producer_states.append(t, 0, pid, epoch, seq, [b"p%d-%d" % (n, seq)],
                                                 [b"k%d" % seq], None, None)
            assert status == "append", status
    prod = b.producer()
    for i in range(60):  # later records of the same keys roll the producers' batches into sealed segments
        prod.send("t", b"o%d" % i, key=b"k%d" % (i % 2))
    b.flush()
    stats = b.compact("t", force=True)
    print(stats.records_removed, pids[-1], flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # a crash: no snapshot at shutdown
"""


def test_an_idempotent_producers_records_are_cleaned_and_it_goes_on_after_a_crash(tmp_path):
    """Kafka empties a producer's last batch when cleaning; VQS records the producers' state
    (the snapshot) before a pass, so their batches are cleaned like any other: ten short-lived
    idempotent producers' superseded records all go. After a SIGKILL the state comes back from
    that snapshot: the last producer goes on in sequence, and a retry of its last batch is a
    duplicate."""
    import signal
    import subprocess
    import sys

    path = str(tmp_path / "data")
    p = subprocess.run([sys.executable, "-c", _CRASH_AFTER_CLEANING, path], capture_output=True,
                       cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert p.returncode == -signal.SIGKILL, p.stderr
    removed, pid = map(int, p.stdout.split())
    assert removed >= 20
    with Broker(path, segment_bytes=600, batch_max_records=4) as b:
        t = b.topic("t")
        assert not [v for _, _, v in _read_all(t) if v.startswith(b"p")]  # every producer's record cleaned
        status, _ = b.producer_states.append(t, 0, pid, 0, 2, [b"p9-2"], [b"k0"], None, None)
        assert status == "append"
        status, _ = b.producer_states.append(t, 0, pid, 0, 1, [b"p9-1"], [b"k1"], None, None)
        assert status == "duplicate"


def test_an_idle_compacted_partition_is_not_touched(tmp_path, clock):
    """A pass with nothing sealed since the last one changes no file: a cleanly reopened idle
    partition keeps its clean-shutdown marker (reopening stays free of writes)."""
    path = str(tmp_path / "data")
    with Broker(path, clock=clock, segment_bytes=600, batch_max_records=4) as b:
        b.create_topic("t", cleanup_policy="compact")
        _produce(b, "t", [(b"k%d" % (i % 3), b"v%d" % i) for i in range(100)], clock)
        assert b.compact("t", force=True).segments_in > 0
    part = os.path.join(path, "topics", "t", "0")
    with Broker(path, clock=clock, segment_bytes=600, batch_max_records=4) as b:
        before = {n: os.stat(os.path.join(part, n)).st_mtime_ns for n in os.listdir(part)}
        assert ".clean-shutdown" in before
        assert b.compact("t", force=True).segments_in == 0
        assert {n: os.stat(os.path.join(part, n)).st_mtime_ns for n in os.listdir(part)} == before


def test_max_compaction_lag_rolls_the_active_segment(broker, clock):
    """The active segment is never cleaned: with max_compaction_lag_ms it rolls by then (Kafka's
    KIP-354), so a record waits at most about that long to become cleanable."""
    broker.create_topic("t", cleanup_policy="compact", segment_bytes=1 << 20, max_compaction_lag_ms=60_000)
    t = broker.topic("t")
    assert t.log(0).segment_ms == 60_000
    _produce(broker, "t", [(b"k", b"old-%d" % i) for i in range(10)], clock)
    assert t.log(0).segment_count == 1
    clock.advance(61)
    _produce(broker, "t", [(b"k", b"new")], clock)  # the append rolls the lagging segment first
    assert t.log(0).segment_count == 2
    assert broker.compact("t").records_removed == 9
    assert [v for _, _, v in _read_all(t)] == [b"old-9", b"new"]


@pytest.mark.parametrize("bad", [0, -5, "fast", True])
def test_a_cleaner_io_bound_must_be_positive(tmp_path, bad):
    with pytest.raises(ConfigError, match="cleaner_io_max_bytes_per_second"):
        Broker(str(tmp_path / "d"), cleaner_io_max_bytes_per_second=bad)


def test_a_bounded_cleaner_still_cleans(tmp_path, clock):
    b = Broker(str(tmp_path / "d"), clock=clock, segment_bytes=600, batch_max_records=4,
               cleaner_io_max_bytes_per_second=10 << 20)
    try:
        b.create_topic("t", cleanup_policy="compact", delete_retention_ms=10**9)
        _produce(b, "t", [(b"k%d" % (i % 7), b"v%d" % i) for i in range(200)], clock)
        assert b.compact("t", force=True).records_removed > 0
    finally:
        b.close()
