"""ConsumerGroups (Kafka's consumer protocol, KIP-848) with a test clock: epochs, reconciliation, expiry."""

from __future__ import annotations

import random

import pytest

from vqs.broker.consumer_groups import FENCED, OK, STALE_EPOCH, UNKNOWN_MEMBER, ConsumerGroups
from vqs.broker.coordinator import INCONSISTENT_PROTOCOL, GroupCoordinator
from vqs.broker.topic import TopicPartition as TP
from vqs.errors import FencedMember


class Clock:
    t = 0.0

    def __call__(self):
        return self.t


def _groups(counts, **kw):
    clock = Clock()
    return ConsumerGroups(lambda t: counts.get(t, 0), clock=clock, session_timeout_ms=3000, **kw), clock


def _owners(cg, group):
    """partition -> members that own or are revoking it (at most one, always)."""
    out: dict = {}
    g = cg._groups.get(group)
    for m in (g.members.values() if g else ()):
        for tp in m.owned | m.revoking:
            out.setdefault(tp, []).append(m.member_id)
    return out


def test_a_partition_moves_only_once_its_owner_released_it():
    cg, _ = _groups({"t": 4})
    a = cg.heartbeat("g", "a", 0, topics=["t"])
    assert a.status == OK and a.assignment == [TP("t", p) for p in range(4)]
    b = cg.heartbeat("g", "b", 0, topics=["t"])
    assert b.status == OK and b.assignment == []  # a still owns everything
    a2 = cg.heartbeat("g", "a", a.epoch)
    assert a2.epoch == a.epoch and len(a2.assignment) == 2  # two to give up; epoch kept meanwhile
    given_up = set(a.assignment) - set(a2.assignment)
    assert cg.heartbeat("g", "b", b.epoch).assignment is None  # not released yet
    a3 = cg.heartbeat("g", "a", a2.epoch, owned=list(a2.assignment))  # reports without them
    assert a3.epoch == b.epoch and a3.assignment is None
    b2 = cg.heartbeat("g", "b", b.epoch)
    assert set(b2.assignment) == given_up
    assert all(len(v) == 1 for v in _owners(cg, "g").values())


def test_range_gives_contiguous_ranges_in_member_id_order():
    cg, _ = _groups({"t": 5})
    cg.heartbeat("g", "m2", 0, topics=["t"], assignor="range")
    cg.heartbeat("g", "m1", 0, topics=["t"], assignor="range")
    d = cg.describe("g")
    targets = {m["member_id"]: [p for _, p in m["target"]] for m in d["members"]}
    assert d["assignor"] == "range" and targets == {"m1": [0, 1, 2], "m2": [3, 4]}


def test_an_expired_members_partitions_are_free_at_once():
    cg, clock = _groups({"t": 2})
    a = cg.heartbeat("g", "a", 0, topics=["t"])
    b = cg.heartbeat("g", "b", 0, topics=["t"])
    a = cg.heartbeat("g", "a", a.epoch)
    cg.heartbeat("g", "a", a.epoch, owned=list(a.assignment))
    b = cg.heartbeat("g", "b", b.epoch)
    assert len(b.assignment) == 1
    clock.t += 2.5
    b = cg.heartbeat("g", "b", b.epoch)
    clock.t += 1  # a: silent for 3.5 s > 3 s
    b = cg.heartbeat("g", "b", b.epoch)
    assert b.assignment == [TP("t", 0), TP("t", 1)]
    assert cg.heartbeat("g", "a", a.epoch).status == UNKNOWN_MEMBER


def test_epochs_fence_and_a_lost_response_is_forgiven():
    cg, _ = _groups({"t": 2})
    a = cg.heartbeat("g", "a", 0, topics=["t"])
    assert cg.heartbeat("g", "a", a.epoch + 1).status == FENCED
    cg.heartbeat("g", "b", 0, topics=["t"])  # a new group epoch
    a2 = cg.heartbeat("g", "a", a.epoch)
    a3 = cg.heartbeat("g", "a", a2.epoch, owned=list(a2.assignment))
    assert a3.epoch > a.epoch
    # a's answer with the new epoch was lost: the previous epoch with what it owns is taken
    assert cg.heartbeat("g", "a", a.epoch, owned=list(a2.assignment)).status == OK
    assert cg.heartbeat("g", "a", a.epoch).status == FENCED  # without what it owns: not forgiven
    assert cg.heartbeat("g", "a", a3.epoch + 1).status == FENCED


