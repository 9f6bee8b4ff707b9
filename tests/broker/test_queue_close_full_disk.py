"""A queue closed on a real full filesystem (a 3 MiB tmpfs, tests/conftest.py)
whose lease-state log has spent its reserved space: close() raises the
DiskFullError but still releases every file and lock, so the same process
opens the broker again at once (no LogLockedError naming itself) and, once
space is freed, the queue is served with nothing lost."""

from __future__ import annotations

import os

import pytest

import vqs
from vqs import DiskFullError


def test_close_releases_the_state_log_when_its_records_find_no_space(small_disk):
    path = os.path.join(small_disk.path, "b")
    b = vqs.Broker(path)
    q = b.create_queue("q")
    for i in range(100):
        q.send(b"m%03d" % i)
    b.flush()
    small_disk.fill(1 << 20)
    small_disk.fill_rest()
    with pytest.raises(DiskFullError):
        for _ in range(100_000):  # lease churn until the state log's reserve is spent
            for m in q.receive(10, visibility_timeout=30):
                q.change_visibility(m.receipt_handle, 0)
    with pytest.raises(DiskFullError):
        b.close()
    small_disk.free()
    with vqs.Broker(path) as b:  # the same process: every lock was released
        q = b.queue("q")
        c = q.counts()  # the last leases may still be in flight: nothing lost either way
        assert c["visible"] + c["in_flight"] == 100 and c["visible"] > 0, c
        ms = q.receive(10)
        q.delete(ms[0].receipt_handle)
        q.send(b"after")
