"""FIFO queues: order per message group (a message in flight holds back the rest of its group), 5-minute deduplication."""

from __future__ import annotations

import hashlib

import pytest

from vqs.broker.queue.registry import QueueRegistry
from vqs.errors import InvalidParameterValue, MissingParameter, ReceiptHandleExpired


def reopen(reg, tmp_path, qclock):
    reg.close()
    return QueueRegistry(str(tmp_path / "queues"), clock=qclock)


def test_fifo_attributes(reg):
    q = reg.create("q.fifo", fifo=True, content_based_deduplication=True)
    a = q.get_attributes()
    assert a["FifoQueue"] == "true" and a["ContentBasedDeduplication"] == "true"
    assert a["DeduplicationScope"] == "queue" and a["FifoThroughputLimit"] == "perQueue"
    q2 = reg.create("h.fifo", FifoQueue="true", DeduplicationScope="messageGroup",
                    FifoThroughputLimit="perMessageGroupId")
    assert q2.get_attributes()["FifoThroughputLimit"] == "perMessageGroupId"


def test_fifo_send_requirements(reg):
    q = reg.create("q.fifo", fifo=True)
    with pytest.raises(MissingParameter):
        q.send(b"x", dedup_id="d")  # no group
    with pytest.raises(InvalidParameterValue):
        q.send(b"x", group_id="g")  # no dedup id and no content-based dedup
    with pytest.raises(InvalidParameterValue):
        q.send(b"x", group_id="g", dedup_id="d", delay_seconds=5)  # no per-message delay
    with pytest.raises(InvalidParameterValue):
        q.send(b"x", group_id="g" * 129, dedup_id="d")
    with pytest.raises(InvalidParameterValue):
        q.send(b"x", group_id="g", dedup_id="bad id")  # space is not allowed


def test_order_within_group_and_group_lock(reg, qclock):
    q = reg.create("q.fifo", fifo=True, content_based_deduplication=True, visibility_timeout=30)
    for i in range(3):
        q.send(f"a{i}", group_id="A")
        q.send(f"b{i}", group_id="B")
    ms = q.receive(2)
    assert [m.text for m in ms] == ["a0", "a1"]  # the oldest group first, in order
    assert [m.group_id for m in ms] == ["A", "A"]
    ms2 = q.receive(10)
    assert [m.text for m in ms2] == ["b0", "b1", "b2"]  # A is locked: a2 not delivered
    assert q.receive(10) == []
    q.delete(ms[0].receipt_handle)
    assert q.receive(10) == []  # a1 still in flight
    q.delete(ms[1].receipt_handle)
    (m,) = q.receive(10)
    assert m.text == "a2"
    seqs = [x.sequence_number for x in ms + ms2 + [m]]
    assert all(s is not None and len(s) == 20 for s in seqs)


def test_expired_message_is_redelivered_before_later_ones(reg, qclock):
    q = reg.create("q.fifo", fifo=True, content_based_deduplication=True, visibility_timeout=10)
    q.send_batch([{"body": f"m{i}", "group_id": "g"} for i in range(3)])
    ms = q.receive(1)
    assert ms[0].text == "m0"
    qclock.advance(10)
    ms = q.receive(10)
    assert [m.text for m in ms] == ["m0", "m1", "m2"]
    assert [m.receive_count for m in ms] == [2, 1, 1]


def test_dedup_window(reg, qclock):
    q = reg.create("q.fifo", fifo=True)
    r1 = q.send_message(b"x", group_id="g", dedup_id="d1")
    r2 = q.send_message(b"other body", group_id="g", dedup_id="d1")
    assert r1 == r2  # accepted, not enqueued again: same id and sequence number
    assert q.counts()["visible"] == 1
    qclock.advance(299)
    assert q.send(b"y", group_id="g", dedup_id="d1") == r1["message_id"]
    qclock.advance(2)  # the 5-minute window has passed
    assert q.send(b"y", group_id="g", dedup_id="d1") != r1["message_id"]
    assert q.counts()["visible"] == 2


