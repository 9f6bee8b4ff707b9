"""Message move tasks (vqs.broker.queue.redrive.MoveTasks): the one
implementation behind QueueRegistry's and the SQS server's
Start/List/CancelMessageMoveTask, with SQS's rules."""

from __future__ import annotations

import base64
import json
import time

import pytest

from vqs.broker.queue_config import DEFAULT_ARN_PREFIX
from vqs.broker.registry import QueueRegistry
from vqs.errors import InvalidParameterValue, ResourceNotFound, UnsupportedOperation


@pytest.fixture
def reg(tmp_path, qclock):
    r = QueueRegistry(str(tmp_path / "queues"), clock=qclock)
    yield r
    r.close()


def _dead_letters(reg, qclock, n):
    """n messages moved to dead-letter queue "dlq" from "q"."""
    dlq = reg.create("dlq")
    q = reg.create("q", dead_letter_queue="dlq", max_receive_count=1, visibility_timeout=1)
    q.send_batch([b"m%d" % i for i in range(n)])
    assert len(q.receive(10)) == n
    qclock.advance(1)
    assert q.receive(10) == []
    assert dlq.counts()["visible"] == n
    return dlq, q


def _wait(task, timeout=15):
    deadline = time.monotonic() + timeout
    while task.active and time.monotonic() < deadline:
        time.sleep(0.02)
    return task.status


def test_source_must_be_a_dead_letter_queue(reg):
    reg.create("plain")
    with pytest.raises(InvalidParameterValue, match="Dead Letter Queue"):
        reg.start_message_move_task("plain")


def test_rate_limits(reg, qclock):
    _dead_letters(reg, qclock, 1)
    for bad in (0, 501, True, "5"):
        with pytest.raises(InvalidParameterValue):
            reg.start_message_move_task("dlq", max_per_second=bad)


def test_one_active_task_per_source_then_cancel(reg, qclock):
    dlq, q = _dead_letters(reg, qclock, 4)
    task = reg.start_message_move_task("dlq", max_per_second=1)  # one message a second
    assert task.status == "RUNNING" and task.to_move == 4
    with pytest.raises(UnsupportedOperation):
        reg.start_message_move_task("dlq")
    assert reg.cancel_message_move_task(task.handle) is task
    assert task.status == "CANCELLED" and task.moved < 4
    assert dlq.counts()["visible"] == 4 - task.moved
    with pytest.raises(ResourceNotFound):  # only a running task can be cancelled
        reg.cancel_message_move_task(task.handle)
    with pytest.raises(ResourceNotFound):
        reg.cancel_message_move_task("no-such-task")
    again = reg.start_message_move_task("dlq")  # the first is no longer active
    assert _wait(again) == "COMPLETED" and again.moved == 4 - task.moved
    assert reg.list_message_move_tasks("dlq", 10) == [again, task]  # newest first
    assert reg.list_message_move_tasks("dlq") == [again]


def test_task_moves_at_most_what_was_visible_at_start(reg, qclock):
    dlq, q = _dead_letters(reg, qclock, 3)
    task = reg.start_message_move_task("dlq", max_per_second=2)
    dlq.send_batch([b"late1", b"late2"])  # arrive while it runs; no source: would stay anyway
    assert _wait(task) == "COMPLETED"
    assert task.moved == 3 and task.failure_reason is None
    assert sorted(m.body for m in q.receive(10)) == [b"m0", b"m1", b"m2"]


def test_handle_and_arns_are_aws_shaped(reg, qclock):
    _dead_letters(reg, qclock, 1)
    reg.create("other")
    task = reg.start_message_move_task("dlq", "other", arn_prefix="arn:aws:sqs:eu-west-1:42")
    assert json.loads(base64.b64decode(task.handle))["sourceArn"] == "arn:aws:sqs:eu-west-1:42:dlq"
    assert task.source_arn == "arn:aws:sqs:eu-west-1:42:dlq"
    assert task.destination_arn == "arn:aws:sqs:eu-west-1:42:other"
    assert _wait(task) == "COMPLETED"
    plain = reg.start_message_move_task("dlq")
    assert plain.source_arn == f"{DEFAULT_ARN_PREFIX}:dlq" and plain.destination_arn is None
    _wait(plain)
