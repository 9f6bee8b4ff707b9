"""The queue contract: one set of SQS-queue rules, run against every variant.

Variants (conftest.py): standard and FIFO queues, embedded under flush
``always``, ``interval`` and ``never``, and through a real ``vqs serve`` with
``vqs.Client``. A rule that holds for one variant and not another is a drift
this suite exists to catch; each test names the rule it checks. FIFO-only
rules take the ``fifo_qh`` fixture, standard-only ones ``standard_qh``.

Time: embedded variants move a manual clock; the server variants sleep, so
the leases and delays here are one or two seconds.
"""

from __future__ import annotations

import threading
import time

import pytest

from vqs.errors import (
    InvalidMessageContents,
    InvalidParameterValue,
    MessageNotAvailable,
    MessageNotInflight,
    MissingParameter,
    PurgeQueueInProgress,
    ReceiptHandleExpired,
    ReceiptHandleIsInvalid,
)


def bodies(msgs) -> list[bytes]:
    return [m.body for m in msgs]


def counts(q) -> tuple[int, int, int]:
    """(visible, in flight, delayed), from the queue's SQS attributes."""
    a = q.get_attributes()
    return (int(a["ApproximateNumberOfMessages"]), int(a["ApproximateNumberOfMessagesNotVisible"]),
            int(a["ApproximateNumberOfMessagesDelayed"]))


# ------------------------------------------------------------------ send / receive / delete


def test_a_sent_message_is_received_once_with_its_id_body_and_receive_count_1(qh):
    q = qh.queue()
    mid = qh.send(q, b"hello")
    [m] = q.receive(max_messages=10)
    assert (m.id, m.body, m.receive_count) == (mid, b"hello", 1)
    assert m.receipt_handle
    assert q.receive(max_messages=10) == []  # leased: not delivered twice


def test_a_text_body_comes_back_as_its_utf8_bytes(qh):
    q = qh.queue()
    qh.send(q, "héllo ✓")
    [m] = q.receive()
    assert m.body == "héllo ✓".encode()


def test_receive_on_an_empty_queue_returns_an_empty_list(qh):
    q = qh.queue()
    assert q.receive(max_messages=10) == []
    assert q.receive(max_messages=1, wait_seconds=0) == []


def test_a_deleted_message_never_comes_back_and_a_second_delete_is_a_no_op(qh):
    q = qh.queue()
    qh.send(q, b"a")
    qh.send(q, b"b", group="h")
    msgs = q.receive(max_messages=10, visibility_timeout=30)
    assert sorted(bodies(msgs)) == [b"a", b"b"] and counts(q) == (0, 2, 0)
    [m] = [m for m in msgs if m.body == b"a"]
    q.delete(m.receipt_handle)
    q.delete(m.receipt_handle)  # already deleted: success, nothing happens
    assert counts(q) == (0, 1, 0)
    with pytest.raises(MessageNotAvailable):  # no lease left to end: it cannot come back
        q.change_visibility(m.receipt_handle, 0)
    for other in msgs:
        if other is not m:
            q.change_visibility(other.receipt_handle, 0)
    assert bodies(qh.drain(q)) == [b"b"]


def test_a_malformed_receipt_handle_is_refused(qh):
    q = qh.queue()
    qh.send(q, b"a")
    with pytest.raises(ReceiptHandleIsInvalid):
        q.delete("not-a-receipt-handle")
    with pytest.raises(ReceiptHandleIsInvalid):
        q.change_visibility("not-a-receipt-handle", 0)
    assert bodies(q.receive()) == [b"a"]  # untouched


# ------------------------------------------------------------------ visibility and leases


def test_the_visibility_timeout_hides_a_message_until_its_lease_ends(qh):
    """...and change_visibility extends a lease past its first end."""
    q = qh.queue()
    qh.send(q, b"a", group="a")
    qh.send(q, b"b", group="b")
    msgs = q.receive(max_messages=10, visibility_timeout=2)
    t = qh.now()
    [m] = [x for x in msgs if x.body == b"a"]
    [extended] = [x for x in msgs if x.body == b"b"]
    q.change_visibility(extended.receipt_handle, 30)
    assert q.receive(max_messages=10) == []
    qh.sleep_until(t + 1)
    assert q.receive(max_messages=10) == []  # still leased
    qh.sleep_until(t + 2.3)
    [again] = q.receive(max_messages=10)  # "b" stays hidden: its lease was extended
    assert (again.id, again.body, again.receive_count) == (m.id, b"a", 2)
    assert again.receipt_handle != m.receipt_handle  # a new delivery, a new handle
    q.change_visibility(extended.receipt_handle, 0)  # the same handle still owns the lease
    [b] = q.receive()
    assert (b.id, b.receive_count) == (extended.id, 2)


