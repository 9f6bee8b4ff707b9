"""Commit metadata and leader epochs in DATA/groups/{group}/offsets.json: kept, replaced, bounded;
a file of the earlier format (bare offsets) reads as before, and one without either is still
written so."""

from __future__ import annotations

import json
import os

import pytest

from vqs.broker import Broker
from vqs.broker.group_offsets import MAX_METADATA
from vqs.errors import ConfigError, CorruptRecordError


def _file(data_dir, group):
    with open(os.path.join(data_dir, "groups", group, "offsets.json")) as f:
        return json.load(f)


def test_metadata_kept_replaced_and_deleted(data_dir):
    with Broker(data_dir) as b:
        b.create_topic("t", partitions=3)
        b.commit_offsets("g", {("t", 0): 0, ("t", 1): 0, ("t", 2): 0}, {("t", 1): "m1"}, {("t", 2): 5})
        assert _file(data_dir, "g") == {"t": {"0": 0, "1": {"offset": 0, "metadata": "m1"},
                                              "2": {"offset": 0, "leader_epoch": 5}}}
        assert b.group_commits("g") == {("t", 0): (0, "", -1), ("t", 1): (0, "m1", -1), ("t", 2): (0, "", 5)}
        b.commit_offsets("g", {("t", 1): 0, ("t", 2): 0})  # a commit without them clears them
        assert b.group_offsets_metadata("g") == {} and _file(data_dir, "g") == {"t": {"0": 0, "1": 0, "2": 0}}
        b.commit_offsets("g", {("t", 2): 0}, {("t", 2): "é" * 10})
        with pytest.raises(ConfigError):
            b.commit_offsets("g", {("t", 0): 0}, {("t", 0): "x" * (MAX_METADATA + 1)})
        with pytest.raises(ConfigError):
            b.commit_offsets("g", {("t", 0): 0}, None, {("t", 0): -2})
        assert b.delete_group_offsets("g", [("t", 0), ("t", 1), ("nope", 0)]) == 2
    with Broker(data_dir) as b:
        assert b.group_offsets("g") == {("t", 2): 0}
        assert b.group_offsets_metadata("g") == {("t", 2): "é" * 10}


def test_earlier_format_reads_and_bad_metadata_is_corrupt(data_dir):
    with Broker(data_dir) as b:
        b.create_topic("t")
    for group, content in (("old", {"t": {"0": 0}}), ("bad", {"t": {"0": {"offset": 0, "metadata": 7}}}),
                           ("bad2", {"t": {"0": {"offset": 0, "leader_epoch": "x"}}})):
        os.makedirs(os.path.join(data_dir, "groups", group))
        with open(os.path.join(data_dir, "groups", group, "offsets.json"), "w") as f:
            json.dump(content, f)
    with Broker(data_dir) as b:
        assert b.group_offsets("old") == {("t", 0): 0} and b.group_offsets_metadata("old") == {}
        for bad in ("bad", "bad2"):
            with pytest.raises(CorruptRecordError):
                b.group_offsets(bad)
