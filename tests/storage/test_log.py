"""Behaviour of vqs.storage.Log against its contract (docs/INTERNALS.md)."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from vqs.errors import (
    ConfigError,
    LogClosedError,
    LogLockedError,
    OffsetOutOfRange,
    ReadOnlyError,
    VQSError,
)
from vqs.record import Record, RecordBatch
from vqs.storage.dir_lock import DirLock
from vqs.storage.log import Log


def val(i: int, size: int = 20) -> bytes:
    """The value stored at offset i in most tests (checkable from the offset)."""
    head = b"v%08d:" % i
    return (head + b"x" * size)[: max(size, len(head))]


def read_all(lg, start=None) -> list[Record]:
    off = lg.start_offset if start is None else start
    out = []
    while off < lg.end_offset:
        recs = lg.read(off, max_records=10_000, max_bytes=64 << 20)
        assert recs, f"read({off}) returned nothing below end_offset {lg.end_offset}"
        out += recs
        off = recs[-1].offset + 1
    return out


def log_files(d) -> list[str]:
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(d, "*.log")))


@pytest.fixture
def d(tmp_path):
    return str(tmp_path / "log")


# --------------------------------------------------------------------------- basics


def test_empty_log(d):
    with Log.open(d) as lg:
        assert lg.start_offset == 0
        assert lg.end_offset == 0
        assert lg.read(0) == []
        assert lg.read_batches(0) == []
        assert lg.offset_for_time(0) is None
        with pytest.raises(OffsetOutOfRange):
            lg.read(1)


def test_append_returns_consecutive_offsets(d):
    with Log.open(d) as lg:
        offs = [lg.append(val(i)) for i in range(100)]
        assert offs == list(range(100))
        assert lg.start_offset == 0
        assert lg.end_offset == 100


def test_append_and_read_fields(d):
    with Log.open(d) as lg:
        lg.append(b"plain")
        lg.append(b"keyed", key=b"k1", headers=[("h", b"v"), ("trace", b"\x00")], timestamp_ms=1234)
        lg.append(b"", key=b"", timestamp_ms=99)
        recs = lg.read(0)
        assert [r.offset for r in recs] == [0, 1, 2]
        assert [bytes(r.value) for r in recs] == [b"plain", b"keyed", b""]
        assert recs[0].key is None
        assert tuple(recs[0].headers) == ()
        assert recs[1].key == b"k1"
        assert tuple(recs[1].headers) == (("h", b"v"), ("trace", b"\x00"))
        assert recs[1].timestamp_ms == 1234
        assert recs[2].key == b"" and recs[2].timestamp_ms == 99


def test_default_timestamp_is_now(d):
    with Log.open(d) as lg:
        before = int(time.time() * 1000)
        lg.append(b"x")
        after = int(time.time() * 1000)
        (r,) = lg.read(0)
        assert before - 5 <= r.timestamp_ms <= after + 5


def test_append_batch(d):
    with Log.open(d) as lg:
        assert lg.append(b"first") == 0
        first = lg.append_batch(
            [b"a", b"b", b"c"],
            keys=[b"ka", None, b"kc"],
            headers=[[("x", b"1")], None, []],
            timestamps_ms=[10, 30, 20],
        )
        assert first == 1
        assert lg.end_offset == 4
        assert lg.append_batch([b"d"]) == 4
        recs = lg.read(1)
        assert [(r.offset, bytes(r.value), r.key, tuple(r.headers), r.timestamp_ms) for r in recs[:3]] == [
            (1, b"a", b"ka", (("x", b"1"),), 10),
            (2, b"b", None, (), 30),
            (3, b"c", b"kc", (), 20),
        ]
        assert recs[3].offset == 4 and bytes(recs[3].value) == b"d"


def test_read_from_middle_and_limits(d):
    with Log.open(d, segment_bytes=4096) as lg:
        for i in range(0, 1000, 100):
            lg.append_batch([val(j) for j in range(i, i + 100)])
        for start in (0, 1, 99, 100, 101, 555, 999):
            recs = lg.read(start, max_records=7)
            assert [r.offset for r in recs] == list(range(start, min(start + 7, 1000)))
            assert all(bytes(r.value) == val(r.offset) for r in recs)
        assert lg.read(1000) == []
        with pytest.raises(OffsetOutOfRange):
            lg.read(1001)
        # max_bytes bounds the answer, but a reader always progresses by one record
        recs = lg.read(10, max_records=500, max_bytes=50)
        assert 1 <= len(recs) < 500
        assert recs[0].offset == 10
        recs = lg.read(10, max_records=500, max_bytes=1)
        assert len(recs) >= 1 and recs[0].offset == 10


def test_read_one_record_at_a_time(d):
    with Log.open(d, flush="never") as lg:
        lg.append_batch([val(i) for i in range(300)])
        for i in range(50):
            lg.append(val(300 + i))
        for i in range(350):
            (r,) = lg.read(i, max_records=1)
            assert r.offset == i and bytes(r.value) == val(i)


def test_large_single_value_bigger_than_batch_limit(d):
    big = os.urandom(3 << 20)
    with Log.open(d, batch_max_bytes=1 << 20) as lg:
        lg.append(b"small")
        assert lg.append(big) == 1
        lg.append(b"after")
        recs = lg.read(0, max_bytes=1)
        assert recs[0].offset == 0
        (r,) = lg.read(1, max_records=1)
        assert bytes(r.value) == big
    with Log.open(d) as lg:
        assert [bytes(r.value) for r in read_all(lg)] == [b"small", big, b"after"]


def test_append_batch_splits_at_batch_max_bytes_keeping_every_column(d):
    limit = 4096
    sizes = [100] * 30 + [5000] + [1000] * 9 + [4096, 1, 4095, 4097, 7]
    values = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    keys = [None if i % 3 else b"k%d" % i for i in range(len(sizes))]
    headers = [[("h", b"%d" % i)] if i % 4 == 0 else None for i in range(len(sizes))]
    stamps = [1_000 + i for i in range(len(sizes))]
    with Log.open(d, batch_max_bytes=limit) as lg:
        lg.append(b"buffered first")
        first = lg.append_batch(values, keys=keys, headers=headers, timestamps_ms=stamps)
        assert first == 1
        batches = lg.read_batches(first, max_bytes=1 << 30)
    assert sum(b.count for b in batches) == len(sizes)
    at = 0
    for b in batches:
        batch_sizes = sizes[at:at + b.count]
        # each batch is as full as the limit allows, and only a lone value exceeds it
        assert b.count == 1 or sum(batch_sizes) <= limit
        nxt = sizes[at + b.count] if at + b.count < len(sizes) else None
        assert nxt is None or sum(batch_sizes) + nxt > limit
        at += b.count
    with Log.open(d) as lg:
        recs = read_all(lg)
    assert bytes(recs[0].value) == b"buffered first"
    for i, r in enumerate(recs[1:]):
        assert r.offset == i + 1
        assert bytes(r.value) == values[i]
        assert (None if r.key is None else bytes(r.key)) == keys[i]
        assert [(k, bytes(v)) for k, v in r.headers] == (headers[i] or [])
        assert r.timestamp_ms == stamps[i]


def test_append_batch_takes_bytes_like_values(d):
    with Log.open(d) as lg:
        lg.append_batch([b"a", bytearray(b"bc"), memoryview(b"def"), b"g"])
        assert [bytes(r.value) for r in lg.read(0)] == [b"a", b"bc", b"def", b"g"]
        with pytest.raises(TypeError, match="value must be bytes-like, not str"):
            lg.append_batch([b"a", "not bytes"])
        assert lg.end_offset == 4


EMPTY_VALUES = textwrap.dedent(
    """
    import sys
    from vqs.storage.log import Log
    path, case = sys.argv[1], sys.argv[2]
    with Log.open(path, flush="never") as lg:
        if case == "single":
            lg.append(b"")
        elif case == "last-empty":
            lg.append_batch([b"a", b""])
        else:
            lg.append_batch([b""] * 100)
    with Log.open(path) as lg:
        print(repr([bytes(r.value) for r in lg.read(0)]))
    """
)


@pytest.mark.parametrize("case,expect", [
    ("single", [b""]), ("last-empty", [b"a", b""]), ("all-empty", [b""] * 100),
])
def test_empty_values(d, case, expect, child_env):
    """Empty values are legal. Run in a child with a timeout: a writer that
    loops on a zero-length buffer must fail this test, not hang the suite."""
    try:
        p = subprocess.run([sys.executable, "-c", EMPTY_VALUES, d, case], env=child_env,
                           capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"appending empty values ({case}) hung for 30 s")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == repr(expect)


def test_read_batches(d):
    with Log.open(d, flush="never") as lg:
        lg.append_batch([val(i) for i in range(10)])
        lg.append_batch([val(i) for i in range(10, 30)], keys=[b"k%d" % i for i in range(10, 30)])
        lg.flush()
        for i in range(30, 35):
            lg.append(val(i))  # buffered
        # A consumer loop: each call continues at the last batch's next_offset.
        got = {}
        off = 0
        while off < lg.end_offset:
            bs = lg.read_batches(off, max_bytes=64 << 20)
            assert bs and all(isinstance(b, RecordBatch) for b in bs)
            for b in bs:
                for i in range(b.count):
                    got[b.base_offset + i] = b.value(i)
            off = bs[-1].next_offset
        assert got == {i: val(i) for i in range(35)}
        # The first batch may begin below the requested offset.
        bs = lg.read_batches(15)
        assert bs[0].base_offset <= 15 < bs[0].next_offset
        assert bs[0].value(15 - bs[0].base_offset) == val(15)
        assert bs[0].key(15 - bs[0].base_offset) == b"k15"
        # Buffered records come back as a batch too.
        bs = lg.read_batches(32)
        assert bs[0].base_offset <= 32 < bs[0].next_offset
        assert bs[0].value(32 - bs[0].base_offset) == val(32)
        assert lg.read_batches(35) == []


@pytest.mark.parametrize("mapped", [False, True])
def test_read_batches_within_segment_stop_at_its_end(d, mapped):
    """``within_segment``: never a batch past the end of the segment holding the first; a
    loop on ``next_offset`` still reads every record once, one segment a call."""
    with Log.open(d, segment_bytes=400, flush="never") as lg:
        for i in range(40):
            lg.append_batch([val(i)])
        lg.flush()
        assert lg.segment_count >= 4
        bases = sorted(int(f[:-len(".log")]) for f in os.listdir(d) if f.endswith(".log"))
        ends = bases[1:] + [lg.end_offset]  # a segment ends where the next begins
        got, off, calls = [], 0, 0
        while off < lg.end_offset:
            bs = lg.read_batches(off, max_bytes=64 << 20, mapped=mapped, within_segment=True)
            assert bs[-1].next_offset in ends  # ended where a segment ends
            got += [bytes(b.value(i)) for b in bs for i in range(b.count)]
            off, calls = bs[-1].next_offset, calls + 1
        assert got == [val(i) for i in range(40)] and calls == lg.segment_count
        assert len(lg.read_batches(0, max_bytes=64 << 20)) == 40  # without it: across segments


def test_read_batches_columns_are_arrow_layout(d):
    with Log.open(d) as lg:
        lg.append_batch([b"ab", b"", b"cde"])
        (b,) = lg.read_batches(0)
        assert list(b.value_offsets) == [0, 2, 2, 5]
        assert bytes(b.value_data) == b"abcde"


def test_closed_log_refuses(d):
    lg = Log.open(d)
    lg.append(b"x")
    lg.close()
    lg.close()  # idempotent
    with pytest.raises(LogClosedError):
        lg.append(b"y")
    with pytest.raises(LogClosedError):
        lg.read(0)


def test_bad_settings(d):
    for kw in (dict(flush="sometimes"), dict(recovery="ignore"), dict(compression="snappy")):
        with pytest.raises(ConfigError):
            Log.open(d, **kw)
    assert issubclass(ConfigError, VQSError)


def test_thread_safe_appends(d):
    with Log.open(d, flush="never", segment_bytes=64 << 10) as lg:
        def worker(t):
            for i in range(500):
                lg.append(b"%d:%d" % (t, i))

        ts = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert lg.end_offset == 2000
        recs = read_all(lg)
        assert [r.offset for r in recs] == list(range(2000))
        per = {}
        for r in recs:
            t, i = bytes(r.value).split(b":")
            per.setdefault(t, []).append(int(i))
        assert all(v == list(range(500)) for v in per.values()) and len(per) == 4


# --------------------------------------------------------------------------- time


def test_offset_for_time(d):
    with Log.open(d, segment_bytes=2048, batch_max_records=10) as lg:
        for i in range(200):
            lg.append(val(i), timestamp_ms=1000 + 10 * i)
        lg.flush()
        assert lg.segment_count > 2
        assert lg.offset_for_time(0) == 0
        assert lg.offset_for_time(1000) == 0
        assert lg.offset_for_time(1001) == 1
        assert lg.offset_for_time(1500) == 50
        assert lg.offset_for_time(1505) == 51
        assert lg.offset_for_time(1000 + 10 * 199) == 199
        assert lg.offset_for_time(1000 + 10 * 199 + 1) is None
    with Log.open(d) as lg:
        assert lg.offset_for_time(1500) == 50
        assert lg.offset_for_time(1000 + 10 * 199 + 1) is None


def test_max_timestamp_is_the_first_record_holding_the_largest(d):
    """Across sealed segments, the write buffer and a reopen: the first offset stamped with the
    largest timestamp (a later equal one does not move it)."""
    with Log.open(d, segment_bytes=2048, batch_max_records=10, flush="never") as lg:
        assert lg.max_timestamp() is None
        for i in range(200):
            lg.append(val(i), timestamp_ms=5000 if i == 37 else 1000 + i)
        lg.flush()
        assert lg.segment_count > 2
        lg.append(val(200), timestamp_ms=5000)  # equal, later: not it
        assert lg.max_timestamp() == (37, 5000)
        lg.append(val(201), timestamp_ms=6000)  # buffered, not yet written
        assert lg.max_timestamp() == (201, 6000)
    with Log.open(d) as lg:
        assert lg.max_timestamp() == (201, 6000)
        lg.append_batch([b"a", b"b", b"c"], timestamps_ms=[7000, 9000, 8000])
        lg.flush()
        assert lg.max_timestamp() == (203, 9000)


def test_offset_for_time_with_per_record_timestamps_in_a_batch(d):
    with Log.open(d) as lg:
        lg.append_batch([b"a", b"b", b"c", b"d"], timestamps_ms=[100, 300, 200, 400])
        assert lg.offset_for_time(150) == 1
        assert lg.offset_for_time(250) == 1
        assert lg.offset_for_time(301) == 3
        assert lg.offset_for_time(401) is None


def test_offset_for_time_ignores_records_below_the_start(d):
    """Only records at or above start_offset count: a deleted record with a
    late timestamp must not make offset_for_time answer with a record whose
    timestamp is earlier than asked."""
    with Log.open(d) as lg:
        lg.append_batch([b"a", b"b", b"c"], timestamps_ms=[500, 100, 200])
        lg.delete_before(1)
        assert lg.start_offset == 1
        assert lg.offset_for_time(150) == 2
        assert lg.offset_for_time(300) is None
        assert lg.offset_for_time(50) == 1


@pytest.mark.parametrize("first_ts", [0, -5, 7])
def test_offset_for_time_after_reopen_with_small_timestamps(d, first_ts):
    """Timestamps are plain integers: 0 (an all-zero time-index entry for the
    first batch) and negative values must survive a reopen like any other.
    (Found by the state machine.)"""
    kw = dict(segment_bytes=256, flush="never", batch_max_records=1, index_interval_bytes=64, segment_ms=None)
    with Log.open(d, **kw) as lg:
        lg.append(b"", timestamp_ms=first_ts)
        lg.append_batch([b""], timestamps_ms=[first_ts + 1])
        lg.append_batch([b""], timestamps_ms=[first_ts])
    with Log.open(d, **kw) as lg:
        assert lg.offset_for_time(first_ts + 1) == 1
        assert lg.offset_for_time(first_ts) == 0
        assert lg.offset_for_time(first_ts + 2) is None


def test_offset_for_time_after_reopen_and_more_appends_with_timestamp_zero(d):
    """Found by the state machine: timestamps [0, 5000, 0], reopen, one more
    record at 0; the record at offset 1 is the first with timestamp >= 1."""
    kw = dict(segment_bytes=256, flush="never", batch_max_records=1, index_interval_bytes=64, segment_ms=None)
    with Log.open(d, **kw) as lg:
        lg.append(b"", timestamp_ms=0)
        lg.append_batch([b""], timestamps_ms=5000)
        lg.append_batch([b""], timestamps_ms=[0])
    with Log.open(d, **kw) as lg:
        lg.append(b"", timestamp_ms=0)
        assert lg.offset_for_time(1) == 1
        assert lg.offset_for_time(5000) == 1
        assert lg.offset_for_time(0) == 0
        assert lg.offset_for_time(5001) is None


def test_offset_for_time_sees_buffered_records(d):
    with Log.open(d, flush="never") as lg:
        lg.append(b"a", timestamp_ms=10)
        lg.append(b"b", timestamp_ms=20)
        assert lg.offset_for_time(15) == 1


# --------------------------------------------------------------------------- segments


def test_segment_roll_by_size(d):
    with Log.open(d, segment_bytes=1024) as lg:
        for i in range(0, 300, 10):
            lg.append_batch([val(i + j, 40) for j in range(10)])
        n = lg.segment_count
        assert n >= 5
        names = log_files(d)
        assert len(names) == n
        assert names[0] == f"{0:020d}.log"
        bases = [int(x[:20]) for x in names]
        assert bases == sorted(bases)
        assert all(os.path.getsize(os.path.join(d, x)) <= 1024 + 1024 for x in names[:-1])
        assert [bytes(r.value) for r in read_all(lg)] == [val(i, 40) for i in range(300)]
        assert lg.size_bytes == sum(os.path.getsize(os.path.join(d, x)) for x in names)
    with Log.open(d, segment_bytes=1024) as lg:
        assert lg.segment_count == n
        assert [bytes(r.value) for r in read_all(lg)] == [val(i, 40) for i in range(300)]


def test_segment_roll_by_size_with_single_appends(d):
    with Log.open(d, segment_bytes=2048, flush="never", batch_max_records=16) as lg:
        for i in range(1000):
            lg.append(val(i))
        lg.flush()
        assert lg.segment_count >= 5
        assert [bytes(r.value) for r in read_all(lg)] == [val(i) for i in range(1000)]


def test_segment_roll_by_age(d):
    with Log.open(d, segment_ms=50, flush="always") as lg:
        lg.append(b"a")
        time.sleep(0.15)
        lg.append(b"b")
        time.sleep(0.15)
        lg.append(b"c")
        assert lg.segment_count >= 2
        assert [bytes(r.value) for r in read_all(lg)] == [b"a", b"b", b"c"]


# --------------------------------------------------------------------------- retention


def _fill(lg, n, size=40, start_ts=None):
    first = lg.end_offset
    for i in range(first, first + n, 10):
        ts = None if start_ts is None else [start_ts + i - first + j for j in range(10)]
        lg.append_batch([val(i + j, size) for j in range(10)], timestamps_ms=ts)


def test_delete_before(d):
    with Log.open(d, segment_bytes=1024) as lg:
        _fill(lg, 300)
        segs = lg.segment_count
        deleted = lg.delete_before(150)
        assert deleted >= 1
        assert lg.segment_count == segs - deleted
        assert lg.start_offset >= 150
        # nothing at or above the requested offset is lost
        recs = read_all(lg, 150)
        assert [r.offset for r in recs] == list(range(150, 300))
        assert all(bytes(r.value) == val(r.offset, 40) for r in recs)
        with pytest.raises(OffsetOutOfRange) as ei:
            lg.read(149)
        assert ei.value.start_offset == lg.start_offset
        with pytest.raises(OffsetOutOfRange):
            lg.read(0)
        assert len(log_files(d)) == lg.segment_count
        start = lg.start_offset
    with Log.open(d, segment_bytes=1024) as lg:
        assert lg.start_offset == start
        assert lg.end_offset == 300
        assert [r.offset for r in read_all(lg, 150)] == list(range(150, 300))
        with pytest.raises(OffsetOutOfRange):
            lg.read(0)


def test_delete_before_start_is_a_no_op(d):
    with Log.open(d, segment_bytes=1024) as lg:
        _fill(lg, 100)
        assert lg.delete_before(0) == 0
        assert lg.start_offset == 0
        assert [r.offset for r in read_all(lg)] == list(range(100))


def test_delete_before_end_empties_the_log_but_keeps_offsets(d):
    with Log.open(d, segment_bytes=1024) as lg:
        _fill(lg, 200)
        lg.delete_before(200)
        assert lg.start_offset == 200
        assert lg.end_offset == 200
        assert lg.read(200) == []
        assert lg.append(b"next") == 200
        assert [bytes(r.value) for r in lg.read(200)] == [b"next"]
    with Log.open(d) as lg:
        assert lg.start_offset == 200 and lg.end_offset == 201


def test_retention_by_bytes(d):
    with Log.open(d, segment_bytes=1024, retention_bytes=3000) as lg:
        _fill(lg, 500)
        before = lg.segment_count
        deleted = lg.apply_retention()
        assert deleted >= 1
        assert lg.segment_count == before - deleted
        # retention deletes whole segments, oldest first, down to at most
        # retention_bytes (+ less than one segment)
        assert lg.size_bytes <= 3000 + 2048
        assert lg.start_offset > 0
        recs = read_all(lg)
        assert [r.offset for r in recs] == list(range(lg.start_offset, 500))
        assert all(bytes(r.value) == val(r.offset, 40) for r in recs)
        assert lg.end_offset == 500


def test_retention_by_time(d):
    now = int(time.time() * 1000)
    with Log.open(d, segment_bytes=1024, retention_ms=60_000) as lg:
        _fill(lg, 200, start_ts=now - 3600_000)  # an hour old
        _fill(lg, 100, start_ts=now)  # recent: offsets 200..299
        lg.flush()
        lg.apply_retention()  # (rolls may have applied it already)
        # every recent record is kept; old ones only if they share a segment with recent ones
        assert 100 <= lg.start_offset <= 200
        recs = read_all(lg)
        assert [r.offset for r in recs] == list(range(lg.start_offset, 300))
        assert all(bytes(r.value) == val(r.offset, 40) for r in recs)
        # nothing more to delete now; everything once it is all old
        assert lg.apply_retention() == 0
        segs = lg.segment_count
        assert lg.apply_retention(now_ms=now + 3600_000) == segs - 1  # never the active segment
        assert lg.end_offset == 300


def test_retention_by_time_explicit_now(d):
    future = int(time.time() * 1000) + 3600_000  # not expired by the rolls' own retention pass
    with Log.open(d, segment_bytes=1024, retention_ms=1000) as lg:
        _fill(lg, 300, start_ts=future)
        lg.flush()
        segs = lg.segment_count
        assert segs >= 3
        assert lg.apply_retention(now_ms=future + 500) == 0
        assert lg.apply_retention(now_ms=future + 10_000) == segs - 1
        assert lg.segment_count == 1
        assert [r.offset for r in read_all(lg)] == list(range(lg.start_offset, 300))


def test_retention_never_deletes_unexpired(d):
    with Log.open(d, segment_bytes=1024, retention_ms=3600_000, retention_bytes=1 << 30) as lg:
        _fill(lg, 200)
        assert lg.apply_retention() == 0
        assert lg.start_offset == 0


# --------------------------------------------------------------------------- reopen, flush policies


@pytest.mark.parametrize("compression", [None, "zstd", "lz4", "gzip"])
def test_reopen_keeps_everything(d, compression):
    expect = []
    with Log.open(d, segment_bytes=4096, compression=compression, flush="never") as lg:
        for i in range(400):
            key = None if i % 3 else b"k%d" % i
            hdr = [("i", b"%d" % i)] if i % 5 == 0 else None
            lg.append(val(i), key=key, headers=hdr, timestamp_ms=5000 + i)
            expect.append((i, val(i), key, tuple(hdr or ()), 5000 + i))
        lg.append_batch([val(i) for i in range(400, 450)], timestamps_ms=list(range(5400, 5450)))
        expect += [(i, val(i), None, (), 5000 + i) for i in range(400, 450)]
        segs = lg.segment_count
    with Log.open(d, segment_bytes=4096, compression=compression) as lg:
        assert lg.start_offset == 0 and lg.end_offset == 450
        assert lg.segment_count == segs
        got = [(r.offset, bytes(r.value), r.key, tuple(r.headers), r.timestamp_ms) for r in read_all(lg)]
        assert got == expect
        assert lg.append(b"more") == 450
    with Log.open(d) as lg:
        assert lg.end_offset == 451


@pytest.mark.parametrize("compression", ["zstd", "lz4", "gzip"])
def test_compression_shrinks_the_log(tmp_path, compression):
    values = [b"a fairly repetitive message body %d " % (i % 10) * 8 for i in range(2000)]
    sizes = {}
    for c in (None, compression):
        p = str(tmp_path / str(c))
        with Log.open(p, compression=c) as lg:
            for i in range(0, 2000, 100):
                lg.append_batch(values[i : i + 100])
            sizes[c] = lg.size_bytes
        with Log.open(p) as lg:  # compression is per batch: any setting reads it
            assert [bytes(r.value) for r in read_all(lg)] == values
    assert sizes[compression] < sizes[None] / 3


@pytest.mark.parametrize("flush", ["never", "interval", "always"])
def test_buffered_records_are_visible_to_reads(d, flush):
    with Log.open(d, flush=flush, flush_interval_ms=10_000) as lg:
        for i in range(10):
            lg.append(val(i))
            assert lg.end_offset == i + 1
            (r,) = lg.read(i, max_records=1)
            assert bytes(r.value) == val(i)
        assert [bytes(r.value) for r in lg.read(0)] == [val(i) for i in range(10)]


def _disk_view(d) -> list[bytes]:
    """What another process would see on disk now (a readonly open, no lock)."""
    ro = Log.open(d, readonly=True)
    try:
        return [bytes(r.value) for r in read_all(ro)]
    finally:
        ro.close()


def test_flush_always_is_on_disk_when_append_returns(d):
    with Log.open(d, flush="always") as lg:
        for i in range(20):
            lg.append(val(i))
            assert _disk_view(d) == [val(j) for j in range(i + 1)]
        lg.append_batch([val(i) for i in range(20, 25)])
        assert _disk_view(d) == [val(j) for j in range(25)]


def test_flush_interval_writes_in_the_background(d):
    with Log.open(d, flush="interval", flush_interval_ms=50) as lg:
        lg.append(val(0))
        lg.append(val(1))
        deadline = time.monotonic() + 3
        while _disk_view(d) != [val(0), val(1)]:
            assert time.monotonic() < deadline, "interval flusher did not write within 3 s"
            time.sleep(0.02)


def test_flush_never_writes_at_flush_and_close(d):
    with Log.open(d, flush="never") as lg:
        lg.append(val(0))
        lg.flush()
        assert _disk_view(d) == [val(0)]
        lg.append(val(1))
    assert _disk_view(d) == [val(0), val(1)]


def test_flush_never_writes_when_a_batch_fills(d):
    with Log.open(d, flush="never", batch_max_records=10) as lg:
        for i in range(25):
            lg.append(val(i))
        on_disk = _disk_view(d)
        assert len(on_disk) >= 20
        assert on_disk == [val(i) for i in range(len(on_disk))]


# --------------------------------------------------------------------------- lock, readonly


def test_second_open_is_locked(d):
    with Log.open(d):
        with pytest.raises(LogLockedError) as ei:
            Log.open(d)
        assert ei.value.holder_pid == os.getpid()
        assert str(os.getpid()) in str(ei.value)
    Log.open(d).close()  # released at close


def test_lock_false_and_readonly_take_no_lock(d):
    with Log.open(d) as lg:
        lg.append(b"x")
        lg.flush()
        with Log.open(d, readonly=True) as ro:
            assert [bytes(r.value) for r in ro.read(0)] == [b"x"]
    with Log.open(d, lock=False) as a:
        DirLock(d).acquire().release()  # a took no lock
        assert a.end_offset == 1


def test_readonly_refuses_writes(d):
    with Log.open(d) as lg:
        lg.append(b"x")
    with Log.open(d, readonly=True) as ro:
        with pytest.raises(ReadOnlyError):
            ro.append(b"y")
        with pytest.raises(ReadOnlyError):
            ro.append_batch([b"y"])
        with pytest.raises(ReadOnlyError):
            ro.delete_before(1)
        assert ro.end_offset == 1


def test_readonly_refresh_sees_new_appends(d):
    with Log.open(d, flush="always", segment_bytes=1024) as lg:
        lg.append_batch([val(i) for i in range(10)])
        with Log.open(d, readonly=True) as ro:
            assert ro.end_offset == 10
            lg.append_batch([val(i, 40) for i in range(10, 200)])
            for i in range(200, 260):
                lg.append(val(i, 40))
            ro.refresh()
            assert ro.end_offset == 260
            recs = read_all(ro)
            assert [r.offset for r in recs] == list(range(260))
            lg.delete_before(100)
            ro.refresh()
            assert [r.offset for r in read_all(ro, 100)] == list(range(100, 260))


def test_readonly_refresh_after_several_rolls(d):
    """The writer appends to the segment the reader saw last, then rolls more
    than once before the reader refreshes: nothing may go missing."""
    with Log.open(d, flush="always", segment_bytes=1024) as lg:
        lg.append_batch([val(i) for i in range(5)])
        with Log.open(d, readonly=True) as ro:
            assert ro.end_offset == 5
            for i in range(5, 200, 5):
                lg.append_batch([val(j) for j in range(i, i + 5)])
            assert lg.segment_count > 3
            ro.refresh()
            assert ro.end_offset == 200
            recs = read_all(ro)
            assert [r.offset for r in recs] == list(range(200))
            assert all(bytes(r.value) == val(r.offset) for r in recs)


WRITER = textwrap.dedent(
    """
    import sys, time
    from vqs.storage.log import Log
    path, n = sys.argv[1], int(sys.argv[2])
    def val(i):
        return (b"v%08d:" % i) + bytes([i % 251]) * (i % 300)
    with Log.open(path, flush="always", segment_bytes=16384) as lg:
        print("open", flush=True)
        i = 0
        while i < n:
            k = 1 + i % 7
            if i % 2:
                lg.append(val(i))
                i += 1
            else:
                lg.append_batch([val(j) for j in range(i, i + k)])
                i += k
    print("done", flush=True)
    """
)


def writer_end(n):
    i = 0
    while i < n:
        i += 1 if i % 2 else 1 + i % 7
    return i


def test_readonly_reads_consistent_prefix_while_another_process_appends(d, child_env):
    def val(i):
        return (b"v%08d:" % i) + bytes([i % 251]) * (i % 300)

    p = subprocess.Popen([sys.executable, "-c", WRITER, d, "6000"], stdout=subprocess.PIPE, env=child_env)
    try:
        assert p.stdout.readline().strip() == b"open"
        ro = Log.open(d, readonly=True)
        try:
            seen_end = 0
            checked = 0
            rounds = 0
            while True:
                done = p.poll() is not None
                ro.refresh()
                end = ro.end_offset
                assert end >= seen_end, "end_offset went backwards"
                seen_end = end
                off = checked
                while off < end:
                    recs = ro.read(off, max_records=1000)
                    assert recs, f"nothing at {off} < end {end}"
                    for r in recs:
                        assert r.offset == off
                        assert bytes(r.value) == val(off), f"record {off} corrupt in readonly view"
                        off += 1
                checked = off
                # a batch-level read of the tail is consistent too
                if end:
                    bs = ro.read_batches(max(0, end - 3))
                    for b in bs:
                        for i in range(b.count):
                            assert b.value(i) == val(b.base_offset + i)
                rounds += 1
                if done:
                    break
            assert p.wait() == 0
            ro.refresh()
            assert ro.end_offset == writer_end(6000)
            assert [bytes(r.value) for r in read_all(ro, checked)] == [
                val(i) for i in range(checked, writer_end(6000))
            ]
            assert rounds > 1
        finally:
            ro.close()
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()


# --------------------------------------------------------------------------- wait_for


def test_wait_for_wakes_on_append(d):
    with Log.open(d, flush="never") as lg:
        lg.append(b"a")
        assert lg.wait_for(0, 0.01) is True  # end_offset 1 > 0 already
        t0 = time.monotonic()
        assert lg.wait_for(1, 0.1) is False
        assert 0.08 <= time.monotonic() - t0 < 1.0
        woke = {}

        def waiter():
            t = time.monotonic()
            woke["ok"] = lg.wait_for(1, 10)
            woke["after"] = time.monotonic() - t

        th = threading.Thread(target=waiter)
        th.start()
        time.sleep(0.2)
        lg.append(b"b")
        th.join(5)
        assert woke["ok"] is True
        assert woke["after"] < 2, "wait_for was not woken by the append"


def test_wait_for_wakes_on_append_batch(d):
    with Log.open(d) as lg:
        res = {}
        th = threading.Thread(target=lambda: res.setdefault("ok", lg.wait_for(0, 10)))
        th.start()
        time.sleep(0.1)
        t0 = time.monotonic()
        lg.append_batch([b"x", b"y"])
        th.join(5)
        assert res["ok"] is True
        assert time.monotonic() - t0 < 2


# --------------------------------------------------------------------------- concurrency


def test_readers_race_appends_rolls_and_retention(d):
    """Reader threads follow the log (read, read_batches, wait_for) while one
    writer appends through many small segments and retention deletes old ones.
    A read either returns correct records or raises OffsetOutOfRange because
    the start moved past it; nothing else."""
    total = 6000
    errors: list[BaseException] = []
    stop = threading.Event()
    with Log.open(d, flush="never", segment_bytes=2048, retention_bytes=8192, batch_max_records=7) as lg:

        def follower(kind):
            off = 0
            try:
                while not stop.is_set() or off < lg.end_offset:
                    if off >= lg.end_offset:
                        lg.wait_for(off, 0.05)
                        continue
                    try:
                        if kind == "batches":
                            bs = lg.read_batches(off, max_bytes=600)
                            for b in bs:
                                for i in range(max(0, off - b.base_offset), b.count):
                                    assert b.value(i) == val(b.base_offset + i)
                            off = bs[-1].next_offset if bs else off
                        else:
                            recs = lg.read(off, max_records=1 if kind == "one" else 50)
                            for r in recs:
                                assert r.offset >= off and bytes(r.value) == val(r.offset)
                            if recs:
                                assert recs[0].offset == off
                                off = recs[-1].offset + 1
                    except OffsetOutOfRange:
                        assert lg.start_offset > off
                        off = lg.start_offset
            except BaseException as e:  # reported by the main thread
                errors.append(e)

        ts = [threading.Thread(target=follower, args=(k,)) for k in ("one", "many", "batches")]
        for t in ts:
            t.start()
        try:
            i = 0
            while i < total:
                if i % 3:
                    lg.append(val(i))
                    i += 1
                else:
                    lg.append_batch([val(j) for j in range(i, i + 5)])
                    i += 5
                if i % 500 < 5:
                    lg.apply_retention()
        finally:
            stop.set()
            for t in ts:
                t.join(30)
        assert not any(t.is_alive() for t in ts), "a reader hung"
        assert not errors, errors[0]
        assert lg.start_offset > 0
        assert [bytes(r.value) for r in read_all(lg)] == [val(o) for o in range(lg.start_offset, lg.end_offset)]


def test_close_wakes_waiters(d):
    lg = Log.open(d)
    res = {}

    def waiter():
        t = time.monotonic()
        try:
            res["ok"] = lg.wait_for(0, 30)
        except LogClosedError:
            res["ok"] = "closed"
        res["after"] = time.monotonic() - t

    th = threading.Thread(target=waiter)
    th.start()
    time.sleep(0.1)
    lg.close()
    th.join(5)
    assert not th.is_alive()
    assert res["ok"] in (False, "closed")
    assert res["after"] < 5


def test_max_bytes_holds_for_reads_served_from_the_decoded_run(d):
    """A read the run cache can serve stops at max_bytes like any other (the
    record that reaches it is the last one returned)."""
    with Log.open(d, flush="never") as lg:
        lg.append_batch([bytes(1000)] * 100)
        assert len(lg.read(0, max_records=100)) == 100  # decodes and caches the run
        assert [r.offset for r in lg.read(0, max_records=10, max_bytes=1000)] == [0]
        assert [r.offset for r in lg.read(5, max_records=10, max_bytes=2500)] == [5, 6, 7]
        assert len(lg.read(5, max_records=10, max_bytes=10_001)) == 10
        with pytest.raises(ConfigError):
            lg.read(5, max_records=0)
