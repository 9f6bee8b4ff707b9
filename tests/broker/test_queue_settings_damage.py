"""A queue whose settings file a failing disk damaged (found by the failing-disk
judge of issue 13: after a device error and fsck, ``queue.json`` held bytes
that were not JSON, and the server answered 500 with a traceback): opening it
raises ``CorruptRecordError`` naming the file, and every other queue opens."""

from __future__ import annotations

import os

import pytest

import vqs
from vqs.errors import CorruptRecordError


@pytest.mark.parametrize("damage", [b"\0" * 300, b'{"version": 1, "na', b"\xff\xfe not utf-8"])
def test_a_damaged_queue_json_is_named(tmp_path, damage):
    path = str(tmp_path / "data")
    with vqs.Broker(path) as b:
        for name in ("bad", "good"):
            b.create_queue(name).send(b"m")
    bad_json = os.path.join(path, "queues", "bad", "queue.json")
    with open(bad_json, "wb") as f:
        f.write(damage)
    with vqs.Broker(path) as b:
        with pytest.raises(CorruptRecordError) as ei:
            b.queue("bad")
        assert ei.value.path == bad_json and bad_json in str(ei.value)
        assert [m.body for m in b.queue("good").receive(10)] == [b"m"]
