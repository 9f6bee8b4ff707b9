"""Share groups: their members, the broker-side assignment, and their share partitions.

A share group (Kafka's KIP-932) reads topics with queue semantics: members
are assigned partitions by the broker, and several members may read one
partition at once, because each record is acquired by one member at a time
(vqs.broker.share.partition). Membership is Kafka's share-group heartbeat:

* a member joins with epoch 0 and its subscribed topics, heartbeats with the
  epoch it was given, and leaves with epoch -1; a member not heard from for
  ``session_timeout_ms`` is removed (checked at every heartbeat of its group
  and every ``describe``). Membership does not hold records: what a member
  acquired stays acquired until it acknowledges it (a client leaving sends
  its last acknowledgements after its leave), its lock ends, or the reader
  releases it (``release_member``: a Kafka share session that closes);
* the assignment is VQS's assignor (vqs.broker.assignor: balanced, sticky,
  each partition to one member) while members are no more than partitions;
  a member left without a partition then shares one (member i of the idle
  ones reads partition i mod P), so every member reads;
* every change of the assignment bumps the group epoch, and each member's
  epoch becomes it; a heartbeat with an older epoch than the member's (other
  than its previous one, a lost answer) is FENCED_MEMBER_EPOCH.

Membership lives in memory (members rejoin after a restart, as Kafka clients
do after a coordinator moves); the share partitions' delivery state is
durable (``DATA/share/{group}/{topic}/{partition}/``, layout.py).

Thread safety: ``lock`` guards the membership; each share partition has its
own lock. No I/O is done under ``lock`` except opening a share partition.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid

from ...errors import (
    ConfigError,
    GroupNotEmpty,
    InvalidName,
    PartitionDoesNotExist,
    TopicDoesNotExist,
    shown,
)
from .. import layout
from ..assignor import assign
from ..config_values import config_int
from ..names import group_dir_name, validate_group, validate_name
from .dead_letter import DeadLetters
from .partition import SharePartition

#: heartbeat answers
OK, UNKNOWN_MEMBER, FENCED_EPOCH, INVALID, FULL = "ok", "unknown_member", "fenced_epoch", "invalid", "full"
#: members of one share group at most (Kafka's group.share.max.size: 200)
MAX_MEMBERS = 200


class ShareSettings:
    """The broker-wide share-group settings (Kafka's ``group.share.*``)."""

    def __init__(self, record_lock_ms: int = 30_000, delivery_limit: int = 5, auto_offset_reset: str = "latest",
                 session_timeout_ms: int = 45_000, heartbeat_interval_ms: int = 5_000, max_record_locks: int = 2000,
                 dlq_topic: str = "", dlq_copy_record: bool = False):
        self.record_lock_ms = record_lock_ms
        self.delivery_limit = delivery_limit
        self.auto_offset_reset = auto_offset_reset
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_record_locks = max_record_locks
        self.dlq_topic = dlq_topic  # archived records copied there (dead_letter.py); "" none
        self.dlq_copy_record = dlq_copy_record

    def merged(self, overrides: dict) -> ShareSettings:
        """These settings with a group's own configs over them."""
        out = ShareSettings.__new__(ShareSettings)
        out.__dict__.update(self.__dict__)
        out.__dict__.update(overrides)
        return out


#: Kafka's share-group configs (IncrementalAlterConfigs on a GROUP resource) -> ShareSettings field
GROUP_CONFIGS = {"share.auto.offset.reset": "auto_offset_reset", "share.record.lock.duration.ms": "record_lock_ms",
                 "share.delivery.count.limit": "delivery_limit", "share.session.timeout.ms": "session_timeout_ms",
                 "share.heartbeat.interval.ms": "heartbeat_interval_ms", "share.isolation.level": None,
                 "errors.deadletterqueue.topic.name": "dlq_topic",
                 "errors.deadletterqueue.copy.record.enable": "dlq_copy_record"}
_BOUNDS = {"record_lock_ms": (1000, 3_600_000), "delivery_limit": (2, 10), "session_timeout_ms": (1000, 3_600_000),
           "heartbeat_interval_ms": (100, 3_600_000)}


def parse_group_config(key: str, value: str):
    """The ShareSettings field and value of Kafka group config ``key``; ConfigError naming it."""
    if key not in GROUP_CONFIGS:
        raise ConfigError(f"unknown share group config {key!r} (supported: {', '.join(sorted(GROUP_CONFIGS))})")
    field = GROUP_CONFIGS[key]
    if field is None:  # no transactions: both isolation levels read the same
        if value not in ("read_uncommitted", "read_committed"):
            raise ConfigError(f"config {key}={shown(value)} must be read_uncommitted or read_committed")
        return None, value
    if field == "dlq_topic":  # blank: none
        text = (value or "").strip()
        if text:
            try:
                validate_name(text, "topic")
            except InvalidName as e:  # (the config's value is bad, not the group)
                raise ConfigError(f"config {key}: {e}") from None
        return field, text
    if field == "dlq_copy_record":
        if value.lower() not in ("true", "false"):
            raise ConfigError(f"config {key}={shown(value)} must be true or false")
        return field, value.lower() == "true"
    if field == "auto_offset_reset":
        if value not in ("latest", "earliest"):
            raise ConfigError(f"config {key}={shown(value)} must be latest or earliest")
        return field, value
    lo, hi = _BOUNDS[field]
    return field, config_int(key, value, lo, hi)


class ShareMember:
    __slots__ = ("id", "epoch", "previous_epoch", "topics", "assignment", "seen", "client_id", "client_host")

    def __init__(self, member_id: str, topics: list, now: float, client_id: str = "", client_host: str = ""):
        self.id = member_id
        self.client_id = client_id
        self.client_host = client_host
        self.epoch = 0
        self.previous_epoch = -1
        self.topics = topics
        self.assignment: dict[str, list[int]] = {}
        self.seen = now


class ShareGroup:
    __slots__ = ("name", "epoch", "members")

    def __init__(self, name: str):
        self.name = name
        self.epoch = 0
        self.members: dict[str, ShareMember] = {}


class ShareGroups:
    """A broker's share groups (``Broker.share_groups``); see module doc."""

    def __init__(self, broker, flush: str = "interval", flush_interval_ms: int = 100,
                 min_free_bytes: int | None = None, clock=time.monotonic):
        self.broker = broker
        self.settings = ShareSettings()
        self._flush = flush
        self._flush_interval_ms = flush_interval_ms
        self._min_free_bytes = min_free_bytes
        self._clock = clock
        self.lock = threading.Lock()
        self._groups: dict[str, ShareGroup] = {}
        self._configs: dict[str, dict] = {}  # group -> its own ShareSettings fields (settings_for)
        self._configs_version = -1  # the group configs' version they were read at
        self._parts: dict[tuple[str, str, int], SharePartition] = {}
        self._parts_lock = threading.Lock()
        self._closed = False

    def configure(self, **settings) -> None:
        """Set ``ShareSettings`` fields (the server's ``kafka_share_*``)."""
        for k, v in settings.items():
            if not hasattr(self.settings, k):
                raise TypeError(f"unknown share-group setting {k!r}")
            setattr(self.settings, k, v)

    def settings_for(self, group: str) -> ShareSettings:
        """The settings in force for ``group``: the broker's, with the group's own configs over
        them (the broker's group configs, group_configs.py; read at open, cached here until they
        change)."""
        gc = self.broker.group_configs
        if self._configs_version != gc.version:
            self._configs, self._configs_version = {}, gc.version
        own = self._configs.get(group)
        if own is None:
            own = self._configs[group] = {field: value for key, raw in gc.own(group).items() if key in GROUP_CONFIGS
                                          for field, value in [parse_group_config(key, raw)] if field}
        return self.settings.merged(own) if own else self.settings

    def group_configs(self, group: str) -> dict[str, str]:
        """The Kafka share-group configs ``group`` sets itself (``alter_group_configs``)."""
        validate_group(group)
        return {k: v for k, v in self.broker.group_configs.own(group).items() if k in GROUP_CONFIGS}

    def alter_group_configs(self, group: str, changes: dict, validate_only: bool = False) -> None:
        """Set (a value) or delete (None: back to the broker's setting) configs of ``group``
        (``GROUP_CONFIGS``, or any group config): ``Broker.alter_group_configs``."""
        self.broker.alter_group_configs(group, changes, validate_only=validate_only)

    # ------------------------------------------------------------------ membership

    def heartbeat(self, group: str, member_id: str, epoch: int, topics: list | None, client_id: str = "",
                  client_host: str = ""):
        """One share-group heartbeat: (status, member id, member epoch, assignment
        {topic: [partitions]} or None). See module doc for the epochs."""
        validate_group(group)
        now = self._clock()
        with self.lock:
            g = self._groups.get(group)
            if g is None:
                if epoch != 0:
                    return UNKNOWN_MEMBER, member_id, epoch, None
                g = self._groups[group] = ShareGroup(group)
            self._expire_locked(g, now)
            m = g.members.get(member_id)
            if epoch == -1:
                if m is not None:
                    del g.members[member_id]
                    self._rebalance_locked(g)
                status, out = OK, (member_id, -1, None)
            elif epoch == 0:
                if topics is None and m is None:
                    return INVALID, member_id, epoch, None
                if m is None and len(g.members) >= MAX_MEMBERS:
                    return FULL, member_id, epoch, None
                if m is None:
                    member_id = member_id or str(uuid.uuid4())
                    m = g.members[member_id] = ShareMember(member_id, sorted(set(topics)), now, client_id,
                                                           client_host)
                elif topics is not None:
                    m.topics = sorted(set(topics))
                m.seen = now
                self._rebalance_locked(g, force=True)
                status, out = OK, (member_id, m.epoch, dict(m.assignment))
            elif m is None:
                status, out = UNKNOWN_MEMBER, (member_id, epoch, None)
            elif epoch != m.epoch and epoch != m.previous_epoch:
                status, out = FENCED_EPOCH, (member_id, epoch, None)
            else:
                m.seen = now
                if topics is not None and sorted(set(topics)) != m.topics:
                    m.topics = sorted(set(topics))
                self._rebalance_locked(g)
                status, out = OK, (member_id, m.epoch, dict(m.assignment))
        return (status, *out)

    def _expire_locked(self, g: ShareGroup, now: float) -> list:
        limit = self.settings_for(g.name).session_timeout_ms / 1000
        gone = [mid for mid, m in g.members.items() if now - m.seen > limit]
        for mid in gone:
            del g.members[mid]
        if gone:
            self._rebalance_locked(g)
        return gone

    def _partition_counts(self, topics) -> dict[str, int]:
        counts = {}
        for t in topics:
            try:
                counts[t] = self.broker.topic(t).partitions
            except (TopicDoesNotExist, InvalidName):  # a name no topic can have (``^t$``: no regex here)
                pass
        return counts

    def _rebalance_locked(self, g: ShareGroup, force: bool = False) -> None:
        """Recompute the assignment; bump the epochs if it changed (or ``force``: a join)."""
        members = sorted(g.members)
        subs = {mid: g.members[mid].topics for mid in members}
        counts = self._partition_counts({t for ts in subs.values() for t in ts})
        prev = {mid: [(t, p) for t, ps in g.members[mid].assignment.items() for p in ps] for mid in members}
        got = assign(subs, counts, prev)
        new: dict[str, dict[str, list[int]]] = {mid: {} for mid in members}
        for mid, tps in got.items():
            for tp in tps:
                new[mid].setdefault(tp.topic, []).append(tp.partition)
        for t, n in counts.items():  # members left without a partition of t share one
            idle = [mid for mid in members if t in subs[mid] and t not in new[mid]]
            for i, mid in enumerate(idle):
                new[mid][t] = [i % n]
        changed = force or any(new[mid] != g.members[mid].assignment for mid in members)
        if not changed:
            return
        g.epoch += 1
        for mid in members:
            m = g.members[mid]
            m.assignment = {t: sorted(ps) for t, ps in new[mid].items()}
            m.previous_epoch, m.epoch = m.epoch, g.epoch

    def describe(self, group: str) -> dict | None:
        """The group epoch and members (id, epoch, client, topics, assignment); None for a
        group that has neither members now nor stored state."""
        with self.lock:
            g = self._groups.get(group)
            if g is not None:
                self._expire_locked(g, self._clock())
                return {"epoch": g.epoch, "members": [
                    {"member_id": m.id, "epoch": m.epoch, "client_id": m.client_id, "client_host": m.client_host,
                     "topics": list(m.topics), "assignment": {t: list(ps) for t, ps in m.assignment.items()}}
                    for m in g.members.values()]}
        if os.path.isdir(os.path.join(layout.share_dir(self.broker.path), group_dir_name(group))):
            return {"epoch": 0, "members": []}
        return None

    def describe_full(self, group: str) -> dict | None:
        """``describe`` with every share partition the group has state of: its start offset, the
        first offset never acquired, the records acquired and available now, and how many
        in-flight records have each delivery count. None for an unknown group."""
        d = self.describe(group)
        if d is None:
            return None
        parts = {(t, p): sp for t, p, sp in self.open_partitions(group)}
        root = os.path.join(layout.share_dir(self.broker.path), group_dir_name(group))
        if os.path.isdir(root):
            for t in os.listdir(root):
                if os.path.isdir(os.path.join(root, t)):
                    for p in os.listdir(os.path.join(root, t)):
                        if p.isdigit() and (t, int(p)) not in parts:
                            try:
                                parts[(t, int(p))] = self.partition(group, t, int(p))
                            except (TopicDoesNotExist, PartitionDoesNotExist):
                                pass
        st = self.settings_for(group)
        rows = []
        for (t, p), sp in sorted(parts.items()):
            sp.expire(int(time.time() * 1000), st.delivery_limit)
            info = sp.describe()
            info["delivery_counts"] = {str(k): v for k, v in info["delivery_counts"].items()}
            rows.append({"topic": t, "partition": p, **info})
        state = "Stable" if d["members"] else "Empty"
        return {"group": group, "state": state, **d, "partitions": rows}

    def groups(self) -> list[str]:
        """The share groups with members now, or with stored state."""
        names = set()
        with self.lock:
            names.update(g.name for g in self._groups.values() if g.members)
        root = layout.share_dir(self.broker.path)
        if os.path.isdir(root):
            from ..names import group_from_dir

            names.update(group_from_dir(e) for e in os.listdir(root))
        return sorted(names)

    # ------------------------------------------------------------------ share partitions

    def partition(self, group: str, topic: str, p: int) -> SharePartition:
        """The share partition of (group, topic, p), opened (or made) on first use;
        TopicDoesNotExist / PartitionDoesNotExist as the topic's ``log`` raises."""
        key = (group, topic, p)
        sp = self._parts.get(key)
        if sp is not None and not sp.log.closed:
            return sp
        log = self.broker.topic(topic).log(p)
        with self._parts_lock:
            if self._closed:
                from ...errors import LogClosedError

                raise LogClosedError(f"the broker of {self.broker.path} is closed")
            sp = self._parts.get(key)
            if sp is not None and sp.log is not log:  # the topic was deleted and made again
                sp.close()
                sp = None
                shutil.rmtree(self._path(group, topic, p), ignore_errors=True)
            if sp is None:
                st = self.settings_for(group)
                path = self._path(group, topic, p)
                dlq = DeadLetters(self.broker, group, topic, p, path, lambda: self.settings_for(group))
                sp = SharePartition(path, log, flush=self._flush, flush_interval_ms=self._flush_interval_ms,
                                    auto_offset_reset=st.auto_offset_reset, min_free_bytes=self._min_free_bytes,
                                    dead_letter=dlq)
                self._parts[key] = sp
            return sp

    # ------------------------------------------------------------------ start offsets (admin)

    def stored_partitions(self, group: str) -> list[tuple[str, int]]:
        """The (topic, partition) pairs ``group`` has share-partition state of, sorted."""
        out = {(t, p) for t, p, _sp in self.open_partitions(group)}
        root = os.path.join(layout.share_dir(self.broker.path), group_dir_name(group))
        if os.path.isdir(root):
            for t in os.listdir(root):
                if os.path.isdir(os.path.join(root, t)):
                    out.update((t, int(p)) for p in os.listdir(os.path.join(root, t)) if p.isdigit())
        return sorted(out)

    def start_offset(self, group: str, topic: str, p: int) -> int:
        """The share-partition start offset of (group, topic, p), or -1 when it has no state
        (no fetch made it yet); TopicDoesNotExist / PartitionDoesNotExist."""
        self.broker.topic(topic).log(p)
        if (topic, p) not in self.stored_partitions(group):
            return -1
        return self.partition(group, topic, p).describe()["start_offset"]

    def check_empty(self, group: str) -> None:
        """GroupNotEmpty if ``group`` has members now."""
        d = self.describe(group)
        if d is not None and d["members"]:
            raise GroupNotEmpty(f"share group {group!r} has members: its offsets change only when it is empty")

    def alter_start_offset(self, group: str, topic: str, p: int, offset: int) -> int:
        """Set the share-partition start offset of (group, topic, p) (made if new; clamped
        to the log), forgetting its records in flight; GroupNotEmpty while ``group`` has
        members. Durable on return; the offset set."""
        validate_group(group)
        self.check_empty(group)
        return self.partition(group, topic, p).reset(offset)

    def delete_offsets(self, group: str, topic: str) -> list[int]:
        """Delete ``group``'s state of every partition of ``topic`` (the next fetch starts
        where ``share.auto.offset.reset`` says); GroupNotEmpty while it has members. The
        partitions deleted."""
        validate_group(group)
        self.check_empty(group)
        parts = [p for t, p in self.stored_partitions(group) if t == topic]
        with self._parts_lock:
            for p in parts:
                sp = self._parts.pop((group, topic, p), None)
                if sp is not None:
                    sp.close()
        shutil.rmtree(os.path.join(layout.share_dir(self.broker.path), group_dir_name(group), topic),
                      ignore_errors=True)
        return parts

    def _path(self, group: str, topic: str, p: int) -> str:
        return os.path.join(layout.share_dir(self.broker.path), group_dir_name(group), topic, str(p))

    def open_partitions(self, group: str) -> list:
        return [(t, p, sp) for (g, t, p), sp in list(self._parts.items()) if g == group]

    def release_member(self, group: str, member: str) -> int:
        """Release every record ``member`` of ``group`` holds; returns how many."""
        n = 0
        limit = self.settings_for(group).delivery_limit
        for _t, _p, sp in self.open_partitions(group):
            n += sp.release_member(member, limit)
        return n

    def forget_topic(self, topic: str) -> None:
        """A topic was deleted: close and delete its share partitions' state."""
        with self._parts_lock:
            for key in [k for k in self._parts if k[1] == topic]:
                self._parts.pop(key).close()
        root = layout.share_dir(self.broker.path)
        if os.path.isdir(root):
            for g in os.listdir(root):
                shutil.rmtree(os.path.join(root, g, topic), ignore_errors=True)

    def close(self) -> None:
        with self._parts_lock:
            self._closed = True
            parts, self._parts = list(self._parts.values()), {}
        for sp in parts:
            sp.close()
