"""Group commits, the topic catalog, queue creation and purge on a real full
filesystem (a 3 MiB tmpfs, tests/conftest.py): commits go on (the offsets file
is replaced through a spare that keeps its space), a create that finds no room
raises DiskFullError and leaves nothing half-written behind for the next open,
and a purge on a full disk works and gives the space back."""

from __future__ import annotations

import os

import pytest

import vqs
from vqs import DiskFullError


def test_a_first_commit_on_a_full_disk_fails_cleanly_and_works_once_space_is_free(small_disk):
    """A group that never committed has no spare yet: DiskFullError naming the
    file, nothing stored, no half-written file; the same commit works once
    space is freed (no restart). Under a spent btrfs quota the group's new
    directory was a raw OSError."""
    small_disk = small_disk
    path = os.path.join(small_disk.path, "b")
    with vqs.Broker(path) as b:
        b.create_topic("t")
        b.producer().send("t", b"x")
        b.topic("t").log(0).flush()
        small_disk.fill(1 << 20)
        small_disk.fill_rest()
        with pytest.raises(DiskFullError) as ei:
            b.commit_offsets("new", {("t", 0): 1})
        assert os.path.join("groups", "new") in ei.value.path  # (btrfs: the directory)
        assert b.group_offsets("new") == {}
        small_disk.free()
        b.commit_offsets("new", {("t", 0): 1})
    with vqs.Broker(path) as b:
        assert b.group_offsets("new") == {("t", 0): 1}


def test_create_topic_and_queue_on_a_full_disk_leave_nothing_behind(small_disk):
    """ENOSPC and EDQUOT: under a spent btrfs quota even the new directory
    needs space, and its mkdir raised a raw OSError (not DiskFullError)."""
    small_disk = small_disk
    path = os.path.join(small_disk.path, "b")
    with vqs.Broker(path) as b:
        b.create_topic("t")
        small_disk.fill(1 << 20)
        small_disk.fill_rest()
        with pytest.raises(DiskFullError) as ei:
            b.create_topic("t2", partitions=3)
        assert ei.value.path.startswith(os.path.join(path, "topics"))
        with pytest.raises(DiskFullError):
            b.create_queue("q")
        assert b.topics() == ["t"] and b.queues() == []
        assert sorted(os.listdir(os.path.join(path, "topics"))) == ["t"]
        queues = os.path.join(path, "queues")  # (not even made under the quota)
        assert not os.path.isdir(queues) or os.listdir(queues) == []
    with vqs.Broker(path) as b:  # the next open, still on the full disk
        assert b.topics() == ["t"] and b.queues() == []
        small_disk.free()
        b.create_topic("t2", partitions=3)
        b.create_queue("q").send(b"m")
    with vqs.Broker(path) as b:
        assert b.topics() == ["t", "t2"]
        assert [m.body for m in b.queue("q").receive(10)] == [b"m"]


