"""SQS's rules for sends, receives and batches, as Amazon SQS states and answers them
(issue #11): real boto3 (AWS JSON 1.0) and raw query-protocol requests against a real
server process. Expected codes, messages and MD5s are AWS's own answers."""

from __future__ import annotations

import json

import pytest

boto3 = pytest.importorskip("boto3")
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402
from vqs_server_proc import SIGV4_ANY, ServerProcess  # noqa: E402

TRACE = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
TRACE_ATTR = {"AWSTraceHeader": {"DataType": "String", "StringValue": TRACE}}


def _client(url):
    return boto3.client("sqs", endpoint_url=url, region_name="us-east-1", aws_access_key_id="x",
                        aws_secret_access_key="y", config=Config(retries={"max_attempts": 1}))


@pytest.fixture(scope="module")
def sqs(base_url):
    return _client(base_url)


def _err(call, **kw) -> dict:
    with pytest.raises(ClientError) as ei:
        call(**kw)
    r = ei.value.response
    return {**r["Error"], "Status": r["ResponseMetadata"]["HTTPStatusCode"]}


def _fifo(sqs, name, **attrs):
    attrs = {"FifoQueue": "true", **{k: str(v) for k, v in attrs.items()}}
    return sqs.create_queue(QueueName=name[:70] + ".fifo", Attributes=attrs)["QueueUrl"]


def _count(sqs, url) -> int:
    a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages",
                                                               "ApproximateNumberOfMessagesDelayed"])["Attributes"]
    return int(a["ApproximateNumberOfMessages"]) + int(a["ApproximateNumberOfMessagesDelayed"])


# --------------------------------------------------------------------- FIFO sends
def test_fifo_delay_seconds_zero_is_as_if_absent(sqs, unique):
    """DelaySeconds=0 on a FIFO queue leaves the queue's delay in force; above 0 is refused."""
    url = _fifo(sqs, unique, ContentBasedDeduplication="true", DelaySeconds=1)
    r = sqs.send_message(QueueUrl=url, MessageBody="m1", MessageGroupId="g", DelaySeconds=0)
    assert r["SequenceNumber"] and "MD5OfMessageBody" in r
    b = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "a", "MessageBody": "m2", "MessageGroupId": "g", "DelaySeconds": 0},
        {"Id": "b", "MessageBody": "m3", "MessageGroupId": "g", "DelaySeconds": 2}])
    assert [s["Id"] for s in b["Successful"]] == ["a"]
    assert b["Failed"] == [{"Id": "b", "SenderFault": True, "Code": "InvalidParameterValue",
                            "Message": "Value 2 for parameter DelaySeconds is invalid. Reason: The request include "
                                       "parameter that is not valid for this queue type."}]
    assert "Messages" not in sqs.receive_message(QueueUrl=url)  # the queue's 1 s delay applies
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=5)["Messages"]
    assert [m["Body"] for m in got][:1] == ["m1"]
    e = _err(sqs.send_message, QueueUrl=url, MessageBody="x", MessageGroupId="g", DelaySeconds=2)
    assert e == {"Code": "InvalidParameterValue", "QueryErrorCode": "InvalidParameterValueException",
                 "Type": "Sender", "Status": 400,
                 "Message": "Value 2 for parameter DelaySeconds is invalid. Reason: The request include parameter "
                            "that is not valid for this queue type."}


def test_fifo_send_batch_fails_whole_without_group_or_dedup_id(sqs, unique):
    url = _fifo(sqs, unique)
    ok = {"Id": "a", "MessageBody": "x", "MessageGroupId": "g", "MessageDeduplicationId": "d1"}
    e = _err(sqs.send_message_batch, QueueUrl=url, Entries=[ok, {"Id": "b", "MessageBody": "y",
                                                                 "MessageDeduplicationId": "d2"}])
    assert e == {"Code": "InvalidParameterValue", "QueryErrorCode": "InvalidParameterValueException",
                 "Type": "Sender", "Status": 400, "Message": "The request must contain the parameter MessageGroupId."}
    e = _err(sqs.send_message_batch, QueueUrl=url, Entries=[ok, {"Id": "b", "MessageBody": "y",
                                                                 "MessageGroupId": "g"}])
    assert (e["Code"], e["Status"], e["Message"]) == (
        "InvalidParameterValue", 400,
        "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly")
    assert _count(sqs, url) == 0  # nothing was sent
    # with content-based deduplication the dedup id may be left out
    url2 = _fifo(sqs, unique + "-cbd", ContentBasedDeduplication="true")
    r = sqs.send_message_batch(QueueUrl=url2, Entries=[{"Id": "b", "MessageBody": "y", "MessageGroupId": "g"}])
    assert [s["Id"] for s in r["Successful"]] == ["b"]
    # single sends keep their own codes
    e = _err(sqs.send_message, QueueUrl=url, MessageBody="x", MessageDeduplicationId="d")
    assert (e["Code"], e["QueryErrorCode"]) == ("MissingParameter", "MissingRequiredParameterException")


