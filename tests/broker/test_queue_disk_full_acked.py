"""A queue under the default ``flush="interval"`` on a real full filesystem (a
3 MiB tmpfs, tests/conftest.py): sends and deletes are acknowledged while the
queue still keeps them (pending sends, pending state records), so their disk
space is reserved first (``Log.hold``). Every acknowledged send survives the
disk filling up, a close and a reopen (space freed or not), and every
acknowledged delete stays deleted."""

from __future__ import annotations

import os

import pytest

import vqs
from vqs import DiskFullError


@pytest.mark.parametrize("free_first", [False, True], ids=["still-full", "freed"])
def test_acknowledged_sends_and_deletes_survive_a_full_disk(small_disk, free_first):
    data = os.path.join(small_disk.path, "b")
    small_disk.fill(1 << 20)
    sent = []
    with vqs.Broker(data) as b:
        q = b.create_queue("q")
        with pytest.raises(DiskFullError):
            while len(sent) < 10_000:
                body = b"%08d" % len(sent) + b"m" * 1500
                q.send(body)
                sent.append(body)
        deleted = set()
        for m in q.receive(max_messages=10) + q.receive(max_messages=10):
            q.delete(m.receipt_handle)  # on the full disk: the state log's reserve
            deleted.add(m.body)
        assert len(deleted) == 20
        if free_first:
            small_disk.free()
            q.send(b"after")
            sent.append(b"after")
    if not free_first:
        small_disk.free()
    with vqs.Broker(data) as b:
        q = b.queue("q")
        got = []
        while True:
            ms = q.receive(max_messages=10, visibility_timeout=600)
            if not ms:
                break
            got += [m.body for m in ms]
    assert set(sent) - deleted <= set(got), f"{len(set(sent) - deleted - set(got))} acknowledged sends lost"
    assert not deleted & set(got), "an acknowledged delete came back"
