"""SQS rules checked against AWS's recorded answers (queue attributes, message
attribute validation, batch size, FIFO group order, the query protocol's words,
QueueDeletedRecently), through real boto3 and raw HTTP against a real server."""

from __future__ import annotations

import json

import httpx
import pytest

boto3 = pytest.importorskip("boto3")
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402


@pytest.fixture(scope="module")
def sqs(base_url):
    return boto3.client("sqs", endpoint_url=base_url, region_name="us-east-1", aws_access_key_id="x",
                        aws_secret_access_key="y", config=Config(retries={"max_attempts": 1}))


def _err(ei) -> tuple[str, str]:
    e = ei.value.response["Error"]
    return e["Code"], e["Message"]


def test_new_queue_has_sse_sqs_and_a_kms_key_replaces_it(sqs, unique):
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert a["SqsManagedSseEnabled"] == "true" and "KmsDataKeyReusePeriodSeconds" not in a
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"KmsMasterKeyId": "k", "KmsDataKeyReusePeriodSeconds": "6000"})
    a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (a["SqsManagedSseEnabled"], a["KmsMasterKeyId"], a["KmsDataKeyReusePeriodSeconds"]) == ("false", "k", "6000")
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"KmsMasterKeyId": "", "KmsDataKeyReusePeriodSeconds": "300"})
    a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert "KmsMasterKeyId" not in a and "KmsDataKeyReusePeriodSeconds" not in a


def test_fifo_attributes_on_a_standard_queue(sqs, unique):
    for attrs, msg in [({"FifoQueue": "false"}, "Unknown Attribute FifoQueue."),
                       ({"ContentBasedDeduplication": "false"}, "Unknown Attribute ContentBasedDeduplication."),
                       ({"DeduplicationScope": "queue"},
                        "You can specify the DeduplicationScope only when FifoQueue is set to true."),
                       ({"FifoThroughputLimit": "perQueue"},
                        "You can specify the FifoThroughputLimit only when FifoQueue is set to true.")]:
        with pytest.raises(ClientError) as ei:
            sqs.create_queue(QueueName=unique, Attributes=attrs)
        assert _err(ei) == ("InvalidAttributeName", msg)
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    for v in ("true", "false"):
        with pytest.raises(ClientError) as ei:
            sqs.set_queue_attributes(QueueUrl=url, Attributes={"FifoQueue": v})
        assert _err(ei) == ("InvalidAttributeName", "Unknown Attribute FifoQueue.")
    furl = sqs.create_queue(QueueName=unique + ".fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    sqs.set_queue_attributes(QueueUrl=furl, Attributes={"FifoQueue": "true"})
    with pytest.raises(ClientError) as ei:
        sqs.set_queue_attributes(QueueUrl=furl, Attributes={"FifoQueue": "false"})
    assert _err(ei) == ("InvalidAttributeValue",
                        "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported.")


def test_empty_redrive_policy_removes_it(sqs, unique):
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    # SQS takes a queue as its own dead-letter queue
    sqs.set_queue_attributes(QueueUrl=url, Attributes={
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": "42"})})
    assert arn in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]["RedrivePolicy"]
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": ""})
    assert "RedrivePolicy" not in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]


def test_message_attribute_rules(sqs, unique):
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x",
                     MessageAttributes={"attr.1øßä": {"StringValue": "v", "DataType": "String"}})
    with pytest.raises(ClientError) as ei:
        sqs.send_message(QueueUrl=url, MessageBody="x",
                         MessageAttributes={"ErrorDetails": {"StringValue": "", "DataType": "String"}})
    assert _err(ei) == ("InvalidParameterValue",
                        "Message (user) attribute 'ErrorDetails' must contain a non-empty value of type 'String'.")
    with pytest.raises(ClientError) as ei:
        sqs.send_message(QueueUrl=url, MessageBody="x",
                         MessageAttributes={"a": {"StringValue": "bad\x08", "DataType": "String"}})
    assert _err(ei)[0] == "InvalidParameterValue"
    for name in ("aWs.x", "AMAZON.x", ".x", "a!b", "a§b", "L" * 257):
        with pytest.raises(ClientError) as ei:
            sqs.send_message(QueueUrl=url, MessageBody="x",
                             MessageAttributes={name: {"StringValue": "v", "DataType": "String"}})
        assert _err(ei)[0] == "InvalidParameterValue"


