"""The group coordinator: generations, leaders, assignment pass-through, fencing, expiry."""

from __future__ import annotations

import threading

from vqs.broker.coordinator import (
    ILLEGAL_GENERATION,
    INCONSISTENT_PROTOCOL,
    OK,
    REBALANCING,
    UNKNOWN_MEMBER,
    GroupCoordinator,
)


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def _join_all(co, group, members, clock=None, **kw):
    """Join several members at once (each join blocks until the rebalance completes); with a
    test ``clock``, time moves past the initial delay once all of them are in."""
    out = {}

    def run(name, mid):
        out[name] = co.join(group, mid, client_id=name, protocols=[("range", name.encode())], **kw)

    threads = [threading.Thread(target=run, args=m) for m in members]
    for t in threads:
        t.start()
    if clock is not None:
        while len(co.describe(group)["members"]) < len(members):
            threading.Event().wait(0.01)
        clock.t += 1
    for t in threads:
        t.join(10)
    return out


def test_join_sync_generation_and_assignment_bytes_passed_through():
    co = GroupCoordinator(initial_delay_ms=500)  # both joins land in the first generation
    res = _join_all(co, "g", [("a", ""), ("b", "")], session_timeout_ms=10_000)
    a, b = res["a"], res["b"]
    assert a.status == b.status == OK and a.generation == b.generation == 1
    leader = a if a.leader == a.member_id else b
    follower = b if leader is a else a
    assert sorted(m[2] for m in leader.members) == [b"a", b"b"] and follower.members == []
    got = {}
    t = threading.Thread(target=lambda: got.update(f=co.sync("g", 1, follower.member_id, {})))
    t.start()
    assert co.sync("g", 1, leader.member_id, {leader.member_id: b"L", follower.member_id: b"F"}) == (OK, b"L")
    t.join(5)
    assert got["f"] == (OK, b"F")
    assert co.heartbeat("g", 1, follower.member_id) == OK
    assert co.check_commit("g", 1, leader.member_id) == OK


def test_stale_generation_and_unknown_members_are_fenced():
    co = GroupCoordinator()
    a = co.join("g", "", client_id="a", protocols=[("range", b"")])
    assert co.sync("g", a.generation, a.member_id, {a.member_id: b"x"}) == (OK, b"x")
    assert co.heartbeat("g", a.generation - 1, a.member_id) == ILLEGAL_GENERATION
    assert co.check_commit("g", a.generation - 1, a.member_id) == ILLEGAL_GENERATION
    assert co.heartbeat("g", a.generation, "nobody") == UNKNOWN_MEMBER
    assert co.check_commit("g", a.generation, "nobody") == UNKNOWN_MEMBER
    assert co.check_commit("g", -1, "") == UNKNOWN_MEMBER  # a group with members: no outside commits
    assert co.join("g", "", client_id="b", protocols=[("other", b"")]).status == INCONSISTENT_PROTOCOL
    assert co.leave("g", a.member_id) == OK
    assert co.check_commit("g", -1, "") == OK  # empty again: a simple consumer may commit


def test_a_silent_member_expires_and_the_others_must_rejoin():
    clock = Clock()
    co = GroupCoordinator(clock=clock, initial_delay_ms=500)
    res = _join_all(co, "g", [("a", ""), ("b", "")], clock=clock, session_timeout_ms=3000)
    a, b = res["a"], res["b"]
    leader = a if a.leader == a.member_id else b
    follower = b if leader is a else a
    t = threading.Thread(target=co.sync, args=("g", 1, follower.member_id, {}))
    t.start()
    co.sync("g", 1, leader.member_id, {})
    t.join(5)
    clock.t += 2
    assert co.heartbeat("g", 1, leader.member_id) == OK
    clock.t += 2  # the follower has been silent for 4 s > 3 s
    assert co.heartbeat("g", 1, leader.member_id) == REBALANCING
    assert co.check_commit("g", 1, leader.member_id) == OK  # its generation still holds until the next forms
    again = co.join("g", leader.member_id, client_id="a", protocols=[("range", b"")], session_timeout_ms=3000)
    assert again.status == OK and again.generation == 2 and [m[0] for m in again.members] == [leader.member_id]
    assert co.heartbeat("g", 2, follower.member_id) == UNKNOWN_MEMBER


