"""SQS message move tasks survive a server restart (boto3 against a real ``vqs serve``).

A task running when the server stops (SIGTERM, or SIGKILL with ``--flush
always``) goes on after the server starts again: ListMessageMoveTasks shows it
with the same TaskHandle and StartedTimestamp, RUNNING until it is COMPLETED,
and finished tasks stay listed. Every message moves: exactly once across a
clean stop, at least once across a kill (SQS's redrive is at-least-once: a
batch moved but not yet deleted from the dead-letter queue moves again).
"""

from __future__ import annotations

import json
import time

import pytest

boto3 = pytest.importorskip("boto3")
from botocore.config import Config  # noqa: E402
from vqs_server_proc import ServerProcess  # noqa: E402

N = 20
RATE = 5


def _client(url):
    return boto3.client("sqs", endpoint_url=url, region_name="eu-west-1", aws_access_key_id="x",
                        aws_secret_access_key="y", config=Config(retries={"max_attempts": 1}))


def _arn(sqs, url) -> str:
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def _setup(sqs) -> tuple[str, str, str]:
    """N messages in dead-letter queue "dlq" (from "src"); an empty "dest"."""
    dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    src = sqs.create_queue(QueueName="src", Attributes={"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": _arn(sqs, dlq), "maxReceiveCount": 1})})["QueueUrl"]
    dest = sqs.create_queue(QueueName="dest")["QueueUrl"]
    for i in range(0, N, 10):
        sqs.send_message_batch(QueueUrl=src, Entries=[
            {"Id": str(k), "MessageBody": f"m{k}"} for k in range(i, i + 10)])
    while True:  # received once: each further receive moves them to the DLQ
        if not sqs.receive_message(QueueUrl=src, MaxNumberOfMessages=10, VisibilityTimeout=0).get("Messages"):
            break
    a = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["ApproximateNumberOfMessages"])
    assert a["Attributes"]["ApproximateNumberOfMessages"] == str(N)
    return dlq, src, dest


def _tasks(sqs, dlq_arn, n=10) -> list[dict]:
    return sqs.list_message_move_tasks(SourceArn=dlq_arn, MaxResults=n)["Results"]


def _until(pred, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError("timed out")


def _drain(sqs, url) -> list[str]:
    bodies = []
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=300)
        if not got.get("Messages"):
            return bodies
        bodies += [m["Body"] for m in got["Messages"]]


@pytest.mark.parametrize("stop", ["sigterm", "sigkill"])
def test_a_move_task_running_at_a_restart_finishes_after_it(tmp_path, stop):
    srv = ServerProcess(tmp_path / "data", "--flush", "always").start()
    try:
        sqs = _client(srv.url)
        dlq, _, dest = _setup(sqs)
        dlq_arn = _arn(sqs, dlq)
        handle = sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=_arn(sqs, dest),
                                             MaxNumberOfMessagesPerSecond=RATE)["TaskHandle"]
        before = _until(lambda: next((t for t in _tasks(sqs, dlq_arn)
                                      if t["ApproximateNumberOfMessagesMoved"] >= RATE), None))
        assert before["Status"] == "RUNNING" and before["TaskHandle"] == handle
        if stop == "sigterm":
            assert srv.stop() == 0
        else:
            srv.kill9()
        srv = ServerProcess(tmp_path / "data", "--flush", "always", port=srv.port).start()
        [after] = _tasks(sqs, dlq_arn)
        assert after["StartedTimestamp"] == before["StartedTimestamp"]
        assert after["ApproximateNumberOfMessagesToMove"] == N
        assert after["Status"] in ("RUNNING", "COMPLETED")
        if after["Status"] == "RUNNING":
            assert after["TaskHandle"] == handle
        [done] = _until(lambda: [t for t in _tasks(sqs, dlq_arn) if t["Status"] == "COMPLETED"])
        assert "TaskHandle" not in done and done["MaxNumberOfMessagesPerSecond"] == RATE
        bodies = _drain(sqs, dest)
        assert set(bodies) == {f"m{k}" for k in range(N)}
        if stop == "sigterm":
            assert len(bodies) == N  # exactly once
        else:
            assert len(bodies) <= N + RATE  # at least once: at most the batch in flight again
        a = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["All"])["Attributes"]
        assert a["ApproximateNumberOfMessages"] == "0" and a["ApproximateNumberOfMessagesNotVisible"] == "0"
        # a new task is listed first; the finished one stays in the history
        sqs.start_message_move_task(SourceArn=dlq_arn)
        listed = _until(lambda: [t for t in _tasks(sqs, dlq_arn) if t["Status"] == "COMPLETED"]
                        if len(_tasks(sqs, dlq_arn)) == 2 else None)
        assert len(listed) == 2 and listed[1]["StartedTimestamp"] == before["StartedTimestamp"]
    finally:
        srv.stop()
