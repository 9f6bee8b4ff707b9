"""Group commits, the topic catalog, queue creation and purge on a real full
filesystem (a 3 MiB tmpfs, tests/conftest.py): commits go on (the offsets file
is replaced through a spare that keeps its space), a create that finds no room
raises DiskFullError and leaves nothing half-written behind for the next open,
and a purge on a full disk works and gives the space back."""

from __future__ import annotations

import json
import os

import pytest

import vqs
from vqs import DiskFullError


def test_group_commits_go_on_and_survive_on_a_full_disk(small_disk):
    path = os.path.join(small_disk.path, "b")
    with vqs.Broker(path) as b:
        b.create_topic("t", partitions=2)
        p = b.producer()
        for i in range(20):
            p.send("t", b"%d" % i, partition=i % 2)
        for i in range(2):
            b.topic("t").log(i).flush()
        b.commit_offsets("g", {("t", 0): 1, ("t", 1): 1})  # the group and its spare exist
        small_disk.fill_rest()
        assert small_disk.is_full()
        for n in range(2, 11):  # many commits on the full disk, each durable on return
            b.commit_offsets("g", {("t", 0): n, ("t", 1): n - 1})
            assert small_disk.is_full()
        c = b.consumer("t", group="g")
        assert c.committed(("t", 0)) == 10
    offsets = os.path.join(path, "groups", "g", "offsets.json")
    with open(offsets, "rb") as f:
        assert json.loads(f.read()) == {"t": {"0": 10, "1": 9}}
    with vqs.Broker(path) as b:
        assert b.group_offsets("g") == {("t", 0): 10, ("t", 1): 9}


def test_a_first_commit_on_a_full_disk_fails_cleanly_and_works_once_space_is_free(full_disk):
    """A group that never committed has no spare yet: DiskFullError naming the
    file, nothing stored, no half-written file; the same commit works once
    space is freed (no restart). Under a spent btrfs quota the group's new
    directory was a raw OSError."""
    small_disk = full_disk
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


def test_create_topic_and_queue_on_a_full_disk_leave_nothing_behind(full_disk):
    """ENOSPC and EDQUOT: under a spent btrfs quota even the new directory
    needs space, and its mkdir raised a raw OSError (not DiskFullError)."""
    small_disk = full_disk
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


def test_purge_on_a_full_disk_works_and_frees_the_space(small_disk):
    path = os.path.join(small_disk.path, "b")
    small_disk.fill(1 << 20)
    with vqs.Broker(path) as b:
        q = b.create_queue("q", flush="always", segment_bytes=128 << 10)
        n = 0
        with pytest.raises(DiskFullError):
            while True:
                q.send(b"m" * 1000)
                n += 1
        assert n > 500 and small_disk.is_full()
        q.purge()
        assert not small_disk.is_full()  # the message log's segments are gone
        assert q.receive(10) == []
        q.send(b"after")
        assert [m.body for m in q.receive(10)] == [b"after"]
    with vqs.Broker(path) as b:
        assert b.queue("q").receive(10) == []  # purged and received: nothing comes back
