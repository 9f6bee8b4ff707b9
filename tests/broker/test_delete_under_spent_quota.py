"""Deleting a topic or a queue on btrfs under a spent quota (a real EDQUOT,
tests/conftest.py ``quota_disk``): the delete renames the directory aside
first (crash safety), and that rename's metadata reservation is refused.
It raised a raw ``OSError`` (the server answered with a dropped connection);
now the quota headroom is used for it (the delete frees the space), and
where none is left it raises ``DiskFullError`` naming the directory with
nothing deleted: the topic (or queue) is still there and readable."""

from __future__ import annotations

import os

from disk_fill import fill_topic

import vqs
from vqs import DiskFullError


def test_delete_topic_under_a_spent_quota(quota_disk):
    path = os.path.join(quota_disk.path, "b")
    with vqs.Broker(path, flush="always") as b:
        b.create_topic("t")
        b.create_queue("q").send(b"x")
        n = fill_topic(b.producer())
        quota_disk.fill_rest()  # whatever the quota still had
        outcomes = []
        for name, delete in (("t", b.delete_topic), ("q", b.delete_queue)):
            try:
                delete(name)
                outcomes.append("deleted")
            except DiskFullError as e:
                assert e.path and name in e.path
                outcomes.append("refused")
        if outcomes[0] == "refused":  # nothing deleted: the topic is whole
            assert b.topic("t").end_offsets() == [n] or b.topic("t").end_offsets() == [n + 1]
            assert b.topic("t").read(0, 0)[0].value[:8] == b"00000000"
        else:
            assert "t" not in b.topics()
        if outcomes[1] == "refused":
            assert b.queue("q").receive()[0].body == b"x"
        assert "deleted" in outcomes  # the headroom lets the first delete through
    quota_disk.free()
