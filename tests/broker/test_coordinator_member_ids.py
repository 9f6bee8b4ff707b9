"""Member ids handed out before a join (Kafka's MEMBER_ID_REQUIRED), a member's join replacing its
own waiting one, and a member that never syncs after the group turned Stable."""

from __future__ import annotations

import threading

from vqs.broker.coordinator import (
    INCONSISTENT_PROTOCOL,
    MAX_PENDING_IDS,
    OK,
    REBALANCING,
    UNKNOWN_MEMBER,
    GroupCoordinator,
)

RANGE = [("range", b"")]


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def _stable_pair(co, clock, group="g", rebalance_timeout_ms=60_000):
    """Two members, joined and synced: (a, b) JoinResults, a the leader."""
    ids = [co.new_member_id(group, protocols=RANGE, session_timeout_ms=60_000)[1] for _ in range(2)]
    waits = [co.start_join(group, mid, protocols=RANGE, session_timeout_ms=60_000,
                           rebalance_timeout_ms=rebalance_timeout_ms) for mid in ids]
    clock.t += 1  # past the initial delay
    co.heartbeat(group, 0, ids[0])  # a call about the group: the joins complete
    a, b = (w.wait() for w in waits)
    a, b = (a, b) if a.leader == a.member_id else (b, a)
    assert a.status == b.status == OK and a.generation == b.generation
    follower = co.start_sync(group, a.generation, b.member_id, {})
    assert co.sync(group, a.generation, a.member_id, {}) == (OK, b"")
    assert follower.wait() == (OK, b"")
    return a, b


def test_a_handed_out_id_joins_as_itself_and_holds_no_rebalance_until_then():
    clock = Clock()
    co = GroupCoordinator(clock=clock)
    a, b = _stable_pair(co, clock)
    status, pending = co.new_member_id("g", client_id="c", protocols=RANGE, session_timeout_ms=10_000)
    assert status == OK and pending.startswith("c-")
    assert [m[0] for m in co.describe("g")["members"]] == [a.member_id, b.member_id]  # not a member yet
    assert co.heartbeat("g", a.generation, a.member_id) == OK  # and no rebalance
    w = co.start_join("g", pending, protocols=RANGE, session_timeout_ms=10_000)
    assert co.heartbeat("g", a.generation, a.member_id) == REBALANCING
    co.start_join("g", a.member_id, protocols=RANGE, session_timeout_ms=60_000)
    co.start_join("g", b.member_id, protocols=RANGE, session_timeout_ms=60_000)
    assert w.wait().status == OK and w.result.member_id == pending
    # an id no join named within its session is forgotten
    late = co.new_member_id("g", protocols=RANGE, session_timeout_ms=10_000)[1]
    clock.t += 11
    assert co.join("g", late, protocols=RANGE).status == UNKNOWN_MEMBER


def test_handed_out_ids_are_bounded_and_refused_where_a_join_would_be():
    co = GroupCoordinator()
    first = co.new_member_id("g", protocols=RANGE)[1]
    for _ in range(MAX_PENDING_IDS):
        co.new_member_id("g", protocols=RANGE)
    assert co.join("g", first, protocols=RANGE).status == UNKNOWN_MEMBER  # the oldest was forgotten
    a = co.join("g", co.new_member_id("g", protocols=RANGE)[1], protocols=RANGE)
    assert a.status == OK
    assert co.new_member_id("g", protocols=[("other", b"")]) == (INCONSISTENT_PROTOCOL, "")


def test_a_members_new_join_replaces_its_waiting_one():
    clock = Clock()
    co = GroupCoordinator(clock=clock)
    a, b = _stable_pair(co, clock)
    first = co.start_join("g", a.member_id, protocols=RANGE, session_timeout_ms=60_000)
    assert not first.done  # waits for b
    second = co.start_join("g", a.member_id, protocols=[("range", b"new subscription")], session_timeout_ms=60_000)
    assert first.done and first.result.status == REBALANCING  # answered at once: one join per member
    assert not second.done
    co.start_join("g", b.member_id, protocols=RANGE, session_timeout_ms=60_000)
    assert second.wait().status == OK and second.result.generation == a.generation + 1
    assert len(co.describe("g")["members"]) == 2


def test_a_member_that_never_syncs_is_removed_after_the_rebalance_timeout_once_stable():
    """A client that dropped its join's answer never syncs; the leader did, so the group is
    Stable: the silent member is still removed one rebalance timeout after the joins ended (as
    Kafka's pending-sync members), not only at its session's end."""
    clock = Clock()
    co = GroupCoordinator(clock=clock)
    ids = [co.new_member_id("g", protocols=RANGE)[1] for _ in range(2)]
    waits = [co.start_join("g", mid, protocols=RANGE, session_timeout_ms=60_000, rebalance_timeout_ms=5_000)
             for mid in ids]
    clock.t += 1
    co.heartbeat("g", 0, ids[0])
    res = [w.wait() for w in waits]
    leader = next(r for r in res if r.leader == r.member_id)
    silent = next(r for r in res if r is not leader)
    assert co.sync("g", leader.generation, leader.member_id, {}) == (OK, b"")
    assert co.describe("g")["state"] == "Stable"
    clock.t += 4
    assert co.heartbeat("g", leader.generation, leader.member_id) == OK
    clock.t += 2  # past the rebalance timeout, far inside the session
    assert co.heartbeat("g", leader.generation, leader.member_id) == REBALANCING
    assert [m[0] for m in co.describe("g")["members"]] == [leader.member_id]
    assert co.heartbeat("g", silent.generation, silent.member_id) == UNKNOWN_MEMBER


def test_a_waiting_join_is_not_held_by_a_discarded_answer():
    """librdkafka's pattern: a member's join answer is dropped (its subscription changed while it
    waited) and it joins again under the same id: the group's next rebalance waits for no one."""
    co = GroupCoordinator(initial_delay_ms=0)
    mid = co.new_member_id("g", protocols=RANGE)[1]
    first = co.join("g", mid, protocols=RANGE)  # alone: answered at once; the client drops the answer
    done = threading.Event()
    again = co.start_join("g", mid, protocols=[("range", b"changed")])
    again.add_done_callback(done.set)
    assert done.wait(5) and again.result.status == OK and again.result.generation == first.generation + 1
    assert [m[0] for m in co.describe("g")["members"]] == [mid]
