"""Committed offsets of consumer groups (DATA/groups/{group}/offsets.json; a group id that is
not a plain name is stored under its encoded name: names.group_dir_name).

The file holds ``{"topic": {"partition": next_offset}}`` and is replaced
atomically (temp file, fsync, rename, fsync dir) on every commit: when
``commit`` returns, the offsets survive a crash or a power loss, and a crash
during a commit leaves the previous offsets.

Commits work on a full disk: a commit is a control write, and the space
governor (vqs.disk.space) keeps data writes off the room it needs. Should
the kernel still find no space, commit raises DiskFullError and the previous
offsets stay, in memory and on disk. (``offsets.json.spare``, a scratch file
of earlier versions, is removed when the group is opened.)

A commit may carry, per partition, a metadata string (Kafka's commit
metadata, at most ``MAX_METADATA`` UTF-8 bytes) and a leader epoch (Kafka's
committed leader epoch; -1: none). A partition committed with either is stored
as ``{"offset": next_offset, "metadata": "...", "leader_epoch": e}`` (each of
the two only when set) instead of the bare integer, so a file without them is
exactly the earlier format and reads as before. Each commit replaces both.

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
from .names import group_dir_name, group_from_dir, validate_group
from .topic import TopicPartition

MAX_METADATA = 4096  # bytes of commit metadata per partition (Kafka's offset.metadata.max.bytes)


def _check_metadata(tp, metadata) -> None:
    if not isinstance(metadata, str) or len(metadata.encode()) > MAX_METADATA:
        raise ConfigError(f"commit metadata for {tp} must be a string of at most {MAX_METADATA} UTF-8 bytes")


def _check_epoch(tp, epoch) -> None:
    if not isinstance(epoch, int) or isinstance(epoch, bool) or not -1 <= epoch < 1 << 31:
        raise ConfigError(f"leader epoch committed for {tp} must be an int32 >= -1, not {epoch!r}")


def _entry(tp, value) -> tuple[int, tuple[str, int]]:
    """(next_offset, (metadata, leader_epoch)) of one stored value: an integer, or
    {"offset", "metadata", "leader_epoch"}."""
    if isinstance(value, dict):
        off, meta, epoch = int(value["offset"]), value.get("metadata", ""), value.get("leader_epoch", -1)
        _check_metadata(tp, meta)
        _check_epoch(tp, epoch)
        return off, (meta, epoch)
    return int(value), NO_EXTRA


NO_EXTRA = ("", -1)  # no metadata, no leader epoch


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
        # (metadata, leader_epoch) of the partitions committed with either (the others: NO_EXTRA)
        self._extra: dict[str, dict[int, tuple[str, int]]] = {}
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
            offsets: dict[str, dict[int, int]] = {}
            for topic, parts in raw.items():
                offsets[str(topic)] = {}
                for p, value in parts.items():
                    off, extra = _entry((topic, p), value)
                    offsets[str(topic)][int(p)] = off
                    if extra != NO_EXTRA:
                        self._extra.setdefault(str(topic), {})[int(p)] = extra
            return offsets
        except (AttributeError, TypeError, ValueError, KeyError, ConfigError) as e:
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

    def metadata(self) -> dict[TopicPartition, str]:
        """The commit metadata of every partition committed with some (others have none: "")."""
        with self._lock:
            return {TopicPartition(t, p): m for t, parts in self._extra.items() for p, (m, _) in parts.items() if m}

    def commits(self) -> dict[TopicPartition, tuple[int, str, int]]:
        """Every committed partition's (next_offset, metadata, leader_epoch), read at one instant."""
        with self._lock:
            return {TopicPartition(t, p): (off, *self._extra.get(t, {}).get(p, NO_EXTRA))
                    for t, parts in sorted(self._offsets.items()) for p, off in sorted(parts.items())}

    def commit(self, offsets: dict, metadata: dict | None = None, leader_epochs: dict | None = None) -> None:
        """Merge ``{(topic, partition): next_offset}`` into the group and persist it;
        ``metadata`` ``{(topic, partition): str}`` and ``leader_epochs`` ``{(topic, partition): int}``
        replace those partitions' metadata and leader epoch (absent: none, -1)."""
        items = []
        metadata, leader_epochs = metadata or {}, leader_epochs or {}
        for tp, off in offsets.items():
            topic, partition = tp
            _check_offset(tp, off)
            meta, epoch = metadata.get(tp) or "", leader_epochs.get(tp, -1)
            _check_metadata(tp, meta)
            _check_epoch(tp, epoch)
            items.append((topic, int(partition), off, (meta, epoch)))
        if not items:
            return
        with self._lock:
            new = {t: dict(parts) for t, parts in self._offsets.items()}
            new_extra = {t: dict(parts) for t, parts in self._extra.items()}
            for topic, partition, off, extra in items:
                new.setdefault(topic, {})[partition] = off
                if extra != NO_EXTRA:
                    new_extra.setdefault(topic, {})[partition] = extra
                elif partition in new_extra.get(topic, {}):
                    del new_extra[topic][partition]
            self._write(new, new_extra)
            self._offsets, self._extra = new, new_extra

    def delete(self, partitions) -> int:
        """Forget the committed offsets of ``partitions`` ((topic, partition) pairs); the number forgotten."""
        with self._lock:
            new = {t: dict(parts) for t, parts in self._offsets.items()}
            new_extra = {t: dict(parts) for t, parts in self._extra.items()}
            n = 0
            for topic, partition in partitions:
                if new.get(topic, {}).pop(partition, None) is not None:
                    n += 1
                new_extra.get(topic, {}).pop(partition, None)
            if not n:
                return 0
            new = {t: parts for t, parts in new.items() if parts}
            self._write(new, new_extra)
            self._offsets, self._extra = new, {t: parts for t, parts in new_extra.items() if parts}
            return n

    def remove_topic(self, topic: str) -> None:
        with self._lock:
            if topic not in self._offsets:
                return
            new = {t: parts for t, parts in self._offsets.items() if t != topic}
            new_extra = {t: parts for t, parts in self._extra.items() if t != topic}
            self._write(new, new_extra)
            self._offsets, self._extra = new, new_extra

    def _write(self, offsets: dict, extra: dict) -> None:
        if not os.path.isdir(self.directory):
            make_dirs(self.directory)
            fsync_dir(os.path.dirname(self.directory))
        data = {}
        for t, parts in sorted(offsets.items()):
            data[t] = {str(p): _value(off, extra.get(t, {}).get(p, NO_EXTRA)) for p, off in sorted(parts.items())}
        atomic_write(self.path, json.dumps(data, sort_keys=True).encode() + b"\n")


