"""HybridQueue on a real full filesystem (a 3 MiB tmpfs, tests/conftest.py;
the first test also under a 3 MiB btrfs quota, EDQUOT):
when the disk tier finds no space, ``put(block=False)`` raises ``queue.Full``
(its cause the DiskFullError naming the file) and ``put(block=True,
timeout=...)`` waits, going on once space is freed or raising ``queue.Full`` at
its timeout; the memory tier keeps serving gets; a spill that fails loses and
reorders nothing; a full queue reopens on the full disk and drains."""

from __future__ import annotations

import gc
import os
import queue
import threading

import pytest

from vqs import DiskFullError
from vqs.hybrid import HybridQueue

ITEM = b"i" * 1000


def _fill_with_puts(q, start=0, errors: list | None = None) -> int:
    """put_nowait until the disk tier is full; return the next item number
    (``errors`` gets the OSError the write met)."""
    i = start
    with pytest.raises(queue.Full) as ei:
        while True:
            q.put_nowait((i, ITEM))
            i += 1
    assert isinstance(ei.value.__cause__, DiskFullError)
    assert ei.value.__cause__.path.startswith(q.path)
    if errors is not None:
        errors.append(ei.value.__cause__.__cause__)
    return i


def _drain(q) -> list:
    out = []
    while True:
        got = q.get_batch(1000, block=False)
        if not got:
            return out
        out.extend(got)


@pytest.mark.parametrize("durable", [False, True])
def test_full_disk_tier_refuses_waits_serves_and_resumes(full_disk, durable):
    full_disk.fill(1 << 20)
    path = os.path.join(full_disk.path, "hq")
    q = HybridQueue(path, memory_items=50, durable=durable, segment_bytes=256 << 10)
    try:
        errors: list = []
        n = _fill_with_puts(q, errors=errors)
        assert n > 500 and q.qsize() == n
        assert q.metrics.disk_full_errors >= 1 and q.metrics.full_refusals >= 1
        assert errors[0].errno == full_disk.errno  # ENOSPC, or EDQUOT under a quota

        # a put with a timeout waits, then raises Full
        with pytest.raises(queue.Full):
            q.put((n, ITEM), timeout=0.2)

        # the memory tier (non-durable: 50 items in memory) and the disk tier serve gets
        got = [q.get_nowait() for _ in range(3)]
        assert [g[0] for g in got] == [0, 1, 2]

        # a blocked put goes on, without a restart, once space is freed
        # (btrfs: a write into reserved blocks deleted the quota headroom ballast,
        # vqs/storage/quota_headroom.py, so the quota has room again: spend it, as another writer would)
        full_disk.fill_rest()
        done = threading.Event()

        def putter():
            q.put((n, ITEM), timeout=30)
            done.set()

        t = threading.Thread(target=putter)
        t.start()
        assert not done.wait(0.3)
        full_disk.free()
        assert done.wait(10)
        t.join()
        rest = _drain(q)
        assert [r[0] for r in rest] == list(range(3, n + 1))
    finally:
        q.close()
        # A deleted segment's file stays open while a handle to it is referenced
        # (vqs/storage/segment.py, Segment.delete): the failed writes' tracebacks
        # hold theirs until the next GC: collect now, or the tmpfs may still be
        # busy at unmount.
        gc.collect()


def test_durable_gets_drain_a_full_queue_under_a_spent_quota(quota_disk):
    """durable=True records the consumed position before a get returns. On
    btrfs (copy-on-write) even that overwrite needs new space, which a spent
    quota refuses: the quota headroom gives it room (vqs/storage/quota_headroom.py;
    the puts that filled the disk, flush="always", allocate as they write and
    leave it alone), and the consumed segments' deletion gives the space back,
    so the whole queue drains, in order, on the spent quota; once the limit is
    raised it takes puts again. (Before, the last put spent the headroom and
    the first get raised DiskFullError.)"""
    q = HybridQueue(os.path.join(quota_disk.path, "hq"), memory_items=50, durable=True,
                    segment_bytes=256 << 10)
    try:
        n = _fill_with_puts(q)
        assert [q.get_nowait()[0] for _ in range(n)] == list(range(n))
        assert q.qsize() == 0
        quota_disk.free()
        q.put_nowait((n, ITEM))
        assert q.get_nowait()[0] == n
    finally:
        q.close()
        gc.collect()


