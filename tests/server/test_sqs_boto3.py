"""Every SQS action through real boto3 (AWS JSON 1.0) against a real server process.

The session's server runs the HTTP fast path (vqs/server/fast_http.py, the default): boto3's
requests are answered there, below ASGI (``test_boto3_is_served_by_the_fast_path`` checks
``vqs_fast_http_requests_total``); tests/server/test_fast_http.py compares its answers with
the ASGI path's byte for byte."""

from __future__ import annotations

import hashlib
import json
import time

import pytest

boto3 = pytest.importorskip("boto3")
from botocore.config import Config  # noqa: E402

from vqs.server.sqs.md5 import md5_of_attributes  # noqa: E402


@pytest.fixture(scope="module")
def sqs(base_url):
    return boto3.client("sqs", endpoint_url=base_url, region_name="eu-west-1", aws_access_key_id="x",
                        aws_secret_access_key="y", config=Config(retries={"max_attempts": 1}))


def _q(sqs, name, **attrs):
    return sqs.create_queue(QueueName=name, Attributes={k: str(v) for k, v in attrs.items()})["QueueUrl"]


def test_create_get_list_delete(sqs, unique, base_url):
    url = _q(sqs, unique)
    assert url == f"{base_url}/123456789012/{unique}"
    assert sqs.get_queue_url(QueueName=unique)["QueueUrl"] == url
    # idempotent with the same attributes; QueueNameExists with others
    assert _q(sqs, unique) == url
    with pytest.raises(sqs.exceptions.QueueNameExists):
        _q(sqs, unique, VisibilityTimeout=99)
    assert url in sqs.list_queues(QueueNamePrefix=unique)["QueueUrls"]
    sqs.delete_queue(QueueUrl=url)
    with pytest.raises(sqs.exceptions.QueueDoesNotExist) as ei:
        sqs.get_queue_url(QueueName=unique)
    assert ei.value.response["Error"]["Code"] == "AWS.SimpleQueueService.NonExistentQueue"
    assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    # as on AWS, not within 60 s (tests/server/test_sqs_aws_rules.py)
    with pytest.raises(sqs.exceptions.QueueDeletedRecently):
        _q(sqs, unique)


def test_list_queues_pagination(sqs, unique):
    names = [f"{unique}-{i}" for i in range(5)]
    for n in names:
        _q(sqs, n)
    r = sqs.list_queues(QueueNamePrefix=unique, MaxResults=2)
    assert len(r["QueueUrls"]) == 2 and "NextToken" in r
    seen = list(r["QueueUrls"])
    while "NextToken" in r:
        r = sqs.list_queues(QueueNamePrefix=unique, MaxResults=2, NextToken=r["NextToken"])
        seen += r["QueueUrls"]
    assert [u.rsplit("/", 1)[1] for u in seen] == sorted(names)
    assert "QueueUrls" not in sqs.list_queues(QueueNamePrefix="no-such-prefix-xyz")


def test_attributes(sqs, unique):
    dlq = _q(sqs, unique + "-dlq")
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    assert dlq_arn == f"arn:aws:sqs:eu-west-1:123456789012:{unique}-dlq"
    url = _q(sqs, unique, DelaySeconds=0)
    a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert a["VisibilityTimeout"] == "30"
    assert a["MaximumMessageSize"] == "1048576"
    assert a["MessageRetentionPeriod"] == "345600"
    assert a["ApproximateNumberOfMessages"] == "0"
    assert int(a["CreatedTimestamp"]) > 1_600_000_000
    policy = {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "5"}
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "45",
                                                       "RedrivePolicy": json.dumps(policy)})
    a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout", "RedrivePolicy"])["Attributes"]
    assert a == {"VisibilityTimeout": "45",
                 "RedrivePolicy": '{"deadLetterTargetArn":"%s","maxReceiveCount":5}' % dlq_arn}
    with pytest.raises(sqs.exceptions.InvalidAttributeName):
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Bogus"])
    with pytest.raises(sqs.exceptions.ClientError) as ei:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "999999"})
    assert ei.value.response["Error"]["Code"] in ("InvalidAttributeValue", "InvalidParameterValue")


