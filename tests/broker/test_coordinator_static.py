"""The group coordinator as Kafka rules it: static members (group instance ids), commits while a
rebalance is under way, rejoins that change nothing, and group ids that are not VQS names."""

from __future__ import annotations

import threading

from vqs.broker.coordinator import (
    FENCED,
    ILLEGAL_GENERATION,
    OK,
    REBALANCING,
    UNKNOWN_MEMBER,
    GroupCoordinator,
)

LONG = {"session_timeout_ms": 60_000, "rebalance_timeout_ms": 60_000}


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def _alone(co, group, instance=None, meta=b"m", **kw):
    """A member that joined ``group`` alone and synced (assignment b"A")."""
    a = co.join(group, "", client_id="a", protocols=[("range", meta)], group_instance_id=instance, **(kw or LONG))
    assert a.status == OK and a.leader == a.member_id
    assert co.sync(group, a.generation, a.member_id, {a.member_id: b"A"}, instance) == (OK, b"A")
    return a


def _pair(co, group, instances=(None, None)):
    """Two members in one generation, synced: (leader, follower) with assignments b"L", b"F"."""
    out = {}

    def run(name, inst):
        out[name] = co.join(group, "", client_id=name, protocols=[("range", name.encode())],
                            group_instance_id=inst, **LONG)

    first = _alone(co, group, instances[0])
    t = threading.Thread(target=run, args=("b", instances[1]))
    t.start()
    while len(co.describe(group)["members"]) < 2:
        threading.Event().wait(0.01)
    out["a"] = co.join(group, first.member_id, client_id="a", protocols=[("range", b"m")],
                       group_instance_id=instances[0], **LONG)
    t.join(10)
    lead, follow = out["a"], out["b"]
    assert lead.status == follow.status == OK and lead.leader == lead.member_id
    w = co.start_sync(group, follow.generation, follow.member_id, {}, instances[1])
    assert co.sync(group, lead.generation, lead.member_id,
                   {lead.member_id: b"L", follow.member_id: b"F"}, instances[0]) == (OK, b"L")
    assert w.wait() == (OK, b"F")
    return lead, follow


def test_a_group_id_need_not_be_a_vqs_name():
    co = GroupCoordinator(initial_delay_ms=0)
    a = _alone(co, "roundrobin,range")  # librdkafka's test uses its assignor list as the group id
    assert co.check_commit("roundrobin,range", a.generation, a.member_id) == OK


def test_a_commit_is_taken_while_joins_are_awaited_and_refused_until_the_leader_syncs():
    co = GroupCoordinator(initial_delay_ms=0)
    a = _alone(co, "g")
    b = co.start_join("g", "", client_id="b", protocols=[("range", b"b")], **LONG)  # waits for a
    assert co.describe("g")["state"] == "PreparingRebalance"
    # the generation in force still holds: a still owns its partitions (Kafka's rule)
    assert co.check_commit("g", a.generation, a.member_id) == OK
    again = co.join("g", a.member_id, client_id="a", protocols=[("range", b"m")], **LONG)
    assert again.status == OK and again.generation == a.generation + 1 and b.wait().status == OK
    # joins done, assignment not handed out yet: the new generation may not commit, the old is gone
    assert co.check_commit("g", again.generation, a.member_id) == REBALANCING
    assert co.check_commit("g", a.generation, a.member_id) == ILLEGAL_GENERATION
    assert co.sync("g", again.generation, a.member_id, {}) == (OK, b"")
    assert co.check_commit("g", again.generation, a.member_id) == OK


def test_a_rejoin_that_changes_nothing_gets_the_generation_in_force():
    co = GroupCoordinator(initial_delay_ms=0)
    lead, follow = _pair(co, "g")
    same = co.join("g", follow.member_id, client_id="b", protocols=[("range", b"b")], **LONG)
    assert (same.status, same.generation, same.leader, same.members) == (OK, follow.generation, lead.member_id, [])
    assert co.describe("g")["state"] == "Stable"
    # a changed subscription does start a rebalance
    changed = co.start_join("g", follow.member_id, client_id="b", protocols=[("range", b"b2")], **LONG)
    assert not changed.done and co.describe("g")["state"] == "PreparingRebalance"
    again = co.join("g", lead.member_id, client_id="a", protocols=[("range", b"m")], **LONG)
    assert again.generation == lead.generation + 1 and changed.wait().generation == again.generation
    # while the group waits for the leader's SyncGroup, the same join is answered at once as well
    repeat = co.join("g", follow.member_id, client_id="b", protocols=[("range", b"b2")], **LONG)
    assert (repeat.status, repeat.generation) == (OK, again.generation)
    assert co.describe("g")["state"] == "CompletingRebalance"