# ------------------------------------------------------------------ AWSTraceHeader
def test_trace_header_md5_and_selection(sqs, unique):
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    attrs = {"timestamp": {"StringValue": "1493147359900", "DataType": "Number"}}
    plain = sqs.send_message(QueueUrl=url, MessageBody="test", MessageAttributes=attrs)
    traced = sqs.send_message(QueueUrl=url, MessageBody="test", MessageAttributes=attrs,
                              MessageSystemAttributes=TRACE_ATTR)
    assert "MD5OfMessageSystemAttributes" not in plain
    assert traced["MD5OfMessageSystemAttributes"] == "5ae4d5d7636402d80f4eb6d213245a88"  # AWS's
    assert traced["MD5OfMessageAttributes"] == plain["MD5OfMessageAttributes"]
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], VisibilityTimeout=0,
                              WaitTimeSeconds=1)["Messages"]
    assert [m["Attributes"].get("AWSTraceHeader") for m in sorted(got, key=lambda m: m["MessageId"])] == [None, TRACE]
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0,
                              MessageSystemAttributeNames=["AWSTraceHeader"])["Messages"]
    assert sorted(m.get("Attributes", {}).get("AWSTraceHeader", "-") for m in got) == ["-", TRACE]
    assert all(set(m.get("Attributes", {})) <= {"AWSTraceHeader"} for m in got)


def test_trace_header_from_request_header_and_in_batches(sqs, unique):
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    xray = "Root=1-3152b799-8954dae64eda91bc9a23a7e8;Parent=7fa8c0f79203be72;Sampled=1"

    def add_header(request, **_):
        request.headers["X-Amzn-Trace-Id"] = xray

    sqs.meta.events.register("before-send.sqs.SendMessage", add_header)
    try:
        sqs.send_message(QueueUrl=url, MessageBody="from-header")
    finally:
        sqs.meta.events.unregister("before-send.sqs.SendMessage", add_header)
    r = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "t", "MessageBody": "batch-traced", "MessageSystemAttributes": TRACE_ATTR},
        {"Id": "p", "MessageBody": "batch-plain"}])
    by_id = {s["Id"]: s for s in r["Successful"]}
    assert by_id["t"]["MD5OfMessageSystemAttributes"] == "5ae4d5d7636402d80f4eb6d213245a88"
    assert "MD5OfMessageSystemAttributes" not in by_id["p"]
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                              AttributeNames=["SentTimestamp", "AWSTraceHeader"])["Messages"]
    seen = {m["Body"]: m["Attributes"] for m in got}
    assert seen["from-header"] == {"SentTimestamp": seen["from-header"]["SentTimestamp"], "AWSTraceHeader": xray}
    assert seen["batch-traced"]["AWSTraceHeader"] == TRACE
    assert "AWSTraceHeader" not in seen["batch-plain"]


def test_trace_header_is_kept_through_a_restart_and_a_dead_letter_move(tmp_path):
    srv = ServerProcess(tmp_path / "data").start()
    try:
        sqs = _client(srv.url)
        dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        url = sqs.create_queue(QueueName="src", Attributes={"RedrivePolicy": json.dumps(
            {"deadLetterTargetArn": arn, "maxReceiveCount": 1})})["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="m", MessageSystemAttributes=TRACE_ATTR,
                         MessageAttributes={"MyAttribute": {"StringValue": "foobar", "DataType": "String"}})
        assert srv.stop() == 0
        srv.start()
        sqs = _client(srv.url)
        m = sqs.receive_message(QueueUrl=url, AttributeNames=["All"], VisibilityTimeout=0)["Messages"][0]
        assert m["Attributes"]["AWSTraceHeader"] == TRACE
        assert "Messages" not in sqs.receive_message(QueueUrl=url)  # its second receive moved it
        m = sqs.receive_message(QueueUrl=dlq, AttributeNames=["All"], MessageAttributeNames=["All"],
                                WaitTimeSeconds=5)["Messages"][0]
        assert m["Attributes"]["AWSTraceHeader"] == TRACE
        assert m["MD5OfMessageAttributes"] == "adb59cd4678ea5a855436b949cd07ab6"  # AWS's, for MyAttribute
    finally:
        srv.stop()


