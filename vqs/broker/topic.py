"""A topic: a name, N partitions (each a storage ``Log``) and its config.

Also the record and metadata types that producers and consumers hand out.
"""

from __future__ import annotations

import logging
import threading
from typing import NamedTuple

from ..errors import InvalidRecord, LogClosedError, PartitionDoesNotExist

logger = logging.getLogger(__name__)


class TopicPartition(NamedTuple):
    """A (topic, partition) pair; any ``(str, int)`` tuple is accepted in its place."""

    topic: str
    partition: int


class RecordMetadata(NamedTuple):
    """Where ``Producer.send`` put a record."""

    topic: str
    partition: int
    offset: int


class PartitionLag(NamedTuple):
    """One row of ``Broker.describe_group``: a group's committed offset vs the log."""

    topic: str
    partition: int
    committed: int | None  # None: never committed (the group's consumers start at start_offset)
    start_offset: int
    end_offset: int
    lag: int  # end_offset - committed, never below 0; end_offset - start_offset if never committed


class ConsumerRecord:
    """A record as a consumer sees it."""

    __slots__ = ("topic", "partition", "offset", "timestamp_ms", "key", "value", "headers")

    def __init__(self, topic, partition, offset, timestamp_ms, key, value, headers=()):
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp_ms = timestamp_ms
        self.key = key
        self.value = value
        self.headers = headers

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def __repr__(self) -> str:
        return (
            f"ConsumerRecord(topic={self.topic!r}, partition={self.partition}, "
            f"offset={self.offset}, timestamp_ms={self.timestamp_ms}, key={self.key!r}, "
            f"value={self.value!r}, headers={self.headers!r})"
        )

    def __eq__(self, other) -> bool:
        if not isinstance(other, ConsumerRecord):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    __hash__ = None


def wrap_records(topic: str, partition: int, records) -> list[ConsumerRecord]:
    return [
        ConsumerRecord(topic, partition, r.offset, r.timestamp_ms, r.key, r.value, r.headers)
        for r in records
    ]


