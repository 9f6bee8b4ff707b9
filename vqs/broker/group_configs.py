"""Kafka's group configs: the settings a group id has of its own over the broker's
(KIP-848's ``consumer.*`` for consumer-protocol groups, KIP-932's ``share.*`` and the
dead-letter ones for share groups). As in Kafka they belong to the group id, whatever kind of
group it is or becomes, and setting one makes no group: a group id with configs only is no
group ListGroups shows.

Stored in ``DATA/group_configs.json`` (``{"groups": {group: {key: value}}}``, replaced
atomically: durable when ``write`` returns, the old file or the new after a crash). It is read
once, when the broker first needs it, so nothing on a group's hot path (a heartbeat under the
coordinator's lock, a share fetch) reads a file. A data directory written before this file
existed kept a share group's configs in ``DATA/share/{group}/config.json``: while
``group_configs.json`` does not exist, those are what the groups have; the first ``write``
puts them all in it, and from then on it alone counts (a config deleted since never comes
back from an old file).

Keys and values are checked (``checked``: each kind's parser, then the rules across keys)
before ``Broker.alter_group_configs`` writes them. At most
``MAX_GROUPS`` group ids have configs: every alteration rewrites the file.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable

from ..errors import ConfigError, CorruptRecordError, shown
from ..storage import atomic_write
from . import layout
from .names import group_from_dir

#: every group config (Kafka 4's GroupConfig, KIP-1191's dead-letter ones) -> where a group
#: without its own takes the value: ("consumer", a ConsumerGroups attribute), ("share", a
#: ShareSettings field), or (None, the one value)
SOURCES = {
    "consumer.session.timeout.ms": ("consumer", "session_timeout_ms"),
    "consumer.heartbeat.interval.ms": ("consumer", "heartbeat_interval_ms"),
    "share.auto.offset.reset": ("share", "auto_offset_reset"),
    "share.record.lock.duration.ms": ("share", "record_lock_ms"),
    "share.delivery.count.limit": ("share", "delivery_limit"),
    "share.session.timeout.ms": ("share", "session_timeout_ms"),
    "share.heartbeat.interval.ms": ("share", "heartbeat_interval_ms"),
    "share.isolation.level": (None, "read_uncommitted"),  # (no transactions: both levels read the same)
    "errors.deadletterqueue.topic.name": ("share", "dlq_topic"),
    "errors.deadletterqueue.copy.record.enable": ("share", "dlq_copy_record"),
}
#: group ids with configs of their own at most
MAX_GROUPS = 10_000
#: characters of a config's value at most (the longest a valid one has: a topic's name)
MAX_VALUE_CHARS = 1_000
_LEGACY = "config.json"  # in DATA/share/{group}/, before group_configs.json


class GroupConfigs:
    """The group configs of the data directory ``data_dir`` (module doc); thread-safe."""

    def __init__(self, data_dir: str):
        self.path = layout.group_configs_file(data_dir)
        self._share_dir = layout.share_dir(data_dir)
        self._lock = threading.Lock()
        self._groups: dict[str, dict[str, str]] = self._load()
        #: goes up at every write: a cache of what the configs mean may compare it
        self.version = 0

    def _load(self) -> dict[str, dict[str, str]]:
        try:
            with open(self.path, "rb") as f:
                doc = json.loads(f.read())
            groups = doc["groups"]
            if not isinstance(groups, dict) or not all(isinstance(v, dict) for v in groups.values()):
                raise ValueError("groups is not an object of objects")
            return {g: {str(k): str(v) for k, v in own.items()} for g, own in groups.items()}
        except FileNotFoundError:
            return self._load_legacy()
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptRecordError(f"unreadable group configs {self.path}: {e}", path=self.path) from e

    def _load_legacy(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        try:
            entries = os.listdir(self._share_dir)
        except FileNotFoundError:
            return out
        for entry in entries:
            path = os.path.join(self._share_dir, entry, _LEGACY)
            try:
                with open(path, "rb") as f:
                    raw = json.loads(f.read())
            except FileNotFoundError:
                continue
            except ValueError as e:
                raise CorruptRecordError(f"{path}: not JSON ({e})", path=path) from e
            if raw:
                out[group_from_dir(entry)] = {str(k): str(v) for k, v in raw.items()}
        return out

    def values(self, group: str, bases: dict) -> dict[str, tuple[str, bool]]:
        """Every group config with the value in force for ``group``, {key: (value, True if its
        own)}; ``bases``: {"consumer": ConsumerGroups, "share": ShareSettings} (SOURCES)."""
        own = self._groups.get(group, {})
        out = {}
        for key, (kind, attr) in SOURCES.items():
            if key in own:
                out[key] = (own[key], True)
            else:
                out[key] = (_text(attr if kind is None else getattr(bases[kind], attr)), False)
        return out

    def consumer_settings(self, group: str) -> dict:
        """A consumer-protocol group's own settings, {ConsumerGroups attribute: value} (quick, no
        I/O: ``ConsumerGroups.own_settings`` calls it under the coordinator's lock)."""
        from .consumer_groups import CONSUMER_CONFIGS

        own = self._groups.get(group)
        if not own:
            return {}
        return {CONSUMER_CONFIGS[k][0]: int(v) for k, v in own.items() if k in CONSUMER_CONFIGS}

    def own(self, group: str) -> dict[str, str]:
        """The configs ``group`` sets itself, {Kafka key: value} (a copy)."""
        return dict(self._groups.get(group, ()))

    def groups(self) -> list[str]:
        """The group ids with configs of their own, sorted."""
        return sorted(self._groups)

    def alter(self, group: str, make: Callable[[dict[str, str]], dict[str, str]], *,
              validate_only: bool = False, before_write: Callable[[], None] | None = None) -> None:
        """``group``'s configs become ``make(its configs now)`` (which checks them: ConfigError),
        durable on return; {} drops them. One alteration at a time: the read, the check and the
        write are under one lock, so concurrent alterations of one group each see the last
        one's result (none is lost). ConfigError past MAX_GROUPS, also for ``validate_only``
        (which writes nothing); nothing is written when nothing changes; ``before_write``
        (a room check) runs only before a write."""
        with self._lock:
            own = self._groups.get(group, {})
            new = make(dict(own))
            if new and group not in self._groups and len(self._groups) >= MAX_GROUPS:
                raise ConfigError(f"{MAX_GROUPS} group ids have configs of their own already (the most kept); "
                                  f"delete some first")
            if validate_only or new == own:
                return
            if before_write is not None:
                before_write()
            groups = dict(self._groups)
            if new:
                groups[group] = dict(new)
            else:
                groups.pop(group, None)
            atomic_write(self.path, json.dumps({"groups": groups}, sort_keys=True, indent=1).encode() + b"\n")
            self._groups = groups
            self.version += 1