def test_dedup_applies_after_delete_and_across_reopen(reg, tmp_path, qclock):
    q = reg.create("q.fifo", fifo=True, content_based_deduplication=True)
    mid = q.send("same", group_id="g")
    (m,) = q.receive()
    q.delete(m.receipt_handle)
    assert q.send("same", group_id="g") == mid
    reg = reopen(reg, tmp_path, qclock)
    q = reg.get("q.fifo")
    qclock.advance(60)
    assert q.send("same", group_id="g") == mid
    assert q.receive() == []
    reg.close()


def test_content_based_dedup_is_sha256_of_body(reg):
    q = reg.create("q.fifo", fifo=True, content_based_deduplication=True)
    q.send("body", group_id="g")
    (m,) = q.receive()
    assert m.dedup_id == hashlib.sha256(b"body").hexdigest()
    assert m.system_attributes()["MessageDeduplicationId"] == m.dedup_id


def test_dedup_inside_one_batch(reg):
    q = reg.create("q.fifo", fifo=True)
    res = q.send_batch_entries([
        {"id": "1", "body": "a", "group_id": "g", "dedup_id": "same"},
        {"id": "2", "body": "b", "group_id": "g", "dedup_id": "same"},
    ])
    a, b = res["successful"]
    assert a["message_id"] == b["message_id"] and a["sequence_number"] == b["sequence_number"]
    assert q.counts()["visible"] == 1


def test_dedup_scope_message_group(reg):
    q = reg.create("q.fifo", fifo=True, deduplication_scope="messageGroup")
    a = q.send(b"x", group_id="g1", dedup_id="d")
    b = q.send(b"x", group_id="g2", dedup_id="d")
    assert a != b
    assert q.send(b"x", group_id="g1", dedup_id="d") == a


def test_fifo_expired_handle_raises(reg, qclock):
    q = reg.create("q.fifo", fifo=True, content_based_deduplication=True, visibility_timeout=10)
    q.send("x", group_id="g")
    (m,) = q.receive()
    qclock.advance(11)
    with pytest.raises(ReceiptHandleExpired) as ei:
        q.delete(m.receipt_handle)
    assert ei.value.code == "InvalidParameterValue"
    (m2,) = q.receive()
    with pytest.raises(ReceiptHandleExpired):
        q.delete(m.receipt_handle)  # stale: received again since
    q.delete(m2.receipt_handle)
    q.delete(m2.receipt_handle)  # already deleted: success


def test_fifo_queue_delay(reg, qclock):
    q = reg.create("q.fifo", fifo=True, content_based_deduplication=True, delay_seconds=5)
    q.send("x", group_id="g")
    assert q.counts() == {"visible": 0, "in_flight": 0, "delayed": 1}
    assert q.receive() == []
    qclock.advance(5)
    assert [m.text for m in q.receive()] == ["x"]


def test_fifo_delay_zero_is_the_queues_delay(reg, qclock):
    """SQS: a FIFO send with DelaySeconds=0 is as if it had none (the queue's delay applies)."""
    q = reg.create("q.fifo", fifo=True, content_based_deduplication=True, delay_seconds=5)
    q.send_message("x", group_id="g", delay_seconds=0)
    r = q.send_batch_entries([{"id": "a", "body": "y", "group_id": "g", "delay_seconds": 0},
                              {"id": "b", "body": "z", "group_id": "g", "delay_seconds": 1}])
    assert [s["id"] for s in r["successful"]] == ["a"] and [f["id"] for f in r["failed"]] == ["b"]
    assert q.counts() == {"visible": 0, "in_flight": 0, "delayed": 2}
    qclock.advance(5)
    assert [m.text for m in q.receive(10)] == ["x", "y"]


def test_fifo_send_batch_entries_fail_whole_without_group_or_dedup(reg):
    q = reg.create("q.fifo", fifo=True)
    ok = {"id": "a", "body": "x", "group_id": "g", "dedup_id": "d"}
    with pytest.raises(InvalidParameterValue, match="must contain the parameter MessageGroupId"):
        q.send_batch_entries([ok, {"id": "b", "body": "y", "dedup_id": "e"}])
    with pytest.raises(InvalidParameterValue, match="ContentBasedDeduplication"):
        q.send_batch_entries([ok, {"id": "b", "body": "y", "group_id": "g"}])
    assert q.counts() == {"visible": 0, "in_flight": 0, "delayed": 0}


