"""Message move tasks (SQS StartMessageMoveTask, ListMessageMoveTasks,
CancelMessageMoveTask): redrives out of a dead-letter queue on background
threads (``Queue.move_messages``, redrive.py), kept across restarts.

SQS's rules: the source must be a dead-letter queue (some queue's
RedrivePolicy targets it); one active (RUNNING or CANCELLING) task per source
queue; a task moves at most the messages visible when it started; only a
running task can be cancelled; the handle is AWS-shaped (base64 of
``{"taskId", "sourceArn"}``), and one that is not is refused; a second task
while one is active is InvalidParameterValue; ListMessageMoveTasks shows the most recent
tasks of a source, newest first, finished ones included: the table keeps the
last ``HISTORY`` (10, ListMessageMoveTasks' largest MaxResults) per source.

Persistence: the table is one JSON file (``path``; docs/FORMAT.md), written
whole with ``atomic_write`` (temp file, fsync, rename, fsync the directory)
when a task starts, is cancelled or ends, and while it moves messages at most
once per ``SAVE_EVERY_S``. A crash at any point leaves the previous or the
next version of the file, never a mix or nothing.

Restart (``resume``, called when the registry opens): a task the file says
RUNNING goes on, with its handle, start time and counts, moving at most
``to_move - moved`` more messages; CANCELLING becomes CANCELLED; a task whose
source or destination queue no longer exists is FAILED with FailureReason
``AWS.SimpleQueueService.NonExistentQueue`` (as SQS reports a destination
deleted while its task runs). A task stopped without being cancelled
(``MoveTask.stop``: its registry or server closes) stays RUNNING in the file,
to resume next time.

Each message moves exactly once (redrive.py: a move intent fsynced before the
target takes it; a move a crash interrupted is found in the target and
finished, not repeated). After a crash
``moved`` can lag by up to ``SAVE_EVERY_S`` of progress (SQS calls it
approximate), and the resumed task may then move that many messages more, if
that many reached the dead-letter queue since it started.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable

from ...errors import (
    CorruptRecordError,
    InvalidParameterValue,
    QueueDoesNotExist,
    ResourceNotFound,
)
from ...storage import atomic_write
from .config import DEFAULT_ARN_PREFIX

logger = logging.getLogger(__name__)

HISTORY = 10  # tasks kept per source queue
SAVE_EVERY_S = 1.0  # progress is written at most this often
NON_EXISTENT = "AWS.SimpleQueueService.NonExistentQueue"
_FIELDS = ("handle", "source", "destination", "source_arn", "destination_arn", "max_per_second",
           "to_move", "moved", "status", "failure_reason", "started_ms")


class MoveTask:
    """A message move task: a redrive out of dead-letter queue ``source`` on a
    background thread. ``status``: RUNNING, CANCELLING, CANCELLED, COMPLETED or
    FAILED (``failure_reason`` says why)."""

    def __init__(self, handle: str, source: str, destination: str | None, *,
                 source_arn: str, destination_arn: str | None,
                 max_per_second: float | None, to_move: int):
        self.handle = handle
        self.source = source
        self.destination = destination
        self.source_arn = source_arn
        self.destination_arn = destination_arn
        self.max_per_second = max_per_second
        self.to_move = to_move  # the source's visible messages when the task started
        self.moved = 0
        self.status = "RUNNING"
        self.failure_reason: str | None = None
        self.started_ms = int(time.time() * 1000)
        self.cancel_event = threading.Event()
        self.thread: threading.Thread | None = None

    @property
    def active(self) -> bool:
        return self.status in ("RUNNING", "CANCELLING")

    def stop(self, wait: float | None = None) -> None:
        """Ask the task to stop; with ``wait``, wait that long for its thread."""
        self.cancel_event.set()
        if wait is not None and self.thread is not None:
            self.thread.join(wait)

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in _FIELDS}

    @classmethod
    def from_json(cls, d: dict) -> MoveTask:
        t = cls(d["handle"], d["source"], d.get("destination"), source_arn=d["source_arn"],
                destination_arn=d.get("destination_arn"), max_per_second=d.get("max_per_second"),
                to_move=int(d["to_move"]))
        t.moved = int(d.get("moved", 0))
        t.status = d["status"]
        t.failure_reason = d.get("failure_reason")
        t.started_ms = int(d["started_ms"])
        return t

    def _run(self, src, table: MoveTasks) -> None:
        def progress(k: int) -> None:
            self.moved += k
            table._changed(final=False)

        try:
            left = self.to_move - self.moved
            if left > 0:
                src.move_messages(self.destination, max_messages=left,
                                  max_per_second=self.max_per_second, cancel=self.cancel_event,
                                  progress=progress)
            if self.status == "CANCELLING":
                self.status = "CANCELLED"
            elif self.cancel_event.is_set():
                pass  # stopped, not cancelled (the owner closes): still RUNNING, resumed at the next open
            elif self.destination is not None and src._resolver(self.destination) is None:
                self.status = "FAILED"  # the destination was deleted while the task ran
                self.failure_reason = NON_EXISTENT
            else:
                self.status = "COMPLETED"
        except Exception as e:  # reported, as AWS does, in the task's FailureReason
            if not (table.closing or self.cancel_event.is_set()):
                self.status = "FAILED"
                self.failure_reason = f"{type(e).__name__}: {e}"
        table._changed(final=True)


class MoveTasks:
    """The message move tasks of a set of queues (QueueRegistry owns one; see
    module doc). ``path``: the file that keeps them (None: in memory only).
    Thread-safe."""

    def __init__(self, path: str | None = None):
        self._path = path
        self._lock = threading.Lock()
        self._save_lock = threading.Lock()
        self._tasks: dict[str, list[MoveTask]] = {}  # source queue -> tasks, newest last
        self._last_save = 0.0
        self.closing = False
        if path is not None and os.path.exists(path):
            with open(path, "rb") as f:
                data = f.read()
            try:
                doc = json.loads(data)
                if doc.get("version") != 1:
                    raise ValueError(f"unknown version {doc.get('version')!r}")
                for d in doc["tasks"]:
                    t = MoveTask.from_json(d)
                    self._tasks.setdefault(t.source, []).append(t)
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                raise CorruptRecordError(f"{path}: not a message move task file ({e})", path=path) from None

    def resume(self, opener: Callable[[str], object]) -> None:
        """Go on with the tasks the file says are active (module doc); ``opener``
        opens a queue by name (raises QueueDoesNotExist)."""
        with self._lock:
            active = [t for ts in self._tasks.values() for t in ts if t.active]
        if not active:
            return
        for t in active:
            if t.status == "CANCELLING":
                t.status = "CANCELLED"
                continue
            try:
                src = opener(t.source)
                if t.destination is not None:
                    opener(t.destination)
            except QueueDoesNotExist:
                t.status = "FAILED"
                t.failure_reason = NON_EXISTENT
                continue
            logger.info("resuming message move task of %s (%d of %d moved)", t.source, t.moved,
                        t.to_move)
            self._launch(t, src)
        self._save()

    def _launch(self, task: MoveTask, src) -> None:
        task.thread = threading.Thread(target=task._run, args=(src, self),
                                       name=f"vqs-move:{src.name}", daemon=True)
        task.thread.start()

    def _changed(self, *, final: bool) -> None:
        """A task moved messages (``final``: stopped or ended): write the file,
        at most once per SAVE_EVERY_S unless final."""
        if self._path is None:
            return
        if not final and time.monotonic() - self._last_save < SAVE_EVERY_S:
            return
        try:
            self._save()
        except OSError:  # the task goes on; the next save retries
            logger.exception("could not write %s", self._path)

    def _save(self) -> None:
        if self._path is None:
            return
        with self._save_lock:  # one writer at a time: the last one written is the newest
            with self._lock:
                doc = {"version": 1,
                       "tasks": [t.to_json() for ts in self._tasks.values() for t in ts]}
            self._last_save = time.monotonic()
            atomic_write(self._path, json.dumps(doc, separators=(",", ":")).encode())

    def start(self, src, dest, *, max_per_second: float | None = None,
              arn_prefix: str = DEFAULT_ARN_PREFIX, source_arn: str | None = None,
              destination_arn: str | None = None) -> MoveTask:
        """Start moving the messages of queue ``src`` to queue ``dest`` (None:
        each back to the queue it came from)."""
        if max_per_second is not None and (
                isinstance(max_per_second, bool) or not isinstance(max_per_second, (int, float))
                or not 1 <= max_per_second <= 500):
            raise InvalidParameterValue(
                f"Value {max_per_second} for parameter MaxNumberOfMessagesPerSecond is invalid. "
                "Reason: Must be between 1 and 500"
            )
        if not src.dead_letter_source_queues():
            raise InvalidParameterValue("Source queue must be configured as a Dead Letter Queue.")
        source_arn = source_arn or f"{arn_prefix}:{src.name}"
        if dest is not None:
            destination_arn = destination_arn or f"{arn_prefix}:{dest.name}"
        with self._lock:
            tasks = self._tasks.setdefault(src.name, [])
            if any(t.active for t in tasks):
                raise InvalidParameterValue(
                    "There is already a task running. Only one active task is allowed for a "
                    "source queue arn at a given time."
                )
            handle = base64.b64encode(json.dumps({"taskId": str(uuid.uuid4()), "sourceArn": source_arn},
                                                 separators=(",", ":")).encode()).decode()
            task = MoveTask(handle, src.name, dest.name if dest is not None else None,
                            source_arn=source_arn, destination_arn=destination_arn,
                            max_per_second=max_per_second, to_move=src.counts()["visible"])
            tasks.append(task)
            del tasks[:-HISTORY]  # the oldest are finished: only one task is active
        self._save()  # durable before the task moves anything
        self._launch(task, src)
        return task

    def cancel(self, handle: str, *, wait: float = 10,
               queue_exists: Callable[[str], bool] | None = None) -> MoveTask:
        """Cancel a running task; waits up to ``wait`` seconds for it to stop.
        SQS's errors: a handle that is not one (base64 of ``{"taskId",
        "sourceArn"}``): InvalidParameterValue; no such task: ResourceNotFound,
        naming the SourceArn when its queue does not exist (``queue_exists``)."""
        source_arn = _handle_source_arn(handle)
        with self._lock:
            task = next((t for ts in self._tasks.values() for t in ts if t.handle == handle), None)
        if task is None:
            if queue_exists is not None and not queue_exists(source_arn.rsplit(":", 1)[-1]):
                raise ResourceNotFound(
                    "The resource that you specified for the SourceArn parameter doesn't exist.")
            raise ResourceNotFound("Task does not exist.")
        if task.status != "RUNNING":
            raise ResourceNotFound(f"Only active tasks can be cancelled (task is {task.status}).")
        task.status = "CANCELLING"
        self._save()
        task.stop(wait)
        return task

    def list(self, source: str, max_results: int = 1) -> list[MoveTask]:
        """The tasks of source queue ``source``, newest first."""
        with self._lock:
            return list(reversed(self._tasks.get(source, [])))[:max_results]

    def forget(self, source: str) -> None:
        """Stop and drop the tasks of ``source`` (the queue is being deleted)."""
        with self._lock:
            tasks = self._tasks.pop(source, [])
        for t in tasks:
            t.stop()
        if tasks:
            self._save()

    def close(self, wait: float = 5) -> None:
        """Stop every task, waiting up to ``wait`` seconds for each; running
        tasks stay RUNNING in the file (module doc)."""
        self.closing = True
        with self._lock:
            tasks = [t for ts in self._tasks.values() for t in ts]
        for t in tasks:
            t.cancel_event.set()
        for t in tasks:
            t.stop(wait)
        if any(t.active for t in tasks):
            self._save()


def _handle_source_arn(handle) -> str:
    """The sourceArn of a task handle; InvalidParameterValue if it is not one."""
    try:
        doc = json.loads(base64.b64decode(handle, validate=True))
        arn = doc["sourceArn"]
        if not isinstance(doc["taskId"], str) or not isinstance(arn, str):
            raise TypeError
        return arn
    except (ValueError, TypeError, KeyError):  # binascii.Error and JSON errors are ValueErrors
        raise InvalidParameterValue("Value for parameter TaskHandle is invalid.") from None
