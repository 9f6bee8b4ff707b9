"""A durable HybridQueue reopened on a full disk and drained gives its space
back at the drain, so a put-only spell after it goes on.

Found by the issue-13 judge (a durable queue filled on a 3 MiB tmpfs, a
btrfs quota and an xfs, closed, the disk filled up to the last block, reopened,
every item got): the first put after the drain fitted in the few KiB left and
was written; from then on the disk tier was no longer wholly consumed, so the
put that found no room could not reclaim the drained 3 MiB segment (it holds
that one live item), and every put was refused until a consumer got it. Now
the get that empties the disk tier reclaims at once after an open or a write
that found the disk full (HybridQueue ``_drain_reclaim``, vqs/hybrid/disk_tier.py).
Root only (real small filesystems, tests/conftest.py)."""

from __future__ import annotations

import os
import queue

import pytest

from vqs import DiskFullError
from vqs.hybrid import HybridQueue

ITEM = b"i" * 3000


def _fill(q) -> int:
    n = 0
    with pytest.raises(queue.Full):
        while n < 100_000:
            q.put_nowait((n, ITEM))
            n += 1
    return n


@pytest.mark.parametrize("durable", [True, False])
def test_a_queue_reopened_on_a_full_disk_and_drained_takes_puts_again(full_disk, durable):
    path = os.path.join(full_disk.path, "hq")
    q = HybridQueue(path, memory_items=50, memory_bytes=None, durable=durable)
    n = _fill(q)
    full_disk.fill_rest()
    try:
        q.close()
    except DiskFullError:
        pass  # non-durable: the memory tier could not be written (it says how many)
    full_disk.fill_rest()
    q = HybridQueue(path, memory_items=50, memory_bytes=None, durable=durable)
    try:
        got = []
        while True:
            try:
                got.append(q.get(timeout=0.1)[0])
            except queue.Empty:
                break
        assert got == list(range(len(got))) and len(got) >= n - 50
        for i in range(300):  # ~900 KB of puts, nobody getting: the drained segment's space is back
            q.put((i, ITEM), timeout=2)
        assert [q.get_nowait()[0] for _ in range(300)] == list(range(300))
    finally:
        q.close()