def test_the_queue_visibility_timeout_is_the_default_lease_and_receive_overrides_it(qh):
    q = qh.queue(visibility_timeout=0)
    qh.send(q, b"a")
    [m] = q.receive()  # leased for the queue's 0 s: visible again at once
    [again] = q.receive(visibility_timeout=30)
    assert (again.id, again.receive_count) == (m.id, 2)
    assert q.receive() == []  # the receive's own 30 s lease holds


def test_change_visibility_0_releases_the_message_at_once_with_receive_count_plus_1(qh):
    q = qh.queue()
    qh.send(q, b"a")
    [m] = q.receive(visibility_timeout=30)
    q.change_visibility(m.receipt_handle, 0)
    [again] = q.receive()
    assert (again.id, again.body, again.receive_count) == (m.id, b"a", 2)


def test_fifo_a_handle_of_an_earlier_delivery_cannot_change_the_current_lease(fifo_qh):
    qh = fifo_qh
    q = qh.queue()
    qh.send(q, b"a")
    [first] = q.receive(visibility_timeout=0)
    [second] = q.receive(visibility_timeout=30)
    with pytest.raises(MessageNotInflight):
        q.change_visibility(first.receipt_handle, 0)
    assert q.receive() == []  # the current lease held
    q.change_visibility(second.receipt_handle, 0)
    assert [m.receive_count for m in q.receive()] == [3]


def test_a_handle_of_a_deleted_message_cannot_change_visibility(qh):
    """SQS: InvalidParameterValue, "Message does not exist or is not available
    for visibility timeout change" (MessageNotAvailable, a subclass)."""
    q = qh.queue()
    qh.send(q, b"a")
    [m] = q.receive()
    q.delete(m.receipt_handle)
    with pytest.raises(MessageNotAvailable) as e:
        q.change_visibility(m.receipt_handle, 0)
    assert isinstance(e.value, InvalidParameterValue)
    assert str(e.value) == (f"Value {m.receipt_handle} for parameter ReceiptHandle is invalid. "
                            "Reason: Message does not exist or is not available for visibility "
                            "timeout change.")


def test_standard_an_earlier_handle_changes_the_lease_of_the_message_in_flight(standard_qh):
    """SQS (standard queues): every receipt handle ever issued for a message
    stays usable; an older one changes the lease of the current delivery."""
    qh = standard_qh
    q = qh.queue()
    qh.send(q, b"a")
    [first] = q.receive(visibility_timeout=0)
    [second] = q.receive(visibility_timeout=30)
    q.change_visibility(first.receipt_handle, 0)  # ends the current lease
    [third] = q.receive(visibility_timeout=30)
    assert (third.id, third.receive_count) == (first.id, 3)
    assert second.receipt_handle != third.receipt_handle


def test_standard_an_earlier_handle_deletes_the_message(standard_qh):
    """SQS (standard queues): DeleteMessage with any handle ever issued for a
    message deletes it, even while it is in flight under a newer one."""
    qh = standard_qh
    q = qh.queue()
    qh.send(q, b"a")
    [first] = q.receive(visibility_timeout=0)
    [second] = q.receive(visibility_timeout=30)
    q.delete(first.receipt_handle)
    assert counts(q) == (0, 0, 0)
    q.delete(second.receipt_handle)  # already deleted: success
    with pytest.raises(MessageNotAvailable):
        q.change_visibility(second.receipt_handle, 0)


def test_standard_a_handle_of_a_message_not_in_flight_changes_nothing(standard_qh):
    """SQS (standard queues): ChangeMessageVisibility on a message that is no
    longer in flight (visible again) succeeds and changes nothing."""
    qh = standard_qh
    q = qh.queue()
    qh.send(q, b"a")
    [m] = q.receive(visibility_timeout=0)
    q.change_visibility(m.receipt_handle, 30)  # visible again: not leased by this
    assert counts(q) == (1, 0, 0)
    [again] = q.receive()
    assert again.receive_count == 2


