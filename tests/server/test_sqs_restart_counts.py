"""SQS's approximate counts are right at once after a server restart.

ApproximateNumberOfMessages (visible), ApproximateNumberOfMessagesNotVisible
(in flight) and ApproximateNumberOfMessagesDelayed (sent with a delay, per
message or the queue's DelaySeconds, not yet visible) answer the same right
after a restart as before it, after a clean stop (SIGTERM) and after a kill
(SIGKILL; ``--flush always``: every acknowledged send and lease is on disk),
before any receive reaches the delayed messages.
"""

from __future__ import annotations

import pytest

boto3 = pytest.importorskip("boto3")
from botocore.config import Config  # noqa: E402
from vqs_server_proc import ServerProcess  # noqa: E402

COUNTS = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
          "ApproximateNumberOfMessagesDelayed"]


def _client(url):
    return boto3.client("sqs", endpoint_url=url, region_name="eu-west-1", aws_access_key_id="x",
                        aws_secret_access_key="y", config=Config(retries={"max_attempts": 1}))


def _counts(sqs, url) -> list[int]:
    a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=COUNTS)["Attributes"]
    return [int(a[k]) for k in COUNTS]


@pytest.mark.parametrize("stop", ["sigterm", "sigkill"])
def test_counts_are_right_right_after_a_restart(tmp_path, stop):
    srv = ServerProcess(tmp_path / "data", "--flush", "always").start()
    try:
        sqs = _client(srv.url)
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        delayed_q = sqs.create_queue(QueueName="dq", Attributes={"DelaySeconds": "600"})["QueueUrl"]
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": f"v{i}", "MessageBody": "visible"} for i in range(4)])
        sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2, VisibilityTimeout=600)  # 2 in flight
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": f"d{i}", "MessageBody": "later", "DelaySeconds": 600} for i in range(3)])
        sqs.send_message(QueueUrl=url, MessageBody="soon", DelaySeconds=900)
        sqs.send_message_batch(QueueUrl=delayed_q, Entries=[
            {"Id": f"q{i}", "MessageBody": "queue delay"} for i in range(5)])
        before = (_counts(sqs, url), _counts(sqs, delayed_q))
        assert before == ([2, 2, 4], [0, 0, 5])
        if stop == "sigterm":
            assert srv.stop() == 0
        else:
            srv.kill9()
        srv = ServerProcess(tmp_path / "data", "--flush", "always", port=srv.port).start()
        assert (_counts(sqs, url), _counts(sqs, delayed_q)) == before
        # and receives agree: only the two visible ones come
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
        assert [m["Body"] for m in got] == ["visible", "visible"]
        assert "Messages" not in sqs.receive_message(QueueUrl=delayed_q, MaxNumberOfMessages=10)
        assert _counts(sqs, url) == [0, 4, 4]
    finally:
        srv.stop()
