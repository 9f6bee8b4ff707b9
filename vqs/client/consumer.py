"""``RemoteConsumer``: ``vqs.Consumer``'s shapes over HTTP.

Guarantees: positions live in the client (a new position is taken only from
records delivered to the caller); ``commit`` stores them on the server for
the group and nothing else does; a partition without a position starts at the
group's committed offset, else at ``auto_offset_reset``. ``poll`` returns
records of the assigned partitions round robin, each partition's in offset
order, and long-polls the server when idle (one partition: on its fetch;
several: ``POST /wait`` on all of them, then a fetch).

Made with ``topics`` and ``group`` it is a member of the group, as the
embedded consumer (vqs/broker/consumer.py): it joins over ``POST
/groups/{g}/members``, heartbeats in ``poll`` (``.../heartbeat``, reporting
the partitions it holds), commits what it consumed of a revoked partition
before reporting it gone, and leaves on ``close`` (``DELETE``). With nothing
assigned, ``poll`` long-polls the heartbeat for an assignment; otherwise its
waits end by the next heartbeat. Commits carry its member id and generation,
so a removed member's commit is refused (FencedMember); it then rejoins on its
next ``poll``. A consumer given partitions (``assign``) is no member.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .. import errors as E
from . import membership as M
from .values import as_tp

if TYPE_CHECKING:
    from .core import Client
    from .transport import Transport


class RemoteConsumer:
    """``Consumer`` over HTTP: positions live in the client; ``commit`` stores them
    on the server for the group. ``poll`` long-polls the server when idle."""

    def __init__(self, client: Client, transport: Transport, topics=None, group: str | None = None, *,
                 auto_offset_reset: str = "earliest", max_partition_bytes: int = 1 << 20,
                 session_timeout_ms: int = 30_000):
        if auto_offset_reset not in ("earliest", "latest"):
            raise E.ConfigError(f"auto_offset_reset must be earliest or latest, not {auto_offset_reset!r}")
        self._client = client
        self._transport = transport
        self.group = group
        self._reset = auto_offset_reset
        self._max_bytes = max_partition_bytes
        self._positions: dict = {}
        self._assigned: list = []
        self._next = 0
        self._closed = False
        self._committed_cache: dict | None = None
        self.session_timeout_ms = session_timeout_ms
        self._topics: list = []
        self._member: dict | None = None  # the latest membership answer
        self._heartbeat_due = 0.0
        if topics is not None:
            self.subscribe(topics)

    def __repr__(self) -> str:
        return f"RemoteConsumer(group={self.group!r}, assignment={self._assigned!r})"

    def subscribe(self, topics) -> None:
        """Read ``topics``: with a group, as a member (the server assigns partitions); without
        one, every partition of them."""
        if isinstance(topics, str):
            topics = [topics]
        if self.group is not None:
            self._leave()
            self._topics = list(topics)
            self._join()
            return
        tps = []
        for t in topics:
            n = self._client.topic(t).partitions
            tps.extend(as_tp((t, p)) for p in range(n))
        self._set_assignment(tps)

    def assign(self, partitions: Iterable) -> None:
        """Read exactly these (topic, partition) pairs; raises TopicDoesNotExist or
        PartitionDoesNotExist (as the embedded consumer does) before changing anything."""
        self._leave()
        tps = [as_tp(tp) for tp in partitions]
        counts: dict[str, int] = {}
        for tp in tps:
            if tp.topic not in counts:
                counts[tp.topic] = self._client.topic(tp.topic).partitions
            _check_partition(tp, counts[tp.topic])
        self._set_assignment(tps)

    def _set_assignment(self, tps: list) -> None:
        self._assigned = tps
        self._positions = {tp: self._positions[tp] for tp in self._assigned if tp in self._positions}

    def assignment(self) -> list:
        return list(self._assigned)

    # -- membership ------------------------------------------------------------------------
    @property
    def member_id(self) -> str | None:
        return self._member["member_id"] if self._member is not None else None

    @property
    def generation(self) -> int:
        return self._member["generation"] if self._member is not None else -1

    def _members_path(self) -> str:
        return f"/groups/{self.group}/members"

    def _join(self) -> None:
        a = self._transport.json("POST", self._members_path(), json=M.join_body(self._topics, self.session_timeout_ms))
        self._apply(a)

    def _leave(self) -> None:
        a, self._member = self._member, None
        self._topics = []
        if a is not None:
            try:
                self._transport.request("DELETE", f"{self._members_path()}/{a['member_id']}")
            except E.FencedMember:
                pass  # already removed

    def _beat(self, owned: list, wait: float = 0.0) -> dict:
        a = self._member
        return self._transport.json("POST", f"{self._members_path()}/{a['member_id']}/heartbeat",
                                    json=M.heartbeat_body(a, owned, wait),
                                    timeout=wait + self._transport.timeout)

    def _heartbeat(self, force: bool = False, wait: float = 0.0) -> None:
        """Heartbeat if due (or ``force``), waiting up to ``wait`` s for a change; act on the
        answer. Rejoins if the member was removed."""
        if self._member is None or (not force and time.monotonic() < self._heartbeat_due):
            return
        try:
            self._apply(self._beat(self._assigned, wait))
        except E.FencedMember:  # removed: what it read uncommitted is read again by the next owner
            if self._closed:
                raise E.LogClosedError("consumer is closed") from None
            self._member, self._assigned, self._positions = None, [], {}
            self._join()

    def _apply(self, a: dict) -> None:
        for attempt in range(M.MAX_REVOKE_ROUNDS):  # a revocation is reported at once; the answer may change
            self._member = a
            new = M.assignment_of(a)
            revoked, done = M.revoked(self._assigned, new, self._positions)
            if done:  # commit what was consumed before letting go
                try:
                    self._commit(done)
                except E.FencedMember:
                    pass  # moved on already: the next owner re-reads from the last commit
            if any(tp not in self._assigned for tp in new):
                self._committed_cache = None  # a previous owner may have committed just now
            self._set_assignment(new)
            if not revoked or attempt == M.MAX_REVOKE_ROUNDS - 1:
                break
            a = self._beat(new)
        self._heartbeat_due = time.monotonic() + M.next_beat_in(a)

    def _offset_row(self, tp, timestamp_ms: int | None = None) -> dict:
        """The server's offsets of one partition (the topic may have been re-made smaller)."""
        rows = self._client.offsets(tp.topic, timestamp_ms)
        _check_partition(tp, len(rows))
        return rows[tp.partition]

    def _reset_offset(self, tp) -> int:
        row = self._offset_row(tp)
        return row["start_offset"] if self._reset == "earliest" else row["end_offset"]

    def _position(self, tp) -> int:
        pos = self._positions.get(tp)
        if pos is None:
            if self.group is not None:
                if self._committed_cache is None:
                    self._committed_cache = self._client.group_offsets(self.group)
                pos = self._committed_cache.get(tp)
            if pos is None:
                pos = self._reset_offset(tp)
            self._positions[tp] = pos
        return pos

    def position(self, tp) -> int:
        return self._position(as_tp(tp))

    def seek(self, tp, offset: int) -> None:
        self._positions[as_tp(tp)] = int(offset)

    def seek_to_beginning(self, partitions=None) -> None:
        for tp in self._tps(partitions):
            self._positions[tp] = self._offset_row(tp)["start_offset"]

    def seek_to_end(self, partitions=None) -> None:
        for tp in self._tps(partitions):
            self._positions[tp] = self._offset_row(tp)["end_offset"]

    def seek_to_timestamp(self, timestamp_ms: int, partitions=None) -> None:
        for tp in self._tps(partitions):
            row = self._offset_row(tp, timestamp_ms)
            off = row.get("offset_for_time")
            self._positions[tp] = row["end_offset"] if off is None else off

    def _tps(self, partitions):
        return self._assigned if partitions is None else [as_tp(tp) for tp in partitions]

    def beginning_offsets(self, partitions=None) -> dict:
        return {tp: self._offset_row(tp)["start_offset"] for tp in self._tps(partitions)}

    def end_offsets(self, partitions=None) -> dict:
        return {tp: self._offset_row(tp)["end_offset"] for tp in self._tps(partitions)}

    def lag(self, partitions=None) -> dict:
        ends = self.end_offsets(partitions)
        return {tp: max(0, end - self._position(tp)) for tp, end in ends.items()}

    def poll(self, max_records: int = 500, timeout: float = 0.0) -> list:
        """Records from the assigned partitions (round robin), waiting up to ``timeout`` s."""
        if self._closed:
            raise E.LogClosedError("consumer is closed")
        if not self._assigned and self._member is None:
            return []
        deadline = time.monotonic() + timeout
        while True:
            self._heartbeat()
            # a member's waits end by its next heartbeat
            until = deadline if self._member is None else min(deadline, self._heartbeat_due)
            if self._assigned:
                out = self._fetch(max_records, 0.0 if len(self._assigned) > 1 else max(0.0, until - time.monotonic()))
                if out:
                    return out
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            if not self._assigned:  # a member with nothing to read: wait for an assignment
                self._heartbeat(force=True, wait=left)
            elif len(self._assigned) > 1 and until > time.monotonic():
                # wait for any assigned partition on the server, then fetch again
                wait = min(until - time.monotonic(), 20.0)
                body = {"partitions": [{"topic": tp.topic, "partition": tp.partition, "offset": self._position(tp)}
                                       for tp in self._assigned],
                        "wait_ms": max(0, int(wait * 1000))}
                self._transport.request("POST", "/wait", json=body, timeout=wait + 30)

    def _fetch(self, max_records: int, wait: float) -> list:
        from ..broker.topic import ConsumerRecord

        out: list = []
        n = len(self._assigned)
        for i in range(n):
            if len(out) >= max_records:
                break
            tp = self._assigned[(self._next + i) % n]
            pos = self._position(tp)
            batches, nxt, _ = self._client.read_batches(tp.topic, tp.partition, pos,
                                                        max_records=max_records - len(out),
                                                        max_bytes=self._max_bytes, timeout=wait)
            for b in batches:
                for r in b.records():
                    out.append(ConsumerRecord(tp.topic, tp.partition, r.offset, r.timestamp_ms, r.key, r.value,
                                              r.headers))
            self._positions[tp] = nxt
        self._next = (self._next + 1) % n
        return out

    def commit(self, offsets: dict | None = None) -> None:
        if self.group is None:
            raise E.ConfigError("commit() needs a consumer group (consumer(..., group='name'))")
        if offsets is None:
            offsets = {tp: self._positions[tp] for tp in self._assigned if tp in self._positions}
        else:
            offsets = {as_tp(tp): int(o) for tp, o in offsets.items()}
        if offsets:
            self._commit(offsets)

    def _commit(self, offsets: dict) -> None:
        self._transport.request("POST", f"/groups/{self.group}/offsets", json=M.commit_body(offsets, self._member))
        if self._committed_cache is not None:
            self._committed_cache.update(offsets)

    def committed(self, tp):
        if self.group is None:
            return None
        return self._client.group_offsets(self.group).get(as_tp(tp))

    def close(self) -> None:
        """Stop (does not commit); a member leaves its group: its partitions move at once."""
        self._closed = True
        self._leave()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> RemoteConsumer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __iter__(self):
        while not self._closed:
            yield from self.poll(timeout=1.0)


def _check_partition(tp, count: int) -> None:
    if not isinstance(tp.partition, int) or isinstance(tp.partition, bool) or not 0 <= tp.partition < count:
        raise E.PartitionDoesNotExist(tp.topic, tp.partition, count)
