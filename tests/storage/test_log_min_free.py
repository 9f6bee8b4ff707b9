"""``min_free_bytes`` on a real small filesystem (a 3 MiB tmpfs,
tests/conftest.py): appends are refused with DiskFullError naming the setting
while the filesystem still has room (the disk is never filled), deletes and
close still write, and appends resume by themselves once space is freed."""

from __future__ import annotations

import os

import pytest

from vqs import ConfigError, DiskFullError, Log


@pytest.mark.parametrize("flush", ["always", "interval"])
def test_appends_stop_at_min_free_bytes_and_resume(small_disk, flush):
    small_disk.fill(1 << 20)
    path = os.path.join(small_disk.path, "log")
    value = b"v" * 1000
    with Log.open(path, flush=flush, segment_bytes=128 << 10, min_free_bytes=1 << 20) as log:
        n = 0
        with pytest.raises(DiskFullError) as ei:
            while True:
                log.append(value)
                if flush == "interval":
                    log.flush()
                n += 1
        assert "min_free_bytes=1048576" in str(ei.value) and ei.value.path.startswith(path)
        st = os.statvfs(small_disk.path)
        assert st.f_bavail * st.f_frsize >= (1 << 20) - (256 << 10)  # refused near the limit, not past it
        assert not small_disk.is_full()
        with pytest.raises(DiskFullError):  # refused again, at once
            log.append(value)
        # deletes go on (and give space back, but not enough here: still refused)
        log.delete_before(log.end_offset // 4)
        small_disk.free()
        off = log.append(b"after")
        log.flush()
        assert log.read(off, max_records=1)[0].value == b"after"
    with Log.open(path) as log:
        assert log.read(log.end_offset - 1, max_records=1)[0].value == b"after"


def test_min_free_bytes_is_checked_and_can_be_changed(tmp_path):
    with pytest.raises(ConfigError, match="min_free_bytes"):
        Log.open(tmp_path / "a", min_free_bytes=-1)
    with Log.open(tmp_path / "b", min_free_bytes=1 << 62) as log:  # more than any disk has
        with pytest.raises(DiskFullError, match="min_free_bytes"):
            log.append(b"x")
            log.flush()
        log.min_free_bytes = 0
        log.append(b"y")
        log.flush()
        assert log.end_offset >= 1


@pytest.mark.parametrize("flush", ["always", "interval"])
def test_the_indexes_preallocation_counts_against_min_free_bytes(small_disk, flush):
    """With the default segment_bytes a segment's first write preallocates its
    indexes (~640 KiB here): that space came out of the margin unseen, and the
    filesystem went down to ~300 KiB free under min_free_bytes=1 MiB."""
    path = os.path.join(small_disk.path, "log")
    with Log.open(path, flush=flush, min_free_bytes=1 << 20) as log:
        with pytest.raises(DiskFullError, match="min_free_bytes"):
            for _ in range(2000):
                log.append(b"v" * 4000)
        log.flush()  # what was accepted is written (indexes included)
        st = os.statvfs(small_disk.path)
        assert st.f_bavail * st.f_frsize >= (1 << 20) - (64 << 10)  # (tmpfs counts pages in per-CPU batches)
