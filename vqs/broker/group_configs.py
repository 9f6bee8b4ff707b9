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

Keys and values are checked by the caller (``Broker.alter_group_configs``: each kind's
parser, then the rules across keys) before ``write``; this module only keeps them. At most
``MAX_GROUPS`` group ids have configs: every alteration rewrites the file.
"""

from __future__ import annotations

import json
import os
import threading

from ..errors import ConfigError, CorruptRecordError
from ..storage import atomic_write
from . import layout
from .names import group_from_dir

#: group ids with configs of their own at most
MAX_GROUPS = 10_000
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

    def own(self, group: str) -> dict[str, str]:
        """The configs ``group`` sets itself, {Kafka key: value} (a copy)."""
        return dict(self._groups.get(group, ()))

    def groups(self) -> list[str]:
        """The group ids with configs of their own, sorted."""
        return sorted(self._groups)

    def write(self, group: str, own: dict[str, str]) -> None:
        """``own`` (checked already) becomes ``group``'s configs, durable on return; {} drops
        them. ConfigError past MAX_GROUPS."""
        with self._lock:
            groups = dict(self._groups)
            if own:
                if group not in groups and len(groups) >= MAX_GROUPS:
                    raise ConfigError(f"{MAX_GROUPS} group ids have configs of their own already (the most kept); "
                                      f"delete some first")
                groups[group] = dict(own)
            else:
                groups.pop(group, None)
            atomic_write(self.path, json.dumps({"groups": groups}, sort_keys=True, indent=1).encode() + b"\n")
            self._groups = groups
            self.version += 1
