"""``broker.share_consumer(topics, group)``: a share-group member in-process.

The same share groups Kafka clients use (``ShareConsumer`` of confluent-kafka
over the Kafka listener): members of one group, embedded or remote, divide
the partitions and never hold a record at once. ``poll`` heartbeats (joining
on its first call), acquires records from the assigned partitions and returns
them with their delivery counts; each must then be acknowledged
(``acknowledge``: ACCEPT by default, RELEASE or REJECT) before its lock ends,
or it comes back to some member. An acknowledgement is durable when
``acknowledge`` returns (vqs.broker.share.partition). ``close`` releases what
the consumer still holds and leaves the group, as a Kafka share session's
close does.

Not thread-safe: one consumer per thread, as Kafka's.
"""

from __future__ import annotations

import threading
import time

from ...errors import ConfigError, GroupFull, VQSError
from ..topic import ConsumerRecord
from .groups import FENCED_EPOCH, FULL, MAX_MEMBERS, OK, UNKNOWN_MEMBER
from .partition import ACCEPT, REJECT, RELEASE, RENEW

_TYPES = {"accept": ACCEPT, "release": RELEASE, "reject": REJECT, "renew": RENEW,
          ACCEPT: ACCEPT, RELEASE: RELEASE, REJECT: REJECT, RENEW: RENEW}


class ShareRecord(ConsumerRecord):
    """A record acquired by a share consumer: a ``ConsumerRecord`` with its delivery count."""

    __slots__ = ("delivery_count",)

    def __init__(self, rec: ConsumerRecord, delivery_count: int):
        super().__init__(rec.topic, rec.partition, rec.offset, rec.timestamp_ms, rec.key, rec.value, rec.headers)
        self.delivery_count = delivery_count


class ShareConsumer:
    """A member of share group ``group`` reading ``topics`` (module doc)."""

    def __init__(self, broker, topics, group: str):
        if isinstance(topics, str):
            topics = [topics]
        topics = list(topics)
        if not topics:
            raise ConfigError("a share consumer reads at least one topic")
        self._broker = broker
        self._groups = broker.share_groups
        self.group = group
        self.topics = topics
        self.member_id = ""
        self._epoch = 0
        self._assignment: dict[str, list[int]] = {}
        self._next = 0
        self._closed = False
        self._wake = threading.Event()

    def _heartbeat(self) -> None:
        status, member, epoch, assignment = self._groups.heartbeat(
            self.group, self.member_id, self._epoch, self.topics if self._epoch == 0 else None)
        if status in (UNKNOWN_MEMBER, FENCED_EPOCH):  # removed (session ended): join again
            self._epoch = 0
            status, member, epoch, assignment = self._groups.heartbeat(self.group, self.member_id, 0, self.topics)
        if status == FULL:
            raise GroupFull(f"share group {self.group!r} has {MAX_MEMBERS} members, the most a group may have")
        if status != OK:
            raise VQSError(f"share group {self.group!r}: heartbeat refused ({status})")
        self.member_id, self._epoch = member, epoch
        if assignment is not None:
            self._assignment = assignment

    def join(self) -> None:
        """Join the group now (``poll`` joins on its first call otherwise)."""
        self._heartbeat()

    def assignment(self) -> list[tuple[str, int]]:
        """The (topic, partition) pairs this member reads now."""
        return sorted((t, p) for t, ps in self._assignment.items() for p in ps)

    def poll(self, max_records: int = 500, timeout: float = 0.0) -> list[ShareRecord]:
        """Acquire up to ``max_records`` records, waiting up to ``timeout`` seconds for one."""
        if self._closed:
            raise VQSError("the share consumer is closed")
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            self._heartbeat()
            out = self._acquire(max_records)
            left = deadline - time.monotonic()
            if out or left <= 0:
                return out
            self._wait(min(left, 0.25))  # woken by appends; releases and ended locks within a slice

    def _acquire(self, max_records: int) -> list[ShareRecord]:
        st = self._groups.settings_for(self.group)
        parts = self.assignment()
        out: list[ShareRecord] = []
        if not parts:
            return out
        k = len(parts)
        start = self._next % k
        self._next = start + 1
        for i in range(k):
            left = max_records - len(out)
            if left <= 0:
                break
            t, p = parts[(start + i) % k]
            sp = self._groups.partition(self.group, t, p)
            ranges = sp.acquire(self.member_id, left, int(time.time() * 1000), st.record_lock_ms, st.delivery_limit,
                                st.max_record_locks)
            topic = self._broker.topic(t)
            for first, last, count in ranges:
                off = first
                while off <= last:
                    recs = topic.read(p, off, max_records=last - off + 1)
                    if not recs:
                        break
                    out += [ShareRecord(r, count) for r in recs if r.offset <= last]
                    off = recs[-1].offset + 1
        return out

    def _wait(self, seconds: float) -> None:
        topics = []
        for t in self._assignment:
            try:
                topics.append(self._broker.topic(t))
            except VQSError:
                pass
        self._wake.clear()
        for topic in topics:
            topic.add_waiter(self._wake)
        try:
            self._wake.wait(seconds)
        finally:
            for topic in topics:
                topic.remove_waiter(self._wake)

    def acknowledge(self, record, kind="accept") -> None:
        """Acknowledge an acquired record (a ``ShareRecord``, or ``(topic, partition, offset)``):
        ``"accept"`` (processed), ``"release"`` (deliver it again), ``"reject"`` (archive it)
        or ``"renew"`` (a new lock). Durable on return; ``InvalidRecordState`` when this
        member does not hold it (its lock ended)."""
        t = _TYPES.get(kind.lower() if isinstance(kind, str) else kind)
        if t is None:
            raise ConfigError(f"acknowledge type must be accept, release, reject or renew, not {kind!r}")
        if isinstance(record, tuple):
            topic, partition, offset = record
        else:
            topic, partition, offset = record.topic, record.partition, record.offset
        st = self._groups.settings_for(self.group)
        sp = self._groups.partition(self.group, topic, partition)
        sp.acknowledge(self.member_id, offset, offset, [t], int(time.time() * 1000), st.record_lock_ms,
                       st.delivery_limit)

    def close(self) -> None:
        """Release what this consumer holds and leave the group (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self.member_id:
            self._groups.release_member(self.group, self.member_id)
            self._groups.heartbeat(self.group, self.member_id, -1, None)

    def __enter__(self) -> ShareConsumer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
