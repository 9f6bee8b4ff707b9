"""``Log.delete_before(start)`` tries again a consumed roll that found no room
(vqs/storage/log_space.py ``consumed_left``), on a real spent btrfs quota
(tests/conftest.py ``quota_disk``).

Found by the issue-13 judge (D7, SIGKILL variant: a child process drains the
queue on a spent quota and is killed; the broker reopens on the still-spent
quota; sends stayed refused, 2 of 6 runs on main): the drained queue's
delete_before had moved the log's start up to its end (and into the
checkpoint) while the roll of the consumed segment was refused, so every
later reclaim (the same offset) returned at once, and the segment stayed for
good; traced with a wrapper of Queue.reclaim (target == start, never called
again)."""

from __future__ import annotations

import glob
import os
import subprocess

import pytest

import vqs


def test_a_refused_consumed_roll_is_tried_again_at_the_same_offset(quota_disk):
    qd = os.path.join(quota_disk.path, "q")
    spacer = os.path.join(quota_disk.path, "spacer")
    q = vqs.Log.open(qd, flush="interval")
    try:
        for _ in range(600):
            q.append(b"q" * 1000)
        q.flush()
        end = q.end_offset
        with open(spacer, "wb") as f:  # room given back later
            f.write(b"\0" * (512 << 10))
        q.drop_active_indexes()
        for p in glob.glob(os.path.join(qd, "quota-headroom*")):
            os.unlink(p)  # (none stands: as after a restart on a spent quota)
        quota_disk.fill_rest()
        assert quota_disk.is_full()
        first = os.path.join(qd, "00000000000000000000.log")
        assert q.delete_before(end) == 0  # no room for the roll: the segment stays, the start moves up
        assert os.path.exists(first) and q.start_offset == end
        with pytest.raises(vqs.DiskFullError):
            q.append(b"refused")
            q.flush()
        assert q.consumed_left
        os.unlink(spacer)  # room again (another program let go)
        subprocess.run(["btrfs", "filesystem", "sync", quota_disk.path], check=True)
        assert q.delete_before(end) >= 1  # before: 0 at once (offset == start)
        assert not os.path.exists(first)
        assert not q.consumed_left
    finally:
        try:
            q.close()
        except vqs.DiskFullError:
            pass
