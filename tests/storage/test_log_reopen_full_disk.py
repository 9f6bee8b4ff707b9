"""A log reopened on a real full filesystem gives its consumed space back and
keeps taking appends: ``delete_before`` rolls a wholly consumed active segment
that holds more than the filesystem has free (the reopened log has no refused
write to go by), and an index preallocation that finds no space keeps none of
it (ext4 keeps what a failed ``posix_fallocate`` got, so the index took the
last free blocks and the next append was refused)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from disk_fill import fill_log

import vqs
from vqs import DiskFullError


def _free(path: str) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


@pytest.fixture
def ext4_disk(tmp_path):
    """A 3 MiB ext4 filesystem on a loop device (root and mkfs.ext4 only)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a loop filesystem needs root")
    if shutil.which("mkfs.ext4") is None:
        pytest.skip("mkfs.ext4 is not installed")
    img, mnt = tmp_path / "ext4.img", tmp_path / "ext4"
    mnt.mkdir()
    with open(img, "wb") as f:
        f.truncate(3 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(img)], check=True, capture_output=True)
    r = subprocess.run(["mount", "-o", "loop", str(img), str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a loop device here: {r.stderr.strip()}")
    try:
        yield str(mnt)
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)])
            pytest.fail(f"{mnt} was busy at unmount (a file left open)")


@pytest.mark.parametrize("flush", ["always", "interval"])
def test_reopened_full_log_gives_its_space_back(small_disk, flush):
    path = os.path.join(small_disk.path, "log")
    log = vqs.Log.open(path, flush=flush)
    n = fill_log(log)
    try:
        log.close()
    except DiskFullError:
        pass  # (always: the refused write's error, after closing)
    log = vqs.Log.open(path, flush=flush)
    try:
        got = []
        while len(got) < log.end_offset:
            got += [r.value[:8] for r in log.read(len(got), max_records=n)]
        assert got[:n] == [b"%08d" % i for i in range(n)]
        before = _free(small_disk.path)
        log.delete_before(log.end_offset)
        assert _free(small_disk.path) > before + (1 << 20)
        for _ in range(n // 2):
            log.append(b"again" + b"v" * 1000)
    finally:
        log.close()


def test_a_failed_index_preallocation_keeps_no_space_on_ext4(ext4_disk):
    path = os.path.join(ext4_disk, "log")
    log = vqs.Log.open(path, flush="always")
    fill_log(log)
    log.delete_before(log.end_offset)  # a refusal came first: the segment is rolled and deleted
    n = fill_log(log)
    try:
        log.close()
    except DiskFullError:
        pass
    # a little room (the log's reservation, given back at close), less than the
    # next segment's indexes want: they are preallocated at the first append
    log = vqs.Log.open(path, flush="always")
    try:
        room = _free(ext4_disk)
        assert 0 < room < (640 << 10)
        for _ in range(room // 2 // 1041):  # half the room: before, the indexes had it all
            log.append(b"late" + b"v" * 1000)
        assert log.end_offset > n
    finally:
        log.close()
