"""Free space under a btrfs quota (vqs/disk/space.py): statvfs shows
the whole filesystem; ``free_bytes`` shows the room under the subvolume's
quota group limit (sysfs), so ``min_free_bytes`` refuses appends before the
quota is spent (tests/conftest.py ``quota_disk``: a 3 MiB limit on a 200 MiB
filesystem)."""

from __future__ import annotations

import ctypes
import os

import pytest

import vqs
from vqs.disk.space import free_bytes, quota


def _commit(path: str) -> None:
    """A btrfs transaction commit (syncfs) of ``path``'s filesystem."""
    fd = os.open(path, os.O_RDONLY)
    try:
        ctypes.CDLL(None, use_errno=True).syncfs(fd)
    finally:
        os.close(fd)


def test_free_bytes_is_the_room_under_the_quota(quota_disk):
    st = os.statvfs(quota_disk.path)
    assert st.f_bavail * st.f_frsize > 100 << 20  # statvfs: the whole filesystem
    q = quota(quota_disk.path)
    assert q is not None and 2 << 20 < q[1] <= 3 << 20
    room = q[1]
    assert free_bytes(quota_disk.path) == room
    quota_disk.fill(1 << 20)
    _commit(quota_disk.path)  # (the group's numbers move at the commit)
    assert room - (1 << 20) - (256 << 10) < free_bytes(quota_disk.path) <= room - (1 << 20)


def test_min_free_bytes_refuses_before_the_quota_is_spent(quota_disk):
    path = os.path.join(quota_disk.path, "log")
    with vqs.Log.open(path, flush="interval", min_free_bytes=1 << 20) as log:
        with pytest.raises(vqs.DiskFullError, match="min_free_bytes=1048576"):
            for _ in range(10_000):
                log.append(b"x" * 1000)
                if log.end_offset % 100 == 0:
                    log.flush()
        assert not quota_disk.is_full()  # refused with room left under the limit


def test_no_quota_no_room(small_disk):
    assert quota(small_disk.path) is None
    st = os.statvfs(small_disk.path)
    assert abs(free_bytes(small_disk.path) - st.f_bavail * st.f_frsize) < 64 << 10
