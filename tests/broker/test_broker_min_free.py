"""``Broker(min_free_bytes=...)`` on a real small filesystem: topic produces
and queue sends are refused (DiskFullError naming the setting) before the
disk is full, while receives, deletes and purges - the queue's state log is
exempt - keep working; sends resume once space is freed."""

from __future__ import annotations

import os

import pytest

import vqs
from vqs import DiskFullError


def test_sends_refused_under_min_free_bytes_while_the_queue_drains(small_disk):
    small_disk.fill(1 << 20)
    path = os.path.join(small_disk.path, "b")
    with vqs.Broker(path, min_free_bytes=768 << 10) as b:
        q = b.create_queue("q", flush="always")
        sent = []
        with pytest.raises(DiskFullError, match="min_free_bytes=786432"):
            while True:
                q.send(b"%06d" % len(sent) + b"m" * 1000)
                sent.append(b"%06d" % len(sent) + b"m" * 1000)
        with pytest.raises(DiskFullError, match="min_free_bytes"):
            b.create_topic("t")
            b.producer().send("t", b"x")
            b.topic("t").log(0).flush()
        assert not small_disk.is_full()
        got = []
        while True:
            ms = q.receive(10)
            if not ms:
                break
            got += [m.body for m in ms]
            q.delete_batch([m.receipt_handle for m in ms])
        assert got[:len(sent)] == sent
        small_disk.free()
        q.send(b"after")
        assert [m.body for m in q.receive(10)] == [b"after"]
