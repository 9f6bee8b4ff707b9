"""An active segment's file is allocated ahead of its writes and gives the rest back when sealed."""

import os
import pathlib

import fs_fault
import pytest

from vqs.disk import fs
from vqs.storage import Log
from vqs.storage.segment import ALLOCATE_AHEAD

needs_fallocate = pytest.mark.skipif(fs._fallocate is None, reason="no fallocate in this C library")


def _blocks(path: str) -> int:
    return os.stat(path).st_blocks * 512


def _active_file(path) -> str:
    return sorted(str(p) for p in path.glob("*.log"))[-1]


@needs_fallocate
def test_blocks_are_allocated_ahead_and_given_back_at_close(tmp_path):
    d = tmp_path / "log"
    log = Log.open(d, flush="never")
    for _ in range(40):
        log.append(b"v" * 10_000)
    log.flush()
    f = _active_file(d)
    size = os.path.getsize(f)
    assert size >= 400_000
    assert _blocks(f) >= size + ALLOCATE_AHEAD // 2  # the length did not move with the blocks
    log.close()
    assert os.path.getsize(f) == size
    assert _blocks(f) < size + (64 << 10)
    with Log.open(d) as again:
        assert [r.value for r in again.read(0, max_records=100)] == [b"v" * 10_000] * 40


@needs_fallocate
def test_a_roll_seals_the_old_segment_without_its_allocation(tmp_path):
    d = tmp_path / "log"
    with Log.open(d, flush="never", segment_bytes=200_000) as log:
        for _ in range(50):
            log.append(b"w" * 10_000)
            log.flush()
        sealed = sorted(str(p) for p in d.glob("*.log"))[:-1]
        assert sealed
        for f in sealed:
            assert _blocks(f) < os.path.getsize(f) + (64 << 10)


def test_under_an_injected_fault_nothing_is_allocated(tmp_path):
    """The space fault (tests/fs_fault.py) counts writes only, so allocation ahead gets
    nothing under it: a log spending a budget is never charged for blocks it did not write."""
    d = tmp_path / "log"
    d.mkdir()
    fault = fs_fault.install(fs_fault.Fault.space(str(d), free=10 << 20))
    try:
        with Log.open(d / "l", flush="never", min_free_bytes=0) as log:
            log.append(b"x" * 1000)
            log.flush()
            fd = os.open(d / "l" / "probe", os.O_RDWR | os.O_CREAT)
            try:
                assert fs.allocate(fd, 0, 4096) is False
            finally:
                os.close(fd)
        assert fault.failures == 0
    finally:
        fs_fault.uninstall()


@needs_fallocate
def test_no_allocation_ahead_without_room_to_spare_over_the_floor(private_disk):
    """Room given ahead is counted at the governor and never taken below the floor (plus a
    margin): near a full disk appends keep what is left, and nothing is marked low for it."""
    tmp_path = pathlib.Path(private_disk.path)  # (free space that only this test moves)
    d = tmp_path / "log"
    with Log.open(d, flush="never", min_free_bytes=0) as lg:
        lg.append(b"x")
        lg.flush()
        g = lg._grant.space
        avail = g.avail
        assert g.ahead(1 << 20, 0) and g.avail == avail - (1 << 20)
        assert not g.ahead(1 << 20, g.avail) and not g.low
    # appends fit over this floor, but not the margin allocation ahead needs over it
    with Log.open(tmp_path / "tight", flush="never", min_free_bytes=max(0, avail - (12 << 20))) as lg:
        for _ in range(10):
            lg.append(b"y" * 10_000)
        lg.flush()
        f = _active_file(tmp_path / "tight")
        assert _blocks(f) < os.path.getsize(f) + (64 << 10)