class Topic:
    """A topic of a Broker. Get one with ``broker.topic(name)``.

    ``partitions`` is the partition count; ``config`` the effective settings
    (the topic's own, else the broker's defaults), ``overrides`` the topic's own
    settings only. Offsets are per partition:
    ``start_offset(p)`` is the first offset still stored (retention moves it),
    ``end_offset(p)`` the offset the next record will get. ``topic_id`` is the
    16 bytes of its id (Kafka's topic id): drawn when the topic was created, so
    a topic made again under the same name has another.
    """

    def __init__(
        self, name: str, directory: str, partitions: int, config: dict, logs: list, overrides=None,
        topic_id: bytes = bytes(16),
    ):
        self.name = name
        self.topic_id = topic_id
        self.directory = directory
        self.partitions = partitions
        self.config = config
        self.overrides = overrides or {}  # the topic's own settings (create_topic, alter_topic)
        self._logs = logs
        self._closed = False
        self._waiters: tuple = ()
        self._waiters_lock = threading.Lock()
        self.compacted = False
        self.flush_always = False
        self._config_changed()

    def _config_changed(self) -> None:
        """Derive what the hot paths read from ``config`` (call after changing it)."""
        #: cleanup_policy has "compact": the log cleaner keeps the latest record per key
        self.compacted = "compact" in (self.config.get("cleanup_policy") or "")
        #: flush "always": an append returns once fsynced (a server runs it off its event loop)
        self.flush_always = self.config.get("flush") == "always"

    def __repr__(self) -> str:
        return f"Topic({self.name!r}, partitions={self.partitions}, config={self.config!r})"

    def message_limit(self, default: int) -> int:
        """The largest record value this topic takes, in bytes: its own ``max_message_bytes``
        (Kafka's ``max.message.bytes``), else ``default`` (a server's ``max_message_bytes``).
        Every front that appends on a producer's behalf checks this one rule first."""
        return self.config.get("max_message_bytes") or default

    def check_keys(self, keys, count: int) -> None:
        """A compacted topic takes only records with keys (Kafka: INVALID_RECORD): raise
        InvalidRecord, nothing appended, if one of ``count`` records (``keys``: None, or one
        key or None per record) has none. Every front that appends checks this one rule."""
        if self.compacted and (keys is None or any(k is None for k in keys)):
            missing = count if keys is None else sum(k is None for k in keys)
            raise InvalidRecord(f"topic {self.name!r} is compacted (cleanup_policy={self.config['cleanup_policy']}): "
                                f"every record needs a key, and {missing} of the {count} record(s) have none")

    # -- partitions -----------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """Closed: deleted, or its broker closed (``add_waiter``'s waiters were woken)."""
        return self._closed

    def log(self, partition: int):
        """The storage Log of ``partition`` (for advanced use; write through a Producer)."""
        if self._closed:
            raise LogClosedError(f"topic {self.name!r} is closed (deleted, or its broker closed)")
        if not isinstance(partition, int) or isinstance(partition, bool) or not (
            0 <= partition < self.partitions
        ):
            raise PartitionDoesNotExist(self.name, partition, self.partitions)
        return self._logs[partition]

    def start_offset(self, partition: int) -> int:
        return self.log(partition).start_offset

    def end_offset(self, partition: int) -> int:
        return self.log(partition).end_offset

    def start_offsets(self) -> list[int]:
        """``start_offset`` of every partition, indexed by partition."""
        return [self.log(p).start_offset for p in range(self.partitions)]

    def end_offsets(self) -> list[int]:
        """``end_offset`` of every partition, indexed by partition."""
        return [self.log(p).end_offset for p in range(self.partitions)]

    @property
    def size_bytes(self) -> int:
        return sum(self.log(p).size_bytes for p in range(self.partitions))

    def describe(self) -> dict:
        """A JSON-ready summary: name, partitions, config, offsets and sizes per partition."""
        parts = []
        for p in range(self.partitions):
            log = self.log(p)
            parts.append(
                {
                    "partition": p,
                    "start_offset": log.start_offset,
                    "end_offset": log.end_offset,
                    "size_bytes": log.size_bytes,
                    "segments": log.segment_count,
                }
            )
        return {
            "name": self.name,
            "partitions": self.partitions,
            "config": dict(self.config),
            "partition_info": parts,
        }

    def read(
        self,
        partition: int,
        offset: int,
        *,
        max_records: int = 500,
        max_bytes: int = 1 << 20,
        timeout: float = 0.0,
    ) -> list[ConsumerRecord]:
        """Stateless fetch: records of ``partition`` from ``offset`` on.

        Waits up to ``timeout`` seconds for a record if there is none yet (long
        poll; no busy loop). Raises OffsetOutOfRange below the start offset or
        above the end offset.
        """
        log = self.log(partition)
        records = log.read(offset, max_records=max_records, max_bytes=max_bytes)
        if not records and timeout > 0 and log.wait_for(offset, timeout):
            records = log.read(offset, max_records=max_records, max_bytes=max_bytes)
        return wrap_records(self.name, partition, records)

    def _add_partitions(self, logs: list) -> None:
        """Append the Logs of new partitions (the catalog's ``add_partitions``). The list grows
        before the count does, so a reader that sees the new count finds its Log."""
        self._logs.extend(logs)
        self.partitions = len(self._logs)
        self._notify()

    # -- new-data notification (consumers waiting on several partitions) -------------
    def add_waiter(self, event) -> None:
        """Have ``event.set()`` called after every append to any partition of this topic
        (from the appending thread; without a lock held), and when the topic closes.
        Anything with a ``set()`` will do: the server's fronts wake an asyncio task with it
        (vqs/server/long_poll.py), an embedded consumer a ``threading.Event``."""
        with self._waiters_lock:
            self._waiters = self._waiters + (event,)

    def remove_waiter(self, event) -> None:
        """Undo ``add_waiter`` (a waiter not added is ignored)."""
        with self._waiters_lock:
            self._waiters = tuple(e for e in self._waiters if e is not event)

    def _notify(self) -> None:
        for event in self._waiters:  # a tuple read atomically: never changes under us
            event.set()

    # -- lifecycle --------------------------------------------------------------------
    def _close(self) -> None:
        """Close every partition log (flushes them). Called by the Broker only."""
        if self._closed:
            return
        self._closed = True
        errors = []
        for log in self._logs:
            try:
                log.close()
            except Exception as e:  # close the others anyway
                errors.append(e)
        self._notify()
        if errors:
            for extra in errors[1:]:  # the first is raised; the others would be lost
                logger.error("closing a partition of topic %s also failed", self.name, exc_info=extra)
            raise errors[0]