def test_commits_need_the_members_epoch_or_a_partition_it_still_owns():
    cg, _ = _groups({"t": 2})
    a = cg.heartbeat("g", "a", 0, topics=["t"])
    assert cg.check_commit("g", "a", a.epoch, [("t", 0)]) == OK
    assert cg.check_commit("g", "", -1, [("t", 0)]) == UNKNOWN_MEMBER  # outside the group while it has members
    b = cg.heartbeat("g", "b", 0, topics=["t"])
    a2 = cg.heartbeat("g", "a", a.epoch)
    a3 = cg.heartbeat("g", "a", a2.epoch, owned=list(a2.assignment))
    kept = a2.assignment[0]
    lost = ({TP("t", 0), TP("t", 1)} - {kept}).pop()
    assert a3.epoch == b.epoch > a.epoch
    assert cg.check_commit("g", "a", a.epoch, [kept]) == OK
    assert cg.check_commit("g", "a", a.epoch, [lost]) == STALE_EPOCH
    assert cg.check_commit("g", "nobody", 1, [kept]) == UNKNOWN_MEMBER


def test_no_partition_is_ever_owned_twice_under_random_membership():
    for seed in range(30):
        rnd = random.Random(seed)
        cg, clock = _groups({"t": 6, "u": 3})
        epochs: dict = {}
        owned: dict = {}
        for _ in range(200):
            mid = f"m{rnd.randrange(5)}"
            act = rnd.random()
            clock.t += rnd.random() * 0.5
            if mid not in epochs:
                a = cg.heartbeat("g", mid, 0, topics=rnd.choice([["t"], ["t", "u"], ["u"]]))
            elif act < 0.1:
                a = cg.heartbeat("g", mid, -1)
            else:  # a member reports what it owns now and then, as librdkafka does after a change
                report = list(owned.get(mid, [])) if act < 0.6 else None
                a = cg.heartbeat("g", mid, epochs[mid], owned=report)
            if a.status != OK or a.epoch < 0:
                epochs.pop(mid, None)
                owned.pop(mid, None)
            else:
                epochs[mid] = a.epoch
                if a.assignment is not None:
                    owned[mid] = a.assignment
            assert all(len(v) == 1 for v in _owners(cg, "g").values()), seed
        # quiet heartbeats settle every member on its target
        for _ in range(6):
            for mid in list(epochs):
                a = cg.heartbeat("g", mid, epochs[mid], owned=list(owned.get(mid, [])))
                epochs[mid] = a.epoch
                if a.assignment is not None:
                    owned[mid] = a.assignment
        d = cg.describe("g")
        if d is not None:
            assert d["state"] == "Stable", seed


def test_a_static_member_back_under_a_new_id_takes_its_slot_without_a_new_epoch():
    cg, clock = _groups({"t": 4})
    a = cg.heartbeat("g", "a", 0, topics=["t"], instance_id="i1")
    b = cg.heartbeat("g", "b", 0, topics=["t"])
    a = cg.heartbeat("g", "a", a.epoch)
    a = cg.heartbeat("g", "a", a.epoch, owned=list(a.assignment))
    b = cg.heartbeat("g", "b", b.epoch)
    held = sorted(cg._groups["g"].members["a"].owned)
    assert len(held) == 2 and len(b.assignment) == 2
    assert cg.heartbeat("g", "a2", 0, topics=["t"], instance_id="i1").status == "unreleased_instance"
    assert cg.heartbeat("g", "a", -2).epoch == -2  # leaves for now
    epoch = cg.describe("g")["epoch"]
    back = cg.heartbeat("g", "a2", 0, topics=["t"], instance_id="i1")
    assert back.status == OK and back.member_id == "a2" and back.assignment == held
    assert cg.describe("g")["epoch"] == epoch  # no rebalance
    assert cg.heartbeat("g", "a", a.epoch).status == UNKNOWN_MEMBER
    # away past its session: the slot goes, and b gets everything
    assert cg.heartbeat("g", "a2", back.epoch, owned=back.assignment).status == OK
    assert cg.heartbeat("g", "a2", -2).status == OK
    clock.t += 2
    b = cg.heartbeat("g", "b", b.epoch)
    assert b.assignment is None  # a2's slot is still held
    clock.t += 1.5  # a2: away for 3.5 s > 3 s
    b = cg.heartbeat("g", "b", b.epoch)
    assert b.assignment == [TP("t", p) for p in range(4)]


def test_inputs_are_bounded_before_they_are_kept():
    cg, _ = _groups({"t": 1})
    assert cg.heartbeat("g", "m" * 256, 0, topics=["t"]).status == "invalid"
    assert cg.heartbeat("g", "m", 0, topics=["t" * 250]).status == "invalid"
    assert cg.heartbeat("g", "m", 0, topics=["t"] * 10_001).status == "invalid"
    assert cg.heartbeat("g", "m", 0, topics=["t"], instance_id="i" * 256).status == "invalid"
    assert cg.heartbeat("g", "m", 0, topics=["t"], assignor="sticky").status == "unsupported_assignor"
    assert cg.describe("g") is None


