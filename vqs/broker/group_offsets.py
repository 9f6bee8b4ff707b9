"""Committed offsets of consumer groups (DATA/groups/{group}/offsets.json).

The file holds ``{"topic": {"partition": next_offset}}`` and is replaced
atomically (temp file, fsync, rename, fsync dir) on every commit: when
``commit`` returns, the offsets survive a crash or a power loss, and a crash
during a commit leaves the previous offsets.

Commits work on a full disk: a commit is a control write, and the space
governor (vqs.storage.space) keeps data writes off the room it needs. Should
the kernel still find no space, commit raises DiskFullError and the previous
offsets stay, in memory and on disk. (``offsets.json.spare``, a scratch file
of earlier versions, is removed when the group is opened.)

A group here is a named set of committed offsets. Who reads which
partition is the group coordinator's business (coordinator.py for Kafka
clients, assigned_groups.py for VQS consumers), which checks a commit before
it gets here.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading

from ..errors import ConfigError, CorruptRecordError
from ..storage import atomic_write, fsync_dir, make_dirs
from .layout import offsets_file
from .names import validate_name
from .topic import TopicPartition


def _check_offset(tp, offset) -> None:
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise ConfigError(f"offset to commit for {tp} must be an integer >= 0, not {offset!r}")


class GroupOffsets:
    """The committed offsets of one group; thread-safe."""

    def __init__(self, directory: str, name: str):
        self.name = name
        self.directory = directory
        self.path = offsets_file(directory)
        self._lock = threading.Lock()
        self._offsets: dict[str, dict[int, int]] = self._load()
        with contextlib.suppress(OSError):
            os.unlink(self.path + ".spare")  # an earlier version's scratch file (module doc)

    def _load(self) -> dict[str, dict[int, int]]:
        try:
            with open(self.path, "rb") as f:
                raw = json.loads(f.read())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            raise CorruptRecordError(f"unreadable group offsets {self.path}: {e}", path=self.path) from e
        try:
            return {
                str(topic): {int(p): int(off) for p, off in parts.items()}
                for topic, parts in raw.items()
            }
        except (AttributeError, TypeError, ValueError) as e:
            raise CorruptRecordError(f"malformed group offsets {self.path}: {e}", path=self.path) from e

    @property
    def exists(self) -> bool:
        return os.path.exists(self.path)

    def get(self, topic: str, partition: int) -> int | None:
        return self._offsets.get(topic, {}).get(partition)

    def all(self) -> dict[TopicPartition, int]:
        with self._lock:
            return {
                TopicPartition(t, p): off
                for t, parts in sorted(self._offsets.items())
                for p, off in sorted(parts.items())
            }

    def commit(self, offsets: dict) -> None:
        """Merge ``{(topic, partition): next_offset}`` into the group and persist it."""
        items = []
        for tp, off in offsets.items():
            topic, partition = tp
            _check_offset(tp, off)
            items.append((topic, int(partition), off))
        if not items:
            return
        with self._lock:
            new = {t: dict(parts) for t, parts in self._offsets.items()}
            for topic, partition, off in items:
                new.setdefault(topic, {})[partition] = off
            self._write(new)
            self._offsets = new

    def remove_topic(self, topic: str) -> None:
        with self._lock:
            if topic not in self._offsets:
                return
            new = {t: parts for t, parts in self._offsets.items() if t != topic}
            self._write(new)
            self._offsets = new

    def _write(self, offsets: dict) -> None:
        if not os.path.isdir(self.directory):
            make_dirs(self.directory)
            fsync_dir(os.path.dirname(self.directory))
        data = {t: {str(p): off for p, off in sorted(parts.items())} for t, parts in sorted(offsets.items())}
        atomic_write(self.path, json.dumps(data, sort_keys=True).encode() + b"\n")


class GroupRegistry:
    """All groups under ``directory`` (DATA/groups); a group's store is shared by its consumers."""

    def __init__(self, directory: str):
        self.directory = directory
        make_dirs(directory)
        self._groups: dict[str, GroupOffsets] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> GroupOffsets:
        group = self._groups.get(name)
        if group is None:
            validate_name(name, "group")
            with self._lock:
                group = self._groups.get(name)
                if group is None:
                    group = GroupOffsets(os.path.join(self.directory, name), name)
                    self._groups[name] = group
        return group

    def names(self) -> list[str]:
        """Groups that have committed offsets."""
        found = set()
        for entry in os.listdir(self.directory):
            if "~" not in entry and os.path.exists(offsets_file(os.path.join(self.directory, entry))):
                found.add(entry)
        return sorted(found)

    def exists(self, name: str) -> bool:
        validate_name(name, "group")
        return os.path.exists(offsets_file(os.path.join(self.directory, name)))

    def delete(self, name: str) -> bool:
        """Forget a group's committed offsets; False if it had none."""
        group = self.get(name)  # the one shared store: consumers holding it see the reset
        with group._lock:
            path = group.directory
            if not os.path.isdir(path):
                return False
            doomed = path + "~deleted"
            shutil.rmtree(doomed, ignore_errors=True)
            os.rename(path, doomed)
            fsync_dir(self.directory)
            shutil.rmtree(doomed, ignore_errors=True)
            group._offsets = {}
            return True

    def remove_topic(self, topic: str) -> None:
        """Drop ``topic`` from every group (called when the topic is deleted)."""
        for name in self.names():
            self.get(name).remove_topic(topic)

    def cleanup(self) -> None:
        for entry in os.listdir(self.directory):
            if "~" in entry:
                shutil.rmtree(os.path.join(self.directory, entry), ignore_errors=True)
