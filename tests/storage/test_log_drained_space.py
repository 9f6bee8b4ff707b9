"""A drained log gives its space back on a full disk, with no restart and no
quota change (a 3 MiB tmpfs, and a btrfs subvolume under a spent 3 MiB quota:
tests/conftest.py): ``delete_before`` rolls the wholly consumed active
segment and deletes it, so appends resume on their own (vqs.storage.log_space
``_roll_consumed_now_locked``). Under a spent btrfs quota even the roll's new,
empty file is refused; the roll first frees what it lets go anyway (the
sealed segments, the active segment's indexes), whatever the segments' size."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from vqs import DiskFullError, Log
from vqs.storage.log_dir import list_segment_bases


def _fill(log: Log, value: bytes, flush: str) -> int:
    """Append (and under ``interval`` flush) until the disk refuses; returns
    how many appends were acknowledged."""
    n = 0
    with pytest.raises(DiskFullError):
        while True:
            log.append(value)
            n += 1
            if flush == "interval" and n % 16 == 0:
                log.flush()
    return n


def _usage(path: str) -> int:
    return sum(os.stat(os.path.join(path, f)).st_blocks * 512 for f in os.listdir(path))


@pytest.mark.parametrize("flush", ["always", "interval"])
@pytest.mark.parametrize("segment_bytes", [64 << 20, 256 << 10], ids=["one-segment", "many-segments"])
def test_a_drained_log_gives_its_space_back_and_appends_resume(full_disk, flush, segment_bytes):
    path = os.path.join(full_disk.path, "log")
    value = b"v" * (4000 if flush == "always" else 1000)  # (always: an fsync each, fewer)
    log = Log.open(path, segment_bytes=segment_bytes, flush=flush)
    try:
        acked = _fill(log, value, flush)
        assert acked * len(value) > 1 << 20
        try:
            log.flush()
        except DiskFullError:
            pass  # (what the flush could not write stays buffered: delete_before writes it or keeps it)
        end = log.end_offset
        assert end >= acked
        used = _usage(path)
        # the refusal holds: no space was freed by hand. (interval: an append the log
        # took into its buffer is acknowledged even when the flush after it is refused,
        # e.g. after the interval flusher gave an idle log's reserve back; it stays
        # buffered, to be written when there is room.)
        taken = 0
        with pytest.raises(DiskFullError):
            for _ in range(200):
                log.append(value)
                taken += 1
                if flush == "interval":
                    log.flush()
        assert log.end_offset == end + taken  # (nothing refused was kept)
        assert taken == 0 or flush == "interval"
        end += taken

        log.delete_before(end)  # a consumer drained it: the whole log is consumed
        # (always: the refused append's record waits in the buffer for space, as
        # before, and is written by the next append; what is written goes)
        assert log.start_offset == end or (flush == "always" and log.start_offset == end - 1)
        assert list_segment_bases(path) == [log.start_offset], os.listdir(path)  # the consumed segments went
        assert _usage(path) < used // 2

        # appends resume on their own: more than any space left over before
        # would hold, and at the same offsets (none reused, none skipped)
        for i in range(300):
            assert log.append(value) == end + i
            if flush == "interval" and i % 16 == 0:
                log.flush()
        log.flush()
        assert [r.value for r in log.read(end, max_records=1)] == [value]
    finally:
        try:
            log.close()
        except DiskFullError:
            pass
    log = Log.open(path, segment_bytes=segment_bytes, flush=flush)
    try:
        assert log.end_offset == end + 300 and log.start_offset in (end - 1, end)
    finally:
        log.close()


def test_a_log_reopened_on_a_spent_quota_gives_its_space_back_when_drained(quota_disk):
    """Closed full and reopened on the still-spent quota: the active segment's
    indexes were trimmed to their entries at close (little to free), but the
    reopen made the quota headroom's ballast again; the consumed roll spends it
    (quota_headroom.spend), so the drained log still gives its space back."""
    path = os.path.join(quota_disk.path, "log")
    log = Log.open(path, flush="interval")
    try:
        acked = _fill(log, b"v" * 4000, "interval")
    finally:
        try:
            log.close()
        except DiskFullError:
            pass
    quota_disk.fill_rest()  # (close gave back the reservation and the indexes' tails)
    assert quota_disk.is_full()
    _reopen_drain_and_append(path, "interval", acked)


def _reopen_drain_and_append(path: str, flush: str, acked: int) -> None:
    """Reopen the filled log, drain it (``delete_before`` its end): its consumed segment
    goes at once, and 800 KB more are appended at the next offsets."""
    log = Log.open(path, flush=flush)
    try:
        end = log.end_offset
        assert end >= acked
        log.delete_before(end)
        assert list_segment_bases(path) == [end], os.listdir(path)
        for i in range(200):  # 800 KB
            assert log.append(b"w" * 4000) == end + i
        log.flush()
    finally:
        log.close()


@pytest.mark.parametrize("flush", ["always", "interval"])
def test_a_log_reopened_on_a_nearly_spent_quota_gives_its_space_back_when_drained(quota_disk, flush):
    """Filled to the quota, closed and reopened with no write refused since:
    the quota's room (what close gave back, the indexes' tails, the
    reservation: 200 to 420 KiB measured here) is more than SHORT_MARGIN but less than
    the consumed segment holds, and the filesystem (statvfs) has plenty. The
    drained log rolls and deletes its consumed segment at once, as without the
    reopen (where the refusal shows the disk is full); before, it kept it
    until a write was refused (vqs.storage.log_space ``_roll_worth_it``)."""
    path = os.path.join(quota_disk.path, "log")
    log = Log.open(path, flush=flush)
    try:
        acked = _fill(log, b"v" * 4000, flush)
    finally:
        try:
            log.close()
        except DiskFullError:
            pass
    _reopen_drain_and_append(path, flush, acked)


FILL_DRAIN = r"""
import sys
from vqs import DiskFullError, Log
log = Log.open(sys.argv[1], segment_bytes=64 << 20, flush="always")
while True:
    try:
        while True:
            off = log.append(b"v" * 32768)  # flush="always": durable when it returns
            print("ack", off, flush=True)
    except DiskFullError:
        pass
    log.delete_before(log.end_offset)  # drained: the consumed segment's roll frees room first
    print("start", log.start_offset, flush=True)