def test_fifo_a_stale_handle_is_refused_and_deletes_nothing(fifo_qh):
    qh = fifo_qh
    q = qh.queue()
    qh.send(q, b"a")
    [first] = q.receive(visibility_timeout=0)
    [second] = q.receive(visibility_timeout=30)
    with pytest.raises(InvalidParameterValue):  # SQS: "The receipt handle has expired"
        q.delete(first.receipt_handle)
    q.change_visibility(second.receipt_handle, 0)
    assert [m.receive_count for m in q.receive()] == [3]  # nothing was deleted


def test_fifo_a_stale_handle_raises_receipt_handle_expired(fifo_qh):
    """The precise error class, as the embedded API raises it (a subclass of
    InvalidParameterValue): the client raises the embedded API's exceptions."""
    qh = fifo_qh
    q = qh.queue()
    qh.send(q, b"a")
    [first] = q.receive(visibility_timeout=0)
    q.receive(visibility_timeout=30)
    with pytest.raises(ReceiptHandleExpired):
        q.delete(first.receipt_handle)


# ------------------------------------------------------------------ batches


def test_send_batch_returns_one_id_per_entry_in_entry_order(qh):
    q = qh.queue()
    sent = [f"m{i}".encode() for i in range(7)]
    ids = qh.send_batch(q, sent)
    assert len(ids) == 7 and len(set(ids)) == 7
    got = {m.id: m.body for m in qh.drain(q)}
    assert got == dict(zip(ids, sent))  # the i-th id is the i-th entry's message


def test_send_batch_with_an_invalid_entry_raises_and_sends_nothing(qh):
    q = qh.queue()
    with pytest.raises(MissingParameter):
        q.send_batch([qh.entry("ok"), qh.entry("")])  # an empty body
    with pytest.raises(InvalidMessageContents):
        q.send_batch([qh.entry("ok"), qh.entry("bad \x00 char")])
    assert q.receive(max_messages=10) == []


def test_delete_batch_reports_each_entry_and_deletes_the_valid_ones(qh):
    q = qh.queue()
    qh.send_batch(q, [b"a", b"b", b"c"])
    msgs = qh.drain(q)
    assert sorted(bodies(msgs)) == [b"a", b"b", b"c"]
    keep = next(m for m in msgs if m.body == b"b")
    gone = [m.receipt_handle for m in msgs if m is not keep]
    deleted, failed = qh.delete_entries(q, [gone[0], "junk-handle", gone[1]])
    assert deleted == 2
    assert failed == {"junk-handle": "ReceiptHandleIsInvalid"}
    assert counts(q) == (0, 1, 0)
    for h in gone:
        with pytest.raises(MessageNotAvailable):
            q.change_visibility(h, 0)
    q.change_visibility(keep.receipt_handle, 0)
    [back] = qh.drain(q)
    assert (back.id, back.receive_count) == (keep.id, 2)


# ------------------------------------------------------------------ delays


def test_standard_delay_seconds_hides_one_message_until_its_delay_ends(standard_qh):
    qh = standard_qh
    q = qh.queue()
    qh.send(q, b"later", delay_seconds=1)
    t = qh.now()
    qh.send(q, b"now")
    assert bodies(q.receive(max_messages=10)) == [b"now"]
    qh.sleep_until(t + 1.2)
    [m] = q.receive(max_messages=10)
    assert (m.body, m.receive_count) == (b"later", 1)


def test_fifo_refuses_a_per_message_delay(fifo_qh):
    q = fifo_qh.queue()
    with pytest.raises(InvalidParameterValue):
        fifo_qh.send(q, b"a", delay_seconds=1)
    assert q.receive() == []


def test_the_queue_delay_seconds_hides_every_new_message_until_it_ends(qh):
    q = qh.queue(delay_seconds=1)
    qh.send(q, b"a")
    t = qh.now()
    assert q.receive(max_messages=10) == []
    qh.sleep_until(t + 1.2)
    assert bodies(q.receive(max_messages=10)) == [b"a"]


# ------------------------------------------------------------------ purge