def test_batch_size_rules(sqs, unique):
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    attrs = {"k": {"DataType": "String", "StringValue": "x"}}  # counts 8 bytes
    with pytest.raises(ClientError) as ei:
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": "1", "MessageBody": "a" * (1048576 - 8), "MessageAttributes": attrs},
            {"Id": "2", "MessageBody": "a"}])
    assert _err(ei) == ("AWS.SimpleQueueService.BatchRequestTooLong",
                        "Batch requests cannot be longer than 1048576 bytes. You have sent 1048577 bytes.")
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"MaximumMessageSize": "1024"})
    r = sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "a" * 1024},
                                                      {"Id": "b", "MessageBody": "a" * 1025}])
    assert [e["Id"] for e in r["Successful"]] == ["a"] and [e["Id"] for e in r["Failed"]] == ["b"]
    r = sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "c", "MessageBody": "c"}])
    assert "Failed" not in r  # SQS leaves an empty Failed list out


def test_fifo_group_visible_again_goes_to_the_back(sqs, unique):
    url = sqs.create_queue(QueueName=unique + ".fifo", Attributes={
        "FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
    for body, g in [("g1-m1", "1"), ("g2-m1", "2"), ("g2-m2", "2"), ("g3-m1", "3"), ("g1-m2", "1")]:
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=g)
    r = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=3, VisibilityTimeout=0)
    assert [m["Body"] for m in r["Messages"]] == ["g1-m1", "g1-m2", "g2-m1"]
    r = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    assert [m["Body"] for m in r["Messages"]] == ["g3-m1", "g1-m1", "g1-m2", "g2-m1", "g2-m2"]


def test_permission_policy_words(sqs, unique):
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    sqs.add_permission(QueueUrl=url, Label="p1", AWSAccountIds=["111111111111"], Actions=["SendMessage"])
    pol = json.loads(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]["Policy"])
    assert pol["Version"] == "2008-10-17"
    with pytest.raises(ClientError) as ei:
        sqs.remove_permission(QueueUrl=url, Label="p2")
    assert _err(ei) == ("InvalidParameterValue", "Value p2 for parameter Label is invalid. Reason: can't find label.")


def test_query_protocol_words(sqs, unique, base_url):
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    r = httpx.get(url)  # no Action
    assert r.status_code == 404 and "<UnknownOperationException" in r.text
    r = httpx.get(url, params={"Action": "ListQueues"})
    assert r.status_code == 400 and "<Code>InvalidAction</Code>" in r.text
    assert "The action ListQueues is not valid for this endpoint" in r.text
    r = httpx.get(base_url + "/", params={"Action": "ListQueues", "QueueNamePrefix": unique},
                  headers={"Accept": "application/json"})
    assert r.status_code == 200
    assert url in json.dumps(r.json()["ListQueuesResponse"]["ListQueuesResult"])
    sqs.delete_queue(QueueUrl=url)
    r = httpx.get(url, params={"Action": "GetQueueAttributes", "AttributeName.1": "QueueArn"})
    assert r.status_code == 400
    assert "<Code>AWS.SimpleQueueService.NonExistentQueue</Code>" in r.text
    assert "<Message>The specified queue does not exist for this wsdl version.</Message>" in r.text
    with pytest.raises(ClientError) as ei:  # the JSON protocol keeps the short words
        sqs.get_queue_attributes(QueueUrl=url)
    assert _err(ei)[1] == "The specified queue does not exist."


def test_queue_deleted_recently(sqs, unique):
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    sqs.delete_queue(QueueUrl=url)
    with pytest.raises(ClientError) as ei:
        sqs.create_queue(QueueName=unique)
    assert _err(ei) == ("AWS.SimpleQueueService.QueueDeletedRecently",
                        "You must wait 60 seconds after deleting a queue before you can create another "
                        "with the same name.")