def test_trace_header_is_stored_with_the_message(reg, tmp_path, qclock):
    q = reg.create("q.fifo", fifo=True, content_based_deduplication=True)
    q.send_message("x", group_id="g", trace_header="Root=1-a")
    q.send_batch_entries([{"id": "b", "body": "y", "group_id": "h", "trace_header": "Root=1-b"}])
    q.send_message("z", group_id="i")
    reg = reopen(reg, tmp_path, qclock)
    try:
        ms = reg.get("q.fifo").receive(10)
        assert [(m.text, m.trace_header) for m in ms] == [("x", "Root=1-a"), ("y", "Root=1-b"), ("z", None)]
        assert ms[0].system_attributes()["AWSTraceHeader"] == "Root=1-a"
        assert "AWSTraceHeader" not in ms[2].system_attributes()
    finally:
        reg.close()


def test_fifo_state_survives_reopen(reg, tmp_path, qclock):
    q = reg.create("q.fifo", fifo=True, content_based_deduplication=True, visibility_timeout=100)
    for i in range(4):
        q.send(f"m{i}", group_id="g")
    q.send("other", group_id="h")
    ms = q.receive(2)
    assert [m.text for m in ms] == ["m0", "m1"]
    q.delete(ms[0].receipt_handle)
    reg = reopen(reg, tmp_path, qclock)
    q = reg.get("q.fifo")
    assert [m.text for m in q.receive(10)] == ["other"]  # g is still locked by m1
    q.delete(ms[1].receipt_handle)
    assert [m.text for m in q.receive(10)] == ["m2", "m3"]
    reg.close()


def test_fifo_dlq_keeps_group_order(reg, qclock):
    dlq = reg.create("dlq.fifo", fifo=True)
    q = reg.create("q.fifo", fifo=True, content_based_deduplication=True, visibility_timeout=1,
                   dead_letter_queue="dlq.fifo", max_receive_count=1)
    q.send_batch([{"body": f"m{i}", "group_id": "g"} for i in range(3)])
    (m,) = q.receive(1)
    assert m.text == "m0"
    qclock.advance(1)
    ms = q.receive(10)  # m0 moves to the DLQ; m1, m2 follow in order
    assert [x.text for x in ms] == ["m1", "m2"]
    (d,) = dlq.receive(10)
    assert d.text == "m0" and d.group_id == "g" and d.source_queue == "q.fifo"


def test_fifo_purge(reg, qclock):
    q = reg.create("q.fifo", fifo=True, content_based_deduplication=True)
    q.send("a", group_id="g")
    q.send("b", group_id="h")
    q.receive(1)
    q.purge()
    assert q.counts() == {"visible": 0, "in_flight": 0, "delayed": 0}
    q.send("c", group_id="g")
    assert [m.text for m in q.receive(10)] == ["c"]


def test_receive_request_attempt_id(reg, qclock):
    q = reg.create("q.fifo", fifo=True, content_based_deduplication=True, visibility_timeout=30)
    q.send_batch([{"body": f"m{i}", "group_id": "g"} for i in range(3)])
    first = q.receive(2, attempt_id="try-1")
    qclock.advance(20)
    again = q.receive(2, attempt_id="try-1")  # a retry: same messages and handles
    assert [m.receipt_handle for m in again] == [m.receipt_handle for m in first]
    qclock.advance(20)  # the retry restarted the visibility timeout (30 s from it)
    assert q.counts()["in_flight"] == 2
    q.delete(first[0].receipt_handle)
    assert q.receive(2, attempt_id="try-1") == []  # not all still in flight: a new receive (g locked)
    with pytest.raises(InvalidParameterValue):
        q.receive(1, attempt_id="bad id")


def test_in_flight_message_hides_only_the_rest_of_its_group(reg, qclock):
    # SQS: a group delivers from its head up to its first message in flight
    q = reg.create("q.fifo", fifo=True, content_based_deduplication=True, visibility_timeout=1)
    q.send_batch([{"body": b, "group_id": "g"} for b in ("foo", "bar", "baz")])
    ms = q.receive(5)
    assert [m.text for m in ms] == ["foo", "bar", "baz"]
    q.change_visibility(ms[1].receipt_handle, 4)
    qclock.advance(2)
    (foo,) = q.receive(5)  # bar (and baz behind it) stay hidden
    assert foo.text == "foo"
    q.delete(foo.receipt_handle)
    qclock.advance(3)
    assert [m.text for m in q.receive(5)] == ["bar", "baz"]


