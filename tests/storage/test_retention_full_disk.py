"""Retention on a real full filesystem (a 3 MiB tmpfs) whose data sits in the
active segment (the default ``segment_bytes`` is larger than the filesystem):
retention never deletes the active segment, so before, a topic whose records
were all past ``retention_ms`` stayed full for good. On a full disk an active
segment wholly past retention is now rolled and deleted, and appends resume;
with room to spare it stays (the rule elsewhere)."""

from __future__ import annotations

import os

import pytest
from disk_fill import close_full, fill_log

import vqs


@pytest.mark.parametrize("flush", ["interval", "always"])
def test_an_expired_active_segment_goes_on_a_full_disk(small_disk, flush):
    now = [1_800_000_000.0]
    log = vqs.Log.open(os.path.join(small_disk.path, "log"), flush=flush, retention_ms=60_000,
                       clock=lambda: now[0])
    try:
        n = fill_log(log)
        assert log.apply_retention() == 0  # nothing past retention yet
        now[0] += 120
        assert log.apply_retention() >= 1
        # (flush="always": the refused append may be written once there is room)
        assert log.start_offset >= n - 1 and len(log.read(log.start_offset)) <= 1
        for _ in range(n // 2):
            log.append(b"again" + b"v" * 1000)
    finally:
        close_full(log)


def test_an_expired_active_segment_stays_with_room_to_spare(tmp_path):
    now = [1_800_000_000.0]
    with vqs.Log.open(str(tmp_path / "log"), retention_ms=60_000, clock=lambda: now[0]) as log:
        log.append_batch([b"x"] * 10)
        log.flush()
        now[0] += 120
        assert log.apply_retention() == 0
        assert log.start_offset == 0 and len(log.read(0)) == 10


@pytest.mark.parametrize("reopen", [False, True])
@pytest.mark.parametrize("flush", ["interval", "always"])
def test_an_expired_active_segment_goes_on_every_kind_of_full_disk(full_disk, flush, reopen):
    """Found by the issue-13 judge: on a full xfs (the roll's new file cannot be
    made) and under a spent btrfs quota (not even an empty file; under
    ``always`` the refused write's bytes cannot be cut either), retention rolled
    nothing and deleted nothing, so a topic stayed full for good. It now rolls
    the expired segment as a drained log's consumed one (log_space.py)."""
    now = [1_800_000_000.0]
    path = os.path.join(full_disk.path, "log")
    log = vqs.Log.open(path, flush=flush, retention_ms=60_000, clock=lambda: now[0])
    try:
        n = fill_log(log)
        if reopen:  # the same on a log reopened on the still-full disk
            close_full(log)
            full_disk.fill_rest()
            log = vqs.Log.open(path, flush=flush, retention_ms=60_000, clock=lambda: now[0])
        now[0] += 120
        assert log.apply_retention() >= 1
        assert log.start_offset >= n - 1 and len(log.read(log.start_offset)) <= 1
        for i in range(n // 2):
            log.append(b"again %d" % i + b"v" * 1000)
    finally:
        close_full(log)
