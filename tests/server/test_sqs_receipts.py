"""SQS's receipt-handle rules through real boto3 against a real ``vqs serve``.

Standard queues: every receipt handle ever issued for a message stays usable
(DeleteMessage deletes the message; ChangeMessageVisibility changes its lease
while it is in flight, is a success that changes nothing while it is not, and
is refused with InvalidParameterValue once the message is deleted). FIFO
queues refuse a handle whose lease is over ("The receipt handle has
expired."). Handles issued before a server restart behave the same after it.
"""

from __future__ import annotations

import pytest

boto3 = pytest.importorskip("boto3")
from botocore.config import Config  # noqa: E402
from vqs_server_proc import ServerProcess  # noqa: E402


def _client(url):
    return boto3.client("sqs", endpoint_url=url, region_name="eu-west-1", aws_access_key_id="x",
                        aws_secret_access_key="y", config=Config(retries={"max_attempts": 1}))


@pytest.fixture(scope="module")
def sqs(base_url):
    return _client(base_url)


def _counts(sqs, url) -> tuple[int, int, int]:
    a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return (int(a["ApproximateNumberOfMessages"]), int(a["ApproximateNumberOfMessagesNotVisible"]),
            int(a["ApproximateNumberOfMessagesDelayed"]))


def _two_deliveries(sqs, url):
    """Send one message, receive it twice: (first handle, second handle, message id);
    the message is in flight under the second delivery (30 s)."""
    mid = sqs.send_message(QueueUrl=url, MessageBody="m")["MessageId"]
    first = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)["Messages"][0]
    second = sqs.receive_message(QueueUrl=url, VisibilityTimeout=30)["Messages"][0]
    assert first["MessageId"] == second["MessageId"] == mid
    assert first["ReceiptHandle"] != second["ReceiptHandle"]
    return first["ReceiptHandle"], second["ReceiptHandle"], mid


def _not_available(handle: str) -> str:
    return (f"Value {handle} for parameter ReceiptHandle is invalid. Reason: Message does not exist "
            "or is not available for visibility timeout change.")


def test_an_older_handle_changes_the_visibility_of_a_message_in_flight(sqs, unique):
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    old, _, mid = _two_deliveries(sqs, url)
    assert _counts(sqs, url) == (0, 1, 0)
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=old, VisibilityTimeout=0)
    assert _counts(sqs, url) == (1, 0, 0)
    m = sqs.receive_message(QueueUrl=url, AttributeNames=["ApproximateReceiveCount"])["Messages"][0]
    assert (m["MessageId"], m["Attributes"]["ApproximateReceiveCount"]) == (mid, "3")


def test_change_visibility_of_a_message_not_in_flight_succeeds_and_changes_nothing(sqs, unique):
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="m")
    h = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)["Messages"][0]["ReceiptHandle"]
    r = sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=h, VisibilityTimeout=60)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert _counts(sqs, url) == (1, 0, 0)  # still visible
    assert "Messages" in sqs.receive_message(QueueUrl=url)


def test_change_visibility_of_a_deleted_message_is_invalid_parameter_value(sqs, unique):
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    old, new, _ = _two_deliveries(sqs, url)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=new)
    for h in (old, new):
        with pytest.raises(sqs.exceptions.ClientError) as e:
            sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=h, VisibilityTimeout=10)
        r = e.value.response
        assert r["ResponseMetadata"]["HTTPStatusCode"] == 400
        assert r["Error"]["Code"] == "InvalidParameterValue"
        assert r["Error"]["Message"] == _not_available(h)


def test_delete_with_an_older_handle_deletes_the_message(sqs, unique):
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    old, new, _ = _two_deliveries(sqs, url)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=old)
    assert _counts(sqs, url) == (0, 0, 0)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=new)  # already deleted: success
    sqs.delete_message(QueueUrl=url, ReceiptHandle=old)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)


def test_batch_actions_follow_the_same_rules_per_entry(sqs, unique):
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    old_a, _, _ = _two_deliveries(sqs, url)
    old_b, _, _ = _two_deliveries(sqs, url)
    r = sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
        {"Id": "a", "ReceiptHandle": old_a, "VisibilityTimeout": 0}])
    assert [e["Id"] for e in r["Successful"]] == ["a"] and not r.get("Failed")
    assert _counts(sqs, url) == (1, 1, 0)  # a visible again, b in flight
    r = sqs.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": "a", "ReceiptHandle": old_a}, {"Id": "b", "ReceiptHandle": old_b}])
    assert sorted(e["Id"] for e in r["Successful"]) == ["a", "b"] and not r.get("Failed")
    assert _counts(sqs, url) == (0, 0, 0)
    r = sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
        {"Id": "a", "ReceiptHandle": old_a, "VisibilityTimeout": 5}])
    assert not r.get("Successful")
    [f] = r["Failed"]
    assert (f["Id"], f["Code"], f["SenderFault"], f["Message"]) == (
        "a", "InvalidParameterValue", True, _not_available(old_a))


def test_fifo_a_handle_whose_lease_is_over_has_expired(sqs, unique):
    url = sqs.create_queue(QueueName=unique + ".fifo", Attributes={
        "FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="m", MessageGroupId="g")
    h = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)["Messages"][0]["ReceiptHandle"]
    with pytest.raises(sqs.exceptions.ClientError) as e:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=h)
    assert e.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert e.value.response["Error"]["Message"] == (
        f"Value {h} for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired.")
    assert _counts(sqs, url) == (1, 0, 0)  # not deleted


@pytest.mark.parametrize("stop", ["sigterm", "sigkill"])
def test_handles_issued_before_a_restart_stay_usable(tmp_path, stop):
    """A restart keeps the rules: an older handle from before it changes the
    lease and deletes the message (with --flush always: every acknowledged
    lease is on disk when the server is killed)."""
    srv = ServerProcess(tmp_path / "data", "--flush", "always").start()
    try:
        sqs = _client(srv.url)
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        old, _, _ = _two_deliveries(sqs, url)
        old2, _, _ = _two_deliveries(sqs, url)
        if stop == "sigterm":
            assert srv.stop() == 0
        else:
            srv.kill9()
        srv = ServerProcess(tmp_path / "data", "--flush", "always", port=srv.port).start()
        assert _counts(sqs, url) == (0, 2, 0)
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=old, VisibilityTimeout=0)
        assert _counts(sqs, url) == (1, 1, 0)
        sqs.delete_message(QueueUrl=url, ReceiptHandle=old)
        sqs.delete_message(QueueUrl=url, ReceiptHandle=old2)
        assert _counts(sqs, url) == (0, 0, 0)
        with pytest.raises(sqs.exceptions.ClientError) as e:
            sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=old2, VisibilityTimeout=0)
        assert e.value.response["Error"]["Message"] == _not_available(old2)
    finally:
        srv.stop()
