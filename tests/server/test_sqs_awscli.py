"""The real AWS CLI (``aws``, awscli from the dev extra) against a real ``vqs serve``.

Both protocols: the CLI's own model (AWS JSON 1.0, what every current CLI sends)
and the 2012-11-05 query protocol, through a query-protocol model given to the
same CLI with ``AWS_DATA_PATH`` (sqs_query_model.py: current CLIs have no query
mode of their own). Dummy credentials come from the environment; each ``aws``
call costs about half a second, so each test does one walk through its actions.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from sqs_query_model import write_query_model

AWS = os.path.join(os.path.dirname(sys.executable), "aws")
if not os.path.exists(AWS):
    AWS = shutil.which("aws")
if AWS is None:
    pytest.skip("the AWS CLI (awscli, dev extra) is not installed", allow_module_level=True)


@pytest.fixture(scope="module", params=["json", "query"])
def aws(request, base_url, tmp_path_factory):
    home = tmp_path_factory.mktemp("aws-" + request.param)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID="AKIDEXAMPLE", AWS_SECRET_ACCESS_KEY="secret", AWS_DEFAULT_REGION="us-east-1",
               AWS_CONFIG_FILE=str(home / "config"), AWS_SHARED_CREDENTIALS_FILE=str(home / "credentials"),
               AWS_PAGER="", HOME=str(home))
    if request.param == "query":
        env["AWS_DATA_PATH"] = write_query_model(str(home / "models"))

    def run(*args, ok: bool = True):
        p = subprocess.run([AWS, "--endpoint-url", base_url, "--output", "json", "sqs", *args], env=env,
                           capture_output=True, text=True, timeout=60)
        if ok:
            assert p.returncode == 0, p.stderr
            return json.loads(p.stdout) if p.stdout.strip() else {}
        assert p.returncode != 0, p.stdout
        return p.stderr

    run.protocol = request.param
    run.env = env
    return run


def test_cli_speaks_the_protocol_it_is_given(aws, unique, base_url):
    """--debug shows what went on the wire: X-Amz-Target (JSON) or an Action form field (query)."""
    p = subprocess.run([AWS, "--debug", "--endpoint-url", base_url, "sqs", "list-queues", "--queue-name-prefix",
                        unique], env=aws.env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    if aws.protocol == "json":
        assert "AmazonSQS.ListQueues" in p.stderr and "'Action': 'ListQueues'" not in p.stderr
    else:
        assert "'Action': 'ListQueues'" in p.stderr and "AmazonSQS.ListQueues" not in p.stderr
    err = aws("get-queue-url", "--queue-name", unique + "-missing", ok=False)
    assert "AWS.SimpleQueueService.NonExistentQueue" in err


def test_standard_queue_walk(aws, unique):
    q = f"{unique}-{aws.protocol}"
    url = aws("create-queue", "--queue-name", q, "--attributes", "VisibilityTimeout=30")["QueueUrl"]
    assert url.endswith("/123456789012/" + q)
    r = aws("send-message", "--queue-url", url, "--message-body", "hello", "--message-attributes",
            json.dumps({"Hello": {"DataType": "String", "StringValue": "There"},
                        "Help.Me": {"DataType": "String", "StringValue": "Me"},
                        "General": {"DataType": "String", "StringValue": "Kenobi"}}),
            "--message-system-attributes", json.dumps({"AWSTraceHeader": {"DataType": "String",
                                                                          "StringValue": "Root=1-cli"}}))
    assert r["MD5OfMessageBody"] == "5d41402abc4b2a76b9719d911017c592"
    assert r["MD5OfMessageAttributes"] == "4c360f3fdafd970e05fae2f149d997f5"
    assert "MD5OfMessageSystemAttributes" in r
    r = aws("send-message-batch", "--queue-url", url, "--entries",
            json.dumps([{"Id": "a", "MessageBody": "b1"}, {"Id": "b", "MessageBody": "b2", "DelaySeconds": 0}]))
    assert sorted(s["Id"] for s in r["Successful"]) == ["a", "b"]
    m = aws("receive-message", "--queue-url", url, "--max-number-of-messages", "1",
            "--attribute-names", "SentTimestamp", "--message-system-attribute-names", "AWSTraceHeader",
            "--message-attribute-names", "Hel.*")["Messages"][0]
    assert m["Body"] == "hello"
    assert set(m["Attributes"]) == {"SentTimestamp", "AWSTraceHeader"}
    assert m["Attributes"]["AWSTraceHeader"] == "Root=1-cli"
    assert sorted(m["MessageAttributes"]) == ["Hello", "Help.Me"]
    assert m["MD5OfMessageAttributes"] == "83fee93c1bcd8b9a5a923ffacdc636c7"
    aws("change-message-visibility", "--queue-url", url, "--receipt-handle", m["ReceiptHandle"],
        "--visibility-timeout", "0")
    got = aws("receive-message", "--queue-url", url, "--max-number-of-messages", "10", "--wait-time-seconds", "1",
              "--attribute-names", "All")["Messages"]
    assert sorted(x["Body"] for x in got) == ["b1", "b2", "hello"]
    again = next(x for x in got if x["Body"] == "hello")
    assert again["Attributes"]["ApproximateReceiveCount"] == "2"
    aws("delete-message", "--queue-url", url, "--receipt-handle", again["ReceiptHandle"])
    rest = [x for x in got if x["Body"] != "hello"]
    r = aws("delete-message-batch", "--queue-url", url, "--entries",
            json.dumps([{"Id": f"d{i}", "ReceiptHandle": x["ReceiptHandle"]} for i, x in enumerate(rest)]))
    assert len(r["Successful"]) == 2 and not r.get("Failed")
    aws("send-message", "--queue-url", url, "--message-body", "to-purge")
    aws("purge-queue", "--queue-url", url)
    a = aws("get-queue-attributes", "--queue-url", url, "--attribute-names", "ApproximateNumberOfMessages")
    assert a["Attributes"]["ApproximateNumberOfMessages"] == "0"
    err = aws("delete-message-batch", "--queue-url", url, "--entries",
              json.dumps([{"Id": "x", "ReceiptHandle": "h"}, {"Id": "x", "ReceiptHandle": "h"}]), ok=False)
    assert "BatchEntryIdsNotDistinct" in err and "Id x repeated." in err


def test_fifo_queue_with_dead_letter_queue_and_move_task(aws, unique):
    q = f"{unique[:50]}-{aws.protocol}"
    dlq = aws("create-queue", "--queue-name", q + "-dlq.fifo", "--attributes", "FifoQueue=true")["QueueUrl"]
    dlq_arn = aws("get-queue-attributes", "--queue-url", dlq, "--attribute-names", "QueueArn")["Attributes"]["QueueArn"]
    attrs = {"FifoQueue": "true", "ContentBasedDeduplication": "true", "VisibilityTimeout": "0",
             "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})}
    url = aws("create-queue", "--queue-name", q + ".fifo", "--attributes", json.dumps(attrs))["QueueUrl"]
    a = aws("get-queue-attributes", "--queue-url", url, "--attribute-names", "All")["Attributes"]
    assert a["FifoQueue"] == "true" and json.loads(a["RedrivePolicy"])["deadLetterTargetArn"] == dlq_arn
    r = aws("send-message-batch", "--queue-url", url, "--entries", json.dumps(
        [{"Id": "a", "MessageBody": "f1", "MessageGroupId": "g"}, {"Id": "b", "MessageBody": "f2",
                                                                   "MessageGroupId": "g"}]))
    assert [s["Id"] for s in r["Successful"]] == ["a", "b"] and all(s["SequenceNumber"] for s in r["Successful"])
    err = aws("send-message-batch", "--queue-url", url, "--entries", json.dumps([{"Id": "a", "MessageBody": "x"}]),
              ok=False)
    assert "InvalidParameterValue" in err and "MessageGroupId" in err
    m = aws("receive-message", "--queue-url", url, "--max-number-of-messages", "10",
            "--message-system-attribute-names", "MessageGroupId", "SequenceNumber")["Messages"]
    assert [x["Body"] for x in m] == ["f1", "f2"] and m[0]["Attributes"]["MessageGroupId"] == "g"
    # received once (maxReceiveCount 1, visibility 0): the next receive moves both to the DLQ
    assert aws("receive-message", "--queue-url", url, "--max-number-of-messages", "10") == {}
    moved = aws("receive-message", "--queue-url", dlq, "--max-number-of-messages", "10", "--wait-time-seconds", "2",
                "--attribute-names", "All", "--visibility-timeout", "0")["Messages"]
    assert [x["Body"] for x in moved] == ["f1", "f2"]
    task = aws("start-message-move-task", "--source-arn", dlq_arn)["TaskHandle"]
    assert task
    tasks = aws("list-message-move-tasks", "--source-arn", dlq_arn)["Results"]
    assert tasks and tasks[0]["SourceArn"] == dlq_arn and tasks[0]["Status"] in ("RUNNING", "COMPLETED")
