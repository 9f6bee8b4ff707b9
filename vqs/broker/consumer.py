"""Consumer: reads topic partitions by offset; optionally commits them for a group.

A consumer has an assignment (a list of topic-partitions) and a position in
each: the offset of the next record ``poll`` returns. A position starts at the
group's committed offset, else at ``auto_offset_reset`` ("earliest": the start
offset, "latest": the end offset). ``poll`` advances positions past what it
returns; ``commit`` stores them for the group.

A consumer made with ``topics`` and ``group`` is a member of the group
(assigned_groups.py): the broker divides the topics' partitions among the
group's members and moves them as members come and go. Its assignment
changes only inside ``poll`` and ``commit`` (on the consumer's thread), where
it also heartbeats: a member that calls neither for ``session_timeout_ms`` is
removed and its partitions move. Before it gives a partition up it commits
its position there (what ``poll`` returned: the records a poll loop has
handled by the time it polls again), so the next owner goes on from there.
A consumer given partitions (``assign``) is no member: it reads exactly
those, as before.

A Consumer belongs to one thread at a time (like Kafka's); ``close`` may be
called from another thread and wakes a waiting ``poll``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..errors import ConfigError, FencedMember, LogClosedError, OffsetOutOfRange
from .topic import ConsumerRecord, TopicPartition, wrap_records

if TYPE_CHECKING:  # pragma: no cover
    from .assigned_groups import Assignment
    from .broker import Broker
    from .group_offsets import GroupOffsets

RESETS = ("earliest", "latest")
_CLOSE_CHECK_S = 1.0


def _tp(tp) -> TopicPartition:
    try:
        topic, partition = tp
    except (TypeError, ValueError):
        raise TypeError(f"expected a (topic, partition) pair, not {tp!r}") from None
    if not isinstance(partition, int) or isinstance(partition, bool):
        raise TypeError(f"partition must be an int, not {partition!r}")
    return TopicPartition(topic, partition)


class Consumer:
    """Reads records from a Broker's topics. Get one with ``broker.consumer(...)``.

    ``group_offsets`` is the committed-offset store of ``group`` (the Broker
    passes its GroupOffsets); it is required with ``group``.
    """

    def __init__(
        self,
        broker: Broker,
        topics=None,
        group: str | None = None,
        *,
        group_offsets: GroupOffsets | None = None,
        auto_offset_reset: str = "earliest",
        reset_out_of_range: bool = False,
        max_partition_bytes: int = 1 << 20,
        session_timeout_ms: int = 30_000,
    ):
        if auto_offset_reset not in RESETS:
            raise ConfigError(f"auto_offset_reset must be 'earliest' or 'latest', not {auto_offset_reset!r}")
        if group is not None and group_offsets is None:
            raise ConfigError(
                f"a consumer of group {group!r} needs the group's offsets store: use broker.consumer(..., group=)"
            )
        self._broker = broker
        self.group = group
        self._group = group_offsets if group is not None else None
        self.auto_offset_reset = auto_offset_reset
        self.reset_out_of_range = reset_out_of_range
        self.max_partition_bytes = max_partition_bytes
        self._assignment: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int] = {}
        self._rotation = 0
        self._event = threading.Event()
        self._closed = False
        self.session_timeout_ms = session_timeout_ms
        self._topics: list[str] = []  # a member's subscription
        self._member: Assignment | None = None
        self._heartbeat_due = 0.0
        self._woken = False  # set by the coordinator (another thread): heartbeat now
        if topics is not None:
            self.subscribe(topics)

    def __repr__(self) -> str:
        return f"Consumer(group={self.group!r}, assignment={self._assignment!r})"

    # -- assignment ------------------------------------------------------------------------
    def subscribe(self, topics) -> None:
        """Read ``topics`` (a name or a list of names): with a group, as a member of it (the
        broker assigns the partitions; module doc); without one, every partition of them."""
        if isinstance(topics, str):
            topics = [topics]
        self._check_open()
        if self.group is not None:
            self._leave()
            self._topics = list(topics)
            self._join()
            return
        tps = []
        for name in topics:
            t = self._broker.topic(name)
            tps.extend(TopicPartition(t.name, p) for p in range(t.partitions))
        self.assign(tps)

    def assign(self, partitions: Iterable) -> None:
        """Read exactly these (topic, partition) pairs; replaces the assignment (and leaves
        the group, for a member: an assigned consumer is no member).

        Positions of partitions kept from the previous assignment are kept.
        """
        self._check_open()
        self._leave()
        tps = []
        for tp in partitions:
            tp = _tp(tp)
            self._broker.topic(tp.topic).log(tp.partition)  # validates both
            if tp not in tps:
                tps.append(tp)
        self._assignment = tps
        self._positions = {tp: off for tp, off in self._positions.items() if tp in tps}

    def assignment(self) -> list[TopicPartition]:
        return list(self._assignment)

    # -- membership ------------------------------------------------------------------------
    @property
    def member_id(self) -> str | None:
        """This consumer's member id in its group, or None (not a member)."""
        return self._member.member_id if self._member is not None else None

    @property
    def generation(self) -> int:
        """The group generation of this member's latest assignment (-1: not a member)."""
        return self._member.generation if self._member is not None else -1

    def _wake(self) -> None:  # the coordinator, under its lock: heartbeat at the next chance
        self._woken = True
        self._event.set()

    def _join(self) -> None:
        self._check_open()
        a = self._broker.coordinator.assigned.join(self.group, self._topics, client_id="vqs-embedded",
                                                   session_timeout_ms=self.session_timeout_ms, wake=self._wake)
        self._member = a
        self._apply(a)

    def _leave(self) -> None:
        a, self._member = self._member, None
        if a is not None and not self._broker.closed:
            try:
                self._broker.coordinator.assigned.leave(self.group, a.member_id)
            except FencedMember:
                pass  # already removed: nothing to give up
        self._topics = []

    def _heartbeat(self, force: bool = False) -> None:
        """Heartbeat if due (or ``force``); act on the answer: give up revoked partitions
        (commit, drop, report), take new ones. Rejoins if the member was removed."""
        a = self._member
        if a is None or (not force and not self._woken and time.monotonic() < self._heartbeat_due):
            return
        self._woken = False  # before asking: a wake during the call is kept for the next
        try:
            a = self._broker.coordinator.assigned.heartbeat(self.group, a.member_id, a.generation,
                                                            self._assignment)
            self._member = a
            self._apply(a)
        except FencedMember:  # removed (session expired): what it read uncommitted is read again
            self._check_open()
            self._member, self._assignment, self._positions = None, [], {}
            self._join()

    def _apply(self, a: Assignment) -> None:
        for attempt in range(10):  # a revocation is reported at once; the answer may change again
            new = list(a.partitions)
            keep = set(new)
            revoked = [tp for tp in self._assignment if tp not in keep]
            done = {tp: self._positions[tp] for tp in revoked if tp in self._positions}
            if done:  # commit what was consumed before letting go
                try:
                    self._commit_checked(done, a)
                except FencedMember:
                    pass  # moved on already: the next owner re-reads from the last commit
            self._assignment = new
            self._positions = {tp: off for tp, off in self._positions.items() if tp in keep}
            if not revoked or attempt == 9:
                break
            a = self._member = self._broker.coordinator.assigned.heartbeat(self.group, a.member_id, a.generation,
                                                                           new)
        interval = a.heartbeat_interval_ms / 1000
        self._heartbeat_due = time.monotonic() + (min(interval, 0.05) if a.pending else interval)

    def _commit_checked(self, offsets: dict, a: Assignment | None) -> None:
        coordinator = self._broker.coordinator
        if a is None:
            coordinator.check_outside_commit(self.group)
        else:
            coordinator.assigned.check_commit(self.group, a.member_id, a.generation, offsets)
        self._group.commit(offsets)

    def _assigned(self, tp) -> TopicPartition:
        tp = _tp(tp)
        if tp not in self._assignment:
            raise ConfigError(f"{tp.topic}[{tp.partition}] is not assigned to this consumer")
        return tp

    def _tps(self, partitions) -> list[TopicPartition]:
        if partitions is None:
            return list(self._assignment)
        return [self._assigned(tp) for tp in partitions]

    # -- positions -------------------------------------------------------------------------
    def _log(self, tp: TopicPartition):
        return self._broker.topic(tp.topic).log(tp.partition)

    def _reset_offset(self, tp: TopicPartition, log=None) -> int:
        log = log or self._log(tp)
        return log.start_offset if self.auto_offset_reset == "earliest" else log.end_offset

    def _position(self, tp: TopicPartition) -> int:
        pos = self._positions.get(tp)
        if pos is None:
            committed = self._group.get(tp.topic, tp.partition) if self._group else None
            pos = committed if committed is not None else self._reset_offset(tp)
            self._positions[tp] = pos
        return pos

    def position(self, tp) -> int:
        """The offset of the next record ``poll`` will return from ``tp``."""
        self._check_open()
        return self._position(self._assigned(tp))

    def seek(self, tp, offset: int) -> None:
        """Make ``offset`` the next offset read from ``tp`` (checked when read)."""
        self._check_open()
        tp = self._assigned(tp)
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ConfigError(f"seek offset must be an integer >= 0, not {offset!r}")
        self._positions[tp] = offset

    def seek_to_beginning(self, partitions=None) -> None:
        """Move to the start offset of ``partitions`` (default: all assigned)."""
        self._check_open()
        for tp in self._tps(partitions):
            self._positions[tp] = self._log(tp).start_offset

    def seek_to_end(self, partitions=None) -> None:
        """Move to the end offset of ``partitions`` (default: all assigned): only new records."""
        self._check_open()
        for tp in self._tps(partitions):
            self._positions[tp] = self._log(tp).end_offset

    def seek_to_timestamp(self, timestamp_ms: int, partitions=None) -> None:
        """Move to the first record with timestamp >= ``timestamp_ms`` (or to the end)."""
        self._check_open()
        for tp in self._tps(partitions):
            log = self._log(tp)
            off = log.offset_for_time(timestamp_ms)
            self._positions[tp] = log.end_offset if off is None else off

    def beginning_offsets(self, partitions=None) -> dict[TopicPartition, int]:
        return {tp: self._log(tp).start_offset for tp in self._tps(partitions)}

    def end_offsets(self, partitions=None) -> dict[TopicPartition, int]:
        return {tp: self._log(tp).end_offset for tp in self._tps(partitions)}

    def lag(self, partitions=None) -> dict[TopicPartition, int]:
        """Records between the position and the end offset, per partition."""
        self._check_open()
        return {tp: max(0, self._log(tp).end_offset - self._position(tp)) for tp in self._tps(partitions)}

    # -- poll --------------------------------------------------------------------------------
    def poll(self, max_records: int = 500, timeout: float = 0.0) -> list[ConsumerRecord]:
        """Return up to ``max_records`` records from the assigned partitions.

        Returns as soon as any record is available; if none is, waits up to
        ``timeout`` seconds for one (woken by the append, not by polling) and
        returns ``[]`` on timeout. Partitions are served fairly: each call
        starts at the next partition, and records are shared out evenly among
        the partitions that have some.

        Raises OffsetOutOfRange if a position is below the partition's start
        offset (deleted by retention) or above its end offset, unless the
        consumer was made with ``reset_out_of_range=True`` (then the position
        moves per ``auto_offset_reset``). Nothing is consumed by a raising poll.
        """
        self._check_open()
        if not isinstance(max_records, int) or max_records < 1:
            raise ConfigError(f"max_records must be an integer >= 1, not {max_records!r}")
        if self._member is not None:
            return self._poll_member(max_records, timeout)
        records = self._fetch(max_records)
        if records or not timeout or timeout <= 0 or not self._assignment:
            return records
        deadline = time.monotonic() + timeout
        if len(self._assignment) == 1:
            # One partition: the log's own long poll (woken by any append to it),
            # in slices of at most a second so that close() from another thread is seen.
            tp = self._assignment[0]
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                self._log(tp).wait_for(self._position(tp), min(remaining, _CLOSE_CHECK_S))
                self._check_open()
                records = self._fetch(max_records)
                if records:
                    return records
        # Several partitions: producers notify each topic's waiters after an append.
        topics = [self._broker.topic(name) for name in dict.fromkeys(tp.topic for tp in self._assignment)]
        event = self._event
        for t in topics:
            t.add_waiter(event)
        try:
            while True:
                event.clear()
                records = self._fetch(max_records)  # after clear(): no append is missed
                if records:
                    return records
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                event.wait(remaining)
                self._check_open()
        finally:
            for t in topics:
                t.remove_waiter(event)

    def _poll_member(self, max_records: int, timeout: float) -> list[ConsumerRecord]:
        """``poll`` of a member: heartbeats when due or woken by the coordinator, waits on
        its topics' appends and on the coordinator at once (the consumer's event)."""
        self._heartbeat()
        records = self._fetch(max_records)
        if records or not timeout or timeout <= 0:
            return records
        deadline = time.monotonic() + timeout
        topics = [self._broker.topic(name) for name in self._topics]
        event = self._event
        for t in topics:
            t.add_waiter(event)
        try:
            while True:
                event.clear()
                self._heartbeat()
                records = self._fetch(max_records)  # after clear(): no append is missed
                if records:
                    return records
                now = time.monotonic()
                if now >= deadline:
                    return []
                if not self._woken:
                    event.wait(max(0.001, min(deadline, self._heartbeat_due) - now))
                self._check_open()
        finally:
            for t in topics:
                t.remove_waiter(event)

    def _fetch(self, max_records: int) -> list[ConsumerRecord]:
        tps = self._assignment
        n = len(tps)
        if not n:
            return []
        start = self._rotation % n
        self._rotation += 1
        active = tps[start:] + tps[:start]
        new_pos: dict[TopicPartition, int] = {}
        out: list[ConsumerRecord] = []
        remaining = max_records
        while remaining > 0 and active:
            share = -(-remaining // len(active))
            still = []
            for tp in active:
                if remaining <= 0:
                    break
                log = self._log(tp)
                pos = new_pos.get(tp)
                if pos is None:
                    pos = self._position(tp)
                want = min(share, remaining)
                try:
                    end = log.end_offset
                    if pos == end:
                        continue
                    if pos < log.start_offset or pos > end:
                        raise OffsetOutOfRange(
                            "", offset=pos, start_offset=log.start_offset, end_offset=end
                        )
                    recs = log.read(pos, max_records=want, max_bytes=self.max_partition_bytes)
                except OffsetOutOfRange as e:
                    if not self.reset_out_of_range:
                        raise self._out_of_range(tp, pos, log) from e
                    new_pos[tp] = self._reset_offset(tp, log)
                    still.append(tp)
                    continue
                if not recs:  # only gaps (quarantined batches) up to the end
                    new_pos[tp] = end
                    continue
                out.extend(wrap_records(tp.topic, tp.partition, recs))
                pos = new_pos[tp] = recs[-1].offset + 1
                remaining -= len(recs)
                if pos < log.end_offset:
                    still.append(tp)
            active = still
        self._positions.update(new_pos)
        return out

    def _out_of_range(self, tp: TopicPartition, pos: int, log) -> OffsetOutOfRange:
        start, end = log.start_offset, log.end_offset
        if pos < start:
            why = f"is below the start offset {start} (records before it were deleted by retention)"
        else:
            why = f"is above the end offset {end}"
        err = OffsetOutOfRange(
            f"{tp.topic}[{tp.partition}]: position {pos} {why}; valid offsets are "
            f"{start}..{end}. Call seek()/seek_to_beginning()/seek_to_end(), or make the "
            f"consumer with reset_out_of_range=True to move per auto_offset_reset",
            offset=pos,
            start_offset=start,
            end_offset=end,
        )
        err.topic, err.partition = tp.topic, tp.partition
        return err

    # -- commit ------------------------------------------------------------------------------
    def _group_store(self):
        if self._group is None:
            raise ConfigError("this consumer has no group: make it with broker.consumer(..., group=NAME)")
        return self._group

    def commit(self, offsets: dict | None = None) -> None:
        """Durably store offsets for the group (fsynced before returning).

        ``offsets`` maps (topic, partition) to the next offset to read; the
        default is the current position of every assigned partition. Raises
        FencedMember (nothing committed) if this member was removed from the
        group or does not own a partition named, or, for a consumer outside the
        group, while the group has members.
        """
        self._check_open()
        self._group_store()
        if offsets is None:
            offsets = {tp: self._position(tp) for tp in self._assignment}
        else:
            offsets = {_tp(tp): off for tp, off in offsets.items()}
            for tp in offsets:
                self._broker.topic(tp.topic).log(tp.partition)  # validates both
        self._commit_checked(offsets, self._member)

    def committed(self, tp) -> int | None:
        """The group's committed offset for ``tp``, or None if it has none."""
        tp = _tp(tp)
        return self._group_store().get(tp.topic, tp.partition)

    # -- lifecycle ---------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError("the consumer is closed")
        if self._broker.closed:
            raise LogClosedError(f"the broker of {self._broker.path} is closed")

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stop using the consumer (does not commit); wakes a waiting poll. A member leaves
        its group: its partitions move to the other members at once."""
        self._closed = True
        self._event.set()
        self._leave()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __iter__(self):
        """Yield records forever (until closed), waiting for new ones."""
        while not self._closed:
            try:
                batch = self.poll(timeout=1.0)
            except LogClosedError:
                return
            yield from batch