def _value(offset: int, extra: tuple[str, int]):
    """What offsets.json stores for one partition: the bare offset, or an object (module doc)."""
    if extra == NO_EXTRA:
        return offset
    value: dict = {"offset": offset}
    if extra[0]:
        value["metadata"] = extra[0]
    if extra[1] != -1:
        value["leader_epoch"] = extra[1]
    return value


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
            validate_group(name)
            with self._lock:
                group = self._groups.get(name)
                if group is None:
                    group = GroupOffsets(os.path.join(self.directory, group_dir_name(name)), name)
                    self._groups[name] = group
        return group

    def names(self) -> list[str]:
        """Groups that have committed offsets."""
        found = set()
        for entry in os.listdir(self.directory):
            if "~" not in entry and os.path.exists(offsets_file(os.path.join(self.directory, entry))):
                found.add(group_from_dir(entry))
        return sorted(found)

    def exists(self, name: str) -> bool:
        validate_group(name)
        return os.path.exists(offsets_file(os.path.join(self.directory, group_dir_name(name))))

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
            group._offsets, group._extra = {}, {}
            return True

    def remove_topic(self, topic: str) -> None:
        """Drop ``topic`` from every group (called when the topic is deleted)."""
        for name in self.names():
            self.get(name).remove_topic(topic)

    def cleanup(self) -> None:
        for entry in os.listdir(self.directory):
            if "~" in entry:
                shutil.rmtree(os.path.join(self.directory, entry), ignore_errors=True)
