"""A ``flush="always"`` queue that shares a full disk with a topic its
producer filled (one Broker data dir; a 3 MiB tmpfs, and a btrfs subvolume
under a spent 3 MiB quota: tests/conftest.py) still receives and deletes
every message, while the producer's retries are refused; once space is
freed both take writes again. Under the quota a receive's lease-state record
goes into blocks the state log reserved, whose metadata the spent quota
refuses: the quota headroom's ballast is for it (vqs.storage.quota_headroom).
The topic's appends (``flush="always"``: they allocate as they write) neither
spend that ballast nor take the space it gave back: they wait for it to
stand again (ballast first). Before, the topic's last append that fitted in
its file's last block spent the ballast and the topic took its space, and
the queue's first receive failed with DiskFullError."""

from __future__ import annotations

import os

import pytest
from disk_fill import drain_queue, fill_topic

import vqs
from vqs import DiskFullError


def test_a_queue_drains_beside_a_topic_that_filled_the_disk(full_disk):
    path = os.path.join(full_disk.path, "b")
    with vqs.Broker(path, flush="always") as b:
        b.create_topic("t")
        q = b.create_queue("q")
        bodies = [b"q%05d" % k + b"x" * 200 for k in range(300)]
        for body in bodies:
            q.send(body)
        full_disk.fill(512 << 10)  # (freed at the end: the space given back)
        p = b.producer()
        n = fill_topic(p)
        assert n > 500, n
        for _ in range(50):  # the producer retries: each one refused, none taking the headroom
            with pytest.raises(DiskFullError):
                p.send("t", b"again")
        assert sorted(drain_queue(q)) == bodies  # single deletes: a state record each
        assert q.counts() == {"visible": 0, "in_flight": 0, "delayed": 0}
        full_disk.free()
        p.send("t", b"after")
        q.send(b"after")
        (m,) = q.receive(10)
        assert m.body == b"after"
        q.delete(m.receipt_handle)
        t = b.topic("t")
        end = t.end_offsets()[0]
        assert [r.value for r in t.read(0, end - 1)] == [b"after"]
        assert t.read(0, 0)[0].value[:8] == b"00000000"
    with vqs.Broker(path) as b:  # and reopens: every acknowledged produce is there
        assert b.topic("t").end_offsets()[0] == end
        assert b.queue("q").receive(10) == []
