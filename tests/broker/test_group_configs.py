"""A group id's own configs (Broker.alter_group_configs, vqs.broker.group_configs): every kind's
in one store, checked before anything changes, kept across a reopen; the store of an older data
directory (a share group's config.json) read until the new one exists; configs alone make no
group; a consumer-protocol group's session timeout is its own."""

from __future__ import annotations

import json
import os

import pytest

from vqs.broker import Broker
from vqs.broker.consumer_groups import OK, ConsumerGroups
from vqs.errors import ConfigError


def test_every_kind_of_group_config_is_kept_for_its_group_id(data_dir):
    with Broker(data_dir) as b:
        b.alter_group_configs("g", {"consumer.session.timeout.ms": "20000", "share.delivery.count.limit": "3"})
        assert b.coordinator.consumer.session_timeout_for("g") == 20_000
        assert b.coordinator.consumer.session_timeout_for("h") == b.coordinator.consumer.session_timeout_ms
        assert b.share_groups.settings_for("g").delivery_limit == 3
        assert b.share_groups.groups() == []  # configs make no group
        bad = [({"consumer.session.timeout.ms": "soon"}, "consumer.session.timeout.ms"),
               ({"consumer.heartbeat.interval.ms": "30000"}, "greater than"),  # the session above it
               ({"share.session.timeout.ms": "1000", "share.heartbeat.interval.ms": "1000"}, "greater than"),
               ({"errors.deadletterqueue.topic.name": "nowhere"}, "does not exist"),
               ({"retention.ms": "1"}, "unknown group config"),
               ({"share.auto.offset.reset": "e" * 100_000}, "a value of 100000 characters"),
               ({"consumer.session.timeout.ms": "5000\u00b2"}, "must be an integer"),  # (isdigit, not int)
               ({"share.record.lock.duration.ms": "\u0663\u0660\u0660\u0660\u0660"}, "must be an integer"),
               ({"errors.deadletterqueue.topic.name": "../etc"}, "errors.deadletterqueue.topic.name")]
        for changes, message in bad:
            with pytest.raises(ConfigError, match=message):
                b.alter_group_configs("g", changes)
        b.alter_group_configs("g", {"consumer.heartbeat.interval.ms": "900"}, validate_only=True)
        assert b.coordinator.consumer.heartbeat_interval_for("g") == b.coordinator.consumer.heartbeat_interval_ms
        b.alter_group_configs("g", {"share.delivery.count.limit": " 4 "})  # (blanks trimmed, as Kafka's)
        assert b.group_configs.own("g")["share.delivery.count.limit"] == "4"
        b.alter_group_configs("g", {"share.delivery.count.limit": "3"})
    with Broker(data_dir) as b:
        assert b.group_configs.own("g") == {"consumer.session.timeout.ms": "20000", "share.delivery.count.limit": "3"}
        b.alter_group_configs("g", {"consumer.session.timeout.ms": None, "share.delivery.count.limit": None})
        assert b.group_configs.groups() == []
    with Broker(data_dir) as b:
        assert b.group_configs.own("g") == {}


def test_an_older_directorys_share_configs_are_read_until_the_store_exists(data_dir):
    with Broker(data_dir) as b:  # (the layout made)
        pass
    legacy = os.path.join(data_dir, "share", "old", "config.json")
    os.makedirs(os.path.dirname(legacy))
    with open(legacy, "w") as f:
        json.dump({"share.auto.offset.reset": "earliest", "share.delivery.count.limit": "2"}, f)
    with Broker(data_dir) as b:
        assert b.share_groups.settings_for("old").delivery_limit == 2
        b.alter_group_configs("old", {"share.delivery.count.limit": None})  # the store takes over
        assert b.group_configs.own("old") == {"share.auto.offset.reset": "earliest"}
    assert os.path.exists(legacy)  # (left as it was: the store alone counts now)
    with Broker(data_dir) as b:
        assert b.share_groups.settings_for("old").delivery_limit == 5  # the deleted one stays deleted
        assert b.share_groups.settings_for("old").auto_offset_reset == "earliest"


def test_a_consumer_group_members_expire_by_its_own_session():
    now = [0.0]
    cg = ConsumerGroups(lambda t: 1, clock=lambda: now[0], session_timeout_ms=45_000)
    cg.own_settings = lambda group: {"session_timeout_ms": 1_000} if group == "fast" else {}
    members = {}
    for group in ("fast", "slow"):
        a = cg.heartbeat(group, "", 0, topics=["t"])
        assert a.status == OK
        members[group] = a.member_id
    now[0] = 2.0  # past fast's own session, well within the broker's
    for group in ("fast", "slow"):
        cg.heartbeat(group, "", 0, topics=["t"])  # another member: the group is checked
    assert members["fast"] not in {m["member_id"] for m in cg.describe("fast")["members"]}
    assert members["slow"] in {m["member_id"] for m in cg.describe("slow")["members"]}


def test_concurrent_alterations_of_one_group_lose_nothing(data_dir):
    """Each alteration reads, checks and writes under one lock: four threads setting four
    different keys of one group all land."""
    import threading

    keys = {"share.record.lock.duration.ms": "60000", "share.delivery.count.limit": "3",
            "consumer.session.timeout.ms": "20000", "share.auto.offset.reset": "earliest"}
    with Broker(data_dir) as b:
        for _ in range(5):
            b.alter_group_configs("g", dict.fromkeys(keys), replace=True)
            start = threading.Barrier(len(keys))

            def alter(k, v, start=start):
                start.wait()
                b.alter_group_configs("g", {k: v})

            threads = [threading.Thread(target=alter, args=kv) for kv in keys.items()]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert b.group_configs.own("g") == keys


def test_the_group_id_cap_holds_for_validate_only_and_a_no_op_writes_nothing(data_dir, monkeypatch):
    from vqs.broker import group_configs

    monkeypatch.setattr(group_configs, "MAX_GROUPS", 3)
    with Broker(data_dir) as b:
        for g in ("a", "b", "c"):
            b.alter_group_configs(g, {"share.delivery.count.limit": "3"})
        for validate_only in (True, False):
            with pytest.raises(ConfigError, match="3 group ids"):
                b.alter_group_configs("d", {"share.delivery.count.limit": "3"}, validate_only=validate_only)
        version = b.group_configs.version
        b.alter_group_configs("d", {"share.delivery.count.limit": None})  # nothing of its own to reset
        b.alter_group_configs("a", {"share.delivery.count.limit": "3"})  # as it is
        assert b.group_configs.version == version