def test_each_new_member_in_the_initial_delay_starts_it_again():
    """Kafka's InitialDelayedJoin: members that join a new group one after another, each within
    the initial delay of the one before, share its first generation; the delay never runs past
    the rebalance deadline."""
    clock = Clock()
    co = GroupCoordinator(clock=clock, initial_delay_ms=500)
    kw = dict(protocols=[("range", b"")], session_timeout_ms=60_000, rebalance_timeout_ms=1_000)
    wa = co.start_join("g", "", client_id="a", **kw)
    clock.t += 0.4
    wb = co.start_join("g", "", client_id="b", **kw)
    clock.t += 0.4  # past a's delay, within b's
    assert co.describe("g")["state"] == "PreparingRebalance" and not wa.done and not wb.done
    wc = co.start_join("g", "", client_id="c", **kw)
    clock.t += 0.3  # within c's delay, past the rebalance deadline (1 s after a's join)
    assert co.describe("g")["state"] == "CompletingRebalance"
    assert wa.done and wb.done and wc.done
    assert {w.result.generation for w in (wa, wb, wc)} == {1} and len(wa.result.members or wb.result.members
                                                                      or wc.result.members) == 3


def _stable(co, group, **kw):
    """One member that joined and synced alone: a later join into ``group`` waits for it."""
    a = co.join(group, "", client_id="pin", protocols=[("range", b"")], **kw)
    assert co.sync(group, a.generation, a.member_id, {a.member_id: b"x"}) == (OK, b"x")
    return a


def test_waits_hold_no_thread_and_the_timer_ends_them_at_the_rebalance_deadline():
    co = GroupCoordinator()
    # the deadline is well past the time the thousand joins take on a loaded machine
    pin = _stable(co, "g", session_timeout_ms=60_000, rebalance_timeout_ms=3000)
    before = threading.active_count()
    done = threading.Event()
    waits = [co.start_join("g", "", client_id=f"c{i}", protocols=[("range", b"")], session_timeout_ms=60_000,
                           rebalance_timeout_ms=3000) for i in range(1000)]
    waits[-1].add_done_callback(done.set)
    assert threading.active_count() <= before + 1  # the coordinator's one timer thread
    assert not any(w.done for w in waits)  # all wait for pin, which never rejoins
    assert done.wait(10)  # the rebalance deadline: pin is dropped, the thousand form generation 2
    results = [w.result for w in waits]
    assert {r.status for r in results} == {OK} and {r.generation for r in results} == {pin.generation + 1}
    assert co.heartbeat("g", pin.generation, pin.member_id) == UNKNOWN_MEMBER
    co.close()
    assert threading.active_count() <= before  # no waits: no timer


def test_a_cancelled_join_leaves_at_once_and_the_rebalance_goes_on_without_it():
    co = GroupCoordinator()
    pin = _stable(co, "g", session_timeout_ms=60_000, rebalance_timeout_ms=60_000)
    gone = co.start_join("g", "", client_id="gone", protocols=[("range", b"")], session_timeout_ms=60_000)
    assert len(co.describe("g")["members"]) == 2 and not gone.done
    gone.cancel()  # e.g. its connection closed: its answer can never be delivered
    assert [m[0] for m in co.describe("g")["members"]] == [pin.member_id]
    again = co.join("g", pin.member_id, client_id="pin", protocols=[("range", b"")], session_timeout_ms=60_000)
    assert (again.status, again.generation, again.leader) == (OK, pin.generation + 1, pin.member_id)


