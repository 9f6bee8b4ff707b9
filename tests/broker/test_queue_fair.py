"""Fair queues: a standard queue's tenants (message group ids) and AWS's noisy-tenant rule.

A tenant is noisy while it has at least 30 messages in flight and more than
10 % of all in flight; receives then deliver quiet tenants' messages first,
noisy ones only when nothing else is visible. Exact counts, injected clock.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from vqs.broker.queue.registry import QueueRegistry
from vqs.errors import InvalidParameterValue

GROUP_ERROR = ("Value {} for parameter MessageGroupId is invalid. Reason: MessageGroupId can only "
               "include alphanumeric and punctuation characters. 1 to 128 in length.")


def reopen(reg, tmp_path, qclock):
    reg.close()
    return QueueRegistry(str(tmp_path / "queues"), clock=qclock)


def send(q, group, bodies):
    """Send ``bodies`` (str) with ``group`` (None: no group id), 10 per batch."""
    for i in range(0, len(bodies), 10):
        q.send_batch([{"body": b, "group_id": group} if group else {"body": b}
                      for b in bodies[i:i + 10]])


def take(q, k, **kw):
    """Receive ``k`` messages (10 per call); returns them."""
    out = []
    while len(out) < k:
        got = q.receive(min(10, k - len(out)), **kw)
        assert got, f"only {len(out)} of {k} came"
        out += got
    return out


def texts(ms):
    return [m.text for m in ms]


def names(prefix, lo, hi):
    return [f"{prefix}{i}" for i in range(lo, hi)]


def queue_json(tmp_path, name):
    with open(os.path.join(str(tmp_path / "queues"), name, "queue.json")) as f:
        return json.load(f)


# ------------------------------------------------------------ the group id itself


def test_standard_queue_stores_and_returns_the_group_id(reg):
    q = reg.create("q")
    mid = q.send("one", group_id="tenant-1")
    q.send_batch([{"body": "two", "group_id": "tenant.2"}, {"body": "three"}])
    ms = q.receive(10)
    assert texts(ms) == ["one", "two", "three"]
    assert ms[0].id == mid
    assert [m.group_id for m in ms] == ["tenant-1", "tenant.2", None]
    sa = ms[0].system_attributes()
    assert sa["MessageGroupId"] == "tenant-1"
    assert "SequenceNumber" not in sa and "MessageDeduplicationId" not in sa
    assert "MessageGroupId" not in ms[2].system_attributes()
    assert ms[0].sequence_number is None
    assert q.send_message("four", group_id="g")["sequence_number"] is None


@pytest.mark.parametrize("bad", ["", "a" * 129, "group 123", "é"])
def test_an_invalid_group_id_is_refused_with_sqs_message(reg, bad):
    q = reg.create("q")
    with pytest.raises(InvalidParameterValue) as ei:
        q.send("x", group_id=bad)
    assert str(ei.value) == GROUP_ERROR.format(bad)
    assert q._fair is None and q.receive(10) == []


def test_deduplication_id_stays_fifo_only(reg):
    q = reg.create("q")
    with pytest.raises(InvalidParameterValue, match="MessageDeduplicationId is invalid"):
        q.send("x", group_id="g", dedup_id="d")
    assert q.receive(10) == []


def test_no_order_or_dedup_per_group_on_a_standard_queue(reg):
    q = reg.create("q")
    q.send_batch([{"body": "same", "group_id": "g"}] * 3)
    first = q.receive(1)
    # a standard queue delivers the group's next message while one is in flight
    assert texts(first + q.receive(10)) == ["same"] * 3


def test_a_queue_without_group_ids_never_turns_fair(reg, tmp_path, qclock):
    q = reg.create("q")
    q.send("plain")
    q.send("with-attrs", attributes={"a": "b"}, delay_seconds=0)
    take(q, 2)
    assert q._fair is None
    assert "fair" not in queue_json(tmp_path, "q")
    reg = reopen(reg, tmp_path, qclock)
    assert reg.get("q")._fair is None
    reg.close()


def test_the_first_group_id_turns_the_queue_fair_durably(reg, tmp_path):
    q = reg.create("q")
    q.send("plain")
    assert "fair" not in queue_json(tmp_path, "q")
    q.send("grouped", group_id="g")
    assert queue_json(tmp_path, "q")["fair"] is True
    assert q._fair is not None


def test_fifo_queues_are_not_fair_queues(reg):
    q = reg.create("q.fifo", fifo=True, content_based_deduplication=True)
    q.send_batch([{"body": f"a{i}", "group_id": "A"} for i in range(10)])
    q.send("b0", group_id="B")
    assert q._fair is None
    # FIFO: one group in flight at a time, in order; nothing of fair queues
    assert texts(q.receive(10)) == names("a", 0, 10)
    assert texts(q.receive(10)) == ["b0"]


# ------------------------------------------------------------ the noisy-tenant rule


def test_quiet_tenants_first_while_one_is_noisy(reg):
    q = reg.create("q", visibility_timeout=600)
    send(q, "A", names("a", 0, 40))
    # 30 of A in flight make it noisy, but with nothing else visible A is
    # served anyway: nothing is dropped or throttled
    a_in = take(q, 40)
    assert texts(a_in) == names("a", 0, 40)
    assert q._fair.inflight == {"A": 40}
    send(q, "A", names("a", 40, 50))      # A's backlog ...
    send(q, "B", ["b0", "b1"])            # ... and quiet tenants sent after it
    send(q, "C", ["c0", "c1"])
    assert texts(q.receive(4)) == ["b0", "b1", "c0", "c1"]
    # 40 of 44 in flight are A's: still noisy; only A is visible, so A comes
    assert texts(q.receive(1)) == ["a40"]
    # A falls to 29 in flight (< 30): served again, in order
    q.delete_batch([m.receipt_handle for m in a_in[:10]])
    q.delete(a_in[10].receipt_handle)
    q.delete(a_in[11].receipt_handle)
    assert q._fair.inflight["A"] == 29
    send(q, None, ["d0"])  # a message without a group id: a tenant of its own
    # a41 makes A 30 of 34 in flight, noisy again: d0 first, then A (only A is left)
    assert texts(q.receive(3)) == ["a41", "d0", "a42"]


def test_the_ten_percent_share_is_exact(reg):
    q = reg.create("q", visibility_timeout=600)
    send(q, "A", names("a", 0, 30))
    take(q, 30)
    send(q, None, names("p", 0, 269))
    assert texts(take(q, 269)) == names("p", 0, 269)
    # A: 30 of 299 in flight, more than 10 %: noisy
    send(q, "A", ["a30"])
    send(q, None, ["x"])
    assert texts(q.receive(1)) == ["x"]
    # now 30 of 300: not more than 10 %, so A is quiet and its older message comes first
    send(q, None, ["y"])
    assert texts(q.receive(1)) == ["a30"]
    assert texts(q.receive(1)) == ["y"]


def test_fewer_than_thirty_in_flight_is_never_noisy(reg):
    q = reg.create("q", visibility_timeout=600)
    send(q, "A", names("a", 0, 29))
    take(q, 29)  # 29 of 29 in flight: 100 %, but fewer than 30
    send(q, "A", ["a29", "a30"])
    send(q, "B", ["b0"])
    # a29 brings A to 30 (noisy): b0 before a30
    assert texts(q.receive(3)) == ["a29", "b0", "a30"]


def test_noisy_tenants_with_fewest_in_flight_first(reg):
    q = reg.create("q", visibility_timeout=600)
    send(q, "A", names("a", 0, 40))
    take(q, 40)
    send(q, "B", names("b", 0, 31))
    take(q, 31)  # A 40, B 31 of 71: both noisy
    send(q, "A", names("a", 40, 45))
    send(q, "B", names("b", 31, 45))
    # only noisy tenants are visible: B (fewer in flight) until it has as many
    # as A, then the oldest message of the two
    got = texts(q.receive(10))
    assert got == names("b", 31, 40) + ["a40"]


def test_lease_expiry_and_visibility_zero_end_a_noisy_tenants_in_flight(reg, qclock):
    q = reg.create("q", visibility_timeout=10)
    send(q, "A", names("a", 0, 35))
    a_in = take(q, 35)
    send(q, "B", ["b0"])
    send(q, "A", ["a35"])
    assert texts(q.receive(1)) == ["b0"]
    # A's leases end: A has nothing in flight, its messages are visible again, oldest first
    qclock.advance(11)
    assert q.counts()["in_flight"] == 0
    assert q._fair.inflight == {}
    assert texts(q.receive(10)) == names("a", 0, 10)
    # visibility 0 ends a lease at once (and its in-flight count)
    a2 = take(q, 25)
    # b0's lease ended too: visible again, it comes as soon as A is noisy (30 in flight)
    assert texts(a2) == names("a", 10, 30) + ["b0"] + names("a", 30, 34)
    assert q._fair.inflight == {"A": 34, "B": 1}
    # visibility 0 ends a lease at once (and its in-flight count)
    q.change_visibility(a2[-1].receipt_handle, 0)
    assert q._fair.inflight["A"] == 33
    assert len(a_in) == 35


def test_fresh_noisy_messages_are_parked_not_lost(reg, qclock):
    q = reg.create("q", visibility_timeout=600)
    send(q, "A", names("a", 0, 30))
    take(q, 30)
    send(q, "A", names("a", 30, 80))
    send(q, "B", ["b0"])
    assert texts(q.receive(1)) == ["b0"]  # found past 50 of A's messages
    assert q.counts() == {"visible": 50, "in_flight": 31, "delayed": 0}
    assert q.get_attributes(["ApproximateNumberOfMessages"]) == {"ApproximateNumberOfMessages": "50"}
    assert texts(take(q, 50)) == names("a", 30, 80)
    assert q.receive(10) == []


def test_in_flight_counts_survive_reopen(reg, tmp_path, qclock):
    q = reg.create("q", visibility_timeout=600)
    send(q, "A", names("a", 0, 40))
    take(q, 40)
    send(q, "A", ["a40"])
    send(q, "B", ["b0", "b1"])
    assert texts(q.receive(1)) == ["b0"]
    # a crash image (the files as they are on disk while the queue is open: the
    # state log replayed, no snapshot of this state) and a clean reopen
    q.flush()
    crash = str(tmp_path / "crash")
    shutil.copytree(str(tmp_path / "queues"), crash)
    regs = [QueueRegistry(crash, clock=qclock), reopen(reg, tmp_path, qclock)]
    for r in regs:
        q = r.get("q")
        assert q._fair.inflight == {"A": 40, "B": 1}
        assert q.counts() == {"visible": 2, "in_flight": 41, "delayed": 0}
        # still noisy after the restart: b1 before a40
        assert texts(q.receive(2)) == ["b1", "a40"]
        r.close()


def test_a_data_dir_from_before_fair_queues_counts_its_groups_when_it_turns_fair(reg, tmp_path, qclock):
    """queue.json without "fair" (written before this version) whose messages
    already carry group ids: the first new group id counts those in flight."""
    q = reg.create("q", visibility_timeout=600)
    send(q, "A", names("a", 0, 35))
    take(q, 35)
    send(q, "A", ["a35"])
    reg.close()
    path = os.path.join(str(tmp_path / "queues"), "q", "queue.json")
    info = json.load(open(path))
    del info["fair"]
    with open(path, "w") as f:
        json.dump(info, f)
    reg = QueueRegistry(str(tmp_path / "queues"), clock=qclock)
    q = reg.get("q")
    assert q._fair is None
    send(q, "B", ["b0"])
    assert q._fair.inflight == {"A": 35}
    assert queue_json(tmp_path, "q")["fair"] is True
    assert texts(q.receive(2)) == ["b0", "a35"]
    reg.close()


def test_purge_forgets_every_tenant(reg):
    q = reg.create("q", visibility_timeout=600)
    send(q, "A", names("a", 0, 40))
    take(q, 30)
    q.purge()
    assert q._fair.inflight == {} and not q._fair.parked_of
    send(q, "A", ["a"])
    assert texts(q.receive(10)) == ["a"]


def test_dead_letter_moves_and_move_tasks_take_parked_messages(reg, qclock):
    dlq = reg.create("dlq", visibility_timeout=600)
    q = reg.create("q", visibility_timeout=5, dead_letter_queue="dlq", max_receive_count=1)
    send(q, "A", names("a", 0, 30))
    take(q, 30)
    send(q, "A", names("a", 30, 40))
    send(q, "B", ["b0"])
    assert texts(q.receive(1)) == ["b0"]  # a30..a39 parked
    qclock.advance(6)  # every lease ends; received once, each moves to the DLQ ...
    # ... and the ten never received (parked before) come, in order
    assert texts(q.receive(10)) == names("a", 30, 40)
    # b0 (newer than those) is visible, moved by the next receive
    assert q.counts() == {"visible": 1, "in_flight": 10, "delayed": 0}
    assert q._fair.inflight == {"A": 10}
    assert q.receive(10) == []
    moved = take(dlq, 31)
    assert texts(moved) == names("a", 0, 30) + ["b0"]
    assert [m.group_id for m in moved] == ["A"] * 30 + ["B"]
    assert dlq._fair is not None  # moved-in group ids make the DLQ fair too
    assert dlq._fair.inflight == {"A": 30, "B": 1}


def test_a_noisy_tenant_with_only_parked_messages_after_reopen(reg, tmp_path, qclock):
    """Parking is an order of delivery, not state: after a restart the parked
    messages are visible like any other, in order."""
    q = reg.create("q", visibility_timeout=600)
    send(q, "A", names("a", 0, 30))
    take(q, 30)
    send(q, "A", names("a", 30, 40))
    send(q, "B", ["b0"])
    assert texts(q.receive(1)) == ["b0"]
    q.compact()
    reg = reopen(reg, tmp_path, qclock)
    q = reg.get("q")
    assert q.counts()["visible"] == 10
    assert texts(take(q, 10)) == names("a", 30, 40)
    reg.close()


def test_no_group_queue_messages_stay_on_the_plain_path(reg):
    """On a fair queue, receives with no tenant near 30 in flight are the
    standard queue's oldest-first receives."""
    q = reg.create("q", visibility_timeout=600)
    send(q, "A", names("a", 0, 5))
    send(q, None, names("p", 0, 5))
    send(q, "B", names("b", 0, 5))
    assert texts(take(q, 15)) == names("a", 0, 5) + names("p", 0, 5) + names("b", 0, 5)
    assert q._fair.inflight == {"A": 5, "B": 5} and not q._fair.near


def test_move_task_takes_parked_messages(reg, qclock):
    src = reg.create("src", visibility_timeout=600)
    dlq = reg.create("dlq2", visibility_timeout=600)
    send(dlq, "A", names("a", 0, 30))
    take(dlq, 30)
    send(dlq, "A", names("a", 30, 40))
    send(dlq, "B", ["b0"])
    assert texts(dlq.receive(1)) == ["b0"]  # a30..a39 parked
    assert dlq.move_messages("src") == 10
    assert texts(take(src, 10)) == names("a", 30, 40)
    assert dlq.counts()["visible"] == 0


def test_a_noisy_tenants_message_past_max_receive_count_still_moves(reg):
    dlq = reg.create("dlq")
    q = reg.create("q", visibility_timeout=600, dead_letter_queue="dlq", max_receive_count=1)
    send(q, "A", names("a", 0, 31))
    a_in = take(q, 31)
    q.change_visibility(a_in[0].receipt_handle, 0)  # a0 visible again; A: 30 in flight, noisy
    send(q, "B", ["b0"])
    # a0 is moved on the way (not set aside as a noisy tenant's), b0 delivered
    assert texts(q.receive(1)) == ["b0"]
    assert texts(dlq.receive(10)) == ["a0"]