# ------------------------------------------------------------ attribute selection
def test_message_attribute_names_select_like_aws(sqs, unique):
    url = sqs.create_queue(QueueName=unique, Attributes={"VisibilityTimeout": "0"})["QueueUrl"]
    r = sqs.send_message(QueueUrl=url, MessageBody="msg", MessageAttributes={
        "Help.Me": {"DataType": "String", "StringValue": "Me"},
        "Hello": {"DataType": "String", "StringValue": "There"},
        "General": {"DataType": "String", "StringValue": "Kenobi"}})
    every = "4c360f3fdafd970e05fae2f149d997f5"  # AWS's MD5s of the selections below
    assert r["MD5OfMessageAttributes"] == every

    def rec(names):
        return sqs.receive_message(QueueUrl=url, MessageAttributeNames=names, WaitTimeSeconds=1)["Messages"][0]

    assert "MessageAttributes" not in rec([]) and "MD5OfMessageAttributes" not in rec([])
    for names in (["All"], ["*"], [".*"]):
        m = rec(names)
        assert (sorted(m["MessageAttributes"]), m["MD5OfMessageAttributes"]) == (["General", "Hello", "Help.Me"], every)
    m = rec(["Foo", "Help"])
    assert "MessageAttributes" not in m and "MD5OfMessageAttributes" not in m
    m = rec(["Hello", "General"])
    assert (sorted(m["MessageAttributes"]), m["MD5OfMessageAttributes"]) == (["General", "Hello"],
                                                                             "fca026605781cb4126a1e9044df24232")
    m = rec(["Foo", "Hello"])
    assert (sorted(m["MessageAttributes"]), m["MD5OfMessageAttributes"]) == (["Hello"],
                                                                             "a311262e065454b75da111d535b8dacd")
    m = rec(["Hel.*"])
    assert (sorted(m["MessageAttributes"]), m["MD5OfMessageAttributes"]) == (["Hello", "Help.Me"],
                                                                             "83fee93c1bcd8b9a5a923ffacdc636c7")
    for names in (["AWS."], ["..foo"]):
        assert "MessageAttributes" not in rec(names)


# ----------------------------------------------------------------------- batches
def test_batch_errors_name_the_right_thing(sqs, unique):
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    for call, entry in ((sqs.send_message_batch, "SendMessageBatchRequestEntry"),
                        (sqs.delete_message_batch, "DeleteMessageBatchRequestEntry"),
                        (sqs.change_message_visibility_batch, "ChangeMessageVisibilityBatchRequestEntry")):
        e = _err(call, QueueUrl=url, Entries=[])
        assert (e["Code"], e["Status"], e["Message"]) == (
            "AWS.SimpleQueueService.EmptyBatchRequest", 400, f"There should be at least one {entry} in the request.")
    ids = ["id_1", "id_2", "id_2", "id_1"]
    e = _err(sqs.send_message_batch, QueueUrl=url, Entries=[{"Id": i, "MessageBody": "x"} for i in ids])
    assert (e["Code"], e["Message"]) == ("AWS.SimpleQueueService.BatchEntryIdsNotDistinct", "Id id_2 repeated.")
    e = _err(sqs.delete_message_batch, QueueUrl=url, Entries=[{"Id": i, "ReceiptHandle": "h"} for i in ids])
    assert e["Message"] == "Id id_2 repeated."
    e = _err(sqs.send_message_batch, QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "x"} for i in range(20)])
    assert (e["Code"], e["QueryErrorCode"], e["Status"], e["Message"]) == (
        "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", "TooManyEntriesInBatchRequest", 400,
        "Maximum number of entries per request are 10. You have sent 20.")
    for bad in ("", "invalid:id", "testLongId" * 10):
        e = _err(sqs.delete_message_batch, QueueUrl=url, Entries=[{"Id": bad, "ReceiptHandle": "h"}])
        assert (e["Code"], e["Message"]) == (
            "AWS.SimpleQueueService.InvalidBatchEntryId",
            "A batch entry id can only contain alphanumeric characters, hyphens and underscores. "
            "It can be at most 80 letters long.")
    # the batch's size counts bodies and message attributes (name + type + value)
    attrs = {"k": {"DataType": "String", "StringValue": "x"}}
    e = _err(sqs.send_message_batch, QueueUrl=url, Entries=[
        {"Id": "1", "MessageBody": "a" * (1048576 - 8), "MessageAttributes": attrs},
        {"Id": "2", "MessageBody": "a"}])
    assert (e["Code"], e["Status"], e["Message"]) == (
        "AWS.SimpleQueueService.BatchRequestTooLong", 400,
        "Batch requests cannot be longer than 1048576 bytes. You have sent 1048577 bytes.")
    assert _count(sqs, url) == 0


