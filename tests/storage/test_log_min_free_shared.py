"""``min_free_bytes`` holds for a log that was idle while other logs filled the
same filesystem (a real 8 MiB tmpfs): its margin, read when it last wrote, is
read again once 100 ms passed, so it does not write into the room the setting
keeps for deletes and checkpoints."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

import vqs
from vqs import DiskFullError


@pytest.fixture
def disk8(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip() or r.returncode}")
    try:
        yield str(mnt)
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_an_idle_log_does_not_write_into_the_room_min_free_bytes_keeps(disk8):
    keep = 2 << 20
    a = vqs.Log.open(os.path.join(disk8, "a"), min_free_bytes=keep)
    b = vqs.Log.open(os.path.join(disk8, "b"), min_free_bytes=keep)
    try:
        a.append(b"first")  # a reads free space now: a margin of ~6 MiB
        a.flush()
        with pytest.raises(DiskFullError):
            for _ in range(10_000):
                b.append(b"x" * 4000)
        b.flush()
        st = os.statvfs(disk8)
        # b stops at the setting, no longer past it: the space it reserves for its
        # buffer comes out of the margin min_free_bytes admits (log_reserve.py), so
        # free space is down to ``keep`` (before the reservation b's last batch
        # overshot it). a's stale margin (~6 MiB) would still admit 1 MiB more.
        assert st.f_bavail * st.f_frsize <= keep
        time.sleep(0.15)  # MIN_FREE_CHECK_S
        with pytest.raises(DiskFullError, match="min_free_bytes"):
            a.append(b"y" * (1 << 20))
        assert a.end_offset == 1
    finally:
        a.close()
        b.close()
