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
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import LogClosedError, QueueDoesNotExist, TopicDoesNotExist

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
        words = getattr(err, "strerror", None) or type(err).__name__
        return "log_failed", f"I/O error: {words}"
    if lg.disk_full:
        return "disk_full", "writes find no space (or are refused under min_free_bytes)"
    return None


def named_logs(broker):
    """(kind, name, part, log) for every topic partition and queue log."""
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
    """(free bytes for an unprivileged writer, total bytes) of ``path``'s filesystem."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize


def storage_health(broker, data_dir: str, min_free_bytes: int) -> dict:
    """The ``storage`` part of /health and the reasons it is degraded (empty: ok)."""
    free, total = disk_space(data_dir)
    problems = log_problems(broker)
    reasons = []
    if free <= min_free_bytes or free == 0:
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
