"""The quota headroom (vqs/storage/quota_headroom.py) on a real btrfs quota
(tests/conftest.py ``quota_disk``: a subvolume under a 3 MiB qgroup limit):
records acknowledged into a log's reserved blocks are written after the
limit is spent by another file, because the write that meets EDQUOT (its
metadata reservation) deletes the ballast and retries; once the limit is
raised the ballast is made again. On tmpfs no ballast is made."""

from __future__ import annotations

import os
import subprocess

import pytest

import vqs
from vqs.storage import durable_file
from vqs.storage.quota_headroom import BALLAST_NAME


def _fill_log_then_quota(disk, path: str) -> vqs.Log:
    log = vqs.Log.open(path, flush="interval", flush_interval_ms=600_000)
    try:
        for i in range(10):  # the first reservation (64 KiB ahead) makes the ballast first
            log.append(b"before %d" % i)
        disk.fill(1 << 20)
        disk.fill_rest()
        assert disk.is_full()
        for i in range(200):  # acknowledged: buffered, covered by blocks reserved before
            log.append(b"spent %03d " % i + b"x" * 100)
    except BaseException:
        log.close()
        raise
    return log


def test_acknowledged_records_are_written_under_a_spent_quota(quota_disk):
    path = os.path.join(quota_disk.path, "log")
    ballast = os.path.join(path, BALLAST_NAME)
    log = _fill_log_then_quota(quota_disk, path)
    try:
        assert os.path.exists(ballast)
        log.flush()  # without the headroom: DiskFullError (EDQUOT), the records wait in memory
        assert not os.path.exists(ballast)  # deleted for the writes' metadata reservation
    finally:
        log.close()
    with vqs.Log.open(path) as log:  # (the quota still spent)
        values = [r.value for r in log.read(0, max_records=1000)]
    assert values == [b"before %d" % i for i in range(10)] + [b"spent %03d " % i + b"x" * 100 for i in range(200)]
    quota_disk.free()  # the limit raised: the next new allocation makes the ballast first
    with vqs.Log.open(path, flush="interval") as log:
        log.append_batch([b"after"])
        log.append(b"y" * 1000)
        log.flush()
        assert os.path.exists(ballast)


def test_without_the_headroom_the_write_is_refused(quota_disk, monkeypatch):
    """The measurement the headroom rests on: the same writes into reserved
    blocks meet EDQUOT when no ballast may be deleted."""
    monkeypatch.setattr(durable_file, "release_for", lambda fd, nbytes: False)
    path = os.path.join(quota_disk.path, "log")
    log = _fill_log_then_quota(quota_disk, path)
    try:
        with pytest.raises(vqs.DiskFullError):
            log.flush()
    finally:
        with pytest.raises(vqs.DiskFullError):
            log.close()  # (the buffered records still find no room: raised after releasing)


def test_no_ballast_off_btrfs(small_disk):
    path = os.path.join(small_disk.path, "log")
    with vqs.Log.open(path, flush="interval") as log:
        log.append_batch([b"x" * 1000] * 100)
    assert not os.path.exists(os.path.join(path, BALLAST_NAME))


def _fsynced_appends_under_a_spent_quota(disk, path: str) -> tuple[int, bool]:
    """Append 450 300-byte records, each flushed (fsynced), into a 512 KiB
    reservation after the quota is spent: how many were written, and whether
    close() then wrote everything."""
    log = vqs.Log.open(path, flush="interval", flush_interval_ms=600_000, reserve_bytes=512 << 10)
    n = 0
    try:
        log.append(b"first")
        log.flush()
        disk.fill(1 << 20)
        disk.fill_rest()
        for _ in range(450):
            log.append(b"r" * 300)
            log.flush()
            n += 1
    except vqs.DiskFullError:
        pass
    try:
        log.close()
    except vqs.DiskFullError:
        return n, False  # (the refused flush's record still waits: it raises again)
    return n, True


def test_segments_are_nocow_so_fsynced_appends_take_no_quota(quota_disk, monkeypatch):
    """An append that ends mid-block makes the next one rewrite that block:
    copy-on-write takes a new block each time (the headroom is gone after
    some 190 such appends, measured); a NOCOW segment is written in place."""
    path = os.path.join(quota_disk.path, "log")
    assert _fsynced_appends_under_a_spent_quota(quota_disk, path) == (450, True)
    flags = subprocess.run(["lsattr", "-l", os.path.join(path, "00000000000000000000.log")],
                           capture_output=True, text=True).stdout
    assert "No_COW" in flags, flags
    assert not os.path.exists(os.path.join(path, BALLAST_NAME))  # (the writes' metadata took it)


def test_copy_on_write_segments_use_the_headroom_up(quota_disk, monkeypatch):
    """The control: the same appends into a segment made without NOCOW (with
    the 64 KiB headroom this was measured with: 256 KiB lasts 4 times longer)."""
    from vqs.storage import quota_headroom, recovery
    monkeypatch.setattr(recovery, "create_nocow", lambda p: None)
    monkeypatch.setattr(quota_headroom, "BALLAST_BYTES", 64 << 10)
    n, closed = _fsynced_appends_under_a_spent_quota(quota_disk, os.path.join(quota_disk.path, "log"))
    assert n < 400 and not closed, n