def test_tags(sqs, unique):
    url = sqs.create_queue(QueueName=unique, tags={"team": "a"})["QueueUrl"]
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "a"}
    sqs.tag_queue(QueueUrl=url, Tags={"env": "test", "team": "b"})
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "b", "env": "test"}
    sqs.untag_queue(QueueUrl=url, TagKeys=["team"])
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"env": "test"}


def test_send_receive_delete_with_md5s(sqs, unique):
    url = _q(sqs, unique)
    attrs = {"s": {"DataType": "String", "StringValue": "hé"},
             "n": {"DataType": "Number", "StringValue": "42"},
             "b": {"DataType": "Binary", "BinaryValue": b"\x00\x01\x02"},
             "c": {"DataType": "String.custom", "StringValue": "x"}}
    r = sqs.send_message(QueueUrl=url, MessageBody="héllo wörld", MessageAttributes=attrs)
    assert r["MD5OfMessageBody"] == hashlib.md5("héllo wörld".encode()).hexdigest()
    assert r["MD5OfMessageAttributes"] == md5_of_attributes(attrs)
    # a value AWS documents: one String attribute
    assert md5_of_attributes({"a": {"DataType": "String", "StringValue": "b"}}) == \
        hashlib.md5(b"\x00\x00\x00\x01a\x00\x00\x00\x06String\x01\x00\x00\x00\x01b").hexdigest()
    m = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"], AttributeNames=["All"],
                            WaitTimeSeconds=1)["Messages"][0]
    assert m["Body"] == "héllo wörld" and m["MessageId"] == r["MessageId"]
    assert m["MD5OfBody"] == r["MD5OfMessageBody"]
    assert m["MessageAttributes"]["b"]["BinaryValue"] == b"\x00\x01\x02"
    assert m["MD5OfMessageAttributes"] == r["MD5OfMessageAttributes"]
    assert m["Attributes"]["ApproximateReceiveCount"] == "1"
    assert int(m["Attributes"]["SentTimestamp"]) > 0
    # selected message attributes only
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
    m2 = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["s"])["Messages"][0]
    assert set(m2["MessageAttributes"]) == {"s"}
    assert m2["ReceiptHandle"] != m["ReceiptHandle"]  # a new handle per delivery
    sqs.delete_message(QueueUrl=url, ReceiptHandle=m2["ReceiptHandle"])
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid):
        sqs.delete_message(QueueUrl=url, ReceiptHandle="garbage")


def test_batches(sqs, unique):
    url = _q(sqs, unique)
    entries = [{"Id": f"m{i}", "MessageBody": f"body {i}"} for i in range(10)]
    r = sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert sorted(s["Id"] for s in r["Successful"]) == sorted(e["Id"] for e in entries)
    assert all(s["MD5OfMessageBody"] == hashlib.md5(f"body {s['Id'][1:]}".encode()).hexdigest()
               for s in r["Successful"])
    got = []
    while len(got) < 10:
        ms = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", [])
        assert ms
        got += ms
    r = sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
        {"Id": f"v{i}", "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 60} for i, m in enumerate(got[:3])])
    assert len(r["Successful"]) == 3
    r = sqs.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": f"d{i}", "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)] )
    assert len(r["Successful"]) == 10 and r.get("Failed", []) == []
    with pytest.raises(sqs.exceptions.TooManyEntriesInBatchRequest):
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": f"x{i}", "MessageBody": "b"} for i in range(11)])
    with pytest.raises(sqs.exceptions.BatchEntryIdsNotDistinct):
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "b"}] * 2)
    with pytest.raises(sqs.exceptions.EmptyBatchRequest):
        sqs.delete_message_batch(QueueUrl=url, Entries=[])
    with pytest.raises(sqs.exceptions.InvalidBatchEntryId):
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "bad id!", "MessageBody": "b"}])
    r = sqs.delete_message_batch(QueueUrl=url, Entries=[{"Id": "z", "ReceiptHandle": "nope"}])
    assert r["Failed"][0]["Code"] == "ReceiptHandleIsInvalid" and r["Failed"][0]["SenderFault"] is True


