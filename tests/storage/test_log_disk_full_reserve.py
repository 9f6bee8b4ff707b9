"""Acknowledged-but-buffered appends on a real full filesystem (a 3 MiB tmpfs,
tests/conftest.py): under ``flush="interval"`` and ``"never"`` an append is
acknowledged once it is in the write buffer, so the buffer must already have
its disk space (vqs/storage/log_reserve.py). Every acknowledged record survives
the disk filling up, ``close`` (which must not fail) and a reopen, with space
freed or not; a refused record is never written; appends resume once space is
freed, with no restart; a roll that finds no space for the next segment writes
past ``segment_bytes`` instead, and the log reopens and reads fine."""

from __future__ import annotations

import os
import random
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vqs import DiskFullError, Log


def _read_all(log: Log) -> dict[int, bytes]:
    out, off = {}, log.start_offset
    while off < log.end_offset:
        recs = log.read(off, max_records=1000)
        if not recs:
            break
        out.update((r.offset, r.value) for r in recs)
        off = recs[-1].offset + 1
    return out


def _fill_log(log: Log, values) -> tuple[list, bytes]:
    """Append until refused; return [(offset, value)] acknowledged and the refused value."""
    acked = []
    for v in values:
        try:
            acked.append((log.append(v), v))
        except DiskFullError as e:
            assert e.path and e.path.startswith(log.path) and e.path in str(e)
            return acked, v
    raise AssertionError("the disk never filled")


@pytest.mark.parametrize("free_first", [False, True], ids=["still-full", "freed"])
@pytest.mark.parametrize("flush", ["interval", "never"])
def test_every_acknowledged_append_survives_a_full_disk(small_disk, flush, free_first):
    small_disk.fill((2 << 20) + (600 << 10))
    path = os.path.join(small_disk.path, "log")
    log = Log.open(path, flush=flush)
    values = (b"%08d" % i + b"a" * 992 for i in range(100_000))
    acked, refused = _fill_log(log, values)
    assert len(acked) > 50
    end = log.end_offset
    for _ in range(20):  # a client retrying: refused, never buffered
        with pytest.raises(DiskFullError):
            log.append(b"retry" * 200)
    assert log.end_offset == end
    if free_first:
        small_disk.free()
        acked.append((log.append(b"after"), b"after"))  # resumes, no restart
    log.close()  # the buffered records have their blocks: nothing to fail on
    if not free_first:
        small_disk.fill_rest()
        assert small_disk.is_full()
    with Log.open(path, flush=flush) as log:
        got = _read_all(log)
    assert [got.get(o) for o, _ in acked] == [v for _, v in acked]
    assert refused not in got.values() and not any(v.startswith(b"retry") for v in got.values())
    small_disk.free()
    with Log.open(path, flush=flush) as log:  # and writes go on
        off = log.append(b"later")
        log.flush()
        assert log.read(off, max_records=1)[0].value == b"later"


def test_a_roll_without_space_writes_past_segment_bytes(small_disk):
    path = os.path.join(small_disk.path, "log")
    seg = 64 << 10
    log = Log.open(path, flush="never", segment_bytes=seg, index_interval_bytes=1024)
    vals = [b"%06d" % i + b"r" * 994 for i in range(200)]
    acked = [(log.append(v), v) for v in vals[:60]]
    log.flush()  # ~60 KB in segment 0: the next batch rolls
    acked += [(log.append(v), v) for v in vals[60:120]]  # buffered, their space reserved
    small_disk.fill_rest()  # no space left for a new segment
    assert small_disk.is_full()
    log.flush()  # the roll finds no space: the batch goes into segment 0, past segment_bytes
    assert log.segment_count == 1 and log.size_bytes > seg
    log.close()
    small_disk.free()
    with Log.open(path, flush="never", segment_bytes=seg, index_interval_bytes=1024) as log:
        assert [log.read(o, max_records=1)[0].value for o, _ in acked] == [v for _, v in acked]
        ts = log.read(100, max_records=1)[0].timestamp_ms
        assert log.offset_for_time(ts) <= 100
        acked += [(log.append(v), v) for v in vals[120:]]
        log.flush()
        assert log.segment_count >= 2  # space is back: it rolls again
    with Log.open(path, segment_bytes=seg) as log:
        got = _read_all(log)
    assert [got.get(o) for o, _ in acked] == [v for _, v in acked]


