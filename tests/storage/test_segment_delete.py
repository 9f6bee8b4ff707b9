"""Deleting a segment (retention, ``delete_before``) lets go of its descriptors at once
(vqs/storage/segment.py ``Segment.delete``): not when the segment object is collected,
and never under a read in flight."""

from __future__ import annotations

import gc
import os

import pytest

from vqs.errors import OffsetOutOfRange
from vqs.storage.log import Log


def fds_under(path: str) -> int:
    """This process's descriptors on files in ``path`` (deleted ones too: "... (deleted)")."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith(path + os.sep):
                n += 1
        except OSError:
            pass  # closed meanwhile (the listing's own descriptor)
    return n


@pytest.fixture
def no_gc():
    gc.disable()  # what holds a segment in a cycle stays held: only deterministic closes count
    try:
        yield
    finally:
        gc.enable()


def _log(path: str) -> Log:
    lg = Log.open(path, segment_bytes=4096, flush="always")
    for _ in range(120):
        lg.append(b"x" * 200)
    assert len(lg._segs.all) > 6
    for s in lg._segs.all:
        s.handle()  # every log file open, as after reads
    return lg


def test_retention_closes_deleted_segments_files_though_something_still_holds_them(tmp_path, no_gc):
    path = str(tmp_path / "log")
    lg = _log(path)
    held = list(lg._segs.all)
    cycle = [held]
    cycle.append(cycle)  # the segments held as a traceback or a pending job would hold them
    before = fds_under(path)
    lg.retention_bytes = 4096
    deleted = lg.apply_retention()
    assert deleted >= 5
    assert fds_under(path) <= before - deleted  # each deleted segment's log file is closed now
    assert all(s._fh is None for s in held[:deleted])
    with pytest.raises(OffsetOutOfRange):
        lg.read(0)
    assert lg.read(lg.start_offset, max_records=1)
    lg.close()
    assert fds_under(path) == 0


def test_a_read_in_flight_keeps_the_descriptor_until_it_lets_go(tmp_path, no_gc):
    path = str(tmp_path / "log")
    lg = _log(path)
    first = lg._segs.all[0]
    h = first.handle()  # a reader inside its pread
    lg.delete_before(lg._segs.all[1].base_offset)
    assert os.pread(h.fd, 4, 0)  # still the deleted file: its number was not reused
    assert os.readlink(f"/proc/self/fd/{h.fd}").endswith("(deleted)")
    fd = h.fd
    del h
    assert not os.path.exists(f"/proc/self/fd/{fd}") or "(deleted)" not in os.readlink(f"/proc/self/fd/{fd}")
    with pytest.raises(FileNotFoundError):
        first.pread(0, 4)  # a reader arriving later finds it deleted; never reopened
    lg.close()


def test_a_segment_deleted_before_its_background_fsync_is_not_a_failure(tmp_path):
    path = str(tmp_path / "log")
    lg = Log.open(path, segment_bytes=4096, flush="interval", flush_interval_ms=60_000)
    for _ in range(60):
        lg.append_batch([b"y" * 200] * 3)
    lg.flush()
    for _ in range(3):
        lg.append_batch([b"z" * 1500] * 2)
    lg.delete_before(lg.end_offset)  # rolled segments whose fsync is still pending, deleted
    lg.flush()  # fsyncs what is left: no LogFailedError
    lg.append(b"after")
    lg.close()
    with Log.open(path) as again:
        assert [r.value for r in again.read(again.start_offset)] == [b"after"]