def test_batch_entry_over_the_queues_message_size(sqs, unique):
    url = sqs.create_queue(QueueName=unique, Attributes={"MaximumMessageSize": "1024"})["QueueUrl"]
    r = sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "ok", "MessageBody": "a" * 1024},
                                                      {"Id": "big", "MessageBody": "a" * 1025}])
    assert [s["Id"] for s in r["Successful"]] == ["ok"]
    assert r["Failed"] == [{"Id": "big", "SenderFault": True, "Code": "InvalidParameterValue",
                            "Message": "One or more parameters cannot be validated. Reason: Message must be "
                                       "shorter than 1024 bytes."}]


# ------------------------------------------------------------------- permissions
def test_add_permission_limits_and_policy(sqs, unique):
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    actions = ["SendMessage", "ReceiveMessage", "DeleteMessage", "ChangeMessageVisibility",
               "GetQueueAttributes", "GetQueueUrl", "PurgeQueue", "ListQueueTags"]
    e = _err(sqs.add_permission, QueueUrl=url, Label="l8", AWSAccountIds=["111111111111"], Actions=actions)
    assert (e["Code"], e["Status"], e["Message"]) == ("OverLimit", 403, "8 Actions were found, maximum allowed is 7.")
    sqs.add_permission(QueueUrl=url, Label="l7", AWSAccountIds=["111111111111"], Actions=actions[:7])
    policy = json.loads(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]["Policy"])
    assert policy["Version"] == "2008-10-17" and policy["Id"].endswith(f":{unique}/SQSDefaultPolicy")
    assert len(policy["Statement"][0]["Action"]) == 7
    sqs.remove_permission(QueueUrl=url, Label="l7")
    e = _err(sqs.remove_permission, QueueUrl=url, Label="l7")
    assert (e["Code"], e["Message"]) == ("InvalidParameterValue",
                                         "Value l7 for parameter Label is invalid. Reason: can't find label.")


# ------------------------------------------------------------------ query protocol
def test_query_protocol_trace_header_selection_and_batch_errors(base_url, unique):
    httpx = pytest.importorskip("httpx")
    url = f"{base_url}/123456789012/{unique}"

    def call(**params):
        return httpx.post(url if params.get("Action") != "CreateQueue" else base_url,
                          data={"Version": "2012-11-05", **params}, headers={"X-Amzn-Trace-Id": "Root=1-q", **SIGV4_ANY}, timeout=30)

    assert call(Action="CreateQueue", QueueName=unique).status_code == 200
    r = call(Action="SendMessage", MessageBody="b", **{
        "MessageAttribute.1.Name": "Hello", "MessageAttribute.1.Value.DataType": "String",
        "MessageAttribute.1.Value.StringValue": "There", "MessageAttribute.2.Name": "Help.Me",
        "MessageAttribute.2.Value.DataType": "String", "MessageAttribute.2.Value.StringValue": "Me"})
    assert r.status_code == 200 and "<MD5OfMessageSystemAttributes>" not in r.text
    r = call(Action="ReceiveMessage", **{"AttributeName.1": "AWSTraceHeader", "MessageAttributeName.1": "Hel.*"})
    assert "<Name>AWSTraceHeader</Name><Value>Root=1-q</Value>" in r.text
    assert "<MD5OfMessageAttributes>83fee93c1bcd8b9a5a923ffacdc636c7</MD5OfMessageAttributes>" in r.text
    r = call(Action="DeleteMessageBatch")
    assert r.status_code == 400 and "<Code>AWS.SimpleQueueService.EmptyBatchRequest</Code>" in r.text
    assert "at least one DeleteMessageBatchRequestEntry" in r.text
    r = call(Action="SendMessage", MessageBody="x", DelaySeconds="-1")
    assert r.status_code == 400 and "<Code>InvalidParameterValue</Code>" in r.text


