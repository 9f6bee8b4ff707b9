"""Group coordinator: consumer-group membership, generations and rebalances (Kafka's protocol).

over 500 lines: one group state machine (joins, syncs, static members, expiry, the timer) that
shares one lock and one set of invariants; split, each half would have to re-check the other's.

A group moves Empty -> PreparingRebalance -> CompletingRebalance -> Stable and
back to PreparingRebalance whenever a member joins, leaves or expires.
A join waits until every current member has (re)joined or the rebalance
timeout passes (stragglers are removed); then the generation goes up by one,
the first joined member (the old leader when it rejoins) leads, and every join
returns. A group's first rebalance (from Empty) waits ``initial_delay_ms``
for more members (Kafka's group.initial.rebalance.delay.ms), and each new
member that joins meanwhile starts that wait again, up to the rebalance
deadline (Kafka's InitialDelayedJoin), so members that start together share
one generation. ``sync`` from the leader stores the assignment bytes it computed
(passed through untouched: range, round-robin, cooperative-sticky all work);
the followers' ``sync`` waits for it; a member that has not synced one
rebalance timeout after its join completed is removed (as Kafka removes a
pending-sync member), so a leader that never syncs holds no follower for
longer. The protocol (e.g. "range") is the first one that every member lists,
in the leader's order.

Waiting holds no thread (group_wait.py): ``start_join``/``start_sync`` put a
``GroupWait`` in the group and return it; the call that changes the group
(another member's join, sync, heartbeat or leave) completes every wait it
makes answerable, under the lock. What only time changes (a rebalance
deadline, the initial delay, a session timeout that frees a rebalance) is
done by one timer thread, alive while some group has waits: it sleeps until
the earliest such moment of any waiting group (re-reckoned whenever a group
changes, and at least once a second) and expires what is due. ``join`` and
``sync`` are the same calls waited for in the calling thread; the Kafka
listener awaits them on its event loop, and cancels a wait whose connection
closed: its member leaves at once (as Kafka drops a pending member).

A member id comes from the coordinator (Kafka's KIP-394): ``new_member_id`` hands one
out to a client that asks to join without one (the Kafka listener answers JoinGroup v4+
so, MEMBER_ID_REQUIRED), and its join names it; such an id is pending, not a member (it
holds no rebalance), until that join, and forgotten when no join names it within its
session timeout. So a client that discards the answer of its waiting JoinGroup (librdkafka
does when its subscription changes meanwhile) joins again under the same id instead of
leaving a member behind that would hold every rebalance until its session ended. A
member's new JoinGroup replaces its own waiting one, which is answered
``rebalance_in_progress`` at once (Kafka keeps one join per member).

A rejoin that changes nothing is answered at once, as Kafka does: a follower
rejoining a Stable group with the same protocols, or any member rejoining
with the same protocols while the group waits for SyncGroups, gets the
current generation back and starts no rebalance (a client that rejoins by
habit cannot keep a group rebalancing forever).

Static members (Kafka's KIP-345: a ``group_instance_id``): the instance id
names one member at a time. A join with the id and no member id replaces
that member: the new member id takes over its slot, assignment and
leadership, and the old member id is fenced (its pending waits, and any later
call naming the instance with the old id, answer ``fenced_instance_id``); in a
Stable group whose protocol stays the same this starts no rebalance (the
answer names the generation in force, and the leader as it was, so the
returning member does not compute an assignment), while the group waits for
SyncGroups it starts one, and while it waits for joins the member simply
joins. A rebalance that ends keeps a static member that did not rejoin (as
Kafka: it may be restarting), so only its session timeout, a LeaveGroup naming
it, a missed SyncGroup or a withdrawn wait (below) removes it.

Invariants (under ``_lock``): a member outside a waiting ``join``/``sync``
expires ``session_timeout_ms`` after its last heartbeat, join or sync, which
starts a rebalance; a heartbeat, sync or commit naming an unknown member is
``unknown_member`` (naming an instance id now held by another member id,
``fenced_instance_id``), an old generation ``illegal_generation``. A commit
with the current generation is accepted while the group waits for joins
(assignments of the generation in force still hold until the next one forms,
as in Kafka) and refused ``rebalance_in_progress`` only between the end of the
joins and the leader's SyncGroup; so a stale member is fenced and can never
commit over the new owner of a partition. Membership lives in
memory only (as in Kafka, clients rejoin after a broker restart); committed
offsets are the Broker's group offsets (group_offsets.py), the same ones
``vqs group`` and REST show.

VQS's own consumers use another protocol, with the assignment computed here
(``assigned``: assigned_groups.py), and Kafka's consumer protocol (KIP-848)
a third (``consumer``: consumer_groups.py), both under the same lock: a group
has members of one protocol only, never two (a Kafka join into a group of VQS
or consumer-protocol members is ``inconsistent_protocol``, and the other way
round), and a commit from outside a group is refused while it has members of
any kind.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass, field

from ..errors import ConfigError, FencedMember
from .assigned_groups import AssignedGroups
from .consumer_groups import ConsumerGroups
from .group_wait import GroupWait
from .names import validate_group

logger = logging.getLogger(__name__)

EMPTY, PREPARING, COMPLETING, STABLE = "Empty", "PreparingRebalance", "CompletingRebalance", "Stable"
OK = "ok"
UNKNOWN_MEMBER = "unknown_member"
ILLEGAL_GENERATION = "illegal_generation"
REBALANCING = "rebalance_in_progress"
INCONSISTENT_PROTOCOL = "inconsistent_protocol"
FENCED = "fenced_instance_id"
_SLICE_S = 1.0  # the timer re-reckons at least this often (a clock that jumps, a test's clock)
MAX_PENDING_IDS = 1000  # member ids handed out and not yet joined, per group (the oldest forgotten past it)


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
    synced: bool = False  # has sent its SyncGroup for the generation completing
    busy: int = 0  # its waits pending (alive while waiting)


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
    deadline: float = 0.0  # end of the rebalance under way (joins, then syncs)
    not_before: float = 0.0  # a new group's first rebalance waits this long for more members
    waits: list = field(default_factory=list)  # GroupWaits pending, in arrival order
    static: dict = field(default_factory=dict)  # group_instance_id -> the member id holding it
    pending: dict = field(default_factory=dict)  # member ids handed out, not yet joined -> when forgotten


class GroupCoordinator:
    """All groups of one Broker; thread-safe. ``join``/``sync`` block their thread; ``start_join``/
    ``start_sync`` answer a ``GroupWait`` to wait on without one (module doc)."""

    def __init__(self, clock=time.monotonic, initial_delay_ms: int = 100, partitions=None):
        self._clock = clock
        self._initial_delay_s = initial_delay_ms / 1000
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._groups: dict[str, Group] = {}
        self._waiting: dict[str, Group] = {}  # groups with waits pending: what the timer watches
        self._timer: threading.Thread | None = None
        self._closed = False
        #: VQS consumers' groups (server-side assignment); ``partitions(topic)`` -> partition count
        self.assigned = AssignedGroups(self._changed, clock, partitions or _no_topics, self._has_classic_locked,
                                       lambda: self._closed)
        #: Kafka consumer-protocol (KIP-848) groups, under the same lock (consumer_groups.py)
        self.consumer = ConsumerGroups(partitions or _no_topics, clock=clock, lock=self._lock,
                                       is_classic=lambda g: (self._has_classic_locked(g)
                                                             or self.assigned.has_members_locked(g)))

    def _has_classic_locked(self, group: str) -> bool:
        g = self._groups.get(group)
        return g is not None and bool(g.members)

    def close(self) -> None:
        """Answer every pending wait (as if its rebalance had failed) and stop the timer."""
        with self._lock:
            self._closed = True
            for g in list(self._waiting.values()):
                self._settle_locked(g)
            self._changed.notify_all()
            timer = self._timer
        if timer is not None and timer is not threading.current_thread():
            timer.join(5)

    # ------------------------------------------------------------------ internals
    def _group(self, name: str) -> Group:
        g = self._groups.get(name)
        if g is None:
            validate_group(name)
            g = self._groups[name] = Group(name)
        return g

    def _expire_locked(self, g: Group) -> None:
        now = self._clock()
        if g.pending:
            for mid in [mid for mid, until in g.pending.items() if now > until]:
                del g.pending[mid]
        for m in list(g.members.values()):
            if not m.busy and now - m.last_seen > m.session_timeout_ms / 1000:
                self._remove_locked(g, m.member_id)
        if g.state == PREPARING and (now >= g.deadline or (
                now >= g.not_before and all(m.joined for m in g.members.values()))):
            self._complete_join_locked(g)
        elif g.state in (COMPLETING, STABLE) and now >= g.deadline:
            # as Kafka: who has not synced one rebalance timeout after the joins ended is out, even
            # once the leader's SyncGroup made the group Stable (a member whose client dropped the
            # join's answer would otherwise hold the group until its session ended)
            for m in [m for m in g.members.values() if not m.synced]:
                self._remove_locked(g, m.member_id)

    def _next_expiry_locked(self, g: Group) -> float | None:
        """The earliest moment ``_expire_locked`` would change ``g`` with no call about it."""
        times = [m.last_seen + m.session_timeout_ms / 1000 for m in g.members.values() if not m.busy]
        if g.state in (PREPARING, COMPLETING) or (g.state == STABLE and not all(m.synced for m in g.members.values())):
            times.append(g.deadline)
        if g.state == PREPARING and all(m.joined for m in g.members.values()):
            times.append(g.not_before)
        return min(times, default=None)

    def _remove_locked(self, g: Group, member_id: str) -> None:
        m = g.members.pop(member_id, None)
        if m is not None and m.group_instance_id is not None and g.static.get(m.group_instance_id) == member_id:
            del g.static[m.group_instance_id]
        if g.leader == member_id:
            g.leader = None
        if not g.members:
            g.state, g.leader, g.protocol = EMPTY, None, None
            g.generation += 1
        else:
            self._start_rebalance_locked(g)
        self._settle_locked(g)

    def _start_rebalance_locked(self, g: Group, new_member: bool = False) -> None:
        """The group prepares a rebalance (nothing changes if it already does, except that a
        ``new_member`` joining within a new group's initial delay starts that delay again, up to
        the rebalance deadline: Kafka's InitialDelayedJoin, so members that start one after
        another share the first generation)."""
        if g.state == PREPARING:
            now = self._clock()
            if new_member and g.not_before > now:
                g.not_before = min(now + self._initial_delay_s, g.deadline)
        else:
            if g.state == EMPTY:
                g.not_before = self._clock() + self._initial_delay_s
            g.state = PREPARING
            for m in g.members.values():
                m.joined = False
            g.deadline = self._clock() + max(m.rebalance_timeout_ms for m in g.members.values()) / 1000
            self._settle_locked(g)

    def _complete_join_locked(self, g: Group) -> None:
        for m in [m for m in g.members.values() if not m.joined and m.group_instance_id is None]:
            g.members.pop(m.member_id)  # a static member that did not rejoin stays (module doc)
        if not any(m.joined for m in g.members.values()):
            for mid in list(g.members):
                self._remove_locked(g, mid)
            g.state, g.leader, g.protocol = EMPTY, None, None
            self._settle_locked(g)
            return
        members = list(g.members.values())
        if g.leader not in g.members or not g.members[g.leader].joined:
            g.leader = next(m.member_id for m in members if m.joined)
        g.protocol = self._select_protocol_locked(g)
        g.generation += 1
        g.state = COMPLETING
        now = self._clock()
        g.deadline = now + max(m.rebalance_timeout_ms for m in members) / 1000
        for m in members:
            m.assignment = b""
            m.synced = False
            m.last_seen = now
        self._settle_locked(g)

    def _select_protocol_locked(self, g: Group) -> str:
        """The first protocol of the leader's list that every member lists."""
        members = list(g.members.values())
        common = set.intersection(*({name for name, _ in m.protocols} for m in members))
        leader = g.members.get(g.leader) or members[0]
        return next(name for name, _ in leader.protocols if name in common)

    def _check_member_locked(self, g: Group, member_id: str, instance: str | None) -> str:
        """Kafka's rule for a call naming a member: with an instance id, the member id must be the
        one holding it now (``fenced_instance_id`` if another does); without, one in the group."""
        if instance is not None:
            holder = g.static.get(instance)
            if holder is None:
                return UNKNOWN_MEMBER
            return OK if holder == member_id else FENCED
        return OK if member_id in g.members else UNKNOWN_MEMBER

    def _replace_static_locked(self, g: Group, instance: str, new_id: str) -> Member:
        """Give the slot of static member ``instance`` to ``new_id``; the old id's waits answer
        ``fenced_instance_id``."""
        old_id = g.static[instance]
        m = g.members[old_id]
        now = self._clock()
        fenced = [w for w in g.waits if w.member_id == old_id]
        for w in fenced:
            self._unregister_locked(g, w, now)
        del g.members[old_id]
        m.member_id = new_id
        g.members[new_id] = m
        g.static[instance] = new_id
        if g.leader == old_id:
            g.leader = new_id
        for w in fenced:
            w.complete_locked(w.answer(g))
        return m

    def _compatible_locked(self, g: Group, protocol_type: str, protocols: list, exclude=()) -> bool:
        """May a member with these protocols join ``g`` (besides the members ``exclude`` names)? Not
        when the group has members of another kind, or shares no protocol with its others."""
        if self.assigned.has_members_locked(g.name) or self.consumer.has_members_locked(g.name):
            return False
        names = {name for name, _ in protocols}
        others = [{n for n, _ in m.protocols} for m in g.members.values() if m.member_id not in exclude]
        return bool(names) and not (others and (g.protocol_type != protocol_type
                                                or not names.intersection(*others)))

    def _replace_join_locked(self, g: Group, member_id: str) -> None:
        """The member joins again: its JoinGroup still waiting (if any) is answered
        ``rebalance_in_progress`` now, so one join per member waits (module doc)."""
        old = [w for w in g.waits if w.member_id == member_id and w.join]
        now = self._clock()
        for w in old:
            self._unregister_locked(g, w, now)
            w.complete_locked(JoinResult(REBALANCING, member_id=member_id))

    def _members_locked(self, g: Group) -> list:
        """(member_id, instance_id, metadata of the group's protocol) of every member: the leader's list."""
        return [(x.member_id, x.group_instance_id, dict(x.protocols)[g.protocol]) for x in g.members.values()]

    def _settle_locked(self, g: Group) -> None:
        """Complete every wait of ``g`` that can be answered now (all of them once closed), and
        have the timer re-reckon its next moment."""
        if g.waits:
            now = self._clock()
            for w in [w for w in g.waits if self._closed or w.ready(g)]:
                self._unregister_locked(g, w, now)
                w.complete_locked(w.answer(g))
        if self._timer is not None:
            self._changed.notify_all()

    def _register_locked(self, g: Group, m: Member, ready, answer, join: bool) -> GroupWait:
        w = GroupWait(self._lock, g.name, m.member_id, ready, answer, self._cancel)
        w.join = join
        g.waits.append(w)
        m.busy += 1
        self._waiting[g.name] = g
        if self._timer is None and not self._closed:
            self._timer = threading.Thread(target=self._run_timer, name="vqs-group-timer", daemon=True)
            self._timer.start()
        return w

    def _unregister_locked(self, g: Group, w: GroupWait, now: float) -> None:
        g.waits.remove(w)
        if not g.waits:
            self._waiting.pop(g.name, None)
        m = g.members.get(w.member_id)
        if m is not None:
            m.busy -= 1
            m.last_seen = now

    def _cancel(self, w: GroupWait) -> None:
        with self._lock:
            g = self._groups.get(w.group)
            if w.done or g is None or w not in g.waits:
                return
            self._unregister_locked(g, w, self._clock())
            w.complete_locked(None)
            if w.member_id in g.members:
                logger.info("group %s: member %s left: its waiting request was withdrawn (its client went away)",
                            g.name, w.member_id)
                self._remove_locked(g, w.member_id)
                self._expire_locked(g)  # the others may all be in now

    def _run_timer(self) -> None:
        """The one thread that does what only time changes, for every group with waits."""
        with self._lock:
            while self._waiting and not self._closed:
                for g in list(self._waiting.values()):
                    self._expire_locked(g)
                due = [t for t in map(self._next_expiry_locked, self._waiting.values()) if t is not None]
                left = min(due, default=self._clock() + _SLICE_S) - self._clock()
                # expiry is strictly after a session's end: wake just past it
                self._changed.wait(min(_SLICE_S, max(left, 0) + 0.001))
            self._timer = None

    # ------------------------------------------------------------------ the protocol
    def join(self, group: str, member_id: str, **kw) -> JoinResult:
        """``start_join``, waited for in this thread."""
        return self.start_join(group, member_id, **kw).wait()

    def start_join(self, group: str, member_id: str, *, client_id: str = "", client_host: str = "",
                   protocol_type: str = "consumer", protocols: list, session_timeout_ms: int = 45_000,
                   rebalance_timeout_ms: int | None = None, group_instance_id: str | None = None) -> GroupWait:
        """Join (or rejoin) ``group``; the wait's result is a ``JoinResult`` once the rebalance
        completes (module doc)."""
        with self._lock:
            g = self._group(group)
            self._expire_locked(g)

            def refused(status: str) -> GroupWait:
                return GroupWait.answered(self._lock, group, member_id, JoinResult(status, member_id=member_id))

            def now_in_force(leader: str | None, members: list) -> GroupWait:
                return GroupWait.answered(self._lock, group, member_id, JoinResult(
                    OK, g.generation, g.protocol, leader or "", member_id, members))

            instance = group_instance_id or None
            # an id new_member_id handed out: this join makes it a member
            adopted = (bool(member_id) and instance is None and member_id not in g.members
                       and member_id in g.pending)
            if member_id and not adopted:
                status = self._check_member_locked(g, member_id, instance)
                if status != OK:
                    return refused(status)
            replacing = g.static.get(instance) if instance is not None and not member_id else None
            if not self._compatible_locked(g, protocol_type, protocols, (member_id, replacing)):
                return refused(INCONSISTENT_PROTOCOL)
            m = g.members.get(member_id) if member_id else None
            if m is not None and list(protocols) == m.protocols and (
                    g.state == COMPLETING or (g.state == STABLE and g.leader != member_id)):
                # as Kafka: a rejoin that changes nothing gets the generation in force back
                m.last_seen = self._clock()
                return now_in_force(g.leader, self._members_locked(g) if g.leader == member_id else [])
            if not member_id:
                member_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            if replacing is not None:
                leader_before = g.leader
                m = self._replace_static_locked(g, instance, member_id)
                m.client_id, m.client_host = client_id, client_host
            new = m is None
            if new:
                g.pending.pop(member_id, None)
                m = g.members[member_id] = Member(member_id, client_id, client_host, session_timeout_ms,
                                                  rebalance_timeout_ms or session_timeout_ms, list(protocols),
                                                  instance)
                if instance is not None:
                    g.static[instance] = member_id
            else:
                self._replace_join_locked(g, member_id)
                m.protocols = list(protocols)
                m.session_timeout_ms = session_timeout_ms
                m.rebalance_timeout_ms = rebalance_timeout_ms or session_timeout_ms
            g.protocol_type = protocol_type
            m.last_seen = self._clock()
            if replacing is not None and g.state == STABLE and self._select_protocol_locked(g) == g.protocol:
                # a static member back (module doc): no rebalance; the leader as it was, so the
                # returning member computes no assignment
                self._settle_locked(g)
                return now_in_force(leader_before, [])
            self._start_rebalance_locked(g, new_member=new)
            m.joined = True
            gen = g.generation

            def answer(g: Group) -> JoinResult:
                if instance is not None and g.static.get(instance) not in (None, member_id):
                    return JoinResult(FENCED, member_id=member_id)
                if member_id not in g.members or g.generation == gen:
                    return JoinResult(UNKNOWN_MEMBER, member_id=member_id)
                members = self._members_locked(g) if g.leader == member_id else []
                return JoinResult(OK, g.generation, g.protocol, g.leader, member_id, members)

            w = self._register_locked(g, m, lambda g: g.state != PREPARING or member_id not in g.members, answer,
                                      join=True)
            self._expire_locked(g)
            self._settle_locked(g)  # (answered at once after close)
            return w

    def new_member_id(self, group: str, *, client_id: str = "", protocol_type: str = "consumer",
                      protocols: list, session_timeout_ms: int = 45_000) -> tuple[str, str]:
        """(status, member id) for a client that asked to join ``group`` without one (Kafka's
        MEMBER_ID_REQUIRED; ``inconsistent_protocol`` and no id when it could not join, as
        ``start_join`` would answer): the id is pending until a join names it, forgotten after the
        session timeout (or as the oldest of more than ``MAX_PENDING_IDS``); it holds no
        rebalance (module doc)."""
        with self._lock:
            g = self._group(group)
            self._expire_locked(g)
            if not self._compatible_locked(g, protocol_type, protocols):
                return INCONSISTENT_PROTOCOL, ""
            member_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            g.pending[member_id] = self._clock() + session_timeout_ms / 1000
            while len(g.pending) > MAX_PENDING_IDS:
                del g.pending[next(iter(g.pending))]
            return OK, member_id

    def sync(self, group: str, generation: int, member_id: str, assignments: dict,
             group_instance_id: str | None = None) -> tuple[str, bytes]:
        """``start_sync``, waited for in this thread."""
        return self.start_sync(group, generation, member_id, assignments, group_instance_id).wait()

    def start_sync(self, group: str, generation: int, member_id: str, assignments: dict,
                   group_instance_id: str | None = None) -> GroupWait:
        """The leader hands in ``{member_id: assignment bytes}``; every member's wait gets
        ``(status, its own assignment)``."""
        instance = group_instance_id or None
        with self._lock:
            g = self._group(group)
            self._expire_locked(g)
            m = g.members.get(member_id)

            def refused(status: str) -> GroupWait:
                return GroupWait.answered(self._lock, group, member_id, (status, b""))

            status = self._check_member_locked(g, member_id, instance)
            if status != OK:
                return refused(status)
            if generation != g.generation:
                return refused(ILLEGAL_GENERATION)
            if g.state == PREPARING:
                return refused(REBALANCING)
            m.last_seen = self._clock()
            m.synced = True

            def answer(g: Group) -> tuple[str, bytes]:
                if member_id not in g.members:
                    return self._check_member_locked(g, member_id, instance), b""
                if g.generation != generation or g.state != STABLE:
                    return REBALANCING, b""
                return OK, g.members[member_id].assignment

            w = self._register_locked(g, m, lambda g: g.state != COMPLETING or g.generation != generation, answer,
                                      join=False)
            if g.state == COMPLETING and member_id == g.leader:
                for mid, data in assignments.items():
                    if mid in g.members:
                        g.members[mid].assignment = data
                g.state = STABLE
            self._settle_locked(g)
            return w

    def heartbeat(self, group: str, generation: int, member_id: str, group_instance_id: str | None = None) -> str:
        with self._lock:
            g = self._group(group)
            self._expire_locked(g)
            status = self._check_member_locked(g, member_id, group_instance_id or None)
            if status != OK:
                return status
            m = g.members[member_id]
            m.last_seen = self._clock()
            if g.state == PREPARING:
                return REBALANCING
            if generation != g.generation:
                return ILLEGAL_GENERATION
            return OK

    def leave(self, group: str, member_id: str, group_instance_id: str | None = None) -> str:
        """``member_id`` leaves; a static member may be named by its instance id alone (member id
        empty), as Kafka's LeaveGroup v3 and admin clients do."""
        with self._lock:
            g = self._group(group)
            instance = group_instance_id or None
            if instance is not None and not member_id:
                member_id = g.static.get(instance, "")
            status = self._check_member_locked(g, member_id, instance)
            if status != OK:
                return status
            self._remove_locked(g, member_id)
            return OK

    def check_commit(self, group: str, generation: int, member_id: str, group_instance_id: str | None = None) -> str:
        """May this member commit offsets now? A negative generation is a consumer outside group
        management (an admin, or a consumer that assigns its own partitions; a new-protocol
        client sends its own member id with it): allowed while the group has no members, whatever
        member id it names, as Kafka's empty-group rule; with members, and naming none, it is
        ``UNKNOWN_MEMBER``, as Kafka answers it. A member of the
        generation in force may commit while the group waits for joins, not while it waits for
        the leader's SyncGroup (module doc; Kafka's rule)."""
        instance = group_instance_id or None
        with self._lock:
            g = self._group(group)
            self._expire_locked(g)
            if generation < 0 and not (g.members or self.assigned.has_members_locked(group)
                                       or self.consumer.has_members_locked(group)):
                return OK
            if generation < 0 and not member_id and instance is None:
                return UNKNOWN_MEMBER  # (Kafka's answer to an outside commit to a group with members)
            status = self._check_member_locked(g, member_id, instance)
            if status != OK:
                return status
            m = g.members[member_id]
            if generation != g.generation:
                return ILLEGAL_GENERATION
            if g.state == COMPLETING:
                return REBALANCING
            m.last_seen = self._clock()
            return OK

    def forget(self, group: str) -> bool:
        """Drop ``group``'s record if it has no members (Kafka's DeleteGroups: the group is Dead
        from now, as if it never had members; a join starts it anew). True if it was known;
        False if unknown or if members joined meanwhile (it stays)."""
        with self._lock:
            g = self._groups.get(group)
            if g is None:
                return False
            self._expire_locked(g)
            if g.members or g.waits:
                return False
            del self._groups[group]
            return True

    def describe(self, group: str) -> dict:
        """State, protocol and members (with their metadata and assignment bytes)."""
        cp = self.consumer.describe(group)
        if cp is not None:  # consumer-protocol members: their assignor as the protocol, no metadata
            return {"state": cp["state"], "generation": cp["epoch"], "protocol_type": "consumer",
                    "protocol": cp["assignor"], "members": [
                        (m["member_id"], m["instance_id"], m["client_id"], m["client_host"], b"", b"")
                        for m in cp["members"]]}
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
            if self.consumer.has_members_locked(group):
                raise FencedMember(f"group {group!r} has Kafka consumer-protocol members: a consumer "
                                   "outside the group may not commit while it has")
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
                    + [(name, "vqs") for name in self.assigned.groups_locked()]
                    + [(name, "consumer") for name in self.consumer.groups_locked()])


def _no_topics(topic: str) -> int:
    raise ConfigError(f"this group coordinator has no broker: it cannot look up topic {topic!r}")