def test_visibility_and_redelivery(sqs, unique):
    url = _q(sqs, unique, VisibilityTimeout=1)
    sqs.send_message(QueueUrl=url, MessageBody="x")
    m = sqs.receive_message(QueueUrl=url)["Messages"][0]
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    time.sleep(1.2)
    m2 = sqs.receive_message(QueueUrl=url, AttributeNames=["ApproximateReceiveCount"], WaitTimeSeconds=2)["Messages"][0]
    assert m2["MessageId"] == m["MessageId"] and m2["Attributes"]["ApproximateReceiveCount"] == "2"
    # SQS: the first delivery's handle still changes the lease of the message in flight
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
    assert sqs.receive_message(QueueUrl=url)["Messages"][0]["MessageId"] == m["MessageId"]


def test_delay_and_purge(sqs, unique):
    url = _q(sqs, unique)
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=1)
    a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesDelayed"])["Attributes"]
    assert a["ApproximateNumberOfMessagesDelayed"] == "1"
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    m = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=3)["Messages"][0]
    assert m["Body"] == "later"
    sqs.send_message(QueueUrl=url, MessageBody="y")
    sqs.purge_queue(QueueUrl=url)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    with pytest.raises(sqs.exceptions.PurgeQueueInProgress):
        sqs.purge_queue(QueueUrl=url)


def test_long_poll_woken_by_send(sqs, unique, base_url):
    import threading

    url = _q(sqs, unique)
    out = {}

    def recv():
        c = boto3.client("sqs", endpoint_url=base_url, region_name="us-east-1", aws_access_key_id="x",
                         aws_secret_access_key="y")
        t0 = time.monotonic()
        out["r"] = c.receive_message(QueueUrl=url, WaitTimeSeconds=10)
        out["dt"] = time.monotonic() - t0

    th = threading.Thread(target=recv)
    th.start()
    time.sleep(0.5)
    sqs.send_message(QueueUrl=url, MessageBody="wake")
    th.join(15)
    assert out["r"]["Messages"][0]["Body"] == "wake" and out["dt"] < 5


def test_dead_letter_queue_and_move_task(sqs, unique):
    dlq = _q(sqs, unique + "-dlq")
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    url = _q(sqs, unique, VisibilityTimeout=0,
             RedrivePolicy=json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2}))
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"] == [url]
    sqs.send_message(QueueUrl=url, MessageBody="poison")
    for _ in range(2):
        assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
    assert "Messages" not in sqs.receive_message(QueueUrl=url)  # third receive moves it to the DLQ
    m = sqs.receive_message(QueueUrl=dlq, AttributeNames=["All"], VisibilityTimeout=0, WaitTimeSeconds=2)["Messages"][0]
    assert m["Body"] == "poison"
    assert m["Attributes"].get("DeadLetterQueueSourceArn", "").endswith(":" + unique)
    t = sqs.start_message_move_task(SourceArn=dlq_arn)
    assert t["TaskHandle"]
    for _ in range(100):
        res = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
        if res and res[0]["Status"] != "RUNNING":
            break
        time.sleep(0.05)
    assert res[0]["Status"] == "COMPLETED" and res[0]["ApproximateNumberOfMessagesMoved"] == 1
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": ""})
    m = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2)["Messages"][0]
    assert m["Body"] == "poison"
    with pytest.raises(sqs.exceptions.ResourceNotFoundException):
        sqs.cancel_message_move_task(TaskHandle=t["TaskHandle"])
    with pytest.raises(sqs.exceptions.ResourceNotFoundException):
        sqs.list_message_move_tasks(SourceArn=dlq_arn + "-missing")