def _text(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def checked(own: dict, changes: dict, bases: dict, topics) -> dict[str, str]:
    """``own`` with ``changes`` over it (None: removed), each value checked by its kind's parser
    and the rules across keys applied as the values will be in force (``bases``, as ``values``):
    a session timeout above its heartbeat interval, a new dead-letter topic that exists
    (``topics()``: the broker's); the configs to write, as strings. ConfigError naming a bad one."""
    from .consumer_groups import CONSUMER_CONFIGS, parse_consumer_config
    from .share.groups import GROUP_CONFIGS, parse_group_config

    for key, value in changes.items():
        if value is not None and len(_text(value)) > MAX_VALUE_CHARS:
            raise ConfigError(f"config {str(key)[:200]}: a value of {len(_text(value))} characters "
                              f"(at most {MAX_VALUE_CHARS})")
    merged = {k: v for k, v in {**own, **changes}.items() if v is not None}
    parsed: dict = {"consumer": {}, "share": {}}
    canonical: dict[str, str] = {}  # each value in one spelling (an int as digits alone)
    for key, value in merged.items():
        if key in CONSUMER_CONFIGS:
            field, v = parse_consumer_config(key, _text(value))
            parsed["consumer"][field] = v
        elif key in GROUP_CONFIGS:
            field, v = parse_group_config(key, _text(value))
            if field == "dlq_topic" and v and key in changes and v not in topics():
                raise ConfigError(f"config {key}: the dead-letter topic {shown(v)} does not exist")
            parsed["share"][field] = v
        else:
            raise ConfigError(f"unknown group config {shown(str(key), 200)} (supported: {', '.join(sorted(SOURCES))})")
        canonical[key] = _text(value) if field is None else _text(v)
    for kind in ("consumer", "share"):
        if not any(k.startswith(kind + ".") for k in changes):
            continue
        session = parsed[kind].get("session_timeout_ms", bases[kind].session_timeout_ms)
        interval = parsed[kind].get("heartbeat_interval_ms", bases[kind].heartbeat_interval_ms)
        if session <= interval:
            raise ConfigError(f"{kind}.session.timeout.ms ({session}) must be greater than "
                              f"{kind}.heartbeat.interval.ms ({interval})")
    return canonical
