"""Consumer group ids are Kafka's (any non-empty string): one that is not a VQS name is stored
under an encoded directory name, listed back as itself, and never collides with another."""

from __future__ import annotations

import os

import pytest

from vqs.broker import Broker
from vqs.broker.names import group_dir_name, group_from_dir, validate_group
from vqs.errors import InvalidName

IDS = ["roundrobin,range", ".", "..", "a/b", "../up", "x%2Cy", "x,y", "über~group", "plain-name.1", "__internal",
       "with space", "t" * 230]


def test_every_id_maps_to_one_safe_directory_name_and_back():
    names = [group_dir_name(g) for g in IDS]
    assert len(set(names)) == len(IDS)  # one-to-one ("x%2Cy" and "x,y" included)
    for g, n in zip(IDS, names):
        assert group_from_dir(n) == g
        assert n not in (".", "..") and "/" not in n and "~" not in n and len(n.encode()) <= 255
    assert group_dir_name("plain-name.1") == "plain-name.1"  # a VQS name is stored as before
    assert group_dir_name("roundrobin,range") == "roundrobin%2Crange"


def test_empty_and_overlong_ids_are_refused():
    for bad in ["", None, "é" * 200, "x" * 300]:
        with pytest.raises(InvalidName):
            validate_group(bad)


def test_offsets_of_such_groups_are_kept_listed_and_reopened(data_dir):
    ids = ["roundrobin,range", "..", "a/b", "x%2Cy", "x,y"]
    with Broker(data_dir) as b:
        b.create_topic("t", partitions=1)
        for i, g in enumerate(ids):
            b.commit_offsets(g, {("t", 0): i})
        assert b.groups() == sorted(ids)
    assert sorted(os.listdir(os.path.join(data_dir, "groups"))) == sorted(map(group_dir_name, ids))
    with Broker(data_dir) as b:
        assert b.groups() == sorted(ids)
        assert [b.group_offsets(g) for g in ids] == [{("t", 0): i} for i in range(len(ids))]
        assert b.delete_group("a/b") and "a/b" not in b.groups()