def test_min_free_bytes_keeps_room_for_close_and_a_full_queue_drains_on_a_full_disk(small_disk):
    """min_free_bytes refuses spills (queue.Full, its cause naming the setting)
    while the filesystem still has room for close() to write the memory tier:
    nothing is lost. The full queue then reopens on a completely full disk,
    drains in order, and takes puts again once space is freed."""
    small_disk.fill(1 << 20)
    path = os.path.join(small_disk.path, "hq")
    opts = dict(memory_items=200, segment_bytes=128 << 10, min_free_bytes=512 << 10)
    with HybridQueue(path, **opts) as q:
        n = _fill_with_puts(q)
        assert "min_free_bytes=524288" in str(q.metrics and _last_cause(q, n))
        assert q.qsize() == n and q.metrics.memory_items == 200
    small_disk.fill_rest()
    assert small_disk.is_full()
    with HybridQueue(path, **opts) as q:  # opens on the full disk
        assert q.qsize() == n
        got = _drain(q)
        assert [g[0] for g in got] == list(range(n))
        small_disk.free()
        q.put("after")
        assert q.get_nowait() == "after"


def _last_cause(q, n) -> str:
    with pytest.raises(queue.Full) as ei:
        q.put_nowait((n, ITEM))
    return str(ei.value.__cause__)


def test_close_on_a_full_disk_releases_the_queue_and_says_what_was_lost(small_disk):
    path = os.path.join(small_disk.path, "hq")
    q = HybridQueue(path, memory_items=1000)
    for i in range(100):
        q.put((i, ITEM))  # all in the memory tier
    small_disk.fill_rest()
    with pytest.raises(DiskFullError, match="100 item"):
        q.close()
    assert q.closed
    small_disk.free()
    with HybridQueue(path) as q:  # the lock was released; nothing half-written
        assert q.qsize() == 0
        q.put("x")
        assert q.get_nowait() == "x"


@pytest.mark.parametrize("durable", [False, True])
def test_full_reports_a_full_disk_tier_and_a_drained_queue_gives_its_space_back(small_disk, durable):
    """With the default segment size (far larger than this filesystem):
    ``full()`` is True while a put would block on the full disk, and a queue
    drained to empty gives its space back, so puts go on with nothing deleted
    by hand (the log rolls and deletes its small active segment)."""
    q = HybridQueue(os.path.join(small_disk.path, "hq"), memory_items=20, durable=durable)
    try:
        assert not q.full()
        n = _fill_with_puts(q)
        assert q.full()
        got = _drain(q)
        assert [g[0] for g in got] == list(range(n))
        for i in range(200):  # over 200 KB: needs the drained segment's space
            q.put_nowait((i, ITEM))
        assert not q.full()
        assert [g[0] for g in _drain(q)] == list(range(200))
    finally:
        try:
            q.close()
        except DiskFullError:
            pass
        gc.collect()


def test_a_new_queue_under_a_spent_quota_raises_disk_full(quota_disk):
    """As the docs say (only creating a new one on a full disk fails, with
    DiskFullError): under a spent btrfs quota the directory itself needs space,
    and makedirs raised a raw OSError (EDQUOT) instead."""
    quota_disk.fill_rest()
    path = os.path.join(quota_disk.path, "new-hq")
    with pytest.raises(DiskFullError) as ei:
        HybridQueue(path).close()
    assert ei.value.path.startswith(path)
