"""The storage half of ``GET /health``: free space of the data directory's
filesystem and the logs that cannot take writes, per topic and queue.

A log has a problem when it ``failed`` (a write or fsync I/O error, EIO: it
takes no writes until the server restarts; LogFailedError) or is
``disk_full`` (its last write found no space, or was refused under
``min_free_bytes``; it clears by itself with the next write that succeeds).
The filesystem is short of space when its free bytes are under
``min_free_bytes`` (or none are left).

Invariants: reading this takes no lock a request holds for long (attribute
reads and one ``statvfs``), so health answers while writes wait for space;
nothing here names a server path (what a remote client sees): topics and
queues by name, the filesystem by its numbers.

``StorageHealth`` is what ``GET /health`` calls (its cost was ~300 us a
request, most of it finding every topic partition's and queue's log). It
keeps, for ``ttl_s`` (the ``health_cache_ms`` setting; 0: no caching):
* the list of named logs: a topic or queue created or deleted within the
  interval shows (or goes) within it;
* the free space, only while it was over ``min_free_bytes`` (and not 0) when
  read and no log has a problem: a filesystem that fills shows within the
  interval; once it is short, or a log finds no space or failed, every answer
  reads it again (so it shows ``ok`` as soon as space is back).
Every answer reads each listed log's ``failed`` and ``disk_full`` afresh (an
attribute read each), so a log that fails or finds no space shows at once.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from ..disk import free_bytes, space_for
from ..errors import CorruptRecordError, LogClosedError, QueueDoesNotExist, TopicDoesNotExist

_GONE = (TopicDoesNotExist, QueueDoesNotExist, LogClosedError)


@dataclass(frozen=True)
class LogProblem:
    kind: str              # "topic" | "queue"
    name: str
    part: str              # a topic's partition number, or a queue's "messages" | "state"
    problem: str           # "log_failed" | "disk_full"
    detail: str            # the error's class and errno words (never a path)

    def as_dict(self) -> dict:
        d = {"kind": self.kind, "name": self.name, "problem": self.problem, "detail": self.detail}
        d["partition" if self.kind == "topic" else "log"] = int(self.part) if self.kind == "topic" else self.part
        return d


def _problem(lg) -> tuple[str, str] | None:
    err = lg.failed
    if err is not None:
        if isinstance(err, CorruptRecordError):
            return "log_failed", "damaged data: it cannot be opened (the server log names the file)"
        words = getattr(err, "strerror", None) or type(err).__name__
        return "log_failed", f"I/O error: {words}"
    if lg.disk_full:
        return "disk_full", "writes find no space (or are refused under min_free_bytes)"
    return None


class Unopenable:
    """In place of the logs of a queue whose data failed validation when it was opened (the
    registry latches it): a failed log to /health and /metrics, which go on with the others."""

    __slots__ = ("failed",)
    disk_full = False

    def __init__(self, err: CorruptRecordError):
        self.failed = err


def named_logs(broker):
    """(kind, name, part, log) for every topic partition and queue log (a queue that cannot be
    opened for damaged data: one ``Unopenable``)."""
    for name in broker.topics():
        try:
            t = broker.topic(name)
            for p in range(t.partitions):
                yield "topic", name, str(p), t.log(p)
        except _GONE:
            continue
    for qn in broker.queues():
        try:
            msgs, state = broker.queue(qn).logs
        except _GONE:
            continue
        except CorruptRecordError as e:
            yield "queue", qn, "messages", Unopenable(e)
            continue
        yield "queue", qn, "messages", msgs
        yield "queue", qn, "state", state


def log_problems(broker) -> list[LogProblem]:
    out = []
    try:
        for kind, name, part, lg in named_logs(broker):
            hit = _problem(lg)
            if hit is not None:
                out.append(LogProblem(kind, name, part, *hit))
    except LogClosedError:  # the broker is closing: report what was seen
        pass
    return out


def disk_space(path: str) -> tuple[int, int]:
    """(free bytes for an unprivileged writer, total bytes) of ``path``'s filesystem;
    free is less under a btrfs quota group's limit (vqs/disk/space.py)."""
    st = os.statvfs(path)
    return free_bytes(path), st.f_blocks * st.f_frsize


def _floor(data_dir: str, min_free_bytes: int | None) -> int:
    """The setting, or (None) the space governor's default for the filesystem."""
    if min_free_bytes is not None:
        return min_free_bytes
    try:
        return space_for(data_dir).default_floor
    except OSError:
        return 0


def _refusing(data_dir: str) -> bool:
    """Whether the space governor of the data dir's filesystem is refusing data
    writes (a queue's pending sends may be what it counts: no log shows it)."""
    try:
        return space_for(data_dir).low
    except OSError:
        return False


def storage_health(broker, data_dir: str, min_free_bytes: int | None) -> dict:
    """The ``storage`` part of /health and the reasons it is degraded (empty: ok)."""
    return _answer(disk_space(data_dir), log_problems(broker), _floor(data_dir, min_free_bytes),
                   _refusing(data_dir))


class StorageHealth:
    """``storage_health`` of one broker, with the named logs and a healthy free
    space kept for ``ttl_s`` seconds (module doc). Used from one thread (the
    event loop) at a time."""

    def __init__(self, broker, data_dir: str, min_free_bytes: int | None, ttl_s: float,
                 clock=time.monotonic):
        self.broker = broker
        self._dir = data_dir
        self._min_free = _floor(data_dir, min_free_bytes)
        self._ttl = ttl_s
        self._clock = clock
        self._logs: list = []
        self._logs_until = float("-inf")
        self._space: tuple[int, int] = (0, 0)
        self._space_until = float("-inf")

    def answer(self) -> dict:
        """The ``storage`` part of /health (as ``storage_health``)."""
        if self._ttl <= 0:
            return storage_health(self.broker, self._dir, self._min_free)
        now = self._clock()
        if now >= self._logs_until:
            try:
                self._logs = list(named_logs(self.broker))
            except LogClosedError:  # the broker is closing: report what was seen
                self._logs = []
            self._logs_until = now + self._ttl
        problems = []
        for kind, name, part, lg in self._logs:
            hit = _problem(lg)
            if hit is not None:
                problems.append(LogProblem(kind, name, part, *hit))
        if problems or now >= self._space_until:
            self._space = free, _ = disk_space(self._dir)
            # a short disk is read again at every answer (it shows ok once space is back)
            self._space_until = now + self._ttl if free > self._min_free and free > 0 else now
        return _answer(self._space, problems, self._min_free, _refusing(self._dir))


def _answer(space: tuple[int, int], problems: list[LogProblem], min_free_bytes: int,
            refusing: bool = False) -> dict:
    free, total = space
    reasons = []
    if free <= min_free_bytes or free == 0 or refusing:
        reasons.append("disk_full")
    if any(p.problem == "disk_full" for p in problems) and "disk_full" not in reasons:
        reasons.append("disk_full")
    if any(p.problem == "log_failed" for p in problems):
        reasons.append("log_failed")
    return {
        "reasons": reasons,
        "disk": {"free_bytes": free, "total_bytes": total, "min_free_bytes": min_free_bytes},
        "problems": [p.as_dict() for p in problems],
    }