def test_purge_deletes_every_message_sent_before_it_in_flight_ones_included(qh):
    q = qh.queue()
    qh.send(q, b"leased", group="a")
    [m] = q.receive(visibility_timeout=30)
    qh.send(q, b"waiting", group="b")
    assert counts(q) == (1, 1, 0)
    q.purge()
    assert counts(q) == (0, 0, 0)
    assert q.receive(max_messages=10) == []
    with pytest.raises(MessageNotAvailable):  # the purged lease is gone: it cannot come back
        q.change_visibility(m.receipt_handle, 0)
    assert q.receive(max_messages=10) == []
    with pytest.raises(PurgeQueueInProgress):  # one purge per 60 s
        q.purge()
    qh.send(q, b"after", group="a")
    assert bodies(q.receive(max_messages=10)) == [b"after"]


# ------------------------------------------------------------------ long poll


def test_a_long_poll_returns_as_soon_as_a_message_is_sent(qh):
    q = qh.queue()
    got: list = []
    done = threading.Event()

    def poll():
        got.extend(q.receive(max_messages=10, wait_seconds=15))
        done.set()

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    time.sleep(0.3)  # let the poll start waiting
    assert not done.is_set()  # an empty queue: the poll waits
    sent_at = time.monotonic()
    qh.send(q, b"wake")
    assert done.wait(10)
    woke_after = time.monotonic() - sent_at
    t.join(5)
    assert bodies(got) == [b"wake"]
    assert woke_after < 5, woke_after  # woken by the send, far before the 15 s wait


# ------------------------------------------------------------------ dead-letter queue


def test_a_message_received_more_than_max_receive_count_times_moves_to_the_dlq(qh):
    dlq = qh.queue("dlq")
    q = qh.queue(dead_letter_queue=dlq.name, max_receive_count=2)
    mid = qh.send(q, b"poison", attributes={"kind": "image"})
    for n in (1, 2):
        [m] = q.receive(visibility_timeout=0)
        assert m.receive_count == n
    assert q.receive(max_messages=10) == []  # a third receive moves it instead
    [moved] = dlq.receive()
    assert (moved.id, moved.body) == (mid, b"poison")
    assert moved.attributes["kind"]["StringValue"] == "image"
    assert q.receive(max_messages=10) == []


# ------------------------------------------------------------------ attributes


def test_string_message_attributes_round_trip_in_sqs_shape(qh):
    q = qh.queue()
    qh.send(q, b"a", attributes={"kind": "image", "size": "42"})
    [m] = q.receive()
    assert m.attributes == {"kind": {"DataType": "String", "StringValue": "image"},
                            "size": {"DataType": "String", "StringValue": "42"}}
    qh.send(q, b"b", group="h")
    [plain] = q.receive()
    assert plain.attributes == {}


def test_typed_message_attributes_round_trip(qh):
    q = qh.queue()
    attrs = {"n": {"DataType": "Number", "StringValue": "42"},
             "b": {"DataType": "Binary", "BinaryValue": b"\x00\xff"}}
    qh.send(q, b"a", attributes=attrs)
    [m] = q.receive()
    assert m.attributes == attrs


# ------------------------------------------------------------------ restart


def test_a_restart_keeps_deletes_leases_and_handles_and_brings_back_the_rest(qh):
    """After a clean close and reopen: an acknowledged delete stays deleted; a
    message whose lease ends comes back with receive count + 1; a lease still
    running holds, and its pre-restart handle still works; a message never
    received comes back as it was."""
    q = qh.queue()
    ids = {b: qh.send(q, b, group=b.decode()) for b in (b"acked", b"short", b"long")}
    leases = {m.body: m for m in qh.drain(q, visibility_timeout=30)}
    assert set(leases) == {b"acked", b"short", b"long"}
    ids[b"fresh"] = qh.send(q, b"fresh", group="fresh")
    q.change_visibility(leases[b"short"].receipt_handle, 1)
    t = qh.now()
    q.delete(leases[b"acked"].receipt_handle)
    qh.restart()
    q = qh.reopen(q)
    qh.sleep_until(t + 1.2)
    back = {m.body: (m.id, m.receive_count) for m in qh.drain(q)}
    assert back == {b"short": (ids[b"short"], 2), b"fresh": (ids[b"fresh"], 1)}
    q.change_visibility(leases[b"long"].receipt_handle, 0)
    [long] = q.receive()
    assert (long.id, long.body, long.receive_count) == (ids[b"long"], b"long", 2)


# ------------------------------------------------------------------ FIFO rules


