"""A log whose every record was below its start when it opened (a queue
drained before a restart) rolls its consumed active segment away at the next
``delete_before(start)`` when the disk is short (vqs/storage/log_space.py
``consumed_left``, ``_roll_due``), on a real spent btrfs quota
(tests/conftest.py ``quota_disk``).

Found by the issue-13 judge (D7, SIGKILL variant; traced 2026-11-28): a queue
drained before the kill and reopened on the full disk kept its consumed
segment (~400 KiB), as no delete moved its start and no write had been refused
yet; its sends then found no room for good."""

from __future__ import annotations

import os

import vqs


def test_a_log_drained_before_a_restart_gives_its_space_back_on_a_full_disk(quota_disk):
    d = os.path.join(quota_disk.path, "q")
    with vqs.Log.open(d, flush="interval") as log:
        for _ in range(300):
            log.append(b"q" * 1000)
        log.flush()
        end = log.end_offset
        assert log.delete_before(end) == 0  # ample room: a small consumed segment stays (as ever)
        assert log.size_bytes > 0
    quota_disk.fill_rest()
    log = vqs.Log.open(d, flush="interval")
    try:
        assert log.start_offset == end and log.size_bytes > 0
        assert log.delete_before(end) >= 1  # before: 0, the start does not move
        assert log.size_bytes == 0
        log.append(b"after the restart")  # its space is back: appends go on
        log.flush()
        assert [r.value for r in log.read(end, max_records=10)] == [b"after the restart"]
    finally:
        try:
            log.close()
        except vqs.DiskFullError:
            pass


def test_with_room_a_drained_log_keeps_its_small_segment_after_a_restart(tmp_path):
    """(the roll costs fsyncs: with room, only the disk being short makes it worth it)"""
    d = str(tmp_path / "q")
    with vqs.Log.open(d, flush="interval") as log:
        for _ in range(30):
            log.append(b"q" * 1000)
        end = log.end_offset
        log.delete_before(end)
    with vqs.Log.open(d, flush="interval") as log:
        size = log.size_bytes
        assert size > 0
        assert log.delete_before(end) == 0
        assert log.size_bytes == size