def test_fifo(sqs, unique):
    url = sqs.create_queue(QueueName=unique + ".fifo",
                           Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
    r1 = sqs.send_message(QueueUrl=url, MessageBody="a", MessageGroupId="g1")
    r2 = sqs.send_message(QueueUrl=url, MessageBody="a", MessageGroupId="g1")  # deduplicated
    assert r1["MessageId"] == r2["MessageId"] and "SequenceNumber" in r1
    sqs.send_message(QueueUrl=url, MessageBody="b", MessageGroupId="g1")
    sqs.send_message(QueueUrl=url, MessageBody="c", MessageGroupId="g2", MessageDeduplicationId="d")
    ms = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    bodies = [m["Body"] for m in ms]
    assert bodies.index("a") < bodies.index("b") and set(bodies) == {"a", "b", "c"}
    assert ms[0]["Attributes"]["MessageGroupId"] in ("g1", "g2")
    with pytest.raises(sqs.exceptions.ClientError) as ei:
        sqs.send_message(QueueUrl=url, MessageBody="x")
    assert ei.value.response["Error"]["Code"] == "MissingParameter"
    with pytest.raises(sqs.exceptions.ClientError):
        sqs.create_queue(QueueName=unique + "-bad", Attributes={"FifoQueue": "true"})


def test_fifo_receive_request_attempt_id(sqs, unique):
    """A FIFO receive retried with its ReceiveRequestAttemptId (its answer lost) gets the same
    messages and receipt handles, from a receive that found them at once or after a long poll;
    another id gets nothing (the group is in flight); a malformed id is InvalidParameterValue."""
    url = sqs.create_queue(QueueName=unique + ".fifo",
                           Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
    for body in ("m0", "m1"):
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="g")
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, ReceiveRequestAttemptId="try-1")["Messages"]
    again = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, ReceiveRequestAttemptId="try-1")["Messages"]
    assert [m["Body"] for m in first] == ["m0", "m1"]
    assert [(m["Body"], m["ReceiptHandle"]) for m in again] == [(m["Body"], m["ReceiptHandle"]) for m in first]
    assert "Messages" not in sqs.receive_message(QueueUrl=url, ReceiveRequestAttemptId="try-2")
    sqs.delete_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                                                    for i, m in enumerate(first)])
    # a long poll that waited for the message, then its retry
    import threading
    threading.Timer(0.3, lambda: sqs.send_message(QueueUrl=url, MessageBody="m2", MessageGroupId="g")).start()
    polled = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5, ReceiveRequestAttemptId="try-3")["Messages"]
    retry = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5, ReceiveRequestAttemptId="try-3")["Messages"]
    assert [m["Body"] for m in polled] == ["m2"] and retry[0]["ReceiptHandle"] == polled[0]["ReceiptHandle"]
    with pytest.raises(sqs.exceptions.ClientError) as ei:
        sqs.receive_message(QueueUrl=url, ReceiveRequestAttemptId="bad id with spaces \u00e9")
    assert ei.value.response["Error"]["Code"] == "InvalidParameterValue"


def test_permissions(sqs, unique):
    url = _q(sqs, unique)
    sqs.add_permission(QueueUrl=url, Label="l1", AWSAccountIds=["111122223333"], Actions=["SendMessage"])
    pol = json.loads(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]["Policy"])
    assert pol["Statement"][0]["Sid"] == "l1"
    with pytest.raises(sqs.exceptions.ClientError):
        sqs.add_permission(QueueUrl=url, Label="l1", AWSAccountIds=["111122223333"], Actions=["SendMessage"])
    sqs.remove_permission(QueueUrl=url, Label="l1")
    with pytest.raises(sqs.exceptions.ClientError):
        sqs.remove_permission(QueueUrl=url, Label="l1")


