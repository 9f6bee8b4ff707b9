"""A full xfs (``xfs_disk``, tests/conftest.py: a loop-mounted xfs with 3 MiB
free) refuses two things tmpfs and ext4 allow, and each one stopped a full
queue from draining there (found by filling an xfs through the library, the
broker and the server):

* ``fallocate`` of blocks a file already holds, when the filesystem has less
  free space than the range (xfs reserves the whole range's blocks before it
  looks): a log reopened on the full disk could not count the reserve it kept
  (a queue's receives answered 507 after a restart), nor a spare its room;
* creating any file, even an empty one, while it has less than a few hundred
  KiB free (renames and unlinks go through): the lease-state compaction's
  snapshot spare and the roll of its consumed segment each needed a new file,
  so a queue's state log filled its reserve and receives were refused.

Root only (a loop mount); skipped with the reason elsewhere, and in CI a
missing mkfs.xfs fails instead."""

from __future__ import annotations

import errno
import os

from vqs import Log
from vqs.storage.durable_file import atomic_write_reserved
from vqs.storage.reserve import allocated_through, reserve, reserve_errno


def test_reserving_blocks_a_file_holds_works_on_a_full_xfs(xfs_disk):
    path = os.path.join(xfs_disk.path, "f")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"x")
        os.fsync(fd)
        assert reserve_errno(fd, 1, 256 << 10) == 0
        xfs_disk.fill_rest()
        assert xfs_disk.is_full()
        # the blocks are the file's already: nothing to allocate, so no refusal
        assert reserve_errno(fd, 1, 256 << 10) == 0
        assert reserve(fd, 0, 128 << 10)
        assert allocated_through(fd, 1, 1 << 20) >= (256 << 10) + 1
        # past what it holds the full disk refuses, as before
        assert reserve_errno(fd, 1, 4 << 20) == errno.ENOSPC
        assert not reserve(fd, 0, 4 << 20)
    finally:
        os.close(fd)


def test_reserved_replacements_go_on_on_a_full_xfs(xfs_disk):
    """atomic_write_reserved swaps the new content with the old file, which
    becomes the next spare: no file is made, so it goes on however often."""
    path = os.path.join(xfs_disk.path, "snapshot")
    atomic_write_reserved(path, b"a" * 1000, reserve_bytes=64 << 10)
    xfs_disk.fill_rest()
    assert xfs_disk.is_full()
    for i in range(20):
        data = bytes([65 + i]) * (1000 + 100 * i)
        atomic_write_reserved(path, data, reserve_bytes=64 << 10)
        with open(path, "rb") as f:
            assert f.read() == data
    assert sorted(os.listdir(xfs_disk.path)) == ["filler2", "snapshot", "snapshot.spare"]


def test_a_reserve_log_rolls_its_consumed_segment_away_on_a_full_xfs(xfs_disk):
    """What a queue's lease-state compaction does on a full disk, round after
    round: write into the reserve, roll the consumed segment, delete it. Each
    round uses ~100 KiB of the 256 KiB reserve, so without the rolls the third
    would find no room; each roll's new segment file is renamed from the
    segment spare (log_dir.py), made again from the space the roll gives back."""
    path = os.path.join(xfs_disk.path, "log")
    log = Log.open(path, reserve_bytes=256 << 10, segment_ms=None)
    try:
        log.append(b"first")
        log.flush()
        for _ in range(6):
            xfs_disk.fill_rest()  # (the first roll drops the preallocated indexes: 640 KiB)
            assert xfs_disk.is_full()
            for _ in range(200):
                log.append(b"x" * 500)
            log.flush()
            end = log.end_offset
            assert log.roll_consumed(end)
            log.delete_before(end)
            assert log.segment_count == 1 and log.start_offset == end
            assert log.hold(256 << 10)  # the reserve, refilled from the deleted segment's space
            log.hold(0)
        assert log.read(log.start_offset) == []
    finally:
        log.close()
    log = Log.open(path, reserve_bytes=256 << 10, segment_ms=None)  # reopens on the full disk
    try:
        assert log.start_offset == log.end_offset == 1 + 6 * 200
        log.append(b"again")
        log.flush()
    finally:
        log.close()