def test_query_protocol_takes_json_member_names_too(base_url, unique):
    """A query request serialized from a model without the query names (AttributeNames.1,
    Attributes.1.key, Entries.1.Id) means what its query-named twin means."""
    httpx = pytest.importorskip("httpx")

    def call(**params):
        return httpx.post(base_url, data={"Version": "2012-11-05", **params}, headers=SIGV4_ANY, timeout=30)

    r = call(Action="CreateQueue", QueueName=unique, **{"Attributes.1.key": "VisibilityTimeout",
                                                         "Attributes.1.value": "7"})
    assert r.status_code == 200, r.text
    url = f"{base_url}/123456789012/{unique}"
    r = call(Action="GetQueueAttributes", QueueUrl=url, **{"AttributeNames.1": "VisibilityTimeout"})
    assert "<Attribute><Name>VisibilityTimeout</Name><Value>7</Value></Attribute>" in r.text
    r = call(Action="SendMessageBatch", QueueUrl=url, **{"Entries.1.Id": "a", "Entries.1.MessageBody": "x"})
    assert "<SendMessageBatchResultEntry><Id>a</Id>" in r.text
    r = call(Action="TagQueue", QueueUrl=url, **{"Tags.1.Key": "k", "Tags.1.Value": "v"})
    assert r.status_code == 200, r.text
    assert "<Tag><Key>k</Key><Value>v</Value></Tag>" in call(Action="ListQueueTags", QueueUrl=url).text


def test_query_protocol_endpoint_rules(base_url, unique):
    """On a queue URL: no Action is an unknown operation (404); CreateQueue and ListQueues are
    not actions of that endpoint; a missing queue is worded as the query protocol words it."""
    httpx = pytest.importorskip("httpx")
    url = f"{base_url}/123456789012/{unique}"
    assert httpx.post(base_url, data={"Action": "CreateQueue", "QueueName": unique}, headers=SIGV4_ANY).status_code == 200
    for headers in ({}, {"Accept": "application/json"}):
        r = httpx.get(url, headers=headers)
        assert r.status_code == 404 and "<UnknownOperationException" in r.text
    for action in ("CreateQueue", "ListQueues"):
        r = httpx.get(url, params={"Action": action, "QueueName": unique + "-2"})
        assert r.status_code == 400 and "<Code>InvalidAction</Code>" in r.text
        assert f"<Message>The action {action} is not valid for this endpoint." in r.text
    r = httpx.get(url + "-missing", params={"Action": "GetQueueAttributes", "AttributeName.1": "QueueArn"})
    assert r.status_code == 400 and "<Code>AWS.SimpleQueueService.NonExistentQueue</Code>" in r.text
    assert "<Message>The specified queue does not exist for this wsdl version.</Message>" in r.text


def test_batch_results_leave_out_empty_lists(sqs, unique):
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    r = sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "x"}])
    assert "Failed" not in r and [s["Id"] for s in r["Successful"]] == ["a"]
    r = sqs.delete_message_batch(QueueUrl=url, Entries=[{"Id": "a", "ReceiptHandle": "nope"}])
    assert "Successful" not in r and r["Failed"][0]["Id"] == "a"


def test_standard_queue_refuses_fifo_attributes(sqs, unique):
    for attrs, message in (({"FifoQueue": "false"}, "Unknown Attribute FifoQueue."),
                           ({"ContentBasedDeduplication": "false"}, "Unknown Attribute ContentBasedDeduplication."),
                           ({"DeduplicationScope": "queue"},
                            "You can specify the DeduplicationScope only when FifoQueue is set to true."),
                           ({"FifoThroughputLimit": "perQueue"},
                            "You can specify the FifoThroughputLimit only when FifoQueue is set to true.")):
        e = _err(sqs.create_queue, QueueName=unique, Attributes=attrs)
        assert (e["Code"], e["Status"], e["Message"]) == ("InvalidAttributeName", 400, message)
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    e = _err(sqs.set_queue_attributes, QueueUrl=url, Attributes={"FifoQueue": "false"})
    assert (e["Code"], e["Message"]) == ("InvalidAttributeName", "Unknown Attribute FifoQueue.")