def test_fifo_delivers_each_group_in_send_order(fifo_qh):
    qh = fifo_qh
    q = qh.queue()
    sent = [(g, f"{g}{i}".encode()) for i in range(6) for g in ("x", "y")]
    for g, body in sent:
        qh.send(q, body, group=g)
    got = []
    while msgs := q.receive(max_messages=3):
        got += msgs
        for m in msgs:
            q.delete(m.receipt_handle)
    for g in ("x", "y"):
        assert [b for b in bodies(got) if b.startswith(g.encode())] == [b for h, b in sent if h == g]
    assert len(got) == len(sent)


def test_fifo_holds_a_group_while_one_of_its_messages_is_in_flight(fifo_qh):
    qh = fifo_qh
    q = qh.queue()
    qh.send(q, b"x1", group="x")
    qh.send(q, b"x2", group="x")
    qh.send(q, b"y1", group="y")
    [x1] = q.receive(max_messages=1)
    assert x1.body == b"x1"
    assert bodies(q.receive(max_messages=10)) == [b"y1"]  # other groups go on; x2 waits
    assert q.receive(max_messages=10) == []
    q.delete(x1.receipt_handle)
    assert bodies(q.receive(max_messages=10)) == [b"x2"]


def test_fifo_a_released_message_comes_back_before_the_rest_of_its_group(fifo_qh):
    qh = fifo_qh
    q = qh.queue()
    for b in (b"a", b"b", b"c"):
        qh.send(q, b)
    [a] = q.receive(max_messages=1)
    q.change_visibility(a.receipt_handle, 0)
    got = q.receive(max_messages=10)
    assert bodies(got) == [b"a", b"b", b"c"]
    assert [m.receive_count for m in got] == [2, 1, 1]
    # a later message released while an earlier one is in flight waits for it
    q.change_visibility(got[2].receipt_handle, 0)
    q.change_visibility(got[1].receipt_handle, 0)
    assert q.receive(max_messages=10) == []
    q.change_visibility(got[0].receipt_handle, 0)
    again = q.receive(max_messages=10)
    assert bodies(again) == [b"a", b"b", b"c"]
    assert [m.receive_count for m in again] == [3, 2, 2]


def test_fifo_deduplicates_a_repeated_dedup_id_within_the_window(fifo_qh):
    qh = fifo_qh
    q = qh.queue()
    first = qh.send(q, b"a", dedup_id="d-1")
    assert qh.send(q, b"a again", dedup_id="d-1") == first  # the same message id
    other = qh.send(q, b"b", dedup_id="d-2")
    assert other != first
    msgs = qh.drain(q)
    assert bodies(msgs) == [b"a", b"b"]
    for m in msgs:
        q.delete(m.receipt_handle)
    assert qh.send(q, b"a third", dedup_id="d-1") == first  # deleted, but still in the window
    assert q.receive(max_messages=10) == []


def test_fifo_accepts_a_dedup_id_again_after_the_5_minute_window(fifo_qh):
    qh = fifo_qh
    if not qh.fake_time:
        pytest.skip("needs 5 minutes of wall-clock time through the server")
    q = qh.queue()
    first = qh.send(q, b"a", dedup_id="d-1")
    qh.advance(301)
    second = qh.send(q, b"a", dedup_id="d-1")
    assert second != first
    assert bodies(q.receive(max_messages=10)) == [b"a", b"a"]


def test_fifo_content_based_deduplication_drops_a_repeated_body(fifo_qh):
    qh = fifo_qh
    q = qh.queue(content_based_deduplication=True)
    first = qh.send(q, b"same", dedup_id=None)
    assert qh.send(q, b"same", dedup_id=None) == first
    assert qh.send(q, b"other", dedup_id=None) != first
    assert bodies(q.receive(max_messages=10)) == [b"same", b"other"]


def test_fifo_refuses_a_message_without_a_group_id(fifo_qh):
    q = fifo_qh.queue()
    with pytest.raises(MissingParameter):
        q.send(b"a", dedup_id="d-1")
    assert q.receive() == []


def test_standard_queues_keep_repeated_bodies_as_separate_messages(standard_qh):
    qh = standard_qh
    q = qh.queue()
    a = qh.send(q, b"same")
    b = qh.send(q, b"same")
    assert a != b
    assert sorted(m.id for m in qh.drain(q)) == sorted([a, b])
