"""SQS-style queues: one test per semantic, limit and error (injected clock, no sleeps)."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from vqs.broker.queue.config_files import MAGIC, PAGE_SIZE
from vqs.broker.queue.config_files import decode as decode_meta
from vqs.broker.queue.registry import QueueRegistry
from vqs.errors import (
    BatchEntryIdsNotDistinct,
    BatchRequestTooLong,
    EmptyBatchRequest,
    InvalidAttributeName,
    InvalidAttributeValue,
    InvalidBatchEntryId,
    InvalidMessageContents,
    InvalidName,
    InvalidParameterValue,
    LogClosedError,
    MessageTooLarge,
    MissingParameter,
    PurgeQueueInProgress,
    QueueAlreadyExists,
    QueueDoesNotExist,
    ReceiptHandleIsInvalid,
    TooManyEntriesInBatchRequest,
)


def reopen(reg, tmp_path, qclock):
    reg.close()
    return QueueRegistry(str(tmp_path / "queues"), clock=qclock)


# ------------------------------------------------------------------ registry


def test_create_get_list_delete(reg):
    q = reg.create("orders")
    assert reg.get("orders") is q
    reg.create("other")
    assert reg.list() == ["orders", "other"]
    assert reg.list("ord") == ["orders"]
    reg.delete("orders")
    assert reg.list() == ["other"]
    with pytest.raises(QueueDoesNotExist):
        reg.get("orders")
    with pytest.raises(QueueDoesNotExist):
        reg.delete("orders")
    # the name is free at once, and the new queue is empty
    q2 = reg.create("orders")
    assert q2 is not q and q2.counts()["visible"] == 0


def test_create_is_idempotent_with_equal_attributes(reg):
    q = reg.create("a", visibility_timeout=60)
    assert reg.create("a", visibility_timeout=60) is q
    assert reg.create("a") is q  # no attributes given: nothing to compare
    assert reg.create("a", VisibilityTimeout="60") is q
    with pytest.raises(QueueAlreadyExists) as ei:
        reg.create("a", visibility_timeout=30)
    assert "VisibilityTimeout" in str(ei.value)
    assert ei.value.code == "QueueNameExists"


def test_invalid_names(reg):
    for bad in ("", ".", "..", "a/b", "x" * 201, "a b"):
        with pytest.raises(InvalidName):
            reg.create(bad)
    with pytest.raises(InvalidParameterValue):
        reg.create("plain", fifo=True)  # FIFO needs .fifo
    with pytest.raises(InvalidParameterValue):
        reg.create("x.fifo")  # .fifo needs fifo=True


@pytest.mark.parametrize("attrs", [
    {"visibility_timeout": 43201}, {"visibility_timeout": -1}, {"delay_seconds": 901},
    {"receive_wait_seconds": 21}, {"retention_seconds": 59}, {"retention_seconds": 1209601},
    {"max_message_bytes": 1023}, {"max_message_bytes": 1048577}, {"VisibilityTimeout": "abc"},
    {"max_receive_count": 3},  # without a dead-letter queue
    {"FifoQueue": "maybe"},
])
def test_bad_attribute_values(reg, attrs):
    with pytest.raises(InvalidAttributeValue):
        reg.create("q", **attrs)
    assert reg.list() == []


def test_unknown_attribute_names(reg):
    with pytest.raises(InvalidAttributeName):
        reg.create("q", Colour="blue")
    with pytest.raises(InvalidAttributeName):
        reg.create("q", ApproximateNumberOfMessages="3")
    with pytest.raises(InvalidAttributeName):
        reg.create("q", content_based_deduplication=True)  # FIFO only
    q = reg.create("q")
    with pytest.raises(InvalidAttributeName):
        q.set_attributes(FifoQueue="true")
    with pytest.raises(InvalidAttributeName):
        q.get_attributes(["Nope"])


def test_attributes_formatted_as_sqs(reg, qclock):
    reg.create("dlq")
    q = reg.create("q", RedrivePolicy=json.dumps({"deadLetterTargetArn": "arn:aws:sqs:eu-west-1:1:dlq",
                                                  "maxReceiveCount": "5"}))
    a = q.get_attributes()
    assert a["VisibilityTimeout"] == "30"
    assert a["MaximumMessageSize"] == "1048576"
    assert a["MessageRetentionPeriod"] == "345600"
    assert a["DelaySeconds"] == "0"
    assert a["ReceiveMessageWaitTimeSeconds"] == "0"
    assert a["QueueArn"] == "arn:aws:sqs:us-east-1:123456789012:q"
    assert a["RedrivePolicy"] == '{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:dlq","maxReceiveCount":5}'
    assert a["CreatedTimestamp"] == str(int(qclock()))
    assert "FifoQueue" not in a
    assert q.get_attributes(["VisibilityTimeout"]) == {"VisibilityTimeout": "30"}
    assert q.get_attributes(["All"]) == a
    assert q.get_attributes(arn_prefix="arn:aws:sqs:eu-west-1:42")["QueueArn"] == "arn:aws:sqs:eu-west-1:42:q"


def test_set_attributes_persist(reg, tmp_path, qclock):
    q = reg.create("q")
    q.set_attributes(VisibilityTimeout="45", delay_seconds=3, Policy='{"x":1}')
    qclock.advance(10)
    q.set_attributes({"MessageRetentionPeriod": "600"})
    reg = reopen(reg, tmp_path, qclock)
    q = reg.get("q")
    a = q.get_attributes()
    assert (a["VisibilityTimeout"], a["DelaySeconds"], a["MessageRetentionPeriod"], a["Policy"]) == ("45", "3", "600", '{"x":1}')
    assert int(a["LastModifiedTimestamp"]) == int(qclock())
    q.set_attributes(Policy="")
    assert "Policy" not in q.get_attributes()
    reg.close()


def test_queue_meta_is_the_vqs_v1_header(reg, tmp_path):
    q = reg.create("q", visibility_timeout=77, delay_seconds=5, receive_wait_seconds=2,
                   retention_seconds=3600, max_message_bytes=2048, tags={"team": "a", "env": "prod"})
    q.send_batch([b"x", b"y", b"z"])
    q.close()
    page = open(tmp_path / "queues" / "q" / "queue.meta", "rb").read()
    assert len(page) == PAGE_SIZE == 16384
    assert page[:4] == (0x01535156).to_bytes(4, "little") == b"VQS\x01"
    m = decode_meta(page)
    assert (m.max_message_size, m.retention_period, m.receive_wait_seconds, m.delay_seconds,
            m.visibility_timeout) == (2048, 3600, 2, 5, 77)
    assert m.tags == {"team": "a", "env": "prod"}
    assert m.item_count == 3 and m.next_write_offset == 3 and m.next_read_offset == 0
    assert page[34:].startswith(b"team\0a\0env\0prod\0\0")
    assert MAGIC == 0x01535156


def test_tags(reg, tmp_path, qclock):
    q = reg.create("q", tags={"a": "1"})
    q.tag({"b": "2"})
    q.untag(["a", "missing"])
    assert q.tags() == {"b": "2"}
    with pytest.raises(InvalidAttributeValue):
        q.tag({"k" * 129: "v"})
    with pytest.raises(InvalidAttributeValue):
        q.tag({f"k{i}": "v" for i in range(51)})
    big = {f"{i:03d}" + "k" * 125: "v" * 256 for i in range(49)}  # 19 KB: more than the page
    q.tag(big)
    reg = reopen(reg, tmp_path, qclock)
    assert reg.get("q").tags() == {"b": "2", **big}
    reg.close()


# ------------------------------------------------------------------ messages


def test_send_receive_delete(reg, qclock):
    q = reg.create("q")
    mid = q.send(b"hello")
    assert len(mid) == 36 and mid.count("-") == 4
    ids = q.send_batch([b"a", "b", {"body": "c", "attributes": {"k": "v"}}])
    assert len(set(ids + [mid])) == 4
    ms = q.receive(10)
    assert [m.body for m in ms] == [b"hello", b"a", b"b", b"c"]
    assert [m.id for m in ms] == [mid] + ids
    assert all(m.receive_count == 1 for m in ms)
    assert ms[0].sent_timestamp_ms == int(qclock() * 1000)
    assert ms[0].first_receive_timestamp_ms == int(qclock() * 1000)
    assert ms[3].attributes == {"k": {"DataType": "String", "StringValue": "v"}}
    assert ms[2].text == "b"
    assert q.counts() == {"visible": 0, "in_flight": 4, "delayed": 0}
    assert q.receive(10) == []
    q.delete(ms[0].receipt_handle)
    q.delete_batch([m.receipt_handle for m in ms[1:]])
    assert q.counts() == {"visible": 0, "in_flight": 0, "delayed": 0}
    # deleting again is a success that does nothing
    q.delete(ms[0].receipt_handle)


def test_visibility_timeout_expiry_and_redelivery(reg, qclock):
    q = reg.create("q", visibility_timeout=30)
    q.send(b"m")
    (m1,) = q.receive()
    qclock.advance(29.9)
    assert q.receive() == []
    assert q.counts()["in_flight"] == 1
    qclock.advance(0.2)
    assert q.counts() == {"visible": 1, "in_flight": 0, "delayed": 0}
    (m2,) = q.receive(visibility_timeout=5)
    assert m2.id == m1.id and m2.receive_count == 2
    assert m2.receipt_handle != m1.receipt_handle
    assert m2.first_receive_timestamp_ms == m1.first_receive_timestamp_ms
    qclock.advance(5)
    (m3,) = q.receive(visibility_timeout=0)
    assert m3.receive_count == 3
    (m4,) = q.receive()  # visibility 0: visible again at once
    assert m4.receive_count == 4


def test_expired_lease_handle_still_deletes_if_not_received_again(reg, qclock):
    q = reg.create("q", visibility_timeout=10)
    q.send(b"m")
    (m,) = q.receive()
    qclock.advance(20)
    q.delete(m.receipt_handle)
    assert q.receive() == []
    assert q.counts()["visible"] == 0


def test_invalid_receipt_handles(reg):
    q = reg.create("q")
    other = reg.create("other")
    other.send(b"x")
    (m,) = other.receive()
    q.send(b"y")
    (mine,) = q.receive()
    h = mine.receipt_handle
    tampered = h[:-1] + ("0" if h[-1] != "0" else "1")
    forged_offset = "01" + h[2:]
    for bad in ("", "garbage", h[:-2], tampered, forged_offset, m.receipt_handle, h.upper(), None, 42):
        with pytest.raises(ReceiptHandleIsInvalid):
            q.delete(bad)
        with pytest.raises(ReceiptHandleIsInvalid):
            q.change_visibility(bad, 10)
    assert ReceiptHandleIsInvalid.code == "ReceiptHandleIsInvalid"
    with pytest.raises(ReceiptHandleIsInvalid):
        q.delete_batch([h, "garbage"])
    assert q.counts()["in_flight"] == 1  # nothing deleted by the refused batch


def test_handles_of_a_recreated_queue_are_invalid(reg):
    q = reg.create("q")
    q.send(b"x")
    (m,) = q.receive()
    reg.delete("q")
    q2 = reg.create("q")
    with pytest.raises(ReceiptHandleIsInvalid):
        q2.delete(m.receipt_handle)


def test_change_visibility(reg, qclock):
    q = reg.create("q", visibility_timeout=30)
    q.send(b"m")
    (m,) = q.receive()
    qclock.advance(20)
    q.change_visibility(m.receipt_handle, 60)  # from now: 80 s after receipt
    qclock.advance(59)
    assert q.receive() == []
    qclock.advance(1.5)
    (m2,) = q.receive()
    assert m2.receive_count == 2
    # release at once
    q.change_visibility(m2.receipt_handle, 0)
    assert q.counts()["visible"] == 1
    (m3,) = q.receive(visibility_timeout=7200)
    with pytest.raises(InvalidParameterValue):
        q.change_visibility(m3.receipt_handle, 43201)
    # at most 12 hours after this receipt, in total
    qclock.advance(3600)
    q.change_visibility(m3.receipt_handle, 43200 - 3600)
    with pytest.raises(InvalidParameterValue):
        q.change_visibility(m3.receipt_handle, 43200 - 3600 + 1)
    # not in flight any more: a success that changes nothing (standard queue)
    qclock.advance(43200)
    q.change_visibility(m3.receipt_handle, 10)
    assert q.counts()["visible"] == 1


def test_change_visibility_batch_entries(reg):
    q = reg.create("q")
    q.send_batch([b"a", b"b"])
    ms = q.receive(2)
    res = q.change_visibility_batch_entries([
        {"id": "1", "receipt_handle": ms[0].receipt_handle, "visibility_timeout": 0},
        {"id": "2", "receipt_handle": "bad", "visibility_timeout": 0},
        {"id": "3", "receipt_handle": ms[1].receipt_handle, "visibility_timeout": 99999},
    ])
    assert res["successful"] == [{"id": "1"}]
    assert {f["id"]: f["code"] for f in res["failed"]} == {"2": "ReceiptHandleIsInvalid", "3": "InvalidParameterValue"}


def test_receive_limits(reg):
    q = reg.create("q")
    for n in (0, 11, -1, 1.5, "3", True):
        with pytest.raises(InvalidParameterValue):
            q.receive(n)
    for w in (-1, 21, "x"):
        with pytest.raises(InvalidParameterValue):
            q.receive(1, wait_seconds=w)
    for v in (-1, 43201, 1.5):
        with pytest.raises(InvalidParameterValue):
            q.receive(1, visibility_timeout=v)


def test_send_limits_and_errors(reg):
    q = reg.create("q", max_message_bytes=1024)
    q.send(b"x" * 1024)
    with pytest.raises(MessageTooLarge) as ei:
        q.send(b"x" * 1025)
    assert ei.value.code == "InvalidParameterValue"
    with pytest.raises(MessageTooLarge):  # attributes count towards the size
        q.send(b"x" * 1000, attributes={"name": "v" * 30})
    with pytest.raises(MissingParameter):
        q.send(b"")
    with pytest.raises(InvalidMessageContents):
        q.send("bad \x00 char")
    with pytest.raises(InvalidParameterValue):
        q.send(b"x", delay_seconds=901)
    with pytest.raises(InvalidParameterValue):
        q.send(b"x", dedup_id="d")  # standard queue
    with pytest.raises(InvalidParameterValue):
        q.send(b"x", attributes={f"a{i}": "v" for i in range(11)})
    for name in ("AWS.x", "a..b", ".a", "a.", "a b"):
        with pytest.raises(InvalidParameterValue):
            q.send(b"x", attributes={name: "v"})
    with pytest.raises(InvalidParameterValue):
        q.send(b"x", attributes={"n": {"DataType": "Number", "StringValue": "abc"}})
    with pytest.raises(InvalidParameterValue):
        q.send(b"x", attributes={"n": {"DataType": "Blob", "StringValue": "abc"}})
    assert q.counts()["visible"] == 1  # only the first message went in


def test_batch_limits(reg):
    q = reg.create("q")
    with pytest.raises(EmptyBatchRequest):
        q.send_batch([])
    with pytest.raises(TooManyEntriesInBatchRequest):
        q.send_batch([b"x"] * 11)
    with pytest.raises(BatchRequestTooLong):
        q.send_batch([b"x" * 600_000, b"y" * 600_000])
    with pytest.raises(BatchEntryIdsNotDistinct):
        q.send_batch([{"id": "a", "body": "1"}, {"id": "a", "body": "2"}])
    with pytest.raises(InvalidBatchEntryId):
        q.send_batch([{"id": "a b", "body": "1"}])
    with pytest.raises(MissingParameter):
        q.send_batch([b"ok", b""])  # all or nothing
    assert q.counts()["visible"] == 0
    with pytest.raises(EmptyBatchRequest):
        q.delete_batch([])
    with pytest.raises(TooManyEntriesInBatchRequest):
        q.delete_batch(["h"] * 11)


def test_send_batch_entries_reports_per_entry(reg):
    q = reg.create("q", max_message_bytes=1024)
    res = q.send_batch_entries([
        {"id": "ok", "body": "fine"},
        {"id": "big", "body": "x" * 2000},
        {"id": "ok2", "body": b"also fine", "delay_seconds": 2},
    ])
    assert [s["id"] for s in res["successful"]] == ["ok", "ok2"]
    assert res["failed"][0]["id"] == "big" and res["failed"][0]["code"] == "InvalidParameterValue"
    assert res["failed"][0]["sender_fault"] is True


def test_delete_batch_entries(reg):
    q = reg.create("q")
    q.send_batch([b"a", b"b"])
    ms = q.receive(2)
    res = q.delete_batch_entries([{"id": "x", "receipt_handle": ms[0].receipt_handle},
                                  {"id": "y", "receipt_handle": "nope"}])
    assert res["successful"] == [{"id": "x"}]
    assert res["failed"][0]["id"] == "y" and res["failed"][0]["code"] == "ReceiptHandleIsInvalid"


def test_queue_delay_and_message_delay(reg, qclock):
    q = reg.create("q", delay_seconds=10, visibility_timeout=3600)
    q.send(b"queue-delayed")
    q.send(b"now", delay_seconds=0)
    q.send(b"later", delay_seconds=20)
    assert q.counts() == {"visible": 1, "in_flight": 0, "delayed": 2}
    assert [m.body for m in q.receive(10)] == [b"now"]
    qclock.advance(10)
    assert [m.body for m in q.receive(10)] == [b"queue-delayed"]
    qclock.advance(9.9)
    assert q.receive(10) == []
    qclock.advance(0.1)
    assert [m.body for m in q.receive(10)] == [b"later"]
    # changing the queue's delay does not move messages already sent
    q.send(b"x")
    q.set_attributes(delay_seconds=0)
    assert q.receive() == []
    qclock.advance(10)
    assert [m.body for m in q.receive()] == [b"x"]


def test_delays_survive_reopen(reg, tmp_path, qclock):
    q = reg.create("q", visibility_timeout=3600)
    q.send(b"later", delay_seconds=100)
    q.send(b"now")
    reg = reopen(reg, tmp_path, qclock)
    q = reg.get("q")
    assert [m.body for m in q.receive(10)] == [b"now"]
    qclock.advance(100)
    assert [m.body for m in q.receive(10)] == [b"later"]
    reg.close()


def test_retention(reg, qclock):
    q = reg.create("q", retention_seconds=60, visibility_timeout=5)
    q.send(b"old")
    qclock.advance(30)
    q.send(b"young")
    (m,) = q.receive()
    assert m.body == b"old"
    qclock.advance(31)  # "old" is past retention; its lease ended too
    ms = q.receive(10)
    assert [x.body for x in ms] == [b"young"]
    assert q.counts()["in_flight"] == 1 and q.counts()["visible"] == 0
    qclock.advance(60)
    assert q.expire() >= 0
    assert q.receive(10) == []


def test_expire_deletes_old_unreceived_messages(reg, qclock):
    q = reg.create("q", retention_seconds=60)
    q.send_batch([b"a", b"b"])
    qclock.advance(61)
    q.send(b"c")
    assert q.expire() == 2
    assert q.counts()["visible"] == 1


def test_purge(reg, qclock):
    q = reg.create("q")
    q.send_batch([b"a", b"b", b"c"])
    (m,) = q.receive()
    q.purge()
    assert q.counts() == {"visible": 0, "in_flight": 0, "delayed": 0}
    q.delete(m.receipt_handle)  # a handle of a purged message: success, nothing to do
    with pytest.raises(PurgeQueueInProgress) as ei:
        q.purge()
    assert ei.value.code == "PurgeQueueInProgress"
    q.send(b"after")
    assert [x.body for x in q.receive(10)] == [b"after"]
    qclock.advance(60)
    q.purge()


def test_purge_survives_reopen(reg, tmp_path, qclock):
    q = reg.create("q")
    q.send_batch([b"a", b"b"])
    q.purge()
    q.send(b"c")
    reg = reopen(reg, tmp_path, qclock)
    assert [m.body for m in reg.get("q").receive(10)] == [b"c"]
    reg.close()


def test_long_poll_woken_by_send_from_another_thread(reg):
    q = reg.create("q")
    got = []

    def consumer():
        t0 = time.monotonic()
        got.append(q.receive(1, wait_seconds=10))
        got.append(time.monotonic() - t0)

    t = threading.Thread(target=consumer)
    t.start()
    time.sleep(0.2)
    q.send(b"wake")
    t.join(5)
    assert not t.is_alive()
    assert [m.body for m in got[0]] == [b"wake"]
    assert got[1] < 5


def test_long_poll_times_out_empty(reg):
    q = reg.create("q")
    t0 = time.monotonic()
    assert q.receive(1, wait_seconds=0.3) == []
    assert 0.25 <= time.monotonic() - t0 < 3


def test_queue_receive_wait_default(reg):
    q = reg.create("q", receive_wait_seconds=1)
    t0 = time.monotonic()
    assert q.receive(1) == []
    assert time.monotonic() - t0 >= 0.9
    assert q.receive(1, wait_seconds=0) == []


def test_close_wakes_long_poll_and_refuses_calls(reg):
    q = reg.create("q")
    out = []
    t = threading.Thread(target=lambda: out.append(q.receive(1, wait_seconds=10)))
    t.start()
    time.sleep(0.2)
    q.close()
    t.join(5)
    assert out == [[]]
    with pytest.raises(LogClosedError):
        q.send(b"x")


def test_state_survives_reopen(reg, tmp_path, qclock):
    q = reg.create("q", visibility_timeout=100)
    q.send_batch([b"%d" % i for i in range(6)])
    ms = q.receive(4)
    q.delete_batch([ms[0].receipt_handle, ms[2].receipt_handle])
    reg = reopen(reg, tmp_path, qclock)
    q = reg.get("q")
    assert q.counts() == {"visible": 2, "in_flight": 2, "delayed": 0}
    q.delete_batch([m.receipt_handle for m in q.receive(10)])  # 4 and 5
    # the old handles still work after the restart
    q.delete(ms[1].receipt_handle)
    qclock.advance(100)
    (m,) = q.receive(10)
    assert m.body == b"3" and m.receive_count == 2
    reg.close()


def test_compaction_keeps_state(reg, tmp_path, qclock):
    q = reg.create("q", visibility_timeout=100)
    q.send_batch([b"%d" % i for i in range(10)])
    ms = q.receive(10)
    q.delete_batch([m.receipt_handle for m in ms[:5]])
    q.compact()
    q.delete(ms[5].receipt_handle)
    reg = reopen(reg, tmp_path, qclock)
    q = reg.get("q")
    assert q.counts() == {"visible": 0, "in_flight": 4, "delayed": 0}
    qclock.advance(100)
    assert sorted(m.body for m in q.receive(10)) == [b"6", b"7", b"8", b"9"]
    reg.close()


def test_dead_letter_queue(reg, qclock):
    dlq = reg.create("dlq")
    q = reg.create("q", dead_letter_queue="dlq", max_receive_count=2, visibility_timeout=1)
    mid = q.send(b"poison", attributes={"k": "v"})
    q.send(b"fine")
    for i in range(2):
        ms = q.receive(10)
        assert {m.body for m in ms} == ({b"poison", b"fine"} if i == 0 else {b"poison"})
        if i == 0:
            q.delete(next(m for m in ms if m.body == b"fine").receipt_handle)
        qclock.advance(1)
    # the third receive finds the count at 2 = max: the message moves instead
    assert q.receive(10) == []
    assert q.counts() == {"visible": 0, "in_flight": 0, "delayed": 0}
    (d,) = dlq.receive(10)
    assert d.body == b"poison" and d.id == mid
    assert d.receive_count == 3  # SQS: the count goes on from the source's 2 receives
    assert d.attributes == {"k": {"DataType": "String", "StringValue": "v"}}
    assert d.source_queue == "q"
    assert d.system_attributes()["DeadLetterQueueSourceArn"].endswith(":q")
    assert dlq.dead_letter_source_queues() == ["q"]
    assert reg.dead_letter_source_queues("dlq") == ["q"]


def test_redrive_policy_validation(reg):
    reg.create("f.fifo", fifo=True)
    with pytest.raises(InvalidParameterValue):
        reg.create("q", dead_letter_queue="missing", max_receive_count=3)
    with pytest.raises(InvalidParameterValue):
        reg.create("q", dead_letter_queue="f.fifo", max_receive_count=3)  # type mismatch
    with pytest.raises(InvalidAttributeValue):
        reg.create("q", RedrivePolicy='{"deadLetterTargetArn":"arn:aws:sqs:r:1:x"}')
    with pytest.raises(InvalidAttributeValue):
        reg.create("q", RedrivePolicy='{"deadLetterTargetArn":"x","maxReceiveCount":1001}')
    reg.create("d", RedriveAllowPolicy='{"redrivePermission":"denyAll"}')
    with pytest.raises(InvalidParameterValue):
        reg.create("q").set_attributes(dead_letter_queue="d", max_receive_count=3)
    q = reg.get("q")
    # SQS takes a queue as its own dead-letter queue; receiving past the count moves nothing
    q.set_attributes(dead_letter_queue="q", max_receive_count=1, visibility_timeout=0)
    q.send(b"m")
    assert len(q.receive(1)) == 1 and len(q.receive(1)) == 1
    q.set_attributes(RedrivePolicy="")
    assert "RedrivePolicy" not in q.get_attributes()


def test_move_messages_back_from_dlq(reg, qclock):
    dlq = reg.create("dlq")
    q = reg.create("q", dead_letter_queue="dlq", max_receive_count=1, visibility_timeout=1)
    ids = q.send_batch([b"a", b"b"])
    q.receive(10)
    qclock.advance(1)
    assert q.receive(10) == []
    assert dlq.counts()["visible"] == 2
    assert dlq.move_messages() == 2
    assert dlq.counts()["visible"] == 0
    ms = q.receive(10)
    assert sorted(m.body for m in ms) == [b"a", b"b"]
    assert sorted(m.id for m in ms) == sorted(ids)  # ids are kept
    assert all(m.receive_count == 1 and m.source_queue is None for m in ms)


def test_message_move_task(reg, qclock):
    reg.create("dlq")
    q = reg.create("q", dead_letter_queue="dlq", max_receive_count=1, visibility_timeout=1)
    other = reg.create("other")
    q.send_batch([b"a", b"b", b"c"])
    q.receive(10)
    qclock.advance(1)
    q.receive(10)
    task = reg.start_message_move_task("dlq", "other")
    task.thread.join(10)
    assert task.status == "COMPLETED" and task.moved == 3
    assert sorted(m.body for m in other.receive(10)) == [b"a", b"b", b"c"]
    assert reg.list_message_move_tasks("dlq")[0] is task


def test_in_flight_limit(reg, monkeypatch):
    import vqs.broker.queue.standard as qmod
    from vqs.errors import OverLimit

    monkeypatch.setattr(qmod, "MAX_INFLIGHT", 3)
    q = reg.create("q")
    q.send_batch([b"1", b"2", b"3", b"4"])
    assert len(q.receive(3)) == 3
    with pytest.raises(OverLimit):
        q.receive(1)


def test_disk_reclaimed_after_consumption(tmp_path, qclock):
    reg = QueueRegistry(str(tmp_path / "queues"), clock=qclock, defaults={"segment_bytes": 64 << 10, "batch_max_bytes": 16 << 10})
    q = reg.create("q")
    seg_dir = tmp_path / "queues" / "q" / "messages"
    body = b"x" * 1000
    for _ in range(300):
        q.send_batch([body] * 10)
    q.flush()
    segs = lambda: sorted(f for f in os.listdir(seg_dir) if f.endswith(".log"))  # noqa: E731
    assert len(segs()) > 40
    peak = len(segs())
    consumed = 0
    while True:
        ms = q.receive(10)
        if not ms:
            break
        q.delete_batch([m.receipt_handle for m in ms])
        consumed += len(ms)
        if consumed == 1500:  # half the backlog consumed: about half the segments gone
            assert len(segs()) <= peak // 2 + 3
    assert len(segs()) <= 4  # deleted as consumption went (a segment or so behind)
    q.reclaim()
    assert len(segs()) <= 2
    size = sum(os.path.getsize(seg_dir / f) for f in segs())
    assert size < 128 << 10
    reg.close()


def test_registry_defaults_and_ignored_topic_settings(tmp_path, qclock):
    reg = QueueRegistry(str(tmp_path / "queues"), clock=qclock,
                        defaults={"flush": "always", "retention_ms": 5, "visibility_timeout": 7})
    q = reg.create("q")
    assert q.config.flush == "always" and q.config.visibility_timeout == 7
    q.send(b"x")
    assert q.receive()[0].body == b"x"
    reg.close()
    with pytest.raises(Exception):
        QueueRegistry(str(tmp_path / "q2"), defaults={"visibility_timeout": -5})
