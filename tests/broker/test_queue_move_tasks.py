"""Message move tasks (vqs.broker.queue.move_tasks): the one
implementation behind QueueRegistry's and the SQS server's
Start/List/CancelMessageMoveTask, with SQS's rules."""

from __future__ import annotations

import base64
import json
import os
import shutil
import time

import pytest

from vqs.broker.queue.config import DEFAULT_ARN_PREFIX
from vqs.broker.queue.registry import QueueRegistry
from vqs.errors import CorruptRecordError, InvalidParameterValue, ResourceNotFound


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
    with pytest.raises(InvalidParameterValue, match="There is already a task running"):
        reg.start_message_move_task("dlq")  # SQS: InvalidParameterValue
    assert reg.cancel_message_move_task(task.handle) is task
    assert task.status == "CANCELLED" and task.moved < 4
    assert dlq.counts()["visible"] == 4 - task.moved
    with pytest.raises(ResourceNotFound):  # only a running task can be cancelled
        reg.cancel_message_move_task(task.handle)
    with pytest.raises(InvalidParameterValue, match=r"^Value for parameter TaskHandle is invalid\.$"):
        reg.cancel_message_move_task("no-such-task")  # not a task handle
    other = json.loads(base64.b64decode(task.handle))
    other["taskId"] = "10f57157-fc38-4da9-a113-4de7e12d05aa"
    with pytest.raises(ResourceNotFound, match=r"^Task does not exist\.$"):
        reg.cancel_message_move_task(base64.b64encode(json.dumps(other).encode()).decode())
    other["sourceArn"] = other["sourceArn"] + "-gone"
    with pytest.raises(ResourceNotFound, match="SourceArn parameter doesn't exist"):
        reg.cancel_message_move_task(base64.b64encode(json.dumps(other).encode()).decode())
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


# ------------------------------------------------------------ across restarts


def _reopen(path, qclock):
    return QueueRegistry(path, clock=qclock)


def test_a_task_running_when_the_registry_closes_resumes_when_it_opens(tmp_path, qclock):
    """SQS keeps a move task going: one running at a restart goes on after it,
    with its handle, start time and counts, and every message moves once."""
    path = str(tmp_path / "queues")
    reg = _reopen(path, qclock)
    dlq, q = _dead_letters(reg, qclock, 10)
    task = reg.start_message_move_task("dlq", max_per_second=5)
    deadline = time.monotonic() + 10
    while task.moved < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    reg.close()
    assert task.status == "RUNNING" and 2 <= task.moved < 10
    with open(os.path.join(path, "~move-tasks.json")) as f:
        saved = json.load(f)["tasks"]
    assert [(t["handle"], t["status"]) for t in saved] == [(task.handle, "RUNNING")]
    reg = _reopen(path, qclock)
    try:
        [again] = reg.list_message_move_tasks("dlq")
        assert (again.handle, again.started_ms, again.to_move) == (task.handle, task.started_ms, 10)
        assert again.moved >= task.moved
        _wait(again)
        assert (again.status, again.moved) == ("COMPLETED", 10)
        got = reg.get("q").receive(10)
        assert sorted(m.body for m in got) == [b"m%d" % i for i in range(10)]  # each once
        assert reg.get("dlq").counts()["visible"] == 0
    finally:
        reg.close()


def test_finished_tasks_are_listed_after_a_restart_newest_first(tmp_path, qclock):
    path = str(tmp_path / "queues")
    reg = _reopen(path, qclock)
    _dead_letters(reg, qclock, 3)
    first = reg.start_message_move_task("dlq")
    _wait(first)
    second = reg.start_message_move_task("dlq")
    _wait(second)
    reg.close()
    reg = _reopen(path, qclock)
    try:
        listed = reg.list_message_move_tasks("dlq", 10)
        assert [(t.handle, t.status, t.moved) for t in listed] == [
            (second.handle, "COMPLETED", 0), (first.handle, "COMPLETED", 3)]
    finally:
        reg.close()


def test_a_task_whose_destination_is_gone_after_a_restart_fails(tmp_path, qclock):
    path = str(tmp_path / "queues")
    reg = _reopen(path, qclock)
    _dead_letters(reg, qclock, 5)
    reg.create("elsewhere")
    task = reg.start_message_move_task("dlq", "elsewhere", max_per_second=1)
    reg.close()
    # the destination disappears while the registry is closed (its directory removed)
    shutil.rmtree(os.path.join(path, "elsewhere"))
    reg = _reopen(path, qclock)
    try:
        [t] = reg.list_message_move_tasks("dlq")
        assert (t.handle, t.status, t.failure_reason) == (
            task.handle, "FAILED", "AWS.SimpleQueueService.NonExistentQueue")
        assert reg.get("dlq").counts()["visible"] >= 4  # what was not moved stays
    finally:
        reg.close()


def test_a_destination_deleted_while_the_task_runs_fails_it(reg, qclock):
    """SQS: FAILED, FailureReason AWS.SimpleQueueService.NonExistentQueue."""
    _dead_letters(reg, qclock, 5)
    reg.create("elsewhere")
    task = reg.start_message_move_task("dlq", "elsewhere", max_per_second=1)
    reg.delete("elsewhere")
    _wait(task)
    assert (task.status, task.failure_reason) == ("FAILED", "AWS.SimpleQueueService.NonExistentQueue")
    assert reg.get("dlq").counts()["visible"] >= 4


def test_a_damaged_task_file_is_an_error_naming_it(tmp_path, qclock):
    path = str(tmp_path / "queues")
    os.makedirs(path)
    with open(os.path.join(path, "~move-tasks.json"), "w") as f:
        f.write("{not json")
    with pytest.raises(CorruptRecordError, match=r"~move-tasks\.json"):
        QueueRegistry(path, clock=qclock)
