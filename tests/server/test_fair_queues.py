"""Fair queues through the server: MessageGroupId on a standard queue with real boto3
(AWS JSON), the query protocol and vqs.Client, against real ``vqs serve`` processes.

The SQS rules stated here: a standard queue accepts MessageGroupId (1-128
alphanumerics and punctuation), returns it as the MessageGroupId system
attribute (no SequenceNumber, no MessageDeduplicationId), and while a tenant
(group) has at least 30 messages and more than 10 % of all in flight, receives
deliver the other tenants' messages first.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import httpx
import pytest
from vqs_server_proc import SIGV4_ANY, ServerProcess

import vqs.client as vc

boto3 = pytest.importorskip("boto3")
from botocore.config import Config  # noqa: E402

NS = "{http://queue.amazonaws.com/doc/2012-11-05/}"
GROUP_ERROR = ("Value {} for parameter MessageGroupId is invalid. Reason: MessageGroupId can only "
               "include alphanumeric and punctuation characters. 1 to 128 in length.")


def _client(url):
    return boto3.client("sqs", endpoint_url=url, region_name="us-east-1", aws_access_key_id="x",
                        aws_secret_access_key="y", config=Config(retries={"max_attempts": 1}))


@pytest.fixture(scope="module")
def sqs(base_url):
    return _client(base_url)


def _send(sqs, url, group, bodies):
    for i in range(0, len(bodies), 10):
        entries = [{"Id": f"e{k}", "MessageBody": b} for k, b in enumerate(bodies[i:i + 10])]
        if group is not None:
            for e in entries:
                e["MessageGroupId"] = group
        r = sqs.send_message_batch(QueueUrl=url, Entries=entries)
        assert not r.get("Failed"), r


def _receive(sqs, url, n, **kw):
    return [m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=n,
                                                   **kw).get("Messages", [])]


def _take(sqs, url, k):
    got = []
    while len(got) < k:
        ms = _receive(sqs, url, min(10, k - len(got)))
        assert ms, f"only {len(got)} of {k} came"
        got += ms
    return got


def test_standard_queue_returns_the_group_id(sqs, unique):
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    r = sqs.send_message(QueueUrl=url, MessageBody="message", MessageGroupId="test")
    assert set(r) - {"ResponseMetadata"} == {"MD5OfMessageBody", "MessageId"}  # no SequenceNumber
    sqs.send_message(QueueUrl=url, MessageBody="plain")
    ms = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    assert [m["Body"] for m in ms] == ["message", "plain"]
    assert set(ms[0]["Attributes"]) == {"ApproximateFirstReceiveTimestamp", "ApproximateReceiveCount",
                                        "MessageGroupId", "SenderId", "SentTimestamp"}
    assert ms[0]["Attributes"]["MessageGroupId"] == "test"
    assert "MessageGroupId" not in ms[1]["Attributes"]
    for m in ms:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
    ms = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                             MessageSystemAttributeNames=["MessageGroupId"])["Messages"]
    assert [m.get("Attributes") for m in ms] == [{"MessageGroupId": "test"}, None]


@pytest.mark.parametrize("bad", ["", "a" * 129, "group 123"])
def test_invalid_group_id_on_a_standard_queue(sqs, unique, bad):
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    with pytest.raises(sqs.exceptions.ClientError) as ei:
        sqs.send_message(QueueUrl=url, MessageBody="message", MessageGroupId=bad)
    err = ei.value.response["Error"]
    assert err["Code"] == "InvalidParameterValue"
    assert err["Message"] == GROUP_ERROR.format(bad)
    assert err["Type"] == "Sender"
    assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert "Messages" not in sqs.receive_message(QueueUrl=url)


def test_batch_entries_carry_their_group_ids(sqs, unique):
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    r = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "a", "MessageBody": "1", "MessageGroupId": "t1"},
        {"Id": "b", "MessageBody": "2"},
        {"Id": "c", "MessageBody": "3", "MessageGroupId": "bad group"},
        {"Id": "d", "MessageBody": "4", "MessageGroupId": "t2"},
    ])
    assert [s["Id"] for s in r["Successful"]] == ["a", "b", "d"]
    assert all("SequenceNumber" not in s for s in r["Successful"])
    assert [(f["Id"], f["Code"], f["SenderFault"]) for f in r["Failed"]] == [("c", "InvalidParameterValue", True)]
    ms = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["MessageGroupId"])["Messages"]
    assert [(m["Body"], m.get("Attributes", {}).get("MessageGroupId")) for m in ms] == \
        [("1", "t1"), ("2", None), ("4", "t2")]


def test_deduplication_id_is_refused_on_a_standard_queue(sqs, unique):
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    with pytest.raises(sqs.exceptions.ClientError) as ei:
        sqs.send_message(QueueUrl=url, MessageBody="m", MessageGroupId="g", MessageDeduplicationId="d")
    assert ei.value.response["Error"]["Code"] == "InvalidParameterValue"


def test_quiet_tenants_first_while_one_is_noisy(sqs, unique):
    url = sqs.create_queue(QueueName=unique, Attributes={"VisibilityTimeout": "600"})["QueueUrl"]
    a = [f"a{i}" for i in range(45)]
    _send(sqs, url, "A", a[:30])
    assert _take(sqs, url, 30) == a[:30]  # 30 of 30 in flight: A is noisy
    _send(sqs, url, "A", a[30:45])
    _send(sqs, url, "B", ["b0", "b1"])
    _send(sqs, url, None, ["p0"])  # no group id: a tenant of its own
    # B's and p0 before A's older backlog; then A: nothing is dropped or throttled
    assert _receive(sqs, url, 10) == ["b0", "b1", "p0"] + a[30:37]
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (attrs["ApproximateNumberOfMessages"], attrs["ApproximateNumberOfMessagesNotVisible"]) == ("8", "40")


def test_query_protocol_group_ids(base_url, unique):
    def call(**params):
        r = httpx.post(base_url + "/", data=params, headers=SIGV4_ANY)
        assert r.status_code == 200, r.text
        return ET.fromstring(r.content)

    url = call(Action="CreateQueue", QueueName=unique).find(f"{NS}CreateQueueResult/{NS}QueueUrl").text
    res = call(Action="SendMessage", QueueUrl=url, MessageBody="one", MessageGroupId="g1")
    assert res.find(f"{NS}SendMessageResult/{NS}SequenceNumber") is None
    call(Action="SendMessageBatch", QueueUrl=url, **{
        "SendMessageBatchRequestEntry.1.Id": "x", "SendMessageBatchRequestEntry.1.MessageBody": "two",
        "SendMessageBatchRequestEntry.1.MessageGroupId": "g2"})
    res = call(Action="ReceiveMessage", QueueUrl=url, MaxNumberOfMessages="10",
               **{"AttributeName.1": "MessageGroupId"})
    got = []
    for m in res.iter(f"{NS}Message"):
        attrs = {a.find(f"{NS}Name").text: a.find(f"{NS}Value").text for a in m.findall(f"{NS}Attribute")}
        got.append((m.find(f"{NS}Body").text, attrs))
    assert got == [("one", {"MessageGroupId": "g1"}), ("two", {"MessageGroupId": "g2"})]
    r = httpx.post(base_url + "/", data={"Action": "SendMessage", "QueueUrl": url, "MessageBody": "m",
                                        "MessageGroupId": "a b"}, headers=SIGV4_ANY)
    assert r.status_code == 400
    assert ET.fromstring(r.content).find(f"{NS}Error/{NS}Message").text == GROUP_ERROR.format("a b")


def test_vqs_client_standard_queue_group_ids(base_url, unique):
    with vc.Client(base_url) as c:
        q = c.create_queue(unique, visibility_timeout=600)
        q.send("one", group_id="t1")
        q.send_batch([{"body": "two", "group_id": "t2"}, {"body": "three"}])
        ms = q.receive(10)
        assert [(m.body, m.group_id, m.sequence_number, m.dedup_id) for m in ms] == \
            [(b"one", "t1", None, None), (b"two", "t2", None, None), (b"three", None, None, None)]
        # the noisy-tenant rule through REST
        q.send_batch([{"body": f"a{i}", "group_id": "A"} for i in range(10)] * 3)
        assert len(q.receive(30)) == 30  # A: 30 of 33 in flight
        q.send("a-late", group_id="A")
        q.send("b", group_id="B")
        assert [m.body for m in q.receive(2)] == [b"b", b"a-late"]


def test_noisy_tenant_survives_kill_9(tmp_path):
    """The per-tenant in-flight counts are rebuilt at open (from the lease state
    and the message log): after a SIGKILL, the noisy tenant is still noisy."""
    s = ServerProcess(tmp_path / "data", "--flush", "always").start()
    try:
        sqs = _client(s.url)
        url = sqs.create_queue(QueueName="fair", Attributes={"VisibilityTimeout": "600"})["QueueUrl"]
        _send(sqs, url, "A", [f"a{i}" for i in range(31)])
        assert len(_take(sqs, url, 30)) == 30
        _send(sqs, url, "B", ["b0"])
        s.kill9()
    finally:
        s.stop()
    s = ServerProcess(tmp_path / "data", "--flush", "always", port=s.port).start()
    try:
        sqs = _client(s.url)
        url = sqs.get_queue_url(QueueName="fair")["QueueUrl"]
        assert _receive(sqs, url, 2) == ["b0", "a30"]
    finally:
        assert s.stop() == 0, s.log()