"""


def _in_the_window(path: str) -> bool:
    """The active segment holds a filled disk's records (over 1 MiB: not a new
    segment before its first append made its indexes) and its indexes are
    gone: the consumed roll dropped them and has not made the next segment yet."""
    try:
        names = set(os.listdir(path))
        logs = sorted(n for n in names if n.endswith(".log"))
        return bool(logs) and logs[-1][:-4] + ".index" not in names \
            and os.stat(os.path.join(path, logs[-1])).st_size > 1 << 20
    except FileNotFoundError:
        return False


def test_a_sigkill_in_the_consumed_roll_keeps_offsets_and_records(quota_disk, child_env, python):
    """A child fills a log under a spent btrfs quota and drains it
    (delete_before, whose roll deletes the active segment's indexes before it
    makes the next segment), again and again; it is SIGKILLed when its active
    segment is seen without its indexes. Reopened (on the still-full disk): no
    offset goes back (the end is at least the last acknowledged append's),
    every acknowledged record from the last start it reported reads back, and
    it drains and takes appends again."""
    path = os.path.join(quota_disk.path, "log")
    child = subprocess.Popen([python, "-c", FILL_DRAIN, path], env=child_env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not _in_the_window(path) and child.poll() is None and time.monotonic() < deadline:
            pass
        child.kill()
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL, err.decode(errors="replace")[-2000:]
    acked, start = [], 0
    for line in out.decode().splitlines():
        what, n = line.split()
        if what == "ack":
            acked.append(int(n))
        else:
            start = int(n)
    assert len(acked) > 20, out.decode()[-500:]  # (killed in a drain, after a fill)
    log = Log.open(path, segment_bytes=64 << 20, flush="always")
    try:
        assert log.end_offset >= acked[-1] + 1
        for off in (o for o in acked if o >= max(start, log.start_offset)):
            assert log.read(off, max_records=1)[0].value == b"v" * 32768, off
        log.delete_before(log.end_offset)  # and it drains and takes appends again
        end = log.end_offset
        for i in range(40):
            assert log.append(b"w" * 32768) == end + i
    finally:
        log.close()
