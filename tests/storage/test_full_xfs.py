"""A full xfs (``xfs_disk``, tests/conftest.py: a loop-mounted xfs with 3 MiB
free) refuses what tmpfs and ext4 allow, and it stopped a full queue from
draining there (found by filling an xfs through the library, the broker and
the server): ``fallocate`` of blocks a file already holds, when the
filesystem has less free space than the range (xfs reserves the whole
range's blocks before it looks), so a log reopened on the full disk could
not count the reserve it kept (a queue's receives answered 507 after a
restart), nor a spare its room.

Root only (a loop mount); skipped with the reason elsewhere, and in CI a
missing mkfs.xfs fails instead."""

from __future__ import annotations

import errno
import os

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
