"""The query protocol (Action=..., XML responses) as older SDKs and tools speak it."""

from __future__ import annotations

import hashlib
import xml.etree.ElementTree as ET

import httpx
from vqs_server_proc import SIGV4_ANY

NS = "{http://queue.amazonaws.com/doc/2012-11-05/}"


def q(base_url, path="/", method="POST", **params):
    if method == "GET":
        return httpx.get(base_url + path, params=params)
    return httpx.post(base_url + path, data=params, headers=SIGV4_ANY)


def xml(r):
    return ET.fromstring(r.content)


def test_query_round_trip(base_url, unique):
    r = q(base_url, Action="CreateQueue", QueueName=unique, **{"Attribute.1.Name": "VisibilityTimeout",
                                                               "Attribute.1.Value": "40", "Tag.1.Key": "k",
                                                               "Tag.1.Value": "v"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/xml")
    url = xml(r).find(f"{NS}CreateQueueResult/{NS}QueueUrl").text
    assert url.endswith(f"/123456789012/{unique}")
    r = q(base_url, Action="SendMessage", QueueUrl=url, MessageBody="hi <there> & you",
          **{"MessageAttribute.1.Name": "a", "MessageAttribute.1.Value.DataType": "String",
             "MessageAttribute.1.Value.StringValue": "b"})
    res = xml(r).find(f"{NS}SendMessageResult")
    assert res.find(f"{NS}MD5OfMessageBody").text == hashlib.md5(b"hi <there> & you").hexdigest()
    assert res.find(f"{NS}MD5OfMessageAttributes").text == \
        hashlib.md5(b"\x00\x00\x00\x01a\x00\x00\x00\x06String\x01\x00\x00\x00\x01b").hexdigest()
    # posting to the queue URL's path: QueueUrl comes from the path
    r = q(base_url, f"/123456789012/{unique}", Action="ReceiveMessage", MaxNumberOfMessages="5",
          **{"AttributeName.1": "All", "MessageAttributeName.1": "All"})
    assert r.status_code == 200, r.text
    msg = xml(r).find(f"{NS}ReceiveMessageResult/{NS}Message")
    assert msg.find(f"{NS}Body").text == "hi <there> & you"
    attrs = {a.find(f"{NS}Name").text: a.find(f"{NS}Value").text for a in msg.findall(f"{NS}Attribute")}
    assert attrs["ApproximateReceiveCount"] == "1"
    ma = msg.find(f"{NS}MessageAttribute")
    assert ma.find(f"{NS}Name").text == "a" and ma.find(f"{NS}Value/{NS}StringValue").text == "b"
    rh = msg.find(f"{NS}ReceiptHandle").text
    r = q(base_url, Action="DeleteMessageBatch", QueueUrl=url,
          **{"DeleteMessageBatchRequestEntry.1.Id": "x", "DeleteMessageBatchRequestEntry.1.ReceiptHandle": rh})
    assert xml(r).find(f"{NS}DeleteMessageBatchResult/{NS}DeleteMessageBatchResultEntry/{NS}Id").text == "x"
    r = q(base_url, method="GET", Action="GetQueueAttributes", QueueUrl=url, **{"AttributeName.1": "VisibilityTimeout"})
    a = xml(r).find(f"{NS}GetQueueAttributesResult/{NS}Attribute")
    assert (a.find(f"{NS}Name").text, a.find(f"{NS}Value").text) == ("VisibilityTimeout", "40")
    r = q(base_url, Action="ListQueueTags", QueueUrl=url)
    t = xml(r).find(f"{NS}ListQueueTagsResult/{NS}Tag")
    assert (t.find(f"{NS}Key").text, t.find(f"{NS}Value").text) == ("k", "v")
    r = q(base_url, Action="ListQueues", QueueNamePrefix=unique)
    assert [u.text for u in xml(r).iter(f"{NS}QueueUrl")] == [url]
    r = q(base_url, Action="DeleteQueue", QueueUrl=url)
    assert r.status_code == 200 and xml(r).find(f"{NS}ResponseMetadata/{NS}RequestId").text


def test_query_errors(base_url, unique):
    r = q(base_url, Action="GetQueueUrl", QueueName=unique + "-missing")
    assert r.status_code == 400
    e = ET.fromstring(r.content).find(f"{NS}Error")
    assert e.find(f"{NS}Code").text == "AWS.SimpleQueueService.NonExistentQueue"
    assert e.find(f"{NS}Type").text == "Sender"
    assert r.headers["x-amzn-query-error"] == "AWS.SimpleQueueService.NonExistentQueue;Sender"
    r = q(base_url, Action="NoSuchAction")
    assert r.status_code == 400 and b"InvalidAction" in r.content
    r = q(base_url)  # no Action at all (not a queue URL: those answer UnknownOperationException)
    assert r.status_code == 400 and b"MissingParameter" in r.content
    # a percent-encoded byte that is not UTF-8: refused, never stored as U+FFFD
    url = xml(q(base_url, Action="CreateQueue", QueueName=unique + "-utf")).find(f".//{NS}QueueUrl").text
    body = f"Action=SendMessage&QueueUrl={url}&MessageBody=a%FFb".encode()
    r = httpx.post(base_url + "/", content=body, headers={**SIGV4_ANY, "content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 404 and b"MalformedQueryString" in r.content, r.text  # (AWS: 404)
    r = q(base_url, Action="ReceiveMessage", QueueUrl=url)
    assert xml(r).find(f".//{NS}Message") is None


def test_the_root_without_a_query_is_a_page_of_links_and_a_browser_lands_on_the_console(base_url):
    r = httpx.get(base_url + "/", headers={"accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
    assert r.status_code == 303 and r.headers["location"] == "/console"
    r = httpx.get(base_url + "/")
    assert r.status_code == 200 and r.json()["links"]["console"] == "/console"
    r = q(base_url, method="GET", Action="ListQueues")  # a query-protocol GET is still SQS
    assert r.status_code == 200 and b"ListQueuesResponse" in r.content


def test_json_protocol_raw(base_url, unique):
    h = {"x-amz-target": "AmazonSQS.GetQueueUrl", "content-type": "application/x-amz-json-1.0"}
    r = httpx.post(base_url + "/", json={"QueueName": unique + "-nope"}, headers=h)
    assert r.status_code == 400
    assert r.json() == {"__type": "com.amazonaws.sqs#QueueDoesNotExist", "message": "The specified queue does not exist."}
    assert r.headers["x-amzn-query-error"] == "AWS.SimpleQueueService.NonExistentQueue;Sender"
    r = httpx.post(base_url + "/", content=b"{broken", headers=h)
    assert r.status_code == 400 and r.json()["__type"].endswith("#SerializationException")
    r = httpx.post(base_url + "/", content=b"{}", headers={**h, "x-amz-target": "AmazonSQS.Nope"})
    assert r.status_code == 400 and r.json()["__type"].endswith("#InvalidAction")
