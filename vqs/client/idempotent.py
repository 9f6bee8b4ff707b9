"""``IdempotentRemoteProducer``: ``vqs.Client(...).producer(idempotent=True)``.

It asks the server for a producer id (``POST /producers``), numbers its
records per partition, and sends each partition's records of a send as one
request carrying ``partition``, ``producer_id``, ``producer_epoch`` and
``sequence`` (server/rest/producers.py). Such a request may be sent again and
is appended once: so the producer retries it by itself when the connection
fails (refused, dropped, timed out: a server restart) or the server answers
503 (starting, stopping), with backoff up to ``retry_timeout`` seconds.

Guarantees: a send that returned was appended exactly once, at the offsets it
returned, however many attempts it took. A send that raised after its
retries may or may not have been appended (at most once); the producer then
takes a new producer id, so no later batch is mistaken for it. A gap (the
server lost records it had acknowledged, a crash under flush="interval" or
"never") raises ``OutOfOrderSequence``, and the producer likewise starts
over with a new id. Sends of one producer are serialized (one lock), so its
batches reach each partition in order.

A ``send_batch`` whose records go to several partitions is one request per
partition; if it raises, the exception's ``appended`` lists the metadata of
the records already appended (the partitions before the failing one): resend
only the others.

Partitions are chosen as the embedded Producer does (key hash with Kafka's
murmur2, else round-robin per call), from the topic's partition count read
once per topic.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import errors as E
from ..broker.partitioner import RoundRobin, group_by_key
from .topics import PRODUCE_HEADERS, RemoteProducer, batch_body, produce_columns

if TYPE_CHECKING:
    from .transport import Transport

_SEQ_MASK = 0x7FFFFFFF
#: The first and the longest pause between two attempts of one request (s).
FIRST_DELAY_S, MAX_DELAY_S = 0.02, 0.5


def retryable(e: BaseException) -> bool:
    """Whether a request that raised ``e`` is sent again: it did not complete (connection
    refused, dropped, timed out), or the server is starting or stopping (503)."""
    if isinstance(e, (E.ServerUnreachable, E.LogClosedError)):
        return True
    return isinstance(e, E.RemoteError) and e.status == 503


def loses_id(e: BaseException) -> bool:
    """Whether a numbered send that raised ``e`` must give up its producer id: the server's
    state and the producer's differ (a ProducerError), or the outcome is unknown (a 5xx, an
    error that is not a VQSError). A refusal as it stands (a bad partition, a value too
    large) appended nothing and keeps the id."""
    if isinstance(e, E.ProducerError):
        return True
    if isinstance(e, E.RemoteError):
        return e.status >= 500
    return not isinstance(e, E.VQSError)


def partition_groups(n: int, keys, partition: int | None, parts: int, rr: RoundRobin, topic: str) -> dict:
    """{partition: indexes of the values it gets}, as the embedded Producer chooses (the
    given partition, else the key hash, else round-robin per call)."""
    if partition is not None:
        return {partition: list(range(n))}
    if keys is None or parts == 1:
        return {rr.next(topic, parts) if parts > 1 else 0: list(range(n))}
    return group_by_key(keys, parts, rr, topic)


def bodies(cols: tuple, groups: dict):
    """(partition, indexes, request body) of each partition's share of a send."""
    whole = len(groups) == 1
    for p, idx in groups.items():
        yield p, idx, batch_body(*(c if whole or c is None else [c[i] for i in idx] for c in cols))


class IdempotentRemoteProducer(RemoteProducer):
    """``Producer`` over HTTP whose sends are appended once, retried on connection errors
    (``send``, ``flush``, ``close`` as ``RemoteProducer``'s)."""

    def __init__(self, transport: Transport, *, retry_timeout: float = 30.0):
        super().__init__(transport)
        self.retry_timeout = retry_timeout
        self._lock = threading.Lock()
        self._rr = RoundRobin()
        self._partitions: dict[str, int] = {}
        self.producer_id = -1
        self.epoch = -1
        self._seq: dict[tuple[str, int], int] = {}
        self.retries = 0  # requests sent again (a dropped connection, a restart)

    def _new_id(self) -> None:
        doc = self._call(lambda: self._transport.json("POST", "/producers"))
        self.producer_id, self.epoch = doc["producer_id"], doc["epoch"]
        self._seq = {}

    def sequence(self, topic: str, partition: int) -> int:
        """The sequence the next batch to ``topic``/``partition`` will carry."""
        return self._seq.get((topic, partition), 0)

    def send_batch(self, topic: str, values: Sequence, keys: Sequence | None = None,
                   headers: Sequence | None = None, partition: int | None = None,
                   timestamps_ms: Sequence[int] | None = None) -> list:
        """Append ``values`` (each partition's share one numbered request); their metadata in
        input order. See the module doc for what a return and a raise promise."""
        from ..broker.topic import RecordMetadata

        n = len(values)
        if n == 0:
            return []
        cols = produce_columns(values, keys, headers, timestamps_ms)
        groups = self._partition(topic, n, cols[1], partition)
        out: list = [None] * n
        with self._lock:
            try:
                for p, idx, body in bodies(cols, groups):
                    first = self._send_numbered(topic, p, body, len(idx))
                    for j, i in enumerate(idx):
                        out[i] = RecordMetadata(topic, p, first + j)
            except Exception as e:
                e.appended = [m for m in out if m is not None]  # the partitions sent before it failed
                raise
        return out

    def _partition(self, topic: str, n: int, keys, partition) -> dict[int, list[int]]:
        parts = self._partitions.get(topic)
        if parts is None and partition is None:
            parts = self._partitions[topic] = self._call(
                lambda: self._transport.json("GET", f"/topics/{topic}"))["partitions"]
        return partition_groups(n, keys, partition, parts, self._rr, topic)

    def _send_numbered(self, topic: str, p: int, body: bytes, count: int) -> int:
        if self.producer_id < 0:
            self._new_id()
        seq = self._seq.get((topic, p), 0)
        params = {"partition": p, "producer_id": self.producer_id, "producer_epoch": self.epoch, "sequence": seq}
        try:
            _, data = self._call(lambda: self._transport.hot("POST", f"/topics/{topic}/messages", params,
                                                             PRODUCE_HEADERS, content=body))
        except Exception as e:
            if loses_id(e):  # no later batch may reuse this sequence
                self.producer_id = -1
            raise
        self._seq[(topic, p)] = (seq + count) & _SEQ_MASK
        return json.loads(data)["ranges"][0]["base_offset"]

    def _call(self, fn):
        """``fn()``, again on a connection error or a 503 until ``retry_timeout`` has passed."""
        deadline = time.monotonic() + self.retry_timeout
        delay = FIRST_DELAY_S
        while True:
            try:
                return fn()
            except E.VQSError as e:
                if not retryable(e):
                    raise
            if time.monotonic() + delay > deadline:
                return fn()  # the last attempt: its error is the caller's
            time.sleep(delay)
            delay = min(delay * 2, MAX_DELAY_S)
            self.retries += 1
