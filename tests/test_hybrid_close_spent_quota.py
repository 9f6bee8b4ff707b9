"""close() of a non-durable HybridQueue under a spent btrfs quota (``quota_disk``)
says how many items of the memory tier it could not keep.

Found by the issue-13 judge: on a 3 MiB tmpfs close() raised "50 item(s) of
the memory tier ... could not be written", but under a spent btrfs quota it
raised the log's own "closing ...: the disk is full" (the put that found the
quota spent left bytes the quota would not let be cut), which escaped before
the count was reported: the 50 items were gone after reopening and nothing
said so. Root only (a loop mount); skipped with the reason elsewhere."""

from __future__ import annotations

import os
import queue

import pytest

from vqs import DiskFullError
from vqs.hybrid import HybridQueue

ITEM = b"i" * 3000


def test_close_under_a_spent_quota_says_what_was_lost(quota_disk):
    path = os.path.join(quota_disk.path, "hq")
    q = HybridQueue(path, memory_items=50, memory_bytes=None)
    n = 0
    with pytest.raises(queue.Full):
        while n < 100_000:
            q.put_nowait((n, ITEM))
            n += 1
    with pytest.raises(DiskFullError, match=r"close\(\): 50 item\(s\) of the memory tier"):
        q.close()
    q = HybridQueue(path, memory_items=50, memory_bytes=None)  # released, and opens on the spent quota
    try:
        got = []
        while True:
            try:
                got.append(q.get_nowait()[0])
            except queue.Empty:
                break
        assert got == list(range(n - 50))  # all but the 50 it said were lost, in order
    finally:
        try:
            q.close()
        except DiskFullError:
            pass
