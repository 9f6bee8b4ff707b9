"""The queues of a data directory: create, open, list, delete (``DATA/queues``).

``QueueRegistry(directory, clock=time.time, defaults=None)``; the Broker owns
one (``DATA/queues``) and delegates its queue methods to it. Each queue lives
in ``directory/{name}/`` (see vqs.broker.queue). Creation is atomic (the queue
is built in a temporary directory, then renamed into place); deletion renames
the directory to a tombstone first, so the name can be reused at once.
The registry owns the message move tasks of its queues
(vqs.broker.queue.move_tasks), kept in ``directory/~move-tasks.json``; the
tasks that were running when it last closed (or crashed) resume when it opens.

``defaults`` are applied to queues created from now on; they may be queue
attributes (``visibility_timeout=60``) or storage settings (``flush``,
``flush_interval_ms``, ``segment_bytes``, ...). ``retention_ms`` and
``retention_bytes`` (topic settings the Broker passes along) are ignored:
a queue's retention is its MessageRetentionPeriod.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable

from ...disk import check_room
from ...errors import (
    ConfigError,
    CorruptRecordError,
    InvalidParameterValue,
    LogClosedError,
    QueueAlreadyExists,
    QueueDoesNotExist,
)
from ...storage import fsync_dir, make_dirs, raise_if_disk_full, rename_aside
from ..layout import MOVE_TASKS_FILE
from ..names import validate_name
from .config import DEFAULT_ARN_PREFIX, IGNORED_DEFAULTS, QueueConfig, normalize
from .config_files import new_identity, write_files
from .core import Queue
from .move_tasks import MoveTask, MoveTasks
from .opening import open_queue

_TOMBSTONE = "~deleted~"  # '~' never appears in a queue name
_CREATING = "~creating~"


class QueueRegistry:
    """The queues under one directory (see module doc). Thread-safe."""

    def __init__(self, directory: str, *, clock: Callable[[], float] = time.time,
                 defaults: dict | None = None):
        self.directory = os.path.abspath(os.fspath(directory))
        self._clock = clock
        self._lock = threading.RLock()
        self._open: dict[str, Queue] = {}
        self._deleting: set[str] = set()  # names delete() is removing: they do not exist for get()
        # queues whose data failed validation when opened (LevelDB's latch): get() raises that
        # again without a new recovery each time, until the queue is deleted or the registry reopened
        self._damaged: dict[str, CorruptRecordError] = {}
        self._closed = False
        d = {k: v for k, v in (defaults or {}).items() if k not in IGNORED_DEFAULTS}
        try:
            self._defaults = normalize(d, creating=True)
            QueueConfig().updated(self._defaults)
        except Exception as e:
            raise ConfigError(f"invalid queue defaults: {e}") from e
        created = not os.path.isdir(self.directory)
        make_dirs(self.directory)
        if created:
            fsync_dir(os.path.dirname(self.directory))
        self._cleanup()
        self._tasks = MoveTasks(os.path.join(self.directory, MOVE_TASKS_FILE))
        self._tasks.resume(self.get)

    def _cleanup(self) -> None:
        removed = False
        for entry in os.listdir(self.directory):
            if _TOMBSTONE in entry or _CREATING in entry:
                shutil.rmtree(os.path.join(self.directory, entry), ignore_errors=True)
                removed = True
        if removed:
            fsync_dir(self.directory)

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"queue registry {self.directory} is closed")

    # ------------------------------------------------------------- lookup

    def _exists(self, name: str) -> bool:
        return os.path.isfile(os.path.join(self.directory, name, "queue.meta"))

    def get(self, name: str) -> Queue:
        """The queue ``name`` (opened on first use); raises QueueDoesNotExist, or the
        CorruptRecordError its opening met (latched: raised again, not met again)."""
        q = self._open.get(name)
        if q is not None and not q.closed:
            return q
        validate_name(name, "queue")
        with self._lock:
            self._check_open()
            q = self._open.get(name)
            if q is not None and not q.closed:
                return q
            if name in self._deleting or not self._exists(name):
                raise QueueDoesNotExist(name)
            damaged = self._damaged.get(name)
            if damaged is not None:
                raise CorruptRecordError(str(damaged), path=damaged.path, position=damaged.position)
            try:
                q = open_queue(os.path.join(self.directory, name), name, clock=self._clock,
                               resolver=self._resolve, lister=self._all_open)
            except CorruptRecordError as e:
                self._damaged[name] = e
                raise
            self._open[name] = q
            return q

    def _resolve(self, name: str) -> Queue | None:
        try:
            return self.get(name)
        except (QueueDoesNotExist, LogClosedError):
            return None
        except Exception:
            return None

    def _all_open(self) -> list[Queue]:
        with self._lock:
            return [self.get(n) for n in self.list()]

    def list(self, prefix: str | None = None) -> list[str]:
        """Names of the queues (starting with ``prefix``), sorted."""
        self._check_open()
        out = []
        for entry in os.listdir(self.directory):
            if _TOMBSTONE in entry or _CREATING in entry:
                continue
            if prefix and not entry.startswith(prefix):
                continue
            if self._exists(entry):
                out.append(entry)
        return sorted(out)

    # ------------------------------------------------------------- create

    def create(self, name: str, /, **attrs) -> Queue:
        """Create queue ``name`` (attributes: vqs.broker.queue.config); if it exists
        with the same values for the attributes given, return it (SQS's
        idempotent CreateQueue), else raise QueueAlreadyExists. ``tags`` are
        applied only when the queue is created."""
        validate_name(name, "queue")
        given = normalize(attrs, creating=True)
        tags = given.pop("tags", None)
        fifo = given.get("fifo", self._defaults.get("fifo", False))
        if fifo and not name.endswith(".fifo"):
            raise InvalidParameterValue(
                "The name of a FIFO queue can only include alphanumeric characters, hyphens, or "
                "underscores, must end with .fifo suffix and be 1 to 80 in length."
            )
        if not fifo and name.endswith(".fifo"):
            raise InvalidParameterValue(
                "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in "
                "length (a name ending in .fifo needs FifoQueue=true)"
            )
        with self._lock:
            self._check_open()
            if self._exists(name):
                q = self.get(name)
                for k, v in given.items():
                    if getattr(q.config, k) != v:
                        raise QueueAlreadyExists(name, _sqs_name(k))
                return q
            changes = {**self._defaults, **given}
            if tags:
                changes["tags"] = dict(tags)
            config = QueueConfig().updated(changes)
            if config.dead_letter_queue is not None:
                dlq = self._resolve(config.dead_letter_queue)
                if dlq is None or dlq.config.fifo != config.fifo:
                    raise InvalidParameterValue(
                        "Value for parameter RedrivePolicy is invalid. Reason: Dead-letter "
                        "target does not exist or is not of the same type (standard or FIFO)."
                    )
            check_room(self.directory, config.min_free_bytes, "creating queue")  # a data write (vqs/disk/space.py)
            tmp = os.path.join(self.directory, f"{name}{_CREATING}{os.getpid()}-{threading.get_ident()}")
            if os.path.exists(tmp):
                shutil.rmtree(tmp)
            make_dirs(tmp)  # (btrfs under a spent quota: even a directory needs space)
            try:
                secret, id_prefix, id_base = new_identity()
                now = int(self._clock() * 1000)
                write_files(tmp, name=name, config=config, created_ms=now, modified_ms=now,
                            secret=secret, id_prefix=id_prefix, id_base=id_base)
                fsync_dir(tmp)
                os.rename(tmp, os.path.join(self.directory, name))
            except BaseException as e:
                # a full disk (DiskFullError) or any failure: no staging directory
                # is left holding space (a crash's leftover is removed at open)
                shutil.rmtree(tmp, ignore_errors=True)
                raise_if_disk_full(e, tmp)  # (a raw ENOSPC/EDQUOT: DiskFullError)
                raise
            fsync_dir(self.directory)
            return self.get(name)

    # ------------------------------------------------------------- delete

    def delete(self, name: str) -> None:
        """Delete queue ``name`` and its messages; the name is free at once.
        Receipt handles of the old queue are not valid in a new one."""
        validate_name(name, "queue")
        with self._lock:
            self._check_open()
            if name in self._deleting or not self._exists(name):
                raise QueueDoesNotExist(name)
            q = self._open.pop(name, None)
            self._damaged.pop(name, None)
            # From here on the queue does not exist for get(): closing it wakes its
            # long polls, and one that looks it up again must not reopen it.
            self._deleting.add(name)
        try:
            self._tasks.forget(name)
            if q is not None:
                q.close()
            with self._lock:
                path = os.path.join(self.directory, name)
                if not os.path.isdir(path):
                    return
                tomb = os.path.join(self.directory, f"{name}{_TOMBSTONE}{time.time_ns()}")
                rename_aside(path, tomb)  # (DiskFullError under a spent btrfs quota: nothing deleted)
                fsync_dir(self.directory)
        finally:
            with self._lock:
                self._deleting.discard(name)
        shutil.rmtree(tomb, ignore_errors=True)

    # --------------------------------------------------- DLQ / move tasks

    def dead_letter_source_queues(self, name: str) -> list[str]:
        """ListDeadLetterSourceQueues: queues whose RedrivePolicy targets ``name``."""
        self.get(name)
        return self.get(name).dead_letter_source_queues()

    def start_message_move_task(self, source: str, destination: str | None = None, *,
                                max_per_second: float | None = None,
                                arn_prefix: str = DEFAULT_ARN_PREFIX,
                                source_arn: str | None = None,
                                destination_arn: str | None = None) -> MoveTask:
        """StartMessageMoveTask: move the messages of dead-letter queue ``source``
        back to their source queues (or to ``destination``) on a background
        thread (rules: vqs.broker.queue.move_tasks). The ARNs reported by
        the task are ``{arn_prefix}:{name}`` unless given."""
        src = self.get(source)
        dest = self.get(destination) if destination is not None else None
        return self._tasks.start(src, dest, max_per_second=max_per_second, arn_prefix=arn_prefix,
                                 source_arn=source_arn, destination_arn=destination_arn)

    def cancel_message_move_task(self, handle: str, *, wait: float = 10) -> MoveTask:
        """CancelMessageMoveTask: stop a running task (waits up to ``wait`` s for it)."""
        return self._tasks.cancel(handle, wait=wait, queue_exists=self._exists)

    def list_message_move_tasks(self, source: str, max_results: int = 1) -> list[MoveTask]:
        """ListMessageMoveTasks: the tasks of queue ``source``, newest first."""
        self.get(source)
        return self._tasks.list(source, max_results)

    # ------------------------------------------------------- maintenance

    def maintenance(self) -> None:
        """Retention and disk reclaim for every open queue (call it periodically,
        e.g. from the Broker's retention thread)."""
        with self._lock:
            queues = [q for q in self._open.values() if not q.closed]
        for q in queues:
            try:
                q.expire()
                q.reclaim()
            except LogClosedError:
                pass

    def flush(self) -> None:
        with self._lock:
            queues = [q for q in self._open.values() if not q.closed]
        for q in queues:
            q.flush()

    def close(self) -> None:
        """Close every open queue (snapshot, flush). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            queues = list(self._open.values())
            self._open.clear()
        self._tasks.close(wait=5)
        err = None
        for q in queues:
            try:
                q.close()
            except Exception as e:  # close the others anyway
                err = err or e
        if err is not None:
            raise err

    def __enter__(self) -> QueueRegistry:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _sqs_name(py_name: str) -> str:
    from .config import PY_TO_SQS

    if py_name in ("dead_letter_queue", "max_receive_count"):
        return "RedrivePolicy"
    return PY_TO_SQS.get(py_name, py_name)