def test_group_visible_again_queues_behind_waiting_groups(reg, qclock):
    # SQS: a group whose head is visible again comes after the groups already waiting
    q = reg.create("q.fifo", fifo=True, content_based_deduplication=True, visibility_timeout=1)
    for b, g in [("g1-m1", "1"), ("g1-m2", "1"), ("g1-m3", "1"), ("g2-m1", "2"), ("g3-m1", "3")]:
        q.send(b, group_id=g)
    assert [m.text for m in q.receive(2)] == ["g1-m1", "g1-m2"]
    assert [m.text for m in q.receive(1)] == ["g2-m1"]  # group 1 is hidden behind g1-m1
    qclock.advance(2)
    assert [m.text for m in q.receive(10, visibility_timeout=0)] == [
        "g3-m1", "g1-m1", "g1-m2", "g1-m3", "g2-m1"]


def test_zero_visibility_receive_sends_groups_to_the_back(reg, qclock):
    q = reg.create("q.fifo", fifo=True, content_based_deduplication=True)
    for b, g in [("g1-m1", "1"), ("g2-m1", "2"), ("g2-m2", "2"), ("g3-m1", "3"), ("g1-m2", "1")]:
        q.send(b, group_id=g)
    assert [m.text for m in q.receive(3, visibility_timeout=0)] == ["g1-m1", "g1-m2", "g2-m1"]
    assert [m.text for m in q.receive(10, visibility_timeout=0)] == [
        "g3-m1", "g1-m1", "g1-m2", "g2-m1", "g2-m2"]


def test_head_made_visible_delivers_without_the_in_flight_rest(reg, qclock):
    q = reg.create("q.fifo", fifo=True, content_based_deduplication=True, visibility_timeout=30)
    for b, g in [("g1-m1", "1"), ("g1-m2", "1"), ("g2-m1", "2")]:
        q.send(b, group_id=g)
    ms = q.receive(2)
    q.change_visibility(ms[0].receipt_handle, 0)
    assert [m.text for m in q.receive(3)] == ["g2-m1", "g1-m1"]


def test_purge_clears_the_dedup_window_across_reopen(reg, tmp_path, qclock):
    q = reg.create("q.fifo", fifo=True)
    q.send("a", group_id="g", dedup_id="d")
    q.purge()
    q.send("b", group_id="g", dedup_id="d")  # not a duplicate after the purge
    assert [m.text for m in q.receive(10, visibility_timeout=0)] == ["b"]
    reg = reopen(reg, tmp_path, qclock)
    q = reg.get("q.fifo")
    q.send("c", group_id="g", dedup_id="d")  # a duplicate of b (sent after the purge)
    assert [m.text for m in q.receive(10)] == ["b"]
    reg.close()


@pytest.mark.parametrize("created, changed", [("queue", "messageGroup"), ("messageGroup", "queue")])
def test_dedup_scope_stays_the_one_the_queue_was_created_with(reg, tmp_path, qclock, created, changed):
    # SQS reports a changed DeduplicationScope but keeps deduplicating as created
    extra = {"fifo_throughput_limit": "perMessageGroupId"} if created == "messageGroup" else {}
    q = reg.create("q.fifo", fifo=True, deduplication_scope=created, **extra)
    q.send("a", group_id="g1", dedup_id="d")
    if changed == "messageGroup":
        q.set_attributes(DeduplicationScope=changed, FifoThroughputLimit="perMessageGroupId")
    else:
        q.set_attributes(DeduplicationScope=changed, FifoThroughputLimit="perQueue")
    assert q.get_attributes()["DeduplicationScope"] == changed
    reg = reopen(reg, tmp_path, qclock)
    q = reg.get("q.fifo")
    q.send("b", group_id="g2", dedup_id="d")
    got = [m.text for m in q.receive(10)]
    assert got == (["a"] if created == "queue" else ["a", "b"])
    reg.close()