def test_rolls_near_a_full_disk_lose_nothing(small_disk):
    small_disk.fill(2 << 20)
    path = os.path.join(small_disk.path, "log")
    log = Log.open(path, flush="interval", segment_bytes=32 << 10, batch_max_bytes=8 << 10)
    acked, _ = _fill_log(log, (b"%07d" % i + b"s" * (500 + i % 700) for i in range(100_000)))
    assert log.segment_count > 3
    log.close()
    with Log.open(path, segment_bytes=32 << 10) as log:
        got = _read_all(log)
    assert [got.get(o) for o, _ in acked] == [v for _, v in acked]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), flush=st.sampled_from(["interval", "never"]),
       filler=st.integers(1 << 20, (2 << 20) + (700 << 10)), free=st.booleans(),
       segment_bytes=st.sampled_from([16 << 10, 128 << 10, 128 << 20]), keyed=st.booleans())
def test_random_appends_on_a_filling_disk_match_the_model(small_disk, seed, flush, filler, free, segment_bytes,
                                                          keyed):
    """Model: the list of acknowledged (offset, value, key) in order."""
    rng = random.Random(seed)
    shutil.rmtree(os.path.join(small_disk.path, "log"), ignore_errors=True)
    small_disk.free()
    small_disk.fill(filler)
    path = os.path.join(small_disk.path, "log")
    log = Log.open(path, flush=flush, segment_bytes=segment_bytes, batch_max_bytes=rng.choice([4096, 64 << 10, 1 << 20]))
    model = []
    refused = 0
    while refused < 3:
        v = rng.randbytes(rng.choice([0, 1, 10, 100, 1000, 5000, 20000]))
        k = rng.randbytes(rng.randint(0, 40)) if keyed and rng.random() < 0.5 else None
        try:
            model.append((log.append(v, key=k), v, k))
        except DiskFullError:
            refused += 1
    if free:
        small_disk.free()
    log.close()
    with Log.open(path, segment_bytes=segment_bytes) as log:
        got = {}
        off = log.start_offset
        while off < log.end_offset:
            recs = log.read(off, max_records=1000)
            got.update((r.offset, (r.value, r.key)) for r in recs)
            off = recs[-1].offset + 1
    assert [got.get(o) for o, _, _ in model] == [(v, k) for _, v, k in model]
    assert len(got) == len(model)  # nothing refused was written


@pytest.fixture
def no_fallocate_fs(tmp_path):
    """A ramfs (no ``fallocate``: EOPNOTSUPP) at ``tmp_path/ram``; root only."""
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("mounting a ramfs needs root")
    mnt = tmp_path / "ram"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "ramfs", "ramfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a ramfs here: {r.stderr.strip() or r.returncode}")
    try:
        yield str(mnt)
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


@pytest.mark.parametrize("flush", ["interval", "never"])
def test_without_fallocate_appends_are_written_at_once(no_fallocate_fs, flush, caplog):
    path = os.path.join(no_fallocate_fs, "log")
    seg = os.path.join(path, "00000000000000000000.log")
    with Log.open(path, flush=flush) as log:
        sizes = []
        for i in range(20):
            log.append(b"%04d" % i + b"w" * 96)
            sizes.append(os.path.getsize(seg))  # in the file before the next append, unflushed
        assert sizes == sorted(set(sizes)) and sizes[0] > 0
    assert "cannot reserve disk space" in caplog.text
    with Log.open(path) as log:
        assert [r.value for r in log.read(0, max_records=100)] == [b"%04d" % i + b"w" * 96 for i in range(20)]
