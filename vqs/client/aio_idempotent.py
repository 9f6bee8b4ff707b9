"""``AsyncIdempotentProducer``: ``vqs.AsyncClient(...).producer(idempotent=True)``.

The asyncio form of ``IdempotentRemoteProducer`` (idempotent.py), with its
decisions (``retryable``, ``loses_id``, ``partition_groups``, ``bodies``) and
therefore its guarantees: a send that returned was appended exactly once at
the offsets it returned, however many attempts it took; one that raised after
its retries was appended at most once, and the producer then takes a new
producer id; a ``send_batch`` over several partitions that raises carries the
metadata already appended on ``appended``. Sends of one producer are
serialized by an ``asyncio.Lock`` (each partition's batches arrive in order);
the pause between attempts is awaited, never slept in a thread.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..broker.partitioner import RoundRobin
from ..wire import BATCH_CONTENT_TYPE
from . import shapes as S
from .idempotent import _SEQ_MASK, FIRST_DELAY_S, MAX_DELAY_S, bodies, loses_id, partition_groups, retryable
from .topics import produce_columns

if TYPE_CHECKING:
    from .aio import AsyncTransport


class AsyncIdempotentProducer:
    """``AsyncProducer``'s methods; every send appended once (module doc)."""

    def __init__(self, transport: AsyncTransport, *, retry_timeout: float = 30.0):
        self._t = transport
        self.retry_timeout = retry_timeout
        self._lock = asyncio.Lock()
        self._rr = RoundRobin()
        self._partitions: dict[str, int] = {}
        self.producer_id = -1
        self.epoch = -1
        self._seq: dict[tuple[str, int], int] = {}
        self.retries = 0  # requests sent again (a dropped connection, a restart)

    async def start(self) -> None:
        """Nothing to open: the producer id is taken by the first send."""

    async def stop(self) -> None:
        """Nothing buffered: every send was acknowledged."""

    async def flush(self) -> None:
        """Nothing buffered: every send was acknowledged."""

    async def __aenter__(self) -> AsyncIdempotentProducer:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    def sequence(self, topic: str, partition: int) -> int:
        """The sequence the next batch to ``topic``/``partition`` will carry."""
        return self._seq.get((topic, partition), 0)

    async def send(self, topic: str, value, key=None, headers=None, partition: int | None = None,
                   timestamp_ms: int | None = None):
        return (await self.send_batch(topic, [value], keys=None if key is None else [key],
                                      headers=None if headers is None else [headers], partition=partition,
                                      timestamps_ms=None if timestamp_ms is None else [timestamp_ms]))[0]

    send_and_wait = send

    async def send_batch(self, topic: str, values: Sequence, keys: Sequence | None = None,
                         headers: Sequence | None = None, partition: int | None = None,
                         timestamps_ms: Sequence[int] | None = None) -> list:
        from ..broker.topic import RecordMetadata

        n = len(values)
        if n == 0:
            return []
        cols = produce_columns(values, keys, headers, timestamps_ms)
        out: list = [None] * n
        async with self._lock:
            parts = self._partitions.get(topic)
            if parts is None and partition is None:
                parts = self._partitions[topic] = (await self._call(
                    lambda: self._t.json("GET", f"/topics/{topic}")))["partitions"]
            try:
                for p, idx, body in bodies(cols, partition_groups(n, cols[1], partition, parts, self._rr, topic)):
                    first = await self._send_numbered(topic, p, body, len(idx))
                    for j, i in enumerate(idx):
                        out[i] = RecordMetadata(topic, p, first + j)
            except Exception as e:
                e.appended = [m for m in out if m is not None]  # the partitions sent before it failed
                raise
        return out

    async def _send_numbered(self, topic: str, p: int, body: bytes, count: int) -> int:
        if self.producer_id < 0:
            doc = await self._call(lambda: self._t.json("POST", "/producers"))
            self.producer_id, self.epoch, self._seq = doc["producer_id"], doc["epoch"], {}
        seq = self._seq.get((topic, p), 0)
        params = {"partition": p, "producer_id": self.producer_id, "producer_epoch": self.epoch, "sequence": seq}
        try:
            r = await self._call(lambda: self._t.request("POST", f"/topics/{topic}/messages", expect=(200,),
                                                         params=params, content=body,
                                                         headers={"content-type": BATCH_CONTENT_TYPE}))
        except Exception as e:
            if loses_id(e):  # no later batch may reuse this sequence
                self.producer_id = -1
            raise
        self._seq[(topic, p)] = (seq + count) & _SEQ_MASK
        return S.produce_answer(topic, json.loads(r.content))[0].offset

    async def _call(self, make):
        """``await make()``, again on a connection error or a 503 until ``retry_timeout``."""
        deadline = time.monotonic() + self.retry_timeout
        delay = FIRST_DELAY_S
        while True:
            try:
                return await make()
            except Exception as e:
                if not retryable(e):
                    raise
            if time.monotonic() + delay > deadline:
                return await make()  # the last attempt: its error is the caller's
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_DELAY_S)
            self.retries += 1
