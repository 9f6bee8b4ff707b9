"""Producer: appends records to topic partitions.

What an acknowledgement (a returned offset) promises follows the flush policy
of the topic's logs (the broker's ``flush`` default, "interval" unless set):
``always`` - on disk and fsynced; ``interval`` - in the log, fsynced within
``flush_interval_ms``; ``never`` - in the log, written when a batch fills and
fsynced at close. Every acknowledged record is visible to consumers at once.

A Producer is cheap and thread-safe; any number of threads may share one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..errors import ConfigError, MessageTooLarge
from .partitioner import RoundRobin, group_by_key, partition_for_key
from .topic import RecordMetadata

if TYPE_CHECKING:  # pragma: no cover
    from .broker import Broker


def to_bytes(value, what: str = "value") -> bytes:
    """bytes-like values pass through; ``str`` is encoded as UTF-8."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return value
    if isinstance(value, str):
        return value.encode()
    raise TypeError(f"a record {what} must be bytes or str, not {type(value).__name__}")


def _check_size(t, values) -> None:
    """The topic's own ``max_message_bytes`` (``Topic.message_limit``), when it has one: the
    same rule the server's fronts apply, so no producer gets past it. Checked before anything
    of the call is appended."""
    if t.config.get("max_message_bytes"):
        _check_largest(t, max((len(v) for v in values if v is not None), default=0))  # (None: a null value)


def _check_largest(t, big: int) -> None:
    """``_check_size`` of a call whose largest value has ``big`` bytes."""
    limit = t.config.get("max_message_bytes")
    if limit and big > limit:
        raise MessageTooLarge(f"a value of {big} bytes exceeds topic {t.name!r}'s max_message_bytes ({limit})")


def _headers(headers):
    """Headers as a tuple of (str, bytes or None): accepts a mapping or a sequence of pairs (a
    None value is a null header value, as Kafka's)."""
    if not headers:
        return None
    items = headers.items() if hasattr(headers, "items") else headers
    out = []
    for item in items:
        try:
            name, value = item
        except (TypeError, ValueError):
            raise TypeError(f"a header must be a (name, value) pair, not {item!r}") from None
        if not isinstance(name, str):
            raise TypeError(f"a header name must be str, not {type(name).__name__}")
        out.append((name, None if value is None else to_bytes(value, "header value")))
    return tuple(out)