def test_a_cancelled_sync_leaves_and_a_rebalance_starts():
    co = GroupCoordinator(initial_delay_ms=300)
    res = _join_all(co, "g", [("a", ""), ("b", "")], session_timeout_ms=60_000)
    a, b = res["a"], res["b"]
    leader, follower = (a, b) if a.leader == a.member_id else (b, a)
    w = co.start_sync("g", leader.generation, follower.member_id, {})
    assert not w.done
    w.cancel()
    d = co.describe("g")
    assert d["state"] == "PreparingRebalance" and [m[0] for m in d["members"]] == [leader.member_id]
    assert co.sync("g", leader.generation, leader.member_id, {}) == (REBALANCING, b"")


def test_an_awaited_join_is_answered_on_its_loop_and_cancelling_it_withdraws_the_member():
    import asyncio

    co = GroupCoordinator()
    pin = _stable(co, "g", session_timeout_ms=60_000, rebalance_timeout_ms=60_000)

    async def main():
        w = co.start_join("g", "", client_id="aw", protocols=[("range", b"")], session_timeout_ms=60_000)
        task = asyncio.ensure_future(w.wait_async())
        await asyncio.sleep(0)
        assert len(co.describe("g")["members"]) == 2
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert [m[0] for m in co.describe("g")["members"]] == [pin.member_id]
        # answered from another thread (pin's rejoin completes the rebalance): the loop is woken
        w = co.start_join("g", "", client_id="aw2", protocols=[("range", b"")], session_timeout_ms=60_000)
        other = threading.Thread(target=co.join, args=("g", pin.member_id),
                                 kwargs={"protocols": [("range", b"")], "session_timeout_ms": 60_000})
        other.start()
        res = await asyncio.wait_for(w.wait_async(), 10)
        other.join(5)
        assert res.status == OK and res.generation == pin.generation + 1  # the rebalance aw started

    asyncio.run(main())


def test_close_answers_every_pending_wait():
    co = GroupCoordinator()
    _stable(co, "g", session_timeout_ms=60_000, rebalance_timeout_ms=60_000)
    w = co.start_join("g", "", client_id="c", protocols=[("range", b"")], session_timeout_ms=60_000)
    co.close()
    assert w.done and w.result.status == UNKNOWN_MEMBER


def test_a_leader_that_never_syncs_is_removed_after_the_rebalance_timeout():
    co = GroupCoordinator(initial_delay_ms=300)
    res = _join_all(co, "g", [("a", ""), ("b", "")], session_timeout_ms=60_000, rebalance_timeout_ms=500)
    a, b = res["a"], res["b"]
    leader, follower = (a, b) if a.leader == a.member_id else (b, a)
    w = co.start_sync("g", leader.generation, follower.member_id, {})
    assert co.heartbeat("g", leader.generation, leader.member_id) == OK  # alive, but never syncs
    done = threading.Event()
    w.add_done_callback(done.set)
    assert done.wait(10) and w.result == (REBALANCING, b"")  # the timer removed the leader
    assert co.heartbeat("g", leader.generation, leader.member_id) == UNKNOWN_MEMBER
    assert [m[0] for m in co.describe("g")["members"]] == [follower.member_id]
    co.close()


def test_forget_drops_a_group_without_members_only():
    co = GroupCoordinator(initial_delay_ms=0)
    assert not co.forget("never")
    res = co.join("g", "", client_id="a", protocols=[("range", b"a")], session_timeout_ms=10_000)
    assert res.status == OK
    assert not co.forget("g") and co.describe("g")["state"] != "Dead"  # a member: it stays
    assert co.leave("g", res.member_id) == OK
    assert co.describe("g")["state"] == "Empty"
    assert co.forget("g") and co.describe("g")["state"] == "Dead"
    again = co.join("g", "", client_id="b", protocols=[("range", b"b")], session_timeout_ms=10_000)
    assert again.status == OK and co.heartbeat("g", again.generation, res.member_id) == UNKNOWN_MEMBER
    co.close()
