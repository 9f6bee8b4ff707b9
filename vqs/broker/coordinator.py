"""Group coordinator: consumer-group membership, generations and rebalances (Kafka's protocol).

A group moves Empty -> PreparingRebalance -> CompletingRebalance -> Stable and
back to PreparingRebalance whenever a member joins, leaves or expires.
``join`` blocks until every current member has (re)joined or the rebalance
timeout passes (stragglers are removed); then the generation goes up by one,
the first joined member (the old leader when it rejoins) leads, and every join
returns. A group's first rebalance (from Empty) waits ``initial_delay_ms``
for more members (Kafka's group.initial.rebalance.delay.ms), so members that
start together share one generation. ``sync`` from the leader stores the assignment bytes it computed
(passed through untouched: range, round-robin, cooperative-sticky all work);
the followers' ``sync`` waits for it. The protocol (e.g. "range") is the first
one that every member lists, in the leader's order.

Invariants (under ``_lock``): a member outside a blocking ``join``/``sync``
expires ``session_timeout_ms`` after its last heartbeat, join or sync, which
starts a rebalance; a heartbeat or commit naming an unknown member is
``unknown_member``, an old generation ``illegal_generation``, and while a
rebalance is under way ``rebalance_in_progress``: a stale member is fenced
and can never commit over the new owner of a partition. Membership lives in
memory only (as in Kafka, clients rejoin after a broker restart); committed
offsets are the Broker's group offsets (group_offsets.py), the same ones
``vqs group`` and REST show.

VQS's own consumers use the other protocol, with the assignment computed here
(``assigned``: assigned_groups.py), under the same lock: a group has members
of one protocol or the other, never both (a Kafka join into a group of VQS
members is ``inconsistent_protocol``, and the other way round), and a
commit from outside a group is refused while it has members of either kind.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field

from ..errors import ConfigError, FencedMember
from .assigned_groups import AssignedGroups
from .names import validate_name

EMPTY, PREPARING, COMPLETING, STABLE = "Empty", "PreparingRebalance", "CompletingRebalance", "Stable"
OK = "ok"
UNKNOWN_MEMBER = "unknown_member"
ILLEGAL_GENERATION = "illegal_generation"
REBALANCING = "rebalance_in_progress"
INCONSISTENT_PROTOCOL = "inconsistent_protocol"
_TICK_S = 0.05


@dataclass
class Member:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: list  # [(name, metadata bytes)]
    group_instance_id: str | None = None
    assignment: bytes = b""
    last_seen: float = 0.0
    joined: bool = False  # has (re)joined the rebalance under way
    busy: int = 0  # blocking calls in progress (alive while waiting)


@dataclass
class JoinResult:
    status: str
    generation: int = -1
    protocol: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list = field(default_factory=list)  # [(member_id, instance_id, metadata)] for the leader


@dataclass
class Group:
    name: str
    state: str = EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict = field(default_factory=dict)
    deadline: float = 0.0  # end of the rebalance under way
    not_before: float = 0.0  # a new group's first rebalance waits this long for more members


class GroupCoordinator:
    """All groups of one Broker; thread-safe, blocking calls (run them off an event loop)."""

    def __init__(self, clock=time.monotonic, initial_delay_ms: int = 100, partitions=None):
        self._clock = clock
        self._initial_delay_s = initial_delay_ms / 1000
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._groups: dict[str, Group] = {}
        self._closed = False
        #: VQS consumers' groups (server-side assignment); ``partitions(topic)`` -> partition count
        self.assigned = AssignedGroups(self._changed, clock, partitions or _no_topics, self._has_classic_locked,
                                       lambda: self._closed)

    def _has_classic_locked(self, group: str) -> bool:
        g = self._groups.get(group)
        return g is not None and bool(g.members)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._changed.notify_all()

    # ------------------------------------------------------------------ internals
    def _group(self, name: str) -> Group:
        g = self._groups.get(name)
        if g is None:
            validate_name(name, "group")
            g = self._groups[name] = Group(name)
        return g

    def _expire_locked(self, g: Group) -> None:
        now = self._clock()
        for m in list(g.members.values()):
            if not m.busy and now - m.last_seen > m.session_timeout_ms / 1000:
                self._remove_locked(g, m.member_id)
        if g.state == PREPARING and (now >= g.deadline or (
                now >= g.not_before and all(m.joined for m in g.members.values()))):
            self._complete_join_locked(g)

    def _remove_locked(self, g: Group, member_id: str) -> None:
        g.members.pop(member_id, None)
        if g.leader == member_id:
            g.leader = None
        if not g.members:
            g.state, g.leader, g.protocol = EMPTY, None, None
            g.generation += 1
        else:
            self._start_rebalance_locked(g)
        self._changed.notify_all()

    def _start_rebalance_locked(self, g: Group) -> None:
        if g.state != PREPARING:
            if g.state == EMPTY:
                g.not_before = self._clock() + self._initial_delay_s
            g.state = PREPARING
            for m in g.members.values():
                m.joined = False
            g.deadline = self._clock() + max(m.rebalance_timeout_ms for m in g.members.values()) / 1000
            self._changed.notify_all()

    def _complete_join_locked(self, g: Group) -> None:
        for m in [m for m in g.members.values() if not m.joined]:
            g.members.pop(m.member_id)
        if not g.members:
            g.state, g.leader, g.protocol = EMPTY, None, None
            self._changed.notify_all()
            return
        members = list(g.members.values())
        if g.leader not in g.members:
            g.leader = members[0].member_id
        leader = g.members[g.leader]
        common = set.intersection(*({name for name, _ in m.protocols} for m in members))
        g.protocol = next(name for name, _ in leader.protocols if name in common)
        g.generation += 1
        g.state = COMPLETING
        now = self._clock()
        for m in members:
            m.assignment = b""
            m.last_seen = now
        self._changed.notify_all()

    def _wait_locked(self, g: Group, m: Member, until) -> None:
        m.busy += 1
        try:
            while not until() and not self._closed:
                self._changed.wait(_TICK_S)
                self._expire_locked(g)
        finally:
            m.busy -= 1
            m.last_seen = self._clock()

    # ------------------------------------------------------------------ the protocol
    def join(self, group: str, member_id: str, *, client_id: str = "", client_host: str = "",
             protocol_type: str = "consumer", protocols: list, session_timeout_ms: int = 45_000,
             rebalance_timeout_ms: int | None = None, group_instance_id: str | None = None) -> JoinResult:
        """Join (or rejoin) ``group``; blocks until the rebalance completes (module doc)."""
        with self._lock:
            g = self._group(group)
            self._expire_locked(g)
            if member_id and member_id not in g.members:
                return JoinResult(UNKNOWN_MEMBER, member_id=member_id)
            if self.assigned.has_members_locked(group):
                return JoinResult(INCONSISTENT_PROTOCOL, member_id=member_id)
            names = {name for name, _ in protocols}
            others = [{n for n, _ in m.protocols} for m in g.members.values() if m.member_id != member_id]
            if not names or (others and (g.protocol_type != protocol_type
                                         or not names.intersection(*others))):
                return JoinResult(INCONSISTENT_PROTOCOL, member_id=member_id)
            if not member_id:
                member_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            m = g.members.get(member_id)
            if m is None:
                m = g.members[member_id] = Member(member_id, client_id, client_host, session_timeout_ms,
                                                  rebalance_timeout_ms or session_timeout_ms, list(protocols),
                                                  group_instance_id)
            else:
                m.protocols = list(protocols)
                m.session_timeout_ms = session_timeout_ms
                m.rebalance_timeout_ms = rebalance_timeout_ms or session_timeout_ms
            g.protocol_type = protocol_type
            m.last_seen = self._clock()
            self._start_rebalance_locked(g)
            m.joined = True
            gen = g.generation
            self._expire_locked(g)
            self._wait_locked(g, m, lambda: g.state != PREPARING or member_id not in g.members)
            if member_id not in g.members or g.generation == gen:
                return JoinResult(UNKNOWN_MEMBER, member_id=member_id)
            members = ([(x.member_id, x.group_instance_id, dict(x.protocols)[g.protocol])
                        for x in g.members.values()] if g.leader == member_id else [])
            return JoinResult(OK, g.generation, g.protocol, g.leader, member_id, members)

    def sync(self, group: str, generation: int, member_id: str, assignments: dict) -> tuple[str, bytes]:
        """The leader hands in ``{member_id: assignment bytes}``; every member gets its own."""
        with self._lock:
            g = self._group(group)
            self._expire_locked(g)
            m = g.members.get(member_id)
            if m is None:
                return UNKNOWN_MEMBER, b""
            if generation != g.generation:
                return ILLEGAL_GENERATION, b""
            if g.state == PREPARING:
                return REBALANCING, b""
            m.last_seen = self._clock()
            if g.state == COMPLETING and member_id == g.leader:
                for mid, data in assignments.items():
                    if mid in g.members:
                        g.members[mid].assignment = data
                g.state = STABLE
                self._changed.notify_all()
            self._wait_locked(g, m, lambda: g.state != COMPLETING or g.generation != generation)
            if member_id not in g.members:
                return UNKNOWN_MEMBER, b""
            if g.generation != generation or g.state != STABLE:
                return REBALANCING, b""
            return OK, m.assignment

    def heartbeat(self, group: str, generation: int, member_id: str) -> str:
        with self._lock:
            g = self._group(group)
            self._expire_locked(g)
            m = g.members.get(member_id)
            if m is None:
                return UNKNOWN_MEMBER
            m.last_seen = self._clock()
            if g.state == PREPARING:
                return REBALANCING
            if generation != g.generation:
                return ILLEGAL_GENERATION
            return OK

    def leave(self, group: str, member_id: str) -> str:
        with self._lock:
            g = self._group(group)
            if member_id not in g.members:
                return UNKNOWN_MEMBER
            self._remove_locked(g, member_id)
            return OK

    def check_commit(self, group: str, generation: int, member_id: str) -> str:
        """May this member commit offsets now? Generation -1 with no member id is a consumer
        outside group management: allowed while the group has no members."""
        with self._lock:
            g = self._group(group)
            self._expire_locked(g)
            if generation < 0 and not member_id:
                return OK if not g.members and not self.assigned.has_members_locked(group) else ILLEGAL_GENERATION
            m = g.members.get(member_id)
            if m is None:
                return UNKNOWN_MEMBER
            if generation != g.generation:
                return ILLEGAL_GENERATION
            if g.state == PREPARING:
                return REBALANCING
            m.last_seen = self._clock()
            return OK

    def describe(self, group: str) -> dict:
        """State, protocol and members (with their metadata and assignment bytes)."""
        vqs = self.assigned.describe(group)
        if vqs is not None:  # VQS members: no Kafka metadata or assignment bytes
            vqs["members"] = [(m["member_id"], None, m["client_id"], m["client_host"], b"", b"")
                              for m in vqs["members"]]
            return vqs
        with self._lock:
            g = self._groups.get(group)
            if g is None:
                return {"state": "Dead", "protocol_type": "", "protocol": "", "members": []}
            self._expire_locked(g)
            return {
                "state": g.state, "generation": g.generation, "protocol_type": g.protocol_type or "",
                "protocol": g.protocol or "",
                "members": [(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                             dict(m.protocols).get(g.protocol or "", b""), m.assignment)
                            for m in g.members.values()],
            }

    def check_outside_commit(self, group: str) -> None:
        """Raise FencedMember while ``group`` has members of either protocol: a consumer outside
        the group (no member id) may commit only when it has none, as Kafka rules."""
        with self._lock:
            g = self._groups.get(group)
            if g is not None:
                self._expire_locked(g)
                if g.members:
                    raise FencedMember(f"group {group!r} has {len(g.members)} Kafka-protocol member(s): a "
                                       "consumer outside the group may not commit while it has")
        self.assigned.check_commit(group, None, -1, ())

    def membership(self, group: str) -> dict:
        """The live members of ``group`` (either protocol) as JSON-able values: ``state``,
        ``generation``, ``protocol_type`` ("vqs", Kafka's "consumer", "" with none) and
        ``members`` (member_id, client_id, client_host; a VQS member's topics and assignment)."""
        vqs = self.assigned.describe(group)
        if vqs is not None:
            return vqs
        d = self.describe(group)
        return {"state": d["state"] if d["members"] else "Empty", "generation": d.get("generation", 0),
                "protocol_type": d["protocol_type"], "protocol": d["protocol"],
                "members": [{"member_id": m[0], "client_id": m[2], "client_host": m[3]} for m in d["members"]]}

    def groups(self) -> list[tuple[str, str]]:
        """(name, protocol type) of every group that has members now."""
        with self._lock:
            return ([(g.name, g.protocol_type or "") for g in self._groups.values() if g.members]
                    + [(name, "vqs") for name in self.assigned.groups_locked()])


def _no_topics(topic: str) -> int:
    raise ConfigError(f"this group coordinator has no broker: it cannot look up topic {topic!r}")
