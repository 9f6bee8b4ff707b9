"""A queue settings change refused on a real full filesystem (a 3 MiB tmpfs,
tests/conftest.py) changes nothing: the queue keeps its attributes and tags in
memory as on disk (the caller was told DiskFullError, the SQS front
ServiceUnavailable), and the same change works once space is freed."""

from __future__ import annotations

import os

import pytest

import vqs
from vqs import DiskFullError


def test_a_refused_settings_change_changes_nothing(small_disk):
    path = os.path.join(small_disk.path, "b")
    with vqs.Broker(path) as b:
        q = b.create_queue("q", visibility_timeout=30)
        small_disk.fill(1 << 20)
        small_disk.fill_rest()
        with pytest.raises(DiskFullError):
            q.set_attributes({"VisibilityTimeout": "45", "DelaySeconds": "5"})
        with pytest.raises(DiskFullError):
            q.tag({"team": "a"})
        assert q.get_attributes()["VisibilityTimeout"] == "30"
        assert q.get_attributes()["DelaySeconds"] == "0"
        assert q.tags() == {}
        small_disk.free()
        # A send on the full disk is refused up front now (the space governor counts
        # what it accepts, vqs/disk/space.py), so the old delay is checked
        # once space is back and before the change is made again: visible at once.
        q.send(b"m")
        assert [m.body for m in q.receive(10)] == [b"m"]
        q.set_attributes({"VisibilityTimeout": "45"})
        q.tag({"team": "a"})
    with vqs.Broker(path) as b:
        q = b.queue("q")
        assert q.get_attributes()["VisibilityTimeout"] == "45" and q.tags() == {"team": "a"}