def test_queue_url_any_host_or_bare_name(sqs, unique):
    _q(sqs, unique)
    sqs.send_message(QueueUrl=f"https://queue.amazonaws.com/123456789012/{unique}", MessageBody="1")
    sqs.send_message(QueueUrl=unique, MessageBody="2")
    ms = sqs.receive_message(QueueUrl=f"http://elsewhere:1/000000000000/{unique}", MaxNumberOfMessages=10)["Messages"]
    assert sorted(m["Body"] for m in ms) == ["1", "2"]


def test_errors(sqs, unique):
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.send_message(QueueUrl=f"http://x/123456789012/{unique}-nope", MessageBody="x")
    url = _q(sqs, unique, MaximumMessageSize=1024)
    with pytest.raises(sqs.exceptions.ClientError) as ei:
        sqs.send_message(QueueUrl=url, MessageBody="x" * 2000)
    assert ei.value.response["Error"]["Code"] == "InvalidParameterValue"
    with pytest.raises(sqs.exceptions.ClientError) as ei:
        sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=11)
    assert ei.value.response["Error"]["Code"] == "InvalidParameterValue"
    with pytest.raises(sqs.exceptions.InvalidMessageContents):
        sqs.send_message(QueueUrl=url, MessageBody="bad \x01 char")
    with pytest.raises(sqs.exceptions.ClientError) as ei:
        sqs.create_queue(QueueName="bad name!")
    assert ei.value.response["Error"]["Code"] == "InvalidParameterValue"


def test_json_protocol_error_shapes_are_awss(sqs, unique):
    """AWS's JSON protocol answers InvalidParameterValue with __type
    ...#InvalidParameterValueException and MissingParameter with
    ...#MissingRequiredParameterException; botocore shows that as
    Error.QueryErrorCode and takes Error.Code from x-amzn-query-error."""
    url = _q(sqs, unique)
    with pytest.raises(sqs.exceptions.ClientError) as ei:
        sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=11)
    err = ei.value.response["Error"]
    assert (err["Code"], err["QueryErrorCode"]) == ("InvalidParameterValue", "InvalidParameterValueException")
    with pytest.raises(sqs.exceptions.ClientError) as ei:
        sqs.send_message(QueueUrl=url, MessageBody="")
    err = ei.value.response["Error"]
    assert (err["Code"], err["QueryErrorCode"]) == ("MissingParameter", "MissingRequiredParameterException")


def test_boto3_is_served_by_the_fast_path(sqs, unique, http):
    """boto3's send, receive (a long poll woken by the send), delete and batches are counted by
    the fast path's own counter, one each (keep-alive connections, one request at a time)."""
    import threading

    def served() -> float:
        for line in http.get("/metrics").text.splitlines():
            if line.startswith('vqs_fast_http_requests_total{api="sqs"}'):
                return float(line.split()[-1])
        raise AssertionError("no vqs_fast_http_requests_total")

    url = _q(sqs, unique)
    before = served()
    got = []
    waiter = threading.Thread(target=lambda: got.append(sqs.receive_message(QueueUrl=url, WaitTimeSeconds=10)))
    waiter.start()
    time.sleep(0.3)  # the receive is waiting (nothing to wait on from outside)
    sent = sqs.send_message(QueueUrl=url, MessageBody="fast")
    waiter.join(15)
    msg = got[0]["Messages"][0]
    assert (msg["MessageId"], msg["Body"]) == (sent["MessageId"], "fast")
    sqs.delete_message(QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"])
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "1"}, {"Id": "b", "MessageBody": "2"}])
    msgs = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    r = sqs.delete_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                                                        for i, m in enumerate(msgs)])
    assert len(r["Successful"]) == len(msgs) >= 1
    assert served() - before == 6
