"""The log cleaner on a full disk (an injected space fault, tests/fs_fault.py): its output is a control
write, so it runs where appends are refused and gives space back; without room even for that
it waits, and a write that meets ENOSPC abandons the pass with the log untouched."""

from __future__ import annotations

import os

import fs_fault
import pytest

from vqs.cleaner import CompactionSettings, clean_log
from vqs.disk import space_for
from vqs.errors import DiskFullError
from vqs.storage import Log

MIB = 1 << 20
SETTINGS = CompactionSettings(delete_retention_ms=10**12)


def _fill(log, mib: int) -> dict:
    """``mib`` MiB of 1 KiB values over 16 keys (most of them superseded); the latest per key."""
    latest = {}
    n = 0
    while log.size_bytes < mib * MIB:
        keys = [b"key-%d" % ((n + i) % 16) for i in range(64)]
        values = [b"%d-" % (n + i) + b"v" * 1000 for i in range(64)]
        log.append_batch(values, keys=keys)
        latest.update(zip(keys, values))
        n += 64
    log.flush()
    return latest


def _table(log) -> dict:
    return {r.key: r.value for r in log.read(0, max_records=1_000_000, max_bytes=1 << 40)}


def _scratch(path) -> list[str]:
    return [n for n in os.listdir(path) if n.endswith((".cleaned", ".swap"))]


@pytest.fixture
def fault_dir(tmp_path):
    d = tmp_path / "fs"
    d.mkdir()
    yield d
    fs_fault.uninstall()


def _install(d, free: int):
    fault = fs_fault.install(fs_fault.Fault.space(str(d), free=free))
    space_for(str(d)).freed()  # the governor reads free space again at its next take
    return fault


def test_the_cleaner_frees_space_where_appends_are_refused(fault_dir):
    log = Log.open(fault_dir / "log", flush="always", segment_bytes=256 << 10, min_free_bytes=4 * MIB)
    try:
        latest = _fill(log, 4)
        before = log.size_bytes
        fault = _install(fault_dir, 3 * MIB)  # under the 4 MiB floor: appends are refused
        taken = 0
        with pytest.raises(DiskFullError, match="min_free_bytes"):
            for _ in range(64):  # what the log's grant still holds may go first
                log.append_batch([b"x" * 1000] * 64, keys=[b"k"] * 64)
                taken += 1
        if taken:  # (none, when the governor read the free space again before the first)
            latest[b"k"] = b"x" * 1000
        stats = clean_log(log, SETTINGS, force=True)
        assert stats.segments_in > 0 and stats.bytes_out < stats.bytes_in
        assert log.size_bytes < before / 2
        assert fault.free > 4 * MIB and fault.failures == 0  # the space came back
        space_for(str(fault_dir)).freed()
        assert _table(log) == latest
        log.append(b"after", key=b"key-1")  # appends resume
    finally:
        log.close()


def test_without_room_for_its_output_the_cleaner_waits(fault_dir):
    log = Log.open(fault_dir / "log", flush="always", segment_bytes=256 << 10, min_free_bytes=4 * MIB)
    try:
        latest = _fill(log, 2)
        files = sorted(os.listdir(log.path))
        _install(fault_dir, MIB + (16 << 10))  # a control write may go down to 1 MiB: no room for a segment
        assert clean_log(log, SETTINGS, force=True).segments_in == 0
        assert sorted(os.listdir(log.path)) == files and _table(log) == latest
    finally:
        log.close()


def test_enospc_while_writing_abandons_the_pass(fault_dir):
    log = Log.open(fault_dir / "log", flush="always", segment_bytes=256 << 10, min_free_bytes=0)
    try:
        keys = [b"kept-%d" % i for i in range(300)]  # the first segment keeps every record
        log.append_batch([b"w" * 1000] * 300, keys=keys)
        latest = dict.fromkeys(keys, b"w" * 1000)
        latest.update(_fill(log, 2))
        files = sorted(os.listdir(log.path))
        fault = _install(fault_dir, 1000)  # the filesystem says no at the first cleaned batch
        assert clean_log(log, SETTINGS, force=True).segments_in == 0
        assert fault.failures >= 1
        # (cleaner.checkpoint is written before the first group: the log may hold cleaned segments from here)
        assert sorted(set(os.listdir(log.path)) - {"cleaner.checkpoint"}) == files and not _scratch(log.path)
        assert _table(log) == latest
        fault.give(64 * MIB)  # space back: the next pass cleans
        assert clean_log(log, SETTINGS, force=True).segments_in > 0
        assert _table(log) == latest and not _scratch(log.path)
    finally:
        log.close()


def test_a_readonly_reader_follows_the_cleaner(tmp_path):
    """A readonly Log (another process's view: Spark's path mode, `vqs inspect`) opened before
    a pass reads the cleaned segments after its refresh, not the sizes and files it saw."""
    owner = Log.open(tmp_path / "log", flush="always", segment_bytes=64 << 10)
    try:
        latest = _fill(owner, 1)
        reader = Log.open(tmp_path / "log", readonly=True)
        try:
            assert _table(reader) == latest
            assert clean_log(owner, SETTINGS, force=True).records_removed > 0
            owner.append(b"new", key=b"key-0")
            owner.flush()
            latest[b"key-0"] = b"new"
            reader.refresh()
            assert _table(reader) == latest
            assert len(reader.read(0, max_records=1_000_000, max_bytes=1 << 40)) == len(
                owner.read(0, max_records=1_000_000, max_bytes=1 << 40))
        finally:
            reader.close()
    finally:
        owner.close()
