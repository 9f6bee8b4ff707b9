"""SQS dead-letter moves (a RedrivePolicy) through a real server and boto3 on
a real filesystem (a 3 MiB tmpfs, tests/conftest.py) its own sends filled: receives past
maxReceiveCount on the full disk return nothing and raise nothing; the
messages the DLQ could not take stay in the source, counted, and move once
space is freed; after a restart each message is in the DLQ exactly once."""

from __future__ import annotations

import collections
import json
import os

import pytest

boto3 = pytest.importorskip("boto3")
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402
from vqs_server_proc import ServerProcess  # noqa: E402

N = 100


def _sqs(url: str):
    return boto3.client("sqs", endpoint_url=url, region_name="eu-west-1", aws_access_key_id="x",
                        aws_secret_access_key="y", config=Config(retries={"max_attempts": 1}))


def _visible(sqs, url: str) -> int:
    a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert a["ApproximateNumberOfMessagesNotVisible"] == a["ApproximateNumberOfMessagesDelayed"] == "0"
    return int(a["ApproximateNumberOfMessages"])


def test_redrive_policy_on_a_full_disk_moves_each_message_once(small_disk):
    data = os.path.join(small_disk.path, "data")
    srv = ServerProcess(data).start()
    try:
        sqs = _sqs(srv.url)
        dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        q = sqs.create_queue(QueueName="q", Attributes={"RedrivePolicy": json.dumps(
            {"deadLetterTargetArn": arn, "maxReceiveCount": 1})})["QueueUrl"]
        for i in range(0, N, 10):
            sqs.send_message_batch(QueueUrl=q, Entries=[
                {"Id": str(k), "MessageBody": "%04d" % (i + k) + "p" * 2000} for k in range(10)])
        handles = []
        while len(handles) < N:
            handles += [m["ReceiptHandle"] for m in sqs.receive_message(
                QueueUrl=q, MaxNumberOfMessages=10, VisibilityTimeout=600).get("Messages", [])]

        def visible_again(hs):
            for i in range(0, len(hs), 10):
                r = sqs.change_message_visibility_batch(QueueUrl=q, Entries=[
                    {"Id": str(k), "ReceiptHandle": h, "VisibilityTimeout": 0}
                    for k, h in enumerate(hs[i:i + 10])])
                assert not r.get("Failed"), r

        visible_again(handles[:20])  # moved while there is space
        assert "Messages" not in sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=10)
        assert _visible(sqs, dlq) == 20

        # the server's own sends fill the disk to the space governor's data floor: the DLQ's
        # appends are refused there too, the lease records (control writes) still written.
        # Filled in ever smaller sends, so that what is left above the floor is less than one
        # message the DLQ would take (a batch's 200 KB of room left could hold all 80 moves)
        filler = sqs.create_queue(QueueName="filler")["QueueUrl"]

        def fill(sizes):
            for count, size in sizes:
                while True:
                    try:
                        r = sqs.send_message_batch(QueueUrl=filler, Entries=[
                            {"Id": str(k), "MessageBody": "f" * size} for k in range(count)])
                    except ClientError as e:
                        assert e.response["Error"]["Code"] == "ServiceUnavailable", e
                        break
                    if r.get("Failed"):
                        break

        fill(((10, 20000), (1, 20000), (1, 2000), (1, 200)))
        visible_again(handles[20:])
        fill(((1, 2000), (1, 200)))  # what the log gave back since (a refused batch cut back) taken too
        for _ in range(N // 10 + 2):  # past maxReceiveCount: never delivered, no error
            assert "Messages" not in sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=10)
        stayed = _visible(sqs, q)
        assert stayed > 0 and stayed + _visible(sqs, dlq) == N

        sqs.delete_queue(QueueUrl=filler)  # its files unlinked: the space is back
        assert "Messages" not in sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=10)
        assert (_visible(sqs, q), _visible(sqs, dlq)) == (0, N)
    finally:
        rc = srv.stop()
    assert rc == 0, srv.log()[-3000:]

    srv = ServerProcess(data).start()  # restarted: each message in the DLQ exactly once
    try:
        sqs = _sqs(srv.url)
        q, dlq = sqs.get_queue_url(QueueName="q")["QueueUrl"], sqs.get_queue_url(QueueName="dlq")["QueueUrl"]
        assert (_visible(sqs, q), _visible(sqs, dlq)) == (0, N)
        got: collections.Counter = collections.Counter()
        while True:
            ms = sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10, VisibilityTimeout=600,
                                     AttributeNames=["All"]).get("Messages", [])
            if not ms:
                break
            got.update(m["Body"][:4] for m in ms)
            assert {m["Attributes"]["DeadLetterQueueSourceArn"].rsplit(":", 1)[1] for m in ms} == {"q"}
        assert got == collections.Counter({"%04d" % i: 1 for i in range(N)})
    finally:
        rc = srv.stop()
    assert rc == 0, srv.log()[-3000:]
