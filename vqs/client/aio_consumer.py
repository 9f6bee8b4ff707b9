"""``AsyncConsumer``: the asyncio consumer of ``vqs.AsyncClient``, aiokafka-style.

Made with a ``group`` it is a member of the group, as ``RemoteConsumer``
(consumer.py) is, with the same decisions (membership.py): it joins on
``start``, heartbeats while it reads (each heartbeat's wait is awaited on the
server, never a thread), commits what it delivered of a partition before
reporting it revoked, rejoins if the server removed it, and leaves on
``stop``. Without a group it reads every partition of its topics.

Invariants:
- a partition's *position* is the offset after the last record handed to the
  caller; records fetched but not yet handed out (``getone``'s buffer) are
  never committed, and are dropped when their partition is revoked or sought;
- ``commit()`` without offsets commits the positions of the assigned
  partitions, with the member id and generation (a removed member's commit
  is refused: FencedMember);
- a wait for records ends by the next heartbeat, so a member keeps its
  session while it waits; several partitions are waited on together on the
  server (``POST /wait``), one is long-polled by its fetch.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import TYPE_CHECKING

from .. import errors as E
from . import membership as M
from .consumer import _check_partition
from .values import as_tp

if TYPE_CHECKING:
    from .aio import AsyncClient

#: The longest one server-side wait of ``getmany`` (s); it is repeated up to the timeout.
MAX_WAIT_S = 20.0


class AsyncConsumer:
    """aiokafka-style: ``start``/``stop`` (or ``async with``), ``getmany``,
    ``getone``, ``async for``, ``commit``; a group member when made with ``group``."""

    def __init__(self, client: AsyncClient, topics: list[str], group: str | None, *,
                 auto_offset_reset: str = "earliest", max_records: int = 500,
                 max_partition_bytes: int = 1 << 20, session_timeout_ms: int = 30_000):
        if auto_offset_reset not in ("earliest", "latest"):
            raise E.ConfigError(f"auto_offset_reset must be 'earliest' or 'latest', got {auto_offset_reset!r}")
        self._client = client
        self._t = client._t
        self.topics = list(topics)
        self.group = group
        self._reset = auto_offset_reset
        self._max = max_records
        self._max_bytes = max_partition_bytes
        self.session_timeout_ms = session_timeout_ms
        self._assigned: list = []
        self._fetch_at: dict = {}    # tp -> next offset to fetch
        self._consumed: dict = {}    # tp -> offset after the last record handed out
        self._buffer: deque = deque()
        self._member: dict | None = None
        self._heartbeat_due = 0.0
        self._committed_cache: dict | None = None
        self._started = False
        self._closed = False

    def __repr__(self) -> str:
        return f"AsyncConsumer(group={self.group!r}, assignment={self._assigned!r})"

    # -- lifetime ---------------------------------------------------------------
    async def start(self) -> None:
        """Join the group (with one) or take every partition of the topics."""
        if self._started:
            return
        self._started = True
        if self.group is not None:
            await self._join()
        else:
            tps = []
            for t in self.topics:
                tps.extend(as_tp((t, row["partition"])) for row in await self._client.offsets(t))
            self._set_assignment(tps)

    async def stop(self) -> None:
        """Leave the group (its partitions move at once); does not commit."""
        self._closed = True
        self._buffer.clear()
        await self._leave()

    async def __aenter__(self) -> AsyncConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    # -- membership --------------------------------------------------------------
    @property
    def member_id(self) -> str | None:
        return self._member["member_id"] if self._member is not None else None

    @property
    def generation(self) -> int:
        return self._member["generation"] if self._member is not None else -1

    def _members_path(self) -> str:
        return f"/groups/{self.group}/members"

    async def _join(self) -> None:
        a = await self._t.json("POST", self._members_path(), json=M.join_body(self.topics, self.session_timeout_ms))
        await self._apply(a)

    async def _leave(self) -> None:
        a, self._member = self._member, None
        if a is not None:
            try:
                await self._t.request("DELETE", f"{self._members_path()}/{a['member_id']}")
            except E.FencedMember:
                pass  # already removed

    async def _beat(self, owned: list, wait: float = 0.0) -> dict:
        a = self._member
        return await self._t.json("POST", f"{self._members_path()}/{a['member_id']}/heartbeat",
                                  json=M.heartbeat_body(a, owned, wait), timeout=wait + self._t.timeout)

    async def _heartbeat(self, force: bool = False, wait: float = 0.0) -> None:
        if self._member is None or (not force and time.monotonic() < self._heartbeat_due):
            return
        try:
            await self._apply(await self._beat(self._assigned, wait))
        except E.FencedMember:  # removed: what it delivered uncommitted is read again by the next owner
            if self._closed:
                raise E.LogClosedError("consumer is stopped") from None
            self._member = None
            self._set_assignment([])
            await self._join()

    async def _apply(self, a: dict) -> None:
        for attempt in range(M.MAX_REVOKE_ROUNDS):
            self._member = a
            new = M.assignment_of(a)
            gone, done = M.revoked(self._assigned, new, self._consumed)
            if done:  # commit what was delivered before letting go
                try:
                    await self._commit(done)
                except E.FencedMember:
                    pass  # moved on already: the next owner re-reads from the last commit
            if any(tp not in self._assigned for tp in new):
                self._committed_cache = None  # a previous owner may have committed just now
            self._set_assignment(new)
            if not gone or attempt == M.MAX_REVOKE_ROUNDS - 1:
                break
            a = await self._beat(new)
        self._heartbeat_due = time.monotonic() + M.next_beat_in(a)

    def _set_assignment(self, tps: list) -> None:
        keep = set(tps)
        self._assigned = list(tps)
        self._fetch_at = {tp: o for tp, o in self._fetch_at.items() if tp in keep}
        self._consumed = {tp: o for tp, o in self._consumed.items() if tp in keep}
        if self._buffer:
            self._buffer = deque(r for r in self._buffer if (r.topic, r.partition) in keep)

    def assignment(self) -> set:
        return set(self._assigned)

    @property
    def closed(self) -> bool:
        return self._closed

    async def subscribe(self, topics) -> None:
        """Read ``topics`` instead: with a group, leave and join again with them (the server
        assigns partitions); without one, every partition of them."""
        self.topics = [topics] if isinstance(topics, str) else list(topics)
        await self._leave()
        self._set_assignment([])  # uncommitted positions go, as on stop: the group's commit rules
        self._started = False
        await self.start()

    async def assign(self, partitions) -> None:
        """Read exactly these (topic, partition) pairs, as no member (a member leaves its
        group first); TopicDoesNotExist or PartitionDoesNotExist before changing anything."""
        tps = [as_tp(tp) for tp in partitions]
        counts: dict[str, int] = {}
        for tp in tps:
            if tp.topic not in counts:
                counts[tp.topic] = len(await self._client.offsets(tp.topic))
            _check_partition(tp, counts[tp.topic])
        await self._leave()
        self._started = True
        self._set_assignment(tps)

    # -- positions ----------------------------------------------------------------
    async def _position(self, tp) -> int:
        pos = self._consumed.get(tp)
        if pos is None:
            if self.group is not None:
                if self._committed_cache is None:
                    self._committed_cache = await self._client.group_offsets(self.group)
                pos = self._committed_cache.get(tp)
            if pos is None:
                row = await self._offset_row(tp)
                pos = row["start_offset"] if self._reset == "earliest" else row["end_offset"]
            self._consumed[tp] = pos
            self._fetch_at[tp] = pos
        return pos

    async def _offset_row(self, tp, timestamp_ms: int | None = None) -> dict:
        """The server's offsets of one partition; PartitionDoesNotExist for one it lacks."""
        rows = await self._client.offsets(tp.topic, timestamp_ms)
        _check_partition(tp, len(rows))
        return rows[tp.partition]

    async def position(self, *tp) -> int:
        """The offset of the next record this consumer hands out from the partition
        (``position(tp)`` or ``position(topic, partition)``), a coroutine as aiokafka's: before
        anything was read or sought there, the group's committed offset, else where
        ``auto_offset_reset`` starts."""
        return await self._position(_tp(tp))

    def seek(self, *args) -> None:
        """``seek(tp, offset)`` or ``seek(topic, partition, offset)``: hand out from ``offset``
        next; records fetched ahead of the partition are dropped."""
        if len(args) not in (2, 3):
            raise E.ConfigError("seek takes (tp, offset) or (topic, partition, offset)")
        self._seek(_tp(args[:-1]), int(args[-1]))

    def _seek(self, tp, offset: int) -> None:
        self._consumed[tp] = self._fetch_at[tp] = offset
        self._buffer = deque(r for r in self._buffer if (r.topic, r.partition) != tp)

    def _tps(self, partitions: tuple) -> list:
        """``partitions`` given as tps, or as one iterable of them; none: the assignment."""
        if len(partitions) == 1 and not isinstance(partitions[0], tuple):
            partitions = tuple(partitions[0])
        return list(self._assigned) if not partitions else [as_tp(tp) for tp in partitions]

    async def seek_to_beginning(self, *partitions) -> None:
        """Hand out from the first offset the log holds (every assigned partition by default)."""
        for tp in self._tps(partitions):
            self._seek(tp, (await self._offset_row(tp))["start_offset"])

    async def seek_to_end(self, *partitions) -> None:
        """Hand out only records appended from now on."""
        for tp in self._tps(partitions):
            self._seek(tp, (await self._offset_row(tp))["end_offset"])

    async def seek_to_timestamp(self, timestamp_ms: int, *partitions) -> None:
        """Hand out from the first record stamped at or after ``timestamp_ms`` (the end if none)."""
        for tp in self._tps(partitions):
            row = await self._offset_row(tp, timestamp_ms)
            off = row.get("offset_for_time")
            self._seek(tp, row["end_offset"] if off is None else off)

    async def beginning_offsets(self, *partitions) -> dict:
        return {tp: (await self._offset_row(tp))["start_offset"] for tp in self._tps(partitions)}

    async def end_offsets(self, *partitions) -> dict:
        return {tp: (await self._offset_row(tp))["end_offset"] for tp in self._tps(partitions)}

    async def lag(self, *partitions) -> dict:
        """{tp: records between the position and the end of the partition}."""
        out = {}
        for tp, end in (await self.end_offsets(*partitions)).items():
            out[tp] = max(0, end - await self._position(tp))
        return out

    # -- reading ------------------------------------------------------------------
    async def _fetch(self, limit: int, wait: float) -> list:
        """Fetch from every assigned partition (concurrently); long-poll ``wait`` s
        only when one partition is assigned."""
        tps = list(self._assigned)
        for tp in tps:
            if tp not in self._fetch_at:
                await self._position(tp)
        results = await asyncio.gather(*(
            self._client.read(tp.topic, tp.partition, self._fetch_at[tp], max_records=limit,
                              max_bytes=self._max_bytes, timeout=wait if len(tps) == 1 else 0.0) for tp in tps))
        out: list = []
        for tp, (recs, nxt) in zip(tps, results):
            if tp in self._fetch_at:  # still assigned
                self._fetch_at[tp] = nxt
                out.extend(recs)
        return out

    async def _wait_any(self, wait: float) -> None:
        body = {"partitions": [{"topic": tp.topic, "partition": tp.partition, "offset": self._fetch_at[tp]}
                               for tp in self._assigned],
                "wait_ms": max(0, int(wait * 1000))}
        await self._t.request("POST", "/wait", json=body, timeout=wait + self._t.timeout)

    async def _fill(self, limit: int, timeout: float) -> None:
        """Fetch into the buffer, waiting up to ``timeout`` s for the first records."""
        if self._closed:
            raise E.LogClosedError("consumer is stopped")
        if not self._started:
            await self.start()
        deadline = time.monotonic() + timeout
        while not self._buffer:
            await self._heartbeat()
            until = deadline if self._member is None else min(deadline, self._heartbeat_due)
            if self._assigned:
                self._buffer.extend(await self._fetch(limit, max(0.0, min(until - time.monotonic(), MAX_WAIT_S))))
                if self._buffer:
                    return
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if not self._assigned:
                if self._member is None:
                    return
                await self._heartbeat(force=True, wait=min(left, MAX_WAIT_S))
            elif len(self._assigned) > 1 and until > time.monotonic():
                await self._wait_any(min(until - time.monotonic(), MAX_WAIT_S))

    def _hand_out(self, n: int) -> list:
        out = []
        buf = self._buffer
        while buf and len(out) < n:
            r = buf.popleft()
            self._consumed[as_tp((r.topic, r.partition))] = r.offset + 1
            out.append(r)
        return out

    async def getmany(self, *partitions, timeout_ms: int = 0, max_records: int | None = None) -> dict:
        """{(topic, partition): [ConsumerRecord]} of the next records, waiting up
        to ``timeout_ms`` for the first one; each partition's in offset order. Records of
        every assigned partition: aiokafka's ``*partitions`` filter is refused (ConfigError;
        ``assign`` chooses the partitions read)."""
        if partitions:
            raise E.ConfigError("getmany(*partitions) is not supported: it returns records of every "
                                "assigned partition (assign([...]) chooses them); pass timeout_ms= "
                                "and max_records= by name")
        limit = max_records or self._max
        if not self._buffer:
            await self._fill(limit, timeout_ms / 1000)
        out: dict = {}
        for r in self._hand_out(limit):
            out.setdefault(as_tp((r.topic, r.partition)), []).append(r)
        return out

    async def getone(self):
        """The next record, waiting for it."""
        while not self._buffer:
            await self._fill(self._max, 1.0)
        return self._hand_out(1)[0]

    def __aiter__(self) -> AsyncConsumer:
        return self

    async def __anext__(self):
        """The next record; the loop ends (StopAsyncIteration) once the consumer is stopped,
        also while it waited for a record, as aiokafka's does."""
        if self._closed:
            raise StopAsyncIteration
        try:
            return await self.getone()
        except E.LogClosedError:
            if self._closed:
                raise StopAsyncIteration from None
            raise

    # -- commits ------------------------------------------------------------------
    async def commit(self, offsets: dict | None = None) -> None:
        """Commit ``offsets`` ({(topic, partition): next offset}) or the position
        of every assigned partition (what was handed out)."""
        if not self.group:
            raise E.ConfigError("commit needs a consumer group")
        if offsets is None:
            offsets = {tp: self._consumed[tp] for tp in self._assigned if tp in self._consumed}
        else:
            offsets = {as_tp(tp): int(o) for tp, o in offsets.items()}
        if offsets:
            await self._commit(offsets)

    async def _commit(self, offsets: dict) -> None:
        await self._t.request("POST", f"/groups/{self.group}/offsets", json=M.commit_body(offsets, self._member))
        if self._committed_cache is not None:
            self._committed_cache.update(offsets)

    async def committed(self, *tp) -> int | None:
        """The group's committed offset of the partition (``committed(tp)`` or
        ``committed(topic, partition)``); None without a group or a commit."""
        tp = _tp(tp)
        return (await self._client.group_offsets(self.group)).get(tp) if self.group else None


def _tp(args: tuple):
    """A TopicPartition of ``(tp,)`` or ``(topic, partition)``."""
    return as_tp(args[0] if len(args) == 1 else args)
