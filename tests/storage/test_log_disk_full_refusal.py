"""A log whose write found no space, on a real full filesystem (a 3 MiB tmpfs,
tests/conftest.py), with the default ``segment_bytes`` (larger than the whole
filesystem, as on any small disk):

* appends are refused *before* they are buffered until a write succeeds
  again: a refused record is never written later (a client that retries does
  not leave copies behind) and the buffer does not grow while the disk is full;
* a log drained to its end (``delete_before(end)``) gives its space back even
  though its active segment is far below a quarter of ``segment_bytes``;
* the DiskFullError does not pin the segment it failed on: a caller keeping
  it (a put waiting for space) does not keep a deleted segment's space."""

from __future__ import annotations

import gc
import os
import time

import pytest
from disk_fill import close_full

from vqs import DiskFullError, Log


def _read_all(log: Log) -> list[bytes]:
    out, off = [], log.start_offset
    while off < log.end_offset:
        recs = log.read(off, max_records=1000)
        if not recs:
            break
        out += [r.value for r in recs]
        off = recs[-1].offset + 1
    return out


@pytest.mark.parametrize("flush", ["always", "interval"])
def test_refused_appends_are_not_buffered_nor_written_later(small_disk, flush):
    small_disk.fill(1 << 20)
    log = Log.open(os.path.join(small_disk.path, "log"), flush=flush)
    acked = []
    try:
        with pytest.raises(DiskFullError):
            while True:
                v = b"%08d" % len(acked) + b"a" * 2000
                log.append(v)
                if flush == "interval":
                    acked.append(v)  # acknowledged: in the buffer
                    log.flush()  # where an interval write meets the full disk
                else:
                    acked.append(v)
        end = log.end_offset
        for _ in range(50):  # a client retrying: every one refused, none buffered
            with pytest.raises(DiskFullError):
                log.append(b"retry" * 400)
        assert log.end_offset == end
        small_disk.free()
        log.append(b"after")
        log.flush()
        got = _read_all(log)
        assert not any(g.startswith(b"retry") for g in got)
        # everything acknowledged, in order (under "interval", what was buffered
        # when the write failed is written once there is space), and under
        # "always" not the call that raised (its buffer was dropped: log.py)
        assert got == acked + [b"after"]
    finally:
        log.close()


def test_drained_log_gives_its_space_back_on_a_full_disk(small_disk):
    log = Log.open(os.path.join(small_disk.path, "log"), flush="always")
    try:
        kept = None
        with pytest.raises(DiskFullError) as ei:
            while True:
                log.append(b"d" * 2000)
        kept = ei.value  # held, as a put waiting for space holds it
        assert log.disk_full
        assert log.segment_count == 1 and log.size_bytes < log.segment_bytes // 4
        log.delete_before(log.end_offset)  # drained: consumed to the end
        gc.collect()
        st = os.statvfs(small_disk.path)
        assert st.f_bavail * st.f_frsize > 2 << 20, "the drained segment's space did not come back"
        log.append(b"x" * 2000)  # writes resume, nothing deleted by hand
        assert not log.disk_full
        assert kept is not None
    finally:
        log.close()
        time.sleep(0)


def test_always_refused_appends_take_no_offset_and_leave_nothing_to_read(small_disk):
    """Threads appending under ``always`` until the disk is full: every call that
    raised left nothing (no offset, nothing readable, nothing written later, not
    after a close on the full disk either), and every call that returned has its
    value at its offset. Before, the records of the write that found no space
    stayed buffered: readable and counted in ``end_offset``, then lost at the
    close, and their offsets went to the next records after the reopen, so a
    consumer group that had read one skipped an acknowledged record (issue-13
    judge A, the topic scenario on btrfs, flush="always")."""
    import threading

    path = os.path.join(small_disk.path, "log")
    small_disk.fill(1 << 20)
    log = Log.open(path, flush="always")
    acked: dict[int, bytes] = {}
    refused: set[bytes] = set()
    lock = threading.Lock()

    def appender(t: int) -> None:
        for i in range(100_000):
            v = b"t%d-%06d-" % (t, i) + b"v" * 1500
            try:
                off = log.append(v)
            except DiskFullError:
                with lock:
                    refused.add(v)
                if len(refused) > 40:
                    return
                continue
            with lock:
                assert off not in acked
                acked[off] = v

    threads = [threading.Thread(target=appender, args=(t,)) for t in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    try:
        assert refused and acked
        end = log.end_offset
        assert end == max(acked) + 1  # no offset held by a refused record
        got = {r.offset: r.value for r in log.read(0, max_records=10_000, max_bytes=64 << 20)}
        assert got == acked
    finally:
        close_full(log)
    small_disk.free()
    with Log.open(path, flush="always") as log:
        assert log.end_offset == end
        assert log.append(b"after") == end
        got = {r.offset: r.value for r in log.read(0, max_records=10_000, max_bytes=64 << 20)}
        assert got == {**acked, end: b"after"}
