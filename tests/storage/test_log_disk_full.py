"""A log on a real full filesystem (a 3 MiB tmpfs, and a btrfs subvolume
under a 3 MiB quota: ENOSPC and EDQUOT, see tests/conftest.py): the
append that finds no space raises DiskFullError naming the file; close releases
the lock; the full log reopens and reads back everything acknowledged; once
space is freed appends resume in the same process, with no restart."""

from __future__ import annotations

import os

import pytest

import vqs
from vqs import DiskFullError, Log


def _fill(log: Log, value: bytes) -> int:
    """Append until the disk is full; return how many appends were acknowledged."""
    n = 0
    with pytest.raises(DiskFullError) as ei:
        while True:
            log.append(value)
            n += 1
    assert ei.value.path is not None and ei.value.path.startswith(log.path)
    assert ei.value.path in str(ei.value)
    assert isinstance(ei.value, vqs.VQSError)
    return n


def _read_all(log: Log) -> list[bytes]:
    out, off = [], log.start_offset
    while off < log.end_offset:
        recs = log.read(off, max_records=1000)
        out += [r.value for r in recs]
        off = recs[-1].offset + 1
    return out


@pytest.mark.parametrize("flush", ["always", "interval"])
def test_full_log_reopens_drains_and_resumes(full_disk, flush):
    full_disk.fill(512 << 10)
    path = os.path.join(full_disk.path, "log")
    value = b"v" * 1000
    log = Log.open(path, segment_bytes=256 << 10, flush=flush)
    try:
        if flush == "always":
            acked = _fill(log, value)
        else:
            # interval: an append is acknowledged into the buffer; flush() (or the
            # append itself, when the space reserved behind the buffer cannot be
            # topped up, log_reserve.py) is where it meets the full disk
            acked = 0
            with pytest.raises(DiskFullError) as ei:
                while True:
                    log.append(value)
                    log.flush()
                    acked += 1
            assert ei.value.__cause__.errno == full_disk.errno
        assert acked > 1000
    finally:
        # close writes what it can and raises the disk-full error, but releases the lock
        # (in a finally: a failed assertion must not leave the files open)
        try:
            log.close()
        except DiskFullError:
            pass
    assert log.closed

    # reopen on the still-full disk (checkpoint and index preallocation wait)
    full_disk.fill_rest()  # closing trimmed the preallocated indexes: full again
    assert full_disk.is_full()
    log = Log.open(path, segment_bytes=256 << 10, flush=flush)
    try:
        assert log.end_offset >= acked
        got = _read_all(log)
        assert len(got) >= acked and got[:acked] == [value] * acked
        with pytest.raises(DiskFullError) as ei:
            for _ in range(100):  # a few may fit in the file's last page
                log.append(value)
                log.flush()
        assert ei.value.__cause__.errno == full_disk.errno  # ENOSPC, or EDQUOT under a quota

        full_disk.free()
        off = log.append(b"after")
        log.flush()
        assert [r.value for r in log.read(off, max_records=1)] == [b"after"]
    finally:
        log.close()

    log = Log.open(path, segment_bytes=256 << 10, flush=flush)
    try:
        assert _read_all(log)[:acked] == [value] * acked
        assert log.read(log.end_offset - 1, max_records=1)[0].value == b"after"
    finally:
        log.close()


def test_reserved_space_takes_appends_on_a_full_disk_across_a_reopen(small_disk):
    # tmpfs only: on btrfs (copy-on-write) space fallocate'd past the end is not
    # written in place, so a write into it needs new space like any other
    # (EDQUOT under a quota): reserve_bytes does not help there (docs/library.md)
    path = os.path.join(small_disk.path, "log")
    log = Log.open(path, flush="always", reserve_bytes=64 << 10)
    small_disk.fill_rest()
    assert small_disk.is_full()
    for i in range(20):  # 20 KB of the 64 KiB reserved
        log.append(b"%04d" % i + b"r" * 1000)
    log.close()
    log = Log.open(path, flush="always", reserve_bytes=64 << 10)  # the reserve is still there
    try:
        for i in range(20, 40):
            log.append(b"%04d" % i + b"r" * 1000)
        with pytest.raises(DiskFullError):
            for i in range(40, 200):  # until the reserve is used up
                log.append(b"%04d" % i + b"r" * 1000)
        got = _read_all(log)
        assert got[:40] == [b"%04d" % i + b"r" * 1000 for i in range(40)]
    finally:
        try:
            log.close()
        except DiskFullError:
            pass
    small_disk.free()
    with Log.open(path, flush="always", reserve_bytes=64 << 10) as log:
        log.append(b"after")
        assert _read_all(log)[-1] == b"after"


def test_close_after_a_refused_write_leaves_a_marker_that_matches(full_disk, caplog):
    # flush="always": the append that meets the full disk is refused; its batch
    # was never written, so nothing of it (an index entry, its timestamp) may
    # stay in the segment's state that close records in the clean-shutdown
    # marker: the reopen trusts the marker, with no mismatch to recover from
    full_disk.fill(1 << 20)
    path = os.path.join(full_disk.path, "log")
    value = b"x" * 3000  # a batch per append: index entries every few appends
    log = Log.open(path, flush="always")
    try:
        acked = _fill(log, value)
    finally:
        try:
            log.close()  # retries the refused record (not acknowledged): may raise again
        except DiskFullError:
            pass
    caplog.clear()
    with caplog.at_level("WARNING", logger="vqs.storage"), Log.open(path, flush="always") as log:
        assert not [r for r in caplog.records if "marker" in r.getMessage()]
        got = _read_all(log)
        assert got[:acked] == [value] * acked and len(got) <= acked + 1
        for off in range(0, acked, 37):  # lookups through the offset index
            assert log.read(off, max_records=1)[0].value == value


def test_a_new_log_under_a_spent_quota_raises_disk_full(quota_disk):
    """btrfs needs space even for a new directory: opening a new log under a
    spent quota raised a raw OSError (EDQUOT) from makedirs; it is a
    DiskFullError naming the path, and leaves nothing half-made behind."""
    quota_disk.fill_rest()
    path = os.path.join(quota_disk.path, "new-log")
    with pytest.raises(DiskFullError) as ei:
        Log.open(path).close()
    assert ei.value.path.startswith(path)
