"""A Broker with a queue on a real full filesystem (a 3 MiB tmpfs, and an xfs
with 3 MiB free, see tests/conftest.py): a send that finds no space raises DiskFullError; leaving
``with vqs.Broker(...)`` releases the directory lock (and every file) even
though closing met the full disk; the broker reopens in the same process on
the still-full disk, where every acknowledged message is received and deleted
(the state log's reserved space); once space is freed, sends resume without
a restart. (On xfs, where reserving blocks a file already holds is refused
on a full disk, the reopened queue's receives were refused: its state log did
not count the reserve it kept, vqs/storage/reserve.py.)"""

from __future__ import annotations

import os

import pytest

import vqs
from vqs import DiskFullError


def _drain(q) -> list[bytes]:
    """Receive and delete until the queue is empty; the bodies, in order."""
    got = []
    while True:
        ms = q.receive(10)
        if not ms:
            return got
        for m in ms:
            got.append(m.body)
            q.delete(m.receipt_handle)

def test_full_broker_closes_reopens_drains_and_resumes(enospc_disk):
    small_disk = enospc_disk
    small_disk.fill(1 << 20)
    path = os.path.join(small_disk.path, "broker")
    body = b"m" * 1000
    sent = set()
    with pytest.raises(DiskFullError) as ei, vqs.Broker(path) as b:
        q = b.create_queue("q", flush="always")
        while True:
            body_i = b"%08d" % len(sent) + body
            q.send(body_i)
            sent.add(body_i)
    # the send that raised was not acknowledged; it may still have been written
    # (by close, once the failed snapshot's temp file gave its space back)
    unacked = b"%08d" % len(sent) + body
    assert ei.value.path is not None and ei.value.path.startswith(path)
    assert len(sent) > 500
    small_disk.fill_rest()  # closing trimmed the preallocated indexes: full again
    assert small_disk.is_full()

    # the lock was released: the same process reopens, on the still-full disk
    with vqs.Broker(path) as b:
        q = b.queue("q")
        assert int(q.get_attributes()["ApproximateNumberOfMessages"]) in (len(sent), len(sent) + 1)
        # receives and deletes write lease records into space the state log
        # keeps reserved: they drain the queue on the full disk
        got = _drain(q)
        assert len(got) == len(set(got))
        assert set(got) - sent <= {unacked} and sent <= set(got)
        # (the drain's state-log compaction may give back more than the state log keeps)
        small_disk.fill_rest()
        assert small_disk.is_full()
        extra = set()  # sends on the full disk: a few may fit in the last page
        with pytest.raises(DiskFullError):
            for i in range(100):
                q.send(b"no room %d" % i)
                extra.add(b"no room %d" % i)
        maybe = extra | {b"no room %d" % len(extra)}  # the one that raised may be written later

        small_disk.free()

        small_disk.free()
        q.send(b"after")
        got = _drain(q)
        assert got[-1] == b"after" and extra <= set(got) <= maybe | {b"after"}

    with vqs.Broker(path) as b:
        assert b.queue("q").receive(10) == []


def test_closing_a_queue_on_a_full_disk_is_clean(enospc_disk):
    """Close refreshes queue.json/queue.meta; on a full disk it keeps the old
    pair (replaced atomically, as a crash would leave it) and closes cleanly:
    nothing it was asked to keep is lost, and the queue reopens with its
    messages and settings."""
    small_disk = enospc_disk
    path = os.path.join(small_disk.path, "broker")
    with vqs.Broker(path) as b:
        q = b.create_queue("q", flush="always", visibility_timeout=7)
        q.send_batch([b"a", b"b"])
        small_disk.fill_rest()
        assert small_disk.is_full()
    with vqs.Broker(path) as b:
        q = b.queue("q")
        assert q.config.visibility_timeout == 7
        assert sorted(m.body for m in q.receive(10)) == [b"a", b"b"]


def test_queue_send_and_delete_under_a_quota(quota_disk):
    """EDQUOT (a btrfs subvolume under a 3 MiB quota group, tests/conftest.py)
    is a full disk like ENOSPC: a send raises DiskFullError naming the queue's
    file, leaving ``with`` releases the broker; once the limit is raised the
    broker reopens on the still-spent quota and every acknowledged message is
    received and deleted there: the lease records go into the state log's
    reserved blocks, whose writes' metadata reservation the quota headroom
    covers (vqs/storage/quota_headroom.py; without it a receive raised
    DiskFullError after about 30 deletes); once the limit is raised sends
    resume."""
    path = os.path.join(quota_disk.path, "broker")
    body = b"m" * 8000  # few sends fill 3 MiB: each is fsynced
    sent = set()
    with pytest.raises(DiskFullError) as ei, vqs.Broker(path) as b:
        q = b.create_queue("q", flush="always")
        while True:
            q.send(b"%08d" % len(sent) + body)
            sent.add(b"%08d" % len(sent) + body)
    assert ei.value.path is not None and ei.value.path.startswith(path)
    e = ei.value
    while not isinstance(e, OSError):
        e = e.__cause__
    assert e.errno == quota_disk.errno  # a real EDQUOT
    # > 100, not > 200 as before the write buffer was backed by a reservation: the
    # queue's messages log (flush="always" buffers under the lock, core.py) keeps
    # up to 1 MiB (log_reserve.MAX_STEP) allocated past its end, which on btrfs
    # counts against the 3 MiB quota and does not spare copy-on-write its new
    # blocks; 100 sends (800 KB acknowledged) still show the quota is the limit
    assert len(sent) > 100
    quota_disk.fill_rest()
    with vqs.Broker(path) as b:  # the quota still spent
        q = b.queue("q")
        got = _drain(q)
        assert sent <= set(got) and len(got) == len(set(got))
        assert set(got) - sent <= {b"%08d" % len(sent) + body}  # the refused send may have been written
    quota_disk.free()  # raises the quota group's limit
    with vqs.Broker(path) as b:
        q = b.queue("q")
        q.send(b"after")
        (m,) = q.receive(10)
        assert m.body == b"after"
        q.delete(m.receipt_handle)
    with vqs.Broker(path) as b:
        assert b.queue("q").receive(10) == []


def test_a_new_broker_under_a_spent_quota_raises_disk_full(quota_disk):
    """A Broker on a new data directory under a spent btrfs quota: DiskFullError
    (a VQSError) naming it, not a raw OSError (EDQUOT) from makedirs."""
    quota_disk.fill_rest()
    path = os.path.join(quota_disk.path, "new-broker")
    with pytest.raises(DiskFullError) as ei:
        vqs.Broker(path).close()
    assert ei.value.path.startswith(path)
