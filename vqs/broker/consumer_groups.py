"""Consumer groups of Kafka's consumer protocol (KIP-848): members, epochs, server-side assignment.

A member heartbeats; the group answers its member epoch and, when it changed,
the partitions it owns. Nothing waits: every change happens inside a heartbeat
(or a commit, a describe) under one lock, and time is read from ``clock``.

The group epoch goes up by one whenever the target assignment may change: a
member joins (epoch 0), leaves (epoch -1 or -2), expires, changes its
subscription or assignor, or a subscribed topic's partition count changes.
The target is recomputed then: ``uniform`` is VQS's assignor (assignor.py:
balanced, then sticky to the previous target), ``range`` gives each topic's
partitions in contiguous ranges to its subscribers in member-id order.

Reconciliation is incremental, and a partition is never owned by two members:
``owned`` (given to the member) and ``revoking`` (taken back, not yet confirmed
released) of all members are disjoint. A member whose owned partitions are not
all in its target first gives up those outside it (they move to ``revoking``,
its epoch unchanged); they stay unavailable to every other member until the
member's heartbeat reports its partitions without them, or it leaves or
expires. Then its epoch becomes the group epoch and it gets those partitions
of its target that no other member owns or is revoking; the rest come in a
later heartbeat, once released. A member still revoking one rebalance
timeout after it was asked is removed (as Kafka fences it).

A heartbeat names the member's epoch: the current one, or the one before it
when the member reports partitions it owns under the current one (a lost
response; Kafka's rule); any other is ``fenced`` and the member rejoins
with epoch 0 (giving up what it owned). An unknown member id is
``unknown_member``. A member that does not heartbeat within the session
timeout expires, and what it owned is free at once.

A pattern (``regex``) is resolved as Kafka's coordinator resolves one, after the
answer: the heartbeat that brings a pattern the group has not resolved is
answered for the member's named topics only, and the pattern's matches count
from the group's next heartbeat on (a new group epoch then). Patterns no member
subscribes to any more are forgotten, so one subscribed to again is resolved
afresh. From then on its matches follow the topics made and deleted. What a
member's pattern matches is cut to the topics it may see (``visible``: at the
server, those its principal may DESCRIBE), each member by its own rights, so a
pattern never assigns a member a topic its ACLs hide from it.

Static members (an instance id): one leaving with epoch -2 keeps its slot,
partitions included, until its session ends; a member joining with the same
instance id meanwhile takes the slot over (its partitions and epoch, no new
group epoch), and while the holder has not left the instance id is
``unreleased_instance``.

Commits: a member may commit with its current epoch, or an older one for
partitions it still owns; otherwise ``stale_epoch``. Membership lives in
memory only (clients rejoin after a restart), offsets are the Broker's group
offsets. The group coordinator (coordinator.py) owns this object and shares
its lock: a group id has members of one protocol at a time, checked under
that one lock (``is_classic`` here, ``has_members_locked`` there).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from .assignor import assign
from .config_values import config_int
from .names import validate_group
from .topic import TopicPartition

OK = "ok"
UNKNOWN_MEMBER = "unknown_member"
FENCED = "fenced"
STALE_EPOCH = "stale_epoch"
INVALID = "invalid"
UNSUPPORTED_ASSIGNOR = "unsupported_assignor"
FULL = "full"
NOT_THIS_PROTOCOL = "not_this_protocol"
UNRELEASED_INSTANCE = "unreleased_instance"

ASSIGNORS = ("uniform", "range")
MAX_MEMBERS = 1000  # members of one group
MAX_GROUPS = 100_000  # groups with members
MAX_TOPICS = 10_000  # topics of one subscription
MAX_ID = 255  # characters of a member, instance or rack id, and of a client id or host kept
MAX_TOPIC_NAME = 249  # Kafka's longest topic name

#: Kafka's group configs of a consumer-protocol group (a group id's own: group_configs.py) ->
#: (the setting it overrides, its bounds)
CONSUMER_CONFIGS = {"consumer.session.timeout.ms": ("session_timeout_ms", 1_000, 3_600_000),
                    "consumer.heartbeat.interval.ms": ("heartbeat_interval_ms", 100, 3_600_000)}


def parse_consumer_config(key: str, value: str) -> tuple[str, int]:
    """(setting, value) of consumer group config ``key``; ConfigError naming it."""
    field_name, lo, hi = CONSUMER_CONFIGS[key]
    return field_name, config_int(key, value, lo, hi)


@dataclass
class Member:
    member_id: str
    client_id: str
    client_host: str
    topics: tuple
    assignor: str | None
    rebalance_timeout_ms: int
    instance_id: str | None = None
    rack_id: str | None = None
    epoch: int = 0
    previous_epoch: int = -1
    owned: set = field(default_factory=set)
    revoking: set = field(default_factory=set)
    revoke_deadline: float = 0.0
    sent: frozenset | None = None  # the assignment last answered
    last_seen: float = 0.0
    away: bool = False  # a static member that left for now (epoch -2): its slot kept for its session
    regex: str | None = None  # a topic-name pattern subscribed to, besides ``topics``
    visible: Callable | None = None  # matched topics -> those the member may see (None: all)


@dataclass
class Group:
    name: str
    epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = ASSIGNORS[0]
    members: dict = field(default_factory=dict)
    target: dict = field(default_factory=dict)  # member id -> set of TopicPartition
    counts: dict = field(default_factory=dict)  # topic -> partition count the target was made for
    subs: dict = field(default_factory=dict)  # member id -> the subscription the target was made for
    static: dict = field(default_factory=dict)  # instance id -> the member id holding it
    resolved: set = field(default_factory=set)  # patterns whose matches count (module doc)
    pending: set = field(default_factory=set)  # patterns met, resolved at the group's next heartbeat


@dataclass
class Answer:
    status: str
    member_id: str = ""
    epoch: int = 0
    assignment: list | None = None  # sorted TopicPartitions; None: unchanged since last answered


class ConsumerGroups:
    """Every consumer-protocol group of one broker; thread-safe (module doc)."""

    def __init__(self, partitions, *, session_timeout_ms: int = 45_000, heartbeat_interval_ms: int = 1_500,
                 clock=time.monotonic, lock=None, is_classic=lambda group: False):
        self._partitions = partitions  # topic -> partition count (0: no such topic)
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self._clock = clock
        self._is_classic = is_classic  # called under the lock: has the group members of another protocol?
        self._lock = lock if lock is not None else threading.Lock()
        self._groups: dict[str, Group] = {}
        self._resolve = None  # pattern -> the topic names it matches now; None: no regex subscriptions
        #: group -> its own settings {"session_timeout_ms": ..., ...} (its CONSUMER_CONFIGS), or {};
        #: called under the lock: quick, no I/O (the broker's group configs, read at open)
        self.own_settings: Callable[[str], dict] = lambda group: {}

    def set_timeouts(self, *, session_timeout_ms: int, heartbeat_interval_ms: int) -> None:
        """The broker's session timeout and heartbeat interval (a group's own configs override
        them: ``own_settings``)."""
        with self._lock:
            self.session_timeout_ms = session_timeout_ms
            self.heartbeat_interval_ms = heartbeat_interval_ms

    def set_resolver(self, resolve) -> None:
        """``resolve(pattern)``: the topics a subscription's pattern matches now (called under the
        lock: it must be quick and never block on I/O); without one a pattern subscription is
        ``invalid``."""
        with self._lock:
            self._resolve = resolve

    def session_timeout_for(self, group: str) -> int:
        """``group``'s session timeout (ms): its own ``consumer.session.timeout.ms``, else the broker's."""
        return self.own_settings(group).get("session_timeout_ms", self.session_timeout_ms)

    def heartbeat_interval_for(self, group: str) -> int:
        """The heartbeat interval ``group``'s members are told (ms): its own, else the broker's."""
        return self.own_settings(group).get("heartbeat_interval_ms", self.heartbeat_interval_ms)

    # ------------------------------------------------------------------ queries
    def has_members(self, group: str) -> bool:
        with self._lock:
            return self.has_members_locked(group)

    def has_members_locked(self, group: str) -> bool:
        g = self._groups.get(group)
        if g is not None:
            self._expire_locked(g)
        return g is not None and bool(g.members)

    def groups(self) -> list[str]:
        with self._lock:
            return self.groups_locked()

    def groups_locked(self) -> list[str]:
        self._prune_locked()
        return sorted(self._groups)

    def _prune_locked(self) -> None:
        for g in list(self._groups.values()):
            self._expire_locked(g)
            if not g.members:
                del self._groups[g.name]

    def describe(self, group: str) -> dict | None:
        """The group's epochs, assignor and members (each with its assignment and target), or
        None when it has no members."""
        with self._lock:
            g = self._groups.get(group)
            if g is not None:
                self._expire_locked(g)
            if g is None or not g.members:
                return None
            reconciling = any(m.epoch != g.epoch or m.revoking or m.owned != g.target.get(m.member_id, set())
                              for m in g.members.values())
            return {"state": "Reconciling" if reconciling else "Stable", "epoch": g.epoch,
                    "assignment_epoch": g.assignment_epoch, "assignor": g.assignor,
                    "members": [{"member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                                 "epoch": m.epoch, "client_id": m.client_id, "client_host": m.client_host,
                                 "topics": list(m.topics), "regex": m.regex,
                                 "subscribed": list(self._subscription(g, m)), "assignment": sorted(m.owned),
                                 "target": sorted(g.target.get(m.member_id, ()))}
                                for m in g.members.values()]}

    # ------------------------------------------------------------------ the protocol
    def heartbeat(self, group: str, member_id: str, epoch: int, *, topics: list | None = None,
                  regex: str | None = None, assignor: str | None = None, owned: list | None = None, rebalance_timeout_ms: int = -1,
                  instance_id: str | None = None, rack_id: str | None = None, client_id: str = "",
                  client_host: str = "", visible: Callable | None = None) -> Answer:
        """One ConsumerGroupHeartbeat: ``topics``, ``regex``, ``assignor``, ``owned`` are None when
        unchanged since the member's last heartbeat (``regex`` "" drops the pattern; module doc).
        ``visible``: a frozenset of topic names -> the subset this member may see; what its
        pattern matches is cut to that, so a pattern never assigns a member a topic it may not
        see (None: every topic)."""
        if regex and self._resolve is None:
            return Answer(INVALID, member_id[:MAX_ID], epoch)
        if assignor is not None and assignor not in ASSIGNORS:
            return Answer(UNSUPPORTED_ASSIGNOR, member_id, epoch)
        if (topics is not None and (len(topics) > MAX_TOPICS or any(len(t) > MAX_TOPIC_NAME for t in topics))) \
                or any(x is not None and len(x) > MAX_ID for x in (member_id, instance_id, rack_id)):
            return Answer(INVALID, member_id[:MAX_ID], epoch)
        client_id, client_host = client_id[:MAX_ID], client_host[:MAX_ID]
        now = self._clock()
        with self._lock:
            g = self._groups.get(group)
            if g is None:
                validate_group(group)
                if epoch != 0:
                    return Answer(UNKNOWN_MEMBER, member_id, epoch)
                if self._is_classic(group):
                    return Answer(NOT_THIS_PROTOCOL, member_id, epoch)
                if len(self._groups) >= MAX_GROUPS:
                    self._prune_locked()
                    if len(self._groups) >= MAX_GROUPS:
                        return Answer(FULL, member_id, epoch)
                g = self._groups[group] = Group(group)
            self._expire_locked(g)
            self._resolve_patterns_locked(g)
            if epoch < 0:  # -1 leaves; -2: a static member leaves for now, its slot kept
                m = g.members.get(member_id)
                if m is None:
                    return Answer(UNKNOWN_MEMBER, member_id, epoch)
                if epoch == -2 and m.instance_id is not None:
                    m.away = True
                    return Answer(OK, member_id, epoch)
                self._remove_locked(g, member_id)
                if not g.members:
                    del self._groups[group]
                return Answer(OK, member_id, epoch)
            m = g.members.get(member_id) if member_id else None
            if epoch == 0 and m is None and instance_id and instance_id in g.static:
                status, m = self._take_over_locked(g, g.static[instance_id], member_id or str(uuid.uuid4()))
                if status != OK:
                    return Answer(status, member_id, epoch)
                member_id = m.member_id
            elif epoch == 0:
                if m is None:
                    if not g.members and self._is_classic(group):
                        return Answer(NOT_THIS_PROTOCOL, member_id, epoch)
                    if len(g.members) >= MAX_MEMBERS:
                        return Answer(FULL, member_id, epoch)
                    if not topics and not regex:
                        return Answer(INVALID, member_id, epoch)
                    member_id = member_id or str(uuid.uuid4())
                    m = g.members[member_id] = Member(member_id, client_id, client_host, tuple(topics or ()),
                                                      assignor, rebalance_timeout_ms, instance_id or None,
                                                      regex=regex or None, visible=visible)
                    if instance_id:
                        g.static[instance_id] = member_id
                else:  # a member fenced (or lost) rejoins: it gave up what it owned
                    m.owned.clear()
                    m.revoking.clear()
                    m.epoch, m.previous_epoch = 0, -1
                    m.visible = visible
                    if topics is not None:
                        m.topics = tuple(topics)
                    if regex is not None:
                        m.regex = regex or None
                m.sent = None
                self._bump_locked(g)
            elif m is None:
                return Answer(UNKNOWN_MEMBER, member_id, epoch)
            elif epoch != m.epoch and not (epoch == m.previous_epoch and owned is not None
                                           and set(_tps(owned)) <= m.owned):
                return Answer(FENCED, member_id, epoch)
            m.last_seen = now
            m.away = False
            m.visible = visible
            if rebalance_timeout_ms > 0:
                m.rebalance_timeout_ms = rebalance_timeout_ms
            m.rack_id = rack_id or m.rack_id
            if topics is not None and tuple(topics) != m.topics:
                m.topics = tuple(topics)
                self._bump_locked(g)
            if regex is not None and (regex or None) != m.regex:
                m.regex = regex or None
                self._bump_locked(g)
            if assignor is not None and assignor != m.assignor:
                m.assignor = assignor
                self._bump_locked(g)
            if owned is not None and m.revoking:
                m.revoking &= set(_tps(owned))  # what it no longer reports is released
            self._check_target_locked(g)
            self._reconcile_locked(g, m, now)
            answer = None
            if m.sent is None or m.owned != m.sent:
                m.sent = frozenset(m.owned)
                answer = sorted(m.owned)
            return Answer(OK, member_id, m.epoch, answer)

    def check_commit(self, group: str, member_id: str, epoch: int, partitions) -> str:
        """May ``member_id`` at ``epoch`` commit offsets of ``partitions`` ((topic, partition)s)?
        A commit from outside the group (epoch -1, with or without a member id) only while it has
        no members."""
        with self._lock:
            g = self._groups.get(group)
            if g is not None:
                self._expire_locked(g)
            if epoch < 0 and (g is None or not g.members):  # as Kafka: a commit from outside, into an empty group
                return OK
            if not member_id and epoch < 0:
                return UNKNOWN_MEMBER
            m = g.members.get(member_id) if g is not None else None
            if m is None:
                return UNKNOWN_MEMBER
            if epoch == m.epoch:
                return OK
            if 0 <= epoch < m.epoch and set(_tps(partitions)) <= m.owned | m.revoking:
                return OK
            return STALE_EPOCH

    # ------------------------------------------------------------------ internals
    def _take_over_locked(self, g: Group, old_id: str, new_id: str) -> tuple[str, Member | None]:
        """A static member back under ``new_id`` takes the slot of ``old_id`` (which left with
        epoch -2): its partitions, epoch and target, with no new group epoch (as Kafka). While the
        old member is still in the group and has not left, the instance id is not released."""
        old = g.members[old_id]
        if not old.away:
            return UNRELEASED_INSTANCE, None
        del g.members[old_id]
        old.member_id, old.sent, old.away = new_id, None, False
        g.members[new_id] = old
        if old_id in g.target:
            g.target[new_id] = g.target.pop(old_id)
        if old_id in g.subs:
            g.subs[new_id] = g.subs.pop(old_id)
        g.static[old.instance_id] = new_id
        return OK, old

    def _remove_locked(self, g: Group, member_id: str) -> None:
        m = g.members.pop(member_id)
        if m.instance_id is not None and g.static.get(m.instance_id) == member_id:
            del g.static[m.instance_id]
        if g.members:
            self._bump_locked(g)
        else:
            g.target, g.subs = {}, {}

    def _expire_locked(self, g: Group) -> None:
        now = self._clock()
        session_ms = self.session_timeout_for(g.name)
        for m in list(g.members.values()):
            if (now - m.last_seen) * 1000 > session_ms or (
                    m.revoking and m.rebalance_timeout_ms > 0 and now > m.revoke_deadline):
                self._remove_locked(g, m.member_id)

    def _subscription(self, g: Group, m: Member) -> tuple:
        """The topics ``m`` subscribes to now: its names, and those its pattern matches once the
        group has resolved it (a pattern not resolved yet is noted to be: module doc)."""
        if m.regex is None or self._resolve is None:
            return m.topics
        if m.regex not in g.resolved:
            g.pending.add(m.regex)
            return m.topics
        matched = self._resolve(m.regex)
        if m.visible is not None:
            matched = m.visible(matched)
        return tuple(sorted(set(m.topics) | matched))

    def _resolve_patterns_locked(self, g: Group) -> None:
        """The patterns met before this heartbeat are resolved now (their matches then change
        the topic counts: a new group epoch); those no member has any more are forgotten."""
        used = {m.regex for m in g.members.values() if m.regex is not None}
        g.resolved = (g.resolved | g.pending) & used
        g.pending = set()

    def _check_target_locked(self, g: Group) -> None:
        """A new group epoch when what the target was made for changed: a member's subscription
        (a topic came to match, or stopped matching, its pattern or what it may see) or a
        subscribed topic's partition count."""
        subs = {mid: self._subscription(g, m) for mid, m in sorted(g.members.items())}
        if subs != g.subs or {t: self._count(t) for ts in subs.values() for t in ts} != g.counts:
            self._bump_locked(g, subs)

    def _count(self, topic: str) -> int:
        try:
            return self._partitions(topic)
        except Exception:  # an unknown or deleted topic has no partitions to assign
            return 0

    def _bump_locked(self, g: Group, subs: dict | None = None) -> None:
        """A new group epoch and its target assignment (``subs``: the members' subscriptions in
        member-id order, when the caller has them)."""
        g.epoch += 1
        if subs is None:
            subs = {mid: self._subscription(g, m) for mid, m in sorted(g.members.items())}
        g.counts = {t: self._count(t) for ts in subs.values() for t in ts}
        g.subs = subs
        votes = [m.assignor for m in g.members.values() if m.assignor]
        g.assignor = max(ASSIGNORS, key=votes.count) if votes else ASSIGNORS[0]
        if g.assignor == "range":
            target = _range(subs, g.counts)
        else:
            target = assign(subs, g.counts, {mid: sorted(tps) for mid, tps in g.target.items() if mid in subs})
        g.target = {mid: set(tps) for mid, tps in target.items()}
        g.assignment_epoch = g.epoch

    def _reconcile_locked(self, g: Group, m: Member, now: float) -> None:
        target = g.target.get(m.member_id, set())
        if m.revoking:
            return  # waits for the member to release them
        revoke = m.owned - target
        if revoke:
            m.owned -= revoke
            m.revoking = revoke
            m.revoke_deadline = now + m.rebalance_timeout_ms / 1000
            return
        if m.epoch != g.epoch:
            m.epoch, m.previous_epoch = g.epoch, m.epoch
        busy = set()
        for o in g.members.values():
            if o is not m:
                busy |= o.owned | o.revoking
        m.owned |= {tp for tp in target - m.owned if tp not in busy}


def _tps(pairs) -> list:
    return [TopicPartition(t, p) for t, p in pairs]


def _range(subs: dict, counts: dict) -> dict:
    """Kafka's range assignment: each topic's partitions in contiguous ranges to its
    subscribers in member-id order, the first ones one more when they do not divide evenly."""
    out: dict = {mid: [] for mid in subs}
    for topic in sorted({t for ts in subs.values() for t in ts}):
        members = sorted(mid for mid, ts in subs.items() if topic in ts)
        n = counts.get(topic, 0)
        per, extra = divmod(n, len(members))
        start = 0
        for i, mid in enumerate(members):
            k = per + (1 if i < extra else 0)
            out[mid] += [TopicPartition(topic, p) for p in range(start, start + k)]
            start += k
    return out