def test_a_static_member_back_under_a_new_member_id_takes_its_slot_without_a_rebalance():
    co = GroupCoordinator(initial_delay_ms=0)
    lead, follow = _pair(co, "g", ("ia", "ib"))
    back = co.join("g", "", client_id="b", protocols=[("range", b"b")], group_instance_id="ib", **LONG)
    assert back.status == OK and back.member_id != follow.member_id
    assert (back.generation, back.leader, back.members) == (follow.generation, lead.member_id, [])
    d = co.describe("g")
    assert d["state"] == "Stable" and d["generation"] == lead.generation
    assert sorted((m[0], m[1]) for m in d["members"]) == sorted([(lead.member_id, "ia"), (back.member_id, "ib")])
    # its assignment is kept; the old member id is fenced wherever it shows up with the instance
    assert co.sync("g", back.generation, back.member_id, {}, "ib") == (OK, b"F")
    assert co.heartbeat("g", follow.generation, follow.member_id, "ib") == FENCED
    assert co.check_commit("g", follow.generation, follow.member_id, "ib") == FENCED
    assert co.sync("g", follow.generation, follow.member_id, {}, "ib") == (FENCED, b"")
    assert co.join("g", follow.member_id, protocols=[("range", b"b")], group_instance_id="ib",
                   **LONG).status == FENCED
    assert co.heartbeat("g", follow.generation, follow.member_id) == UNKNOWN_MEMBER
    assert co.heartbeat("g", back.generation, back.member_id, "ib") == OK
    assert co.check_commit("g", back.generation, back.member_id, "ib") == OK
    assert co.heartbeat("g", lead.generation, lead.member_id, "ia") == OK  # no rebalance for the leader


def test_the_leader_back_under_a_new_id_is_told_the_old_leader_and_leads_from_then_on():
    co = GroupCoordinator(initial_delay_ms=0)
    lead, follow = _pair(co, "g", ("ia", "ib"))
    back = co.join("g", "", client_id="a", protocols=[("range", b"m")], group_instance_id="ia", **LONG)
    assert back.status == OK and back.leader == lead.member_id != back.member_id  # computes no assignment
    assert co.sync("g", back.generation, back.member_id, {}, "ia") == (OK, b"L")
    changed = co.start_join("g", follow.member_id, client_id="b", protocols=[("range", b"b2")],
                            group_instance_id="ib", **LONG)
    again = co.join("g", back.member_id, protocols=[("range", b"m")], group_instance_id="ia", **LONG)
    assert again.leader == back.member_id and len(again.members) == 2
    assert {m[1] for m in again.members} == {"ia", "ib"} and changed.wait().status == OK


def test_a_duplicate_instance_fences_the_join_pending_under_the_old_member_id():
    co = GroupCoordinator(initial_delay_ms=0)
    pin = _alone(co, "g")
    first = co.start_join("g", "", client_id="s", protocols=[("range", b"s")], group_instance_id="i", **LONG)
    assert not first.done  # waits for pin
    second = co.start_join("g", "", client_id="s", protocols=[("range", b"s")], group_instance_id="i", **LONG)
    assert first.done and first.result.status == FENCED
    assert not second.done and len(co.describe("g")["members"]) == 2
    again = co.join("g", pin.member_id, client_id="a", protocols=[("range", b"m")], **LONG)
    assert second.wait().status == OK and second.result.generation == again.generation == pin.generation + 1


def test_a_static_member_leaves_by_instance_id_and_a_wrong_member_id_is_fenced():
    co = GroupCoordinator(initial_delay_ms=0)
    a = _alone(co, "g", "ia")
    assert co.leave("g", "", "nobody") == UNKNOWN_MEMBER
    assert co.leave("g", "someone-else", "ia") == FENCED
    assert len(co.describe("g")["members"]) == 1
    assert co.leave("g", "", "ia") == OK  # the admin client's way: instance id alone
    assert co.describe("g")["members"] == [] and co.check_commit("g", -1, "") == OK
    b = _alone(co, "g", "ia")  # the instance id is free again, a member id of its own
    assert b.member_id != a.member_id and co.leave("g", b.member_id, "ia") == OK


def test_a_static_member_that_does_not_rejoin_stays_through_the_rebalance_until_its_sync_is_due():
    """Kept through the rebalance (it may be restarting), then, as every member of the new
    generation, removed when it has not synced one rebalance timeout after the joins ended (as
    Kafka's pending-sync members, also once the group is Stable)."""
    clock = Clock()
    co = GroupCoordinator(clock=clock, initial_delay_ms=0)
    timeouts = {"session_timeout_ms": 10_000, "rebalance_timeout_ms": 2_000}
    first = co.join("g", "", client_id="s", protocols=[("range", b"s")], group_instance_id="i", **timeouts)
    assert co.sync("g", first.generation, first.member_id, {first.member_id: b"S"}, "i") == (OK, b"S")
    w = co.start_join("g", "", client_id="d", protocols=[("range", b"d")], **timeouts)
    clock.t += 3  # past the rebalance timeout: a dynamic member would be dropped; the static one stays
    d = co.describe("g")
    assert d["state"] == "CompletingRebalance" and len(d["members"]) == 2
    assert w.wait().status == OK and w.result.leader == w.result.member_id and len(w.result.members) == 2
    assert co.sync("g", w.result.generation, w.result.member_id, {}) == (OK, b"")
    clock.t += 1
    assert co.heartbeat("g", w.result.generation, w.result.member_id) == OK
    assert len(co.describe("g")["members"]) == 2
    clock.t += 1.5  # the joins ended 2.5 s ago (rebalance timeout 2 s), its session has 7 s left
    d = co.describe("g")
    assert [m[0] for m in d["members"]] == [w.result.member_id] and d["state"] == "PreparingRebalance"
    assert co.heartbeat("g", first.generation, first.member_id, "i") == UNKNOWN_MEMBER