def test_a_pattern_subscription_follows_the_topics_that_match():
    counts = {"t": 1, "x-1": 1}
    cg, _ = _groups(counts)
    cg.set_timeouts(session_timeout_ms=3000, heartbeat_interval_ms=1000)
    cg.set_resolver(lambda p: {t for t in counts if t.startswith("x-")})
    a = cg.heartbeat("g", "a", 0, topics=["t"], regex="x-.*")
    assert a.assignment == [TP("t", 0)]  # the named topic first; the pattern is resolved after
    a = cg.heartbeat("g", "a", a.epoch)
    assert a.assignment == [TP("t", 0), TP("x-1", 0)]
    counts["x-2"] = 2
    epoch = a.epoch
    a = cg.heartbeat("g", "a", a.epoch)
    assert a.epoch > epoch and a.assignment == [TP("t", 0), TP("x-1", 0), TP("x-2", 0), TP("x-2", 1)]
    a = cg.heartbeat("g", "a", a.epoch, regex="")  # the pattern dropped: its topics revoked
    assert a.assignment == [TP("t", 0)]
    a = cg.heartbeat("g", "a", a.epoch, owned=[("t", 0)])  # released; the group forgets the pattern
    a = cg.heartbeat("g", "a", a.epoch, regex="x-.*")  # subscribed again: resolved afresh
    assert a.assignment is None  # unchanged: [t-0]
    a = cg.heartbeat("g", "a", a.epoch)
    assert a.assignment == [TP("t", 0), TP("x-1", 0), TP("x-2", 0), TP("x-2", 1)]


def test_a_members_matches_count_when_another_member_names_the_topic_and_only_what_it_may_see():
    """The target follows each member's subscription, not only the union of them: a topic one
    member names comes to match another's pattern (the union unchanged), and the second gets
    its share; what ``visible`` hides from a member is never its, until it may see it."""
    counts = {"x-1": 2, "x-2": 2}
    cg, _ = _groups(counts)
    cg.set_timeouts(session_timeout_ms=3000, heartbeat_interval_ms=1000)
    cg.set_resolver(lambda p: frozenset(t for t in counts if t.startswith("x-")))
    hide = frozenset({"x-2"})
    a = cg.heartbeat("g", "a", 0, topics=["x-1", "x-2"])
    b = cg.heartbeat("g", "b", 0, regex="x-.*", visible=lambda ts: ts - hide)
    for _ in range(4):  # b's pattern is resolved at the group's next heartbeat; a releases what moves
        a = cg.heartbeat("g", "a", a.epoch, owned=sorted(_mine(cg, "a")))
        b = cg.heartbeat("g", "b", b.epoch, owned=sorted(_mine(cg, "b")), visible=lambda ts: ts - hide)
    assert _mine(cg, "b") == {TP("x-1", 0), TP("x-1", 1)}  # what it may see; a keeps x-2, which b may not
    assert _mine(cg, "a") == {TP("x-2", 0), TP("x-2", 1)}
    hide = frozenset()
    cg.heartbeat("g", "a", -1)  # a leaves: b may see x-2 now and takes everything
    b = cg.heartbeat("g", "b", b.epoch, owned=sorted(_mine(cg, "b")), visible=lambda ts: ts - hide)
    b = cg.heartbeat("g", "b", b.epoch, owned=sorted(_mine(cg, "b")), visible=lambda ts: ts - hide)
    assert _mine(cg, "b") == {TP("x-1", 0), TP("x-1", 1), TP("x-2", 0), TP("x-2", 1)}


def _mine(cg, member):
    m = cg._groups["g"].members[member]
    return set(m.owned)


def test_the_coordinator_keeps_consumer_protocol_groups_apart_and_shows_them():
    co = GroupCoordinator(partitions=lambda t: 2)
    a = co.consumer.heartbeat("g", "a", 0, topics=["t"])
    assert a.status == OK
    assert co.join("g", "", protocols=[("range", b"")], session_timeout_ms=6000).status == INCONSISTENT_PROTOCOL
    with pytest.raises(FencedMember):
        co.check_outside_commit("g")
    m = co.membership("g")
    assert m["protocol_type"] == "consumer" and [x["member_id"] for x in m["members"]] == ["a"]
    assert ("g", "consumer") in co.groups()
    classic = co.join("c", "", protocols=[("range", b"")], session_timeout_ms=6000)
    assert classic.status == OK
    assert co.consumer.heartbeat("c", "", 0, topics=["t"]).status == "not_this_protocol"
    co.close()