class Producer:
    """Writes records to a Broker's topics. Get one with ``broker.producer()``.

    ``clock_ms`` (the Broker's test clock, in ms) stamps records that carry no
    timestamp; None leaves that to each log (the wall clock).
    """

    def __init__(self, broker: Broker, *, clock_ms: Callable[[], int] | None = None):
        self._broker = broker
        self._clock_ms = clock_ms
        self._rr = RoundRobin()

    def send(
        self,
        topic: str,
        value,
        key=None,
        headers=None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> RecordMetadata:
        """Append one record; returns its (topic, partition, offset).

        The partition is ``partition`` if given, else the key's hash partition
        (stable across processes and restarts), else the next one round-robin.
        ``value`` None is a null value (a tombstone), read back as None.
        """
        t = self._broker.topic(topic)
        if value.__class__ is not bytes and value is not None:
            value = to_bytes(value)
        if t.config.get("max_message_bytes"):
            _check_size(t, (value,))
        if key is not None and key.__class__ is not bytes:
            key = to_bytes(key, "key")
        elif key is None and t.compacted:
            t.check_keys(None, 1)  # InvalidRecord: a compacted topic takes keyed records only
        if partition is None:
            n = t.partitions
            if n == 1:
                p = 0
            elif key is not None:
                p = partition_for_key(key, n)
            else:
                p = self._rr.next(t.name, n)
            log = t._logs[p]  # a closed (deleted) topic's log refuses the append
        else:
            log = t.log(partition)  # validates the number
            p = partition
        if timestamp_ms is None and self._clock_ms is not None:
            timestamp_ms = self._clock_ms()
        offset = log.append(
            value, key=key, headers=_headers(headers) if headers else None, timestamp_ms=timestamp_ms
        )
        if t._waiters:
            t._notify()
        return RecordMetadata(t.name, p, offset)

    def send_batch(
        self,
        topic: str,
        values: Sequence,
        keys: Sequence | None = None,
        headers: Sequence | None = None,
        partition: int | None = None,
        timestamps_ms: Sequence[int] | None = None,
    ) -> list[RecordMetadata]:
        """Append many records; returns their metadata in input order.

        ``keys``, ``headers`` and ``timestamps_ms``, when given, are sequences
        as long as ``values`` (a key, or a value, may be None). Records bound for the same
        partition are written as one batch; keyless records of one call all go
        to one partition (chosen round-robin per call), so an unkeyed batch
        stays one batch on disk.
        """
        t = self._broker.topic(topic)
        n = len(values)
        for name, seq in (("keys", keys), ("headers", headers), ("timestamps_ms", timestamps_ms)):
            if seq is not None and len(seq) != n:
                raise ConfigError(f"send_batch: {name} has {len(seq)} items, values has {n}")
        if n == 0:
            return []
        values = [v if v.__class__ is bytes or v is None else to_bytes(v) for v in values]
        _check_size(t, values)
        if keys is not None:
            keys = [k if k is None or k.__class__ is bytes else to_bytes(k, "key") for k in keys]
            if all(k is None for k in keys):
                keys = None
        if t.compacted:
            t.check_keys(keys, n)  # InvalidRecord: a compacted topic takes keyed records only
        if headers is not None:
            headers = [_headers(h) for h in headers]
            if all(h is None for h in headers):
                headers = None
        if timestamps_ms is None and self._clock_ms is not None:
            timestamps_ms = self._clock_ms()  # one int: every record's timestamp
        name = t.name

        if partition is not None:
            t.log(partition)  # validates the number
            p = partition
        elif keys is None:
            p = self._rr.next(name, t.partitions)
        elif t.partitions == 1:
            p = 0
        else:
            p = None
        if p is not None:
            first = self._append(t, p, values, keys, headers, timestamps_ms)
            t._notify()
            return [RecordMetadata(name, p, first + i) for i in range(n)]

        # Keyed records spread over partitions: one batch per partition.
        groups = group_by_key(keys, t.partitions, self._rr, name)
        out: list = [None] * n
        try:
            for p, idx in groups.items():
                first = self._append(
                    t, p,
                    [values[i] for i in idx],
                    [keys[i] for i in idx],
                    None if headers is None else [headers[i] for i in idx],
                    timestamps_ms
                    if timestamps_ms is None or isinstance(timestamps_ms, int)
                    else [timestamps_ms[i] for i in idx],
                )
                for j, i in enumerate(idx):
                    out[i] = RecordMetadata(name, p, first + j)
        finally:
            t._notify()
        return out

    def send_encoded(self, topic: str, partition: int, batch) -> list[RecordMetadata] | None:
        """Append a producer's record batch (a decoded ``vqs.record.RecordBatch``) to
        ``partition`` as it is encoded (``Log.append_encoded``: no decoding into values and
        encoding again); its records' metadata, or None, nothing appended, for a batch the log
        does not take so (the caller sends its records with ``send_batch``). Checked as
        ``send_batch`` checks (the topic's ``max_message_bytes``, a compacted topic's keys)."""
        t = self._broker.topic(topic)
        n = batch.count
        o = batch.value_offsets
        limit = t.config.get("max_message_bytes")
        if limit and o[n] > limit:  # (only then can one value pass it)
            _check_largest(t, max(o[i + 1] - o[i] for i in range(n)))
        if t.compacted and batch.key_validity is None:
            return None  # (send_batch refuses keyless records on a compacted topic)
        first = t.log(partition).append_encoded(batch)
        if first is None:
            return None
        t._notify()
        return [RecordMetadata(t.name, partition, first + i) for i in range(n)]

    def _append(self, t, p: int, values, keys, headers, timestamps_ms) -> int:
        """One batch to partition ``p`` of topic ``t``; its first offset (IdempotentProducer
        numbers it)."""
        return t.log(p).append_batch(values, keys=keys, headers=headers, timestamps_ms=timestamps_ms)

    def flush(self) -> None:
        """Write and fsync every buffered record of every topic (whatever the flush policy)."""
        self._broker.flush()

    def close(self) -> None:
        """Flush. The producer owns nothing else; the Broker owns the logs."""
        self.flush()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
