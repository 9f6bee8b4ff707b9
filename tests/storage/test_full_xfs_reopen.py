"""A log reopened on a full xfs (``xfs_disk``) more than once still gives its
drained space back.

Found by the issue-13 judge (a queue SIGKILLed on a full xfs, reopened by
the next process and again by the one after, drained to empty: its message
log's 3 MiB segment stayed and every send was refused). An open that
recovers the tail rebuilds the active segment's indexes: it deleted the old
index files, and a full xfs makes no new file, so the segment was left with
none; the roll of the drained segment, which on a full xfs renames the
segment spare or an index into the new segment's file (it cannot create
one), then found neither. Now the rebuild keeps the old offset index's inode,
emptied, as the segment spare when the new index cannot be made.

Root only (a loop mount); skipped with the reason elsewhere."""

from __future__ import annotations

import os

import pytest
from disk_fill import fill_log

import vqs
from vqs import DiskFullError


def _close(log) -> None:
    try:
        log.close()
    except DiskFullError:
        pass  # (the buffered or refused record: nothing acknowledged is at stake here)


@pytest.mark.parametrize("flush", ["always", "interval"])
def test_a_log_reopened_twice_on_a_full_xfs_gives_its_drained_space_back(xfs_disk, flush):
    path = os.path.join(xfs_disk.path, "log")
    log = vqs.Log.open(path, flush=flush)
    n = fill_log(log)
    for _ in range(3):  # each close on the full xfs may leave out the clean-shutdown marker
        _close(log)
        xfs_disk.fill_rest()
        log = vqs.Log.open(path, flush=flush)
    try:
        assert log.end_offset >= n
        first = log.read(log.start_offset, max_records=1)[0]
        assert first.value == b"%08d" % 0 + b"v" * 1000
        log.delete_before(log.end_offset)
        assert log.segment_count == 1 and log.size_bytes < (64 << 10)
        for i in range(n // 2):  # the drained segment's space is back
            log.append(b"again %d" % i + b"v" * 1000)
    finally:
        _close(log)
