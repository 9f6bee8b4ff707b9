"""The limits table of docs/sqs.md, checked against a running server: for each row
with a ``name lo hi`` in its last column, ``hi`` (and ``lo``) is accepted and one
past it refused, with real boto3."""

from __future__ import annotations

import os
import re

import pytest

boto3 = pytest.importorskip("boto3")
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "sqs.md")


def _documented() -> dict[str, tuple[int, int]]:
    with open(DOC) as f:
        text = f.read()
    table = text[text.index("## Limits"):]
    return {m[1]: (int(m[2]), int(m[3])) for m in re.finditer(r"\| `(\w+) (\d+) (\d+)` \|", table)}


LIMITS = _documented()


@pytest.fixture(scope="module")
def sqs(base_url):
    return boto3.client("sqs", endpoint_url=base_url, region_name="us-east-1", aws_access_key_id="x",
                        aws_secret_access_key="y", config=Config(retries={"max_attempts": 1}))


def test_the_table_is_read():
    assert {"VisibilityTimeout", "DelaySeconds", "MessageRetentionPeriod", "MaximumMessageSize",
            "ReceiveMessageWaitTimeSeconds", "batch", "batch_bytes", "MaxNumberOfMessages", "tags",
            "message_attributes", "permission_actions"} <= set(LIMITS)


def _refused(call, *args, **kw) -> None:
    with pytest.raises(ClientError) as ei:
        call(*args, **kw)
    assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] in (400, 403)


def _within(sqs, url, name, n):
    """Do one request with limit ``name`` at ``n``."""
    if name in ("VisibilityTimeout", "DelaySeconds", "MessageRetentionPeriod", "MaximumMessageSize",
                "ReceiveMessageWaitTimeSeconds"):
        return sqs.set_queue_attributes(QueueUrl=url, Attributes={name: str(n)})
    if name == "batch":
        return sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "x"} for i in range(n)])
    if name == "batch_bytes":
        half = n // 2
        return sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "a" * half},
                                                             {"Id": "b", "MessageBody": "b" * (n - half)}])
    if name == "MaxNumberOfMessages":
        return sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=n)
    if name == "message_attributes":
        return sqs.send_message(QueueUrl=url, MessageBody="x", MessageAttributes={
            f"a{i}": {"DataType": "String", "StringValue": "v"} for i in range(n)})
    if name == "tags":
        return sqs.tag_queue(QueueUrl=url, Tags={f"k{i}": "v" for i in range(n)})
    if name == "permission_actions":
        actions = ["SendMessage", "ReceiveMessage", "DeleteMessage", "ChangeMessageVisibility",
                   "GetQueueAttributes", "GetQueueUrl", "PurgeQueue", "ListQueueTags"][:n]
        sqs.add_permission(QueueUrl=url, Label="p", AWSAccountIds=["111111111111"], Actions=actions)
        return sqs.remove_permission(QueueUrl=url, Label="p")
    raise AssertionError(f"no check for documented limit {name}")


@pytest.mark.parametrize("name", sorted(LIMITS))
def test_documented_limit_holds(sqs, unique, name):
    lo, hi = LIMITS[name]
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    _within(sqs, url, name, hi)
    if name == "batch_bytes":  # a batch of 0 bytes is a batch of empty bodies: refused for that reason
        lo = 2
    if lo > 0 or name in ("VisibilityTimeout", "DelaySeconds", "ReceiveMessageWaitTimeSeconds"):
        _within(sqs, url, name, lo)
    if name == "MaximumMessageSize":
        sqs.set_queue_attributes(QueueUrl=url, Attributes={name: str(hi)})
    _refused(_within, sqs, url, name, hi + 1)
    if lo > 0 and name not in ("batch_bytes",):
        _refused(_within, sqs, url, name, lo - 1)
