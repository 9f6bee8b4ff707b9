"""The files of a log directory besides the segments::

    {base:020d}.log / .index / .timeindex   one segment (see segment.py)
    log.checkpoint                          {"version", "recovery_point", "log_start_offset"}
    .clean-shutdown                         between a clean close and the next write: JSON,
                                            the active segment's tail and the checkpoint
                                            (empty from earlier versions: the tail is scanned)
    quarantine/{segment}-{position}-{from_offset}-{to_offset|end}.bad
                                            bytes recovery="skip" cut out of a segment
    *.tmp                                   an interrupted atomic write or excision (removed at open)

Invariants:
- the checkpoint is replaced atomically; everything below its recovery point was fsynced;
- the clean-shutdown marker is written last by ``close`` and removed by the next writer
  before it changes any file, so it never outlives a crash after a change; while it is
  there, what it records (the active segment's tail, the checkpoint) holds;
- a quarantine file name records the one offset gap its removal left;
- files earlier versions kept for a full disk (``LEFTOVERS``) are removed at open.
"""

from __future__ import annotations

import json
import os

from ..disk import fs
from .durable_file import atomic_write
from .segment import LOG_SUFFIX

CHECKPOINT = "log.checkpoint"
CLEAN_MARKER = ".clean-shutdown"
QUARANTINE_DIR = "quarantine"
LEFTOVERS = frozenset((".segment-spare", "quota-headroom", "quota-headroom.reclaim"))


def list_segment_bases(path: str, names: list[str] | None = None) -> list[int]:
    """Base offsets of the segment files in ``path`` (or among ``names``), ascending."""
    bases = []
    for name in os.listdir(path) if names is None else names:
        if name.endswith(LOG_SUFFIX) and len(name) == 20 + len(LOG_SUFFIX) and name[:20].isdigit():
            bases.append(int(name[:20]))
    return sorted(bases)


def remove_temp_files(path: str, names: list[str] | None = None) -> None:
    """Remove ``*.tmp`` and ``LEFTOVERS``."""
    for name in os.listdir(path) if names is None else names:
        if name.endswith(".tmp") or name in LEFTOVERS:
            fs.unlink(os.path.join(path, name))


def read_checkpoint(path: str) -> tuple[int | None, int]:
    """(recovery point, log start offset); (None, 0) if missing or unreadable."""
    try:
        with open(os.path.join(path, CHECKPOINT), "rb") as f:
            d = json.loads(f.read())
        return int(d["recovery_point"]), int(d["log_start_offset"])
    except (OSError, ValueError, KeyError, TypeError):
        return None, 0


def write_checkpoint(path: str, recovery_point: int, log_start_offset: int) -> None:
    """Replace the checkpoint atomically (the caller keeps the recovery point monotonic)."""
    data = json.dumps(
        {"version": 1, "recovery_point": recovery_point, "log_start_offset": log_start_offset}
    ).encode()
    atomic_write(os.path.join(path, CHECKPOINT), data)


_MARKER_FIELDS = ("segment", "size", "next_offset", "max_timestamp_ms", "ti_last", "since_index",
                  "recovery_point", "log_start_offset")


def clean_marker_bytes(seg, recovery_point: int, log_start_offset: int) -> bytes:
    """The marker: the sealed active segment's tail (``Segment.adopt_tail``) and the checkpoint."""
    return json.dumps({
        "version": 1, "segment": seg.base_offset, "size": seg.size, "next_offset": seg.next_offset,
        "max_timestamp_ms": seg.max_timestamp_ms, "ti_last": seg._ti_last, "since_index": seg._since_index,
        "recovery_point": recovery_point, "log_start_offset": log_start_offset,
    }).encode()


def read_clean_marker(path: str) -> dict | None:
    """The marker's fields, or None when it is empty (earlier versions) or not as expected."""
    try:
        with open(os.path.join(path, CLEAN_MARKER), "rb") as f:
            d = json.loads(f.read())
        if d.get("version") != 1 or not all(type(d[k]) is int for k in _MARKER_FIELDS):
            return None
        return d
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def load_gaps(path: str) -> dict[int, int]:
    """{from offset: to offset}: the quarantined gaps, from the ``quarantine/`` file names."""
    gaps: dict[int, int] = {}
    try:
        names = os.listdir(os.path.join(path, QUARANTINE_DIR))
    except FileNotFoundError:
        return gaps
    for name in names:
        parts = name[:-4].split("-") if name.endswith(".bad") else []
        if len(parts) == 4 and parts[2].isdigit() and parts[3].isdigit():
            gaps[int(parts[2])] = int(parts[3])
    return gaps


def load_tail_gaps(path: str) -> set[int]:
    """The ``from`` offsets of the quarantined segment tails (``...-{from}-end.bad``: nothing
    followed in that segment at open): each a gap up to the next segment's base."""
    try:
        names = os.listdir(os.path.join(path, QUARANTINE_DIR))
    except FileNotFoundError:
        return set()
    parts = (name[:-4].split("-") for name in names if name.endswith("-end.bad"))
    return {int(p[2]) for p in parts if len(p) == 4 and p[2].isdigit()}