def test_message_attribute_names_and_values(sqs, unique):
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="t", MessageAttributes={
        "attr.1øßä": {"StringValue": "Valida", "DataType": "String"}})  # letters of any script
    e = _err(sqs.send_message, QueueUrl=url, MessageBody="t", MessageAttributes={
        "attr1": {"StringValue": f"Invalid-{chr(8)},{chr(11)}", "DataType": "String"}})
    assert (e["Code"], e["Status"]) == ("InvalidParameterValue", 400) and "Invalid" in e["Message"]
    for prefix in ("aWs.", "AMAZON.", "."):
        e = _err(sqs.send_message, QueueUrl=url, MessageBody="t", MessageAttributes={
            f"{prefix}-Invalid-attr": {"StringValue": "Valid", "DataType": "String"}})
        assert e["Code"] == "InvalidParameterValue" and "invalid" in e["Message"].lower()
    e = _err(sqs.send_message, QueueUrl=url, MessageBody="t", MessageAttributes={
        "ErrorDetails": {"StringValue": "", "DataType": "String"}})
    assert e["Message"] == "Message (user) attribute 'ErrorDetails' must contain a non-empty value of type 'String'."


def test_new_queues_report_sse_sqs_as_aws_does(sqs, unique):
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["SqsManagedSseEnabled"])["Attributes"]
    assert a == {"SqsManagedSseEnabled": "true"}


def test_query_protocol_empty_lists(base_url, unique):
    """The query protocol sends an empty list as ``Name=``: an empty batch, an empty selection."""
    httpx = pytest.importorskip("httpx")
    url = f"{base_url}/123456789012/{unique}"
    assert httpx.post(base_url, data={"Action": "CreateQueue", "QueueName": unique}, headers=SIGV4_ANY).status_code == 200
    r = httpx.post(url, data={"Action": "SendMessageBatch", "Entries": ""}, headers=SIGV4_ANY)
    assert r.status_code == 400 and "EmptyBatchRequest" in r.text
    assert httpx.post(url, data={"Action": "SendMessage", "MessageBody": "b", "MessageAttribute.1.Name": "A",
                                 "MessageAttribute.1.Value.DataType": "String",
                                 "MessageAttribute.1.Value.StringValue": "v"}, headers=SIGV4_ANY).status_code == 200
    r = httpx.post(url, data={"Action": "ReceiveMessage", "MessageAttributeNames": "", "AttributeNames": ""},
                   headers=SIGV4_ANY)
    assert r.status_code == 200 and "<Body>b</Body>" in r.text and "<MessageAttribute>" not in r.text


def test_query_protocol_answers_json_when_asked(base_url, unique):
    httpx = pytest.importorskip("httpx")
    url = f"{base_url}/123456789012/{unique}"
    assert httpx.post(base_url, data={"Action": "CreateQueue", "QueueName": unique}, headers=SIGV4_ANY).status_code == 200
    httpx.post(url, data={"Action": "SendMessage", "MessageBody": '{"foo": "ba\\rr"}'}, headers=SIGV4_ANY)
    accept = {"Accept": "application/json"}
    r = httpx.get(base_url, params={"Action": "ListQueues", "Version": "2012-11-05"}, headers=accept)
    assert r.status_code == 200 and url in r.json()["ListQueuesResponse"]["ListQueuesResult"]["QueueUrls"]
    r = httpx.post(base_url, data={"Action": "ReceiveMessage", "QueueUrl": url, "VisibilityTimeout": "0"},
                   headers={**accept, **SIGV4_ANY})
    assert r.json()["ReceiveMessageResponse"]["ReceiveMessageResult"]["messages"][0]["Body"] == '{"foo": "ba\\rr"}'
    r = httpx.get(url, params={"Action": "GetQueueAttributes", "AttributeName.1": "All"}, headers=accept)
    attrs = r.json()["GetQueueAttributesResponse"]["GetQueueAttributesResult"]["Attributes"]
    assert {"Name": "VisibilityTimeout", "Value": "30"} in attrs
    r = httpx.get(url, params={"Action": "ListQueues"}, headers=accept)
    assert r.status_code == 400 and r.json()["Error"]["Code"] == "InvalidAction"
    assert r.json()["Error"]["Message"] == "The action ListQueues is not valid for this endpoint."
    assert httpx.get(base_url, params={"Action": "ListQueues"}).text.startswith("<?xml")  # XML unless asked


def test_set_fifo_queue_attribute_on_a_fifo_queue(sqs, unique):
    url = _fifo(sqs, unique)
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"FifoQueue": "true"})
    e = _err(sqs.set_queue_attributes, QueueUrl=url, Attributes={"FifoQueue": "false"})
    assert (e["Code"], e["Message"]) == (
        "InvalidAttributeValue", "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported.")
