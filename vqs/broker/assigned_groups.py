"""VQS consumer groups: membership with the assignment computed by the broker (as Kafka's KIP-848).

The protocol (the embedded Consumer calls it in-process; ``vqs.Client`` over
``POST /groups/{g}/members``, ``.../heartbeat`` and ``DELETE``):

- ``join(group, topics)``: a new member; answers an ``Assignment``: its member
  id, the generation, the partitions it may read now, and whether more is to
  come (``pending``);
- ``heartbeat(group, member, generation, owned)``: the member says which
  partitions it holds after acting on the answer of ``generation``; the answer
  is what it may hold now. A partition missing from the answer is revoked:
  the member commits what it consumed of it, drops it, and reports so at
  once (the embedded consumer does both in the same ``poll``);
- ``leave(group, member)``: its partitions are free at once;
- ``check_commit(group, member, generation, partitions)``: may it commit?

Invariants (under the coordinator's lock, whose Condition is ``changed``):

- the group's target assignment (assignor.py: balanced, sticky) is
  recomputed, and the group's generation goes up, whenever a member joins,
  leaves or expires, or a subscribed topic's partition count changes;
- no partition is granted to two members at once: a member is granted a
  partition of its target only while no other member owns it, and it owns
  what it was granted until it reports (answering its latest generation) that
  it let it go, or it leaves or expires. So a partition moves only after its
  previous owner committed and let go (or is gone), and its next owner starts
  at the committed offset: exactly once while nothing fails, at least once
  when a member dies (what it read but did not commit is read again);
- a member not heard from for ``session_timeout_ms`` is removed by the next
  call about its group, and its partitions are free;
- a commit is accepted only from a current member, naming its latest
  generation and only partitions it owns (FencedMember otherwise): a removed
  or stale member never commits over a partition's next owner; while a group
  has members, a consumer outside it may not commit (as Kafka refuses a
  simple consumer's commit to an active group);
- a group has these members or Kafka-protocol members (coordinator.py),
  never both: the other kind is refused (InconsistentGroupProtocol).

Memory only, as coordinator.py: after a broker restart members are unknown
(FencedMember) and rejoin; committed offsets are the group offsets on disk.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..errors import ConfigError, FencedMember, InconsistentGroupProtocol, VQSError
from .assignor import assign
from .names import validate_name
from .topic import TopicPartition

logger = logging.getLogger(__name__)

PROTOCOL_TYPE = "vqs"
_MAX_HEARTBEAT_MS = 3000
MIN_SESSION_MS, MAX_SESSION_MS = 100, 3_600_000


def heartbeat_interval_ms(session_timeout_ms: int) -> int:
    """How often a member should heartbeat: a third of its session, at most 3 s."""
    return max(10, min(_MAX_HEARTBEAT_MS, session_timeout_ms // 3))


@dataclass(frozen=True)
class Assignment:
    """One answer to a member: the partitions it may read now, in its ``generation``."""

    group: str
    member_id: str
    generation: int
    partitions: tuple  # TopicPartitions, sorted
    pending: bool  # partitions still to move (to or from this member): heartbeat again soon
    heartbeat_interval_ms: int

    def to_json(self) -> dict:
        return {"group": self.group, "member_id": self.member_id, "generation": self.generation,
                "assignment": [{"topic": t, "partition": p} for t, p in self.partitions],
                "pending": self.pending, "heartbeat_interval_ms": self.heartbeat_interval_ms}


@dataclass
class _Member:
    member_id: str
    client_id: str
    client_host: str
    topics: tuple
    session_timeout_ms: int
    last_seen: float
    owned: set = field(default_factory=set)
    epoch: int = -1  # the generation of its latest answer
    wake: Callable[[], None] | None = None


@dataclass
class _Group:
    name: str
    generation: int = 0
    members: dict = field(default_factory=dict)
    target: dict = field(default_factory=dict)  # member id -> frozenset of TopicPartitions
    counts: dict = field(default_factory=dict)  # topic -> partition count the target was computed for


def _check_session(ms) -> int:
    if not isinstance(ms, int) or isinstance(ms, bool) or not MIN_SESSION_MS <= ms <= MAX_SESSION_MS:
        raise ConfigError(f"session_timeout_ms must be an integer in {MIN_SESSION_MS}..{MAX_SESSION_MS}, "
                          f"not {ms!r}")
    return ms


class AssignedGroups:
    """The VQS-protocol groups of one GroupCoordinator (it makes this; same lock)."""

    def __init__(self, changed: threading.Condition, clock: Callable[[], float],
                 partitions: Callable[[str], int], classic_members: Callable[[str], bool],
                 closed: Callable[[], bool] = lambda: False):
        self._changed = changed
        self._closed = closed  # the coordinator closed: waits end
        self._clock = clock
        self._partitions = partitions  # topic -> partition count; raises TopicDoesNotExist
        self._classic = classic_members  # group -> has Kafka-protocol members (lock held)
        self._groups: dict[str, _Group] = {}

    # ------------------------------------------------------------------ internals (lock held)
    def _count(self, topic: str) -> int:
        try:
            return self._partitions(topic)
        except VQSError:  # deleted since: nothing of it to assign
            return 0

    def _rebalance_locked(self, g: _Group) -> None:
        g.counts = {t: self._count(t) for m in g.members.values() for t in m.topics}
        target = assign({mid: m.topics for mid, m in g.members.items()}, g.counts,
                        {mid: g.target.get(mid, ()) for mid in g.members})
        g.target = {mid: frozenset(tps) for mid, tps in target.items()}
        g.generation += 1
        self._notify_locked(g)

    def _notify_locked(self, g: _Group) -> None:
        for m in g.members.values():
            if m.wake is not None:
                m.wake()
        self._changed.notify_all()

    def _expire_locked(self, g: _Group) -> None:
        now = self._clock()
        gone = [m for m in g.members.values() if now - m.last_seen > m.session_timeout_ms / 1000]
        for m in gone:
            del g.members[m.member_id]
            logger.info("group %s: member %s missed its session timeout (%d ms); its partitions move",
                        g.name, m.member_id, m.session_timeout_ms)
        if gone or any(self._count(t) != n for t, n in g.counts.items()):
            self._settle_locked(g)

    def _settle_locked(self, g: _Group) -> None:
        if g.members:
            self._rebalance_locked(g)
        else:
            self._groups.pop(g.name, None)
            self._changed.notify_all()

    def _group_locked(self, group: str) -> _Group | None:
        g = self._groups.get(group)
        if g is not None:
            self._expire_locked(g)
            if not g.members:
                return None
        return g

    def _member_locked(self, group: str, member_id: str) -> tuple[_Group, _Member]:
        g = self._group_locked(group)
        m = g.members.get(member_id) if g is not None else None
        if m is None:
            raise FencedMember(f"member {member_id!r} is not in group {group!r} (its session expired, it left, "
                               "or the server restarted): join again")
        return g, m

    def _answer_locked(self, g: _Group, m: _Member) -> Assignment:
        target = g.target.get(m.member_id, frozenset())
        others = set().union(*(x.owned for x in g.members.values() if x is not m))
        grant = {tp for tp in target if tp in m.owned or tp not in others}
        m.owned |= grant
        m.epoch = g.generation
        return Assignment(g.name, m.member_id, g.generation, tuple(sorted(grant)),
                          grant != target or m.owned != grant, heartbeat_interval_ms(m.session_timeout_ms))

    # ------------------------------------------------------------------ the protocol
    def has_members_locked(self, group: str) -> bool:
        return self._group_locked(group) is not None

    def join(self, group: str, topics: Iterable[str], *, session_timeout_ms: int, client_id: str = "",
             client_host: str = "", wake: Callable[[], None] | None = None) -> Assignment:
        """A new member of ``group`` reading ``topics``; ``wake`` (called under the lock, so it
        must only set a flag or an event) tells an in-process member to heartbeat now."""
        validate_name(group, "group")
        topics = tuple(dict.fromkeys([topics] if isinstance(topics, str) else topics))
        if not topics:
            raise ConfigError(f"a member of group {group!r} must subscribe to at least one topic")
        _check_session(session_timeout_ms)
        for t in topics:
            self._partitions(t)  # TopicDoesNotExist for a topic that is not there
        with self._changed:
            if self._classic(group):
                raise InconsistentGroupProtocol(
                    f"group {group!r} has Kafka-protocol members (JoinGroup): a VQS consumer cannot join it; "
                    "use another group id, or stop the Kafka consumers first")
            g = self._group_locked(group) or self._groups.setdefault(group, _Group(group))
            mid = f"{client_id or 'vqs'}-{uuid.uuid4()}"
            m = g.members[mid] = _Member(mid, client_id, client_host, topics, session_timeout_ms,
                                         self._clock(), wake=wake)
            self._rebalance_locked(g)
            return self._answer_locked(g, m)

    def heartbeat(self, group: str, member_id: str, generation: int, owned: Iterable | None = None,
                  wait_s: float = 0.0) -> Assignment:
        """The member holds ``owned`` having acted on the answer of ``generation``; its new answer.
        With ``wait_s``, waits up to that long (at most half the session) for an answer that
        differs from ``owned``. Raises FencedMember if it is no longer a member."""
        with self._changed:
            g, m = self._member_locked(group, member_id)
            reported = None if owned is None else {TopicPartition(*tp) for tp in owned}
            if reported is not None and generation == m.epoch and not m.owned <= reported:
                m.owned &= reported  # it let these go: others may take them now
                self._notify_locked(g)
            m.last_seen = self._clock()
            answer = self._answer_locked(g, m)
            deadline = self._clock() + min(wait_s, m.session_timeout_ms / 2000)
            while reported is not None and set(answer.partitions) == reported:
                now = self._clock()
                left = deadline - now
                if left <= 0 or self._closed():
                    break
                # no one is told when a session lapses: wake when the next one does
                lapse = min(x.last_seen + x.session_timeout_ms / 1000 for x in g.members.values()) - now
                self._changed.wait(max(0.001, min(left, lapse + 0.001)))
                g, m = self._member_locked(group, member_id)
                m.last_seen = self._clock()
                answer = self._answer_locked(g, m)
            return answer

    def watch(self, group: str, member_id: str, wake: Callable[[], None], wait_s: float) -> float:
        """Have ``wake()`` called (from the changing thread, lock held: it must only hand over)
        whenever the member's group changes, until ``unwatch``; returns how long a heartbeat
        may wait (``wait_s``, at most half the session). For a caller that waits without a
        thread: it heartbeats with no wait, and again after each wake-up or a slice of at most
        a second (a lapsed session is noticed by a heartbeat, not announced). Raises
        FencedMember if it is no longer a member."""
        with self._changed:
            g, m = self._member_locked(group, member_id)
            m.wake = wake
            return min(wait_s, m.session_timeout_ms / 2000)

    def unwatch(self, group: str, member_id: str, wake: Callable[[], None]) -> None:
        """Undo ``watch`` (nothing if the member left or another watch replaced it)."""
        with self._changed:
            g = self._groups.get(group)
            m = None if g is None else g.members.get(member_id)
            if m is not None and m.wake is wake:
                m.wake = None

    def leave(self, group: str, member_id: str) -> None:
        """Remove the member; its partitions are free at once. FencedMember if it is not one."""
        with self._changed:
            g, m = self._member_locked(group, member_id)
            del g.members[member_id]
            self._settle_locked(g)

    def check_commit(self, group: str, member_id: str | None, generation: int, partitions: Iterable) -> None:
        """Raise FencedMember unless this commit may go ahead (module doc); ``member_id`` None is a
        consumer outside the group."""
        with self._changed:
            if member_id is None:
                g = self._group_locked(group)
                if g is not None:
                    raise FencedMember(f"group {group!r} has {len(g.members)} member(s): a consumer outside "
                                       "the group may not commit while it has (commit as a member, or after "
                                       "they leave)")
                return
            g, m = self._member_locked(group, member_id)
            if generation != m.epoch:
                raise FencedMember(f"member {member_id!r} of group {group!r}: generation {generation} is stale "
                                   f"(its latest is {m.epoch}); nothing was committed")
            foreign = sorted(tp for tp in {TopicPartition(*tp) for tp in partitions} if tp not in m.owned)
            if foreign:
                names = ", ".join(f"{t}[{p}]" for t, p in foreign[:5])
                raise FencedMember(f"member {member_id!r} of group {group!r} does not own {names}; "
                                   "nothing was committed")
            m.last_seen = self._clock()

    def describe(self, group: str) -> dict | None:
        """None for a group without VQS members; else its generation, state and members."""
        with self._changed:
            g = self._group_locked(group)
            if g is None:
                return None
            settled = all(m.owned == g.target.get(m.member_id, frozenset()) for m in g.members.values())
            return {"state": "Stable" if settled else "Reconciling", "generation": g.generation,
                    "protocol_type": PROTOCOL_TYPE, "protocol": "sticky",
                    "members": [{"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                                 "topics": list(m.topics), "session_timeout_ms": m.session_timeout_ms,
                                 "assignment": [{"topic": t, "partition": p} for t, p in sorted(m.owned)]}
                                for m in g.members.values()]}

    def groups_locked(self) -> list[str]:
        return [name for name in list(self._groups) if self._group_locked(name) is not None]
