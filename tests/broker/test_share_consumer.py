"""The embedded share consumer (``broker.share_consumer``) and the durable share-partition state."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from vqs import Broker
from vqs.errors import InvalidRecordState


def _topic(broker, name="t", partitions=2, n=20):
    broker.create_topic(name, partitions)
    p = broker.producer()
    for i in range(n):
        p.send(name, b"v%03d" % i, partition=i % partitions)
    p.flush()
    return {b"v%03d" % i for i in range(n)}


def _earliest(broker, **settings):
    broker.share_groups.configure(auto_offset_reset="earliest", **settings)


def test_two_members_divide_the_records_each_accepted_once(broker):
    values = _topic(broker)
    _earliest(broker)
    a, b = broker.share_consumer("t", "g"), broker.share_consumer("t", "g")
    got = []
    for _ in range(10):
        for c in (a, b):
            for r in c.poll(max_records=3):
                assert r.delivery_count == 1
                got.append(r.value)
                c.acknowledge(r)
    assert sorted(got) == sorted(values)
    assert a.assignment() and b.assignment() and set(a.assignment()).isdisjoint(b.assignment())
    assert a.poll() == [] and b.poll() == []
    a.close()
    b.close()


def test_more_members_than_partitions_share_one_without_sharing_a_record(broker):
    values = _topic(broker, partitions=1, n=30)
    _earliest(broker)
    cs = [broker.share_consumer("t", "g") for _ in range(3)]
    got = []
    for _ in range(5):
        for c in cs:
            for r in c.poll(max_records=4):
                got.append(r.value)
                c.acknowledge(r)
    assert all(c.assignment() == [("t", 0)] for c in cs)
    assert sorted(got) == sorted(values)


def test_release_reject_and_the_delivery_limit(broker):
    _topic(broker, partitions=1, n=3)
    _earliest(broker, delivery_limit=2)
    c = broker.share_consumer("t", "g")
    r0, r1, r2 = c.poll()
    c.acknowledge(r0, "release")
    c.acknowledge(r1, "reject")
    c.acknowledge(r2, "release")
    again = c.poll()
    assert [(r.offset, r.delivery_count) for r in again] == [(0, 2), (2, 2)]
    c.acknowledge(again[0])
    c.acknowledge(again[1], "release")  # its second delivery released: archived at the limit
    assert c.poll() == []
    c.acknowledge(("t", 0, 1))  # settled, below the start offset: ignored, as Kafka does
    assert broker.share_groups.partition("g", "t", 0).describe()["start_offset"] == 3


def test_a_lock_that_ends_gives_the_record_to_another_member(broker):
    _topic(broker, partitions=1, n=1)
    _earliest(broker, record_lock_ms=200)
    a, b = broker.share_consumer("t", "g"), broker.share_consumer("t", "g")
    (r,) = a.poll()
    (again,) = b.poll(timeout=5)  # waits for a's lock to end
    assert (again.offset, again.delivery_count) == (0, 2)
    with pytest.raises(InvalidRecordState):
        a.acknowledge(r)  # its lock ended: no longer a's
    b.acknowledge(again)


def test_close_releases_what_the_consumer_holds(broker):
    _topic(broker, partitions=1, n=2)
    _earliest(broker)
    a = broker.share_consumer("t", "g")
    assert len(a.poll()) == 2
    a.close()
    b = broker.share_consumer("t", "g")
    assert [r.delivery_count for r in b.poll()] == [2, 2]


def test_a_new_group_starts_at_the_end_by_default(broker):
    _topic(broker, partitions=1, n=5)
    c = broker.share_consumer("t", "g")
    assert c.poll() == []
    p = broker.producer()
    p.send("t", b"new", partition=0)
    p.flush()
    assert [r.value for r in c.poll()] == [b"new"]


_CRASH = """
import os, signal, sys
from vqs import Broker
b = Broker(sys.argv[1], flush="interval", flush_interval_ms=60_000)
b.share_groups.configure(auto_offset_reset="earliest")
c = b.share_consumer("t", "g")
recs = c.poll(max_records=10)
for r in recs[:4]:
    c.acknowledge(r)             # accepted: never again
c.acknowledge(recs[4], "reject")  # archived: never again
c.acknowledge(recs[5], "release")
# recs[6:] held under their locks; then the process dies without closing anything
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_share_state_survives_a_sigkill(data_dir, child_env):
    with Broker(data_dir) as b:
        _topic(b, partitions=1, n=10)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_CRASH), data_dir], env=child_env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == -9, proc.stderr
    with Broker(data_dir) as b:
        c = b.share_consumer("t", "g")
        again = c.poll(max_records=100)
        # every unsettled record is available again at once, its delivery count kept
        assert [(r.offset, r.delivery_count) for r in again] == [(5, 2)] + [(o, 2) for o in range(6, 10)]
        for r in again:
            c.acknowledge(r)
        assert c.poll() == []
        assert b.share_groups.partition("g", "t", 0).describe()["start_offset"] == 10


def test_a_groups_own_configs_apply_to_it_alone_and_are_kept(data_dir):
    from vqs.errors import ConfigError

    with Broker(data_dir) as b:
        _topic(b, partitions=1, n=3)
        sg = b.share_groups
        sg.alter_group_configs("early", {"share.auto.offset.reset": "earliest", "share.delivery.count.limit": "2"})
        with pytest.raises(ConfigError, match=r"share\.record\.lock\.duration\.ms"):
            sg.alter_group_configs("early", {"share.record.lock.duration.ms": "soon"})
        with pytest.raises(ConfigError, match="unknown group config"):
            sg.alter_group_configs("early", {"retention.ms": "1"})
        assert len(b.share_consumer("t", "early").poll()) == 3
        assert b.share_consumer("t", "late").poll() == []  # the broker's default: latest
    with Broker(data_dir) as b:
        assert b.share_groups.group_configs("early") == {"share.auto.offset.reset": "earliest",
                                                          "share.delivery.count.limit": "2"}
        assert b.share_groups.settings_for("early").delivery_limit == 2
        b.share_groups.alter_group_configs("early", {"share.delivery.count.limit": None})
        assert b.share_groups.settings_for("early").delivery_limit == 5


def test_a_deleted_topic_takes_its_share_state_along(broker, data_dir):
    import os

    _topic(broker, partitions=1, n=2)
    _earliest(broker)
    c = broker.share_consumer("t", "g")
    for r in c.poll():
        c.acknowledge(r)
    state = os.path.join(data_dir, "share", "g", "t")
    assert os.path.isdir(state)
    broker.delete_topic("t")
    assert not os.path.exists(state)
    _topic(broker, partitions=1, n=3)  # made again: read afresh
    assert [r.offset for r in c.poll()] == [0, 1, 2]


def test_a_member_past_the_group_size_limit_is_refused_with_group_full(broker):
    from vqs import GroupFull
    from vqs.broker.share.groups import MAX_MEMBERS

    _topic(broker, n=2)
    members = [broker.share_consumer("t", "g") for _ in range(MAX_MEMBERS)]
    for c in members:
        c.poll(max_records=1, timeout=0)
    extra = broker.share_consumer("t", "g")
    with pytest.raises(GroupFull, match="'g'"):
        extra.poll(max_records=1, timeout=0)
    members[0].close()  # a place frees up: the same consumer joins on its next poll
    extra.poll(max_records=1, timeout=0)
    extra.close()
    for c in members[1:]:
        c.close()
