"""A queue on a real full filesystem (a 3 MiB tmpfs, tests/conftest.py) with
the default ``segment_bytes`` (32 MiB: larger than the filesystem, as on any
small disk): once its sends find no space, draining it (receive and delete,
one by one or in batches) gives the space back and sends resume, with nothing
deleted by hand and no restart; with ``min_free_bytes`` too. A delete never
fails because the sends still pending find no space."""

from __future__ import annotations

import os

import pytest
from disk_fill import drain_queue

import vqs
from vqs import DiskFullError


def _fill(q) -> int:
    n = 0
    with pytest.raises(DiskFullError):
        while n < 10_000:
            q.send(b"%08d" % n + b"m" * 2000)
            n += 1
    return n



@pytest.mark.parametrize("flush,batch,min_free", [
    ("always", True, 0), ("interval", False, 0), ("always", False, 1 << 20)])
def test_drained_queue_gives_space_back_and_sends_resume(small_disk, flush, batch, min_free):
    with vqs.Broker(os.path.join(small_disk.path, "b"), flush=flush, min_free_bytes=min_free) as b:
        q = b.create_queue("q")
        n = _fill(q)
        assert n > 300
        got = drain_queue(q, batch)
        # every acknowledged send (the one that raised may have been written too)
        assert {b"%08d" % i for i in range(n)} <= {g[:8] for g in got}
        for i in range(100):
            q.send(b"again %d" % i + b"x" * 2000)
        assert len(drain_queue(q, batch)) == 100


def test_a_small_send_taken_after_the_refusal_does_not_keep_the_space(small_disk):
    """Sends of varied sizes: after a large one is refused a small one still
    fits the space the log kept allocated, and is taken. Draining the queue
    must still give the space back (the filesystem is full whether or not the
    last write found room), and keep giving it back when later sends are
    refused on the drained queue: before, the consumed segment stayed and
    every large send was refused until a restart."""
    with vqs.Broker(os.path.join(small_disk.path, "b"), flush="always") as b:
        q = b.create_queue("q")
        n = _fill(q)
        q.send(b"small")  # fits what the log kept allocated
        got = drain_queue(q, batch=True)
        assert b"small" in got and len(got) >= n + 1  # (the refused one may be written too)
        for i in range(100):
            q.send(b"again %d" % i + b"x" * 2000)
        assert len(drain_queue(q, batch=True)) == 100



@pytest.mark.parametrize("flush", ["interval", "always"])
def test_a_queue_reopened_on_the_full_disk_gives_the_space_back_once_drained(small_disk, flush):
    """Sends fill the disk, the broker is closed and opened again on the full
    disk, and the queue is drained there: the reopened queue has no refused
    send to go by, so before, the consumed segment stayed (the filesystem
    still ~70 KiB short of the next send's reservation) and sends were refused
    again after a few dozen, until the next drain."""
    path = os.path.join(small_disk.path, "b")
    with vqs.Broker(path, flush=flush) as b:
        n = _fill(b.create_queue("q"))
    with vqs.Broker(path, flush=flush) as b:
        q = b.queue("q")
        got = drain_queue(q, batch=True)
        assert {b"%08d" % i for i in range(n)} <= {g[:8] for g in got}
        for i in range(n // 2):  # half the disk's worth: only the consumed segment's space fits it
            q.send(b"again %d" % i + b"x" * 2000)
        assert len(drain_queue(q, batch=True)) == n // 2
