"""Broker: owns a data directory; its catalog of topics, queues and consumer groups.

::

    with vqs.Broker("data", flush="always") as broker:
        broker.create_topic("events", partitions=4)
        broker.producer().send("events", b"hello", key=b"user-1")
        consumer = broker.consumer("events", group="billing")
        for record in consumer.poll(timeout=1.0):
            ...
        consumer.commit()

One process owns a data directory (an exclusive lock on DATA/.lock, whose
error names the holder's pid); other processes go through the server, or read
partition logs with ``Log.open(..., readonly=True)``. Layout: layout.py.

Why over 500 lines: this is the embedded API's one facade (topics, producers,
consumers, groups, queues, redrive), each method a short delegation to the part
that owns the state (catalog, group offsets, coordinator, queue registry).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable

from ..cleaner import CleanStats, check_rate
from ..disk import check_room, raise_open_file_limit
from ..errors import ConfigError, DiskFullError, LogClosedError, OffsetOutOfRange, VQSError
from ..storage import FILE_CACHE, DirLock, check_settings, fsync_dir, make_dirs
from . import layout
from .catalog import TopicCatalog
from .compaction import TopicCleaner
from .consumer import Consumer
from .group_offsets import GroupRegistry
from .names import validate_group, validate_name
from .producer import Producer
from .topic import PartitionLag, Topic, TopicPartition

logger = logging.getLogger(__name__)

# Keyword defaults a Broker passes to every Log.open (docs/INTERNALS.md).
LOG_OPTIONS = frozenset(
    {
        "segment_bytes",
        "segment_ms",
        "retention_ms",
        "retention_bytes",
        "flush",
        "flush_interval_ms",
        "recovery",
        "compression",
        "index_interval_bytes",
        "batch_max_records",
        "batch_max_bytes",
        "min_free_bytes",
    }
)


def _check_queue_defaults(queue_defaults: dict) -> None:
    """Settings that are not Log settings must be queue attributes (visibility_timeout, ...)."""
    from .queue.config import normalize  # late: queue code loads on first use

    try:
        normalize(queue_defaults, creating=True)
    except (VQSError, ValueError, TypeError) as e:
        raise ConfigError(
            f"Broker setting(s) {', '.join(sorted(queue_defaults))} refused ({e}); a Broker takes: clock, "
            f"retention_check_interval_ms, queue_maintenance_interval_ms, the Log settings "
            f"{', '.join(sorted(LOG_OPTIONS))}, and queue attributes (visibility_timeout, ...)"
        ) from e


def _open_log(path: str, **kwargs):
    from ..storage import Log

    return Log.open(path, **kwargs)


class Broker:
    """A data directory's topics, consumer groups and queues, in this process.

    ``defaults`` are Log settings applied to every topic partition: ``flush``,
    ``flush_interval_ms``, ``segment_bytes``, ``segment_ms``, ``retention_ms``,
    ``retention_bytes``, ``recovery``, ``compression``, ``index_interval_bytes``,
    ``batch_max_records``, ``batch_max_bytes``, ``min_free_bytes`` (a topic's own
    settings override them; ``min_free_bytes`` applies to topic partitions and
    queue message logs, never to queue state logs, so receives and deletes
    always have room), plus default queue attributes (``visibility_timeout=60``, ...); all
    of them are passed to the queue registry. Anything else is a ConfigError.

    ``clock`` (seconds, like ``time.time``) is used for record timestamps,
    retention and queues when given, so tests can move time. A background
    thread applies topic retention every ``retention_check_interval_ms`` (also
    on demand: ``apply_retention()``) and queue maintenance (retention, disk
    reclaim) every ``queue_maintenance_interval_ms``. The log cleaner looks at
    compacted topics every ``cleaner_interval_ms``, reading and writing at most
    ``cleaner_io_max_bytes_per_second`` (None: no bound; Kafka's
    ``log.cleaner.io.max.bytes.per.second``).
    """

    def __init__(
        self,
        path,
        *,
        clock: Callable[[], float] | None = None,
        retention_check_interval_ms: int = 300_000,
        queue_maintenance_interval_ms: int = 1000,
        cleaner_interval_ms: int = 15_000,
        cleaner_io_max_bytes_per_second: float | None = None,
        **defaults,
    ):
        queue_defaults = {k: v for k, v in defaults.items() if k not in LOG_OPTIONS}
        if queue_defaults:
            _check_queue_defaults(queue_defaults)
        # (the Log settings as defaults: refused now, not at the first topic or queue)
        check_settings({k: v for k, v in defaults.items() if k in LOG_OPTIONS})
        for name, value in (
            ("retention_check_interval_ms", retention_check_interval_ms),
            ("queue_maintenance_interval_ms", queue_maintenance_interval_ms),
            ("cleaner_interval_ms", cleaner_interval_ms),
        ):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"{name} must be > 0, not {value!r}")
        check_rate("cleaner_io_max_bytes_per_second", cleaner_io_max_bytes_per_second)
        self.path = os.path.abspath(os.fspath(path))
        self.defaults = dict(defaults)  # all of them: the queue registry gets these
        self.log_defaults = {k: v for k, v in defaults.items() if k in LOG_OPTIONS}
        self._clock = clock or time.time
        self._clock_ms = (lambda: int(clock() * 1000)) if clock is not None else None
        self._retention_interval_s = retention_check_interval_ms / 1000
        self._queue_interval_s = queue_maintenance_interval_ms / 1000
        self._lock = threading.RLock()
        self._closed = False
        self._queues = None
        self._coordinator = None
        self._share_groups = None
        self._group_configs = None
        self._producer_states = None
        self._retention_thread: threading.Thread | None = None
        self._stop = threading.Event()

        # Many partitions need many files: raise the soft open-file limit to the
        # hard limit as servers do (once per process; logged), and let the file
        # cache's derived cap follow (file_cache.py bounds what stays open).
        raise_open_file_limit()
        FILE_CACHE.limits_changed()
        created = not os.path.isdir(self.path)
        if created and os.path.exists(self.path):
            raise ConfigError(f"{self.path} is a file, not a directory (a data directory)")
        make_dirs(self.path)  # (a spent quota: DiskFullError)
        if created:
            fsync_dir(os.path.dirname(self.path))
        self._dir_lock = DirLock(self.path, hint=(
            "reach it through the server that owns it: vqs.Client(url) or `vqs --url`; read its topics "
            "without the lock with Spark's path mode or Log.open(DIR/topics/T/P, readonly=True)")).acquire()
        try:
            for sub_path in (layout.topics_dir(self.path), layout.groups_dir(self.path)):
                if not os.path.isdir(sub_path):
                    make_dirs(sub_path)
                    fsync_dir(self.path)
            self._groups = GroupRegistry(layout.groups_dir(self.path))
            self._groups.cleanup()
            open_log = _open_log if clock is None else functools.partial(_open_log, clock=clock)
            self._catalog = TopicCatalog(self.path, self.log_defaults, open_log)
            self._catalog.load()
            self._cleaner = TopicCleaner(self._catalog, cleaner_interval_ms / 1000, self._clock_ms,
                                         io_max_bytes_per_s=cleaner_io_max_bytes_per_second,
                                         snapshot_producers=lambda t, p: self.producer_states.snapshot_partition(t, p))
            if any(t.compacted for t in self._catalog.all()):
                self._cleaner.start()
            if os.path.isdir(layout.queues_dir(self.path)):
                self._queue_registry()  # recover existing queues now, not at first use
            self._retention_thread = threading.Thread(
                target=self._maintenance_loop, name=f"vqs-maintenance:{self.path}", daemon=True
            )
            self._retention_thread.start()
        except BaseException:
            self._closed = True
            try:
                for part in (self._queues, getattr(self, "_catalog", None)):
                    if part is not None:
                        try:
                            part.close()
                        except Exception:  # the original error matters more
                            logger.exception("closing %s after a failed open", part)
            finally:
                self._dir_lock.release()
            raise

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._catalog.names())} topics"
        return f"Broker({self.path!r}, {state})"

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"the broker of {self.path} is closed")

    def close(self) -> None:
        """Stop retention, close every log and queue (flushing them), release the lock."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop.set()
        if self._coordinator is not None:
            self._coordinator.close()
        if self._share_groups is not None:
            try:
                self._share_groups.close()
            except Exception:  # its state logs are the truth; the next open replays them
                logger.exception("closing the share groups of %s failed", self.path)
        if self._producer_states is not None:
            try:
                self._producer_states.snapshot()  # bounds the next open's scan; the log is the truth
            except DiskFullError as e:  # expected on a full disk: the next open scans further
                logger.warning("snapshot of producer sequences not written: %s", e)
            except Exception:
                logger.exception("snapshot of producer sequences in %s failed", self.path)
        thread = self._retention_thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        self._cleaner.close()
        errors = []
        with self._lock:
            for close in (self._catalog.close, self._queues.close if self._queues else None):
                if close is None:
                    continue
                try:
                    close()
                except Exception as e:  # close the rest anyway
                    errors.append(e)
            self._dir_lock.release()
        if errors:
            for extra in errors[1:]:  # the first is raised; the others would be lost
                logger.error("closing %s also failed", self.path, exc_info=extra)
            raise errors[0]

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def flush(self) -> None:
        """Write and fsync every buffered record of every topic and queue."""
        self._check_open()
        for topic in self._catalog.all():
            for p in range(topic.partitions):
                try:
                    topic.log(p).flush()
                except LogClosedError:
                    pass  # deleted meanwhile
        if self._queues is not None:
            self._queues.flush()

    # -- retention ---------------------------------------------------------------------------
    def apply_retention(self) -> int:
        """Apply every topic's time/size retention now; returns segments deleted."""
        self._check_open()
        now_ms = self._clock_ms() if self._clock_ms is not None else None
        deleted = 0
        with self._lock:  # not concurrently with delete_topic / close
            if self._closed:
                return 0
            for topic in self._catalog.all():
                for p in range(topic.partitions):
                    deleted += topic.log(p).apply_retention(now_ms)
        return deleted

    def _maintenance_loop(self) -> None:
        """Topic retention every retention_check_interval_ms; queue maintenance
        (retention, disk reclaim) every queue_maintenance_interval_ms."""
        now = time.monotonic()
        next_retention = now + self._retention_interval_s
        next_queues = now + self._queue_interval_s
        while not self._stop.wait(max(0.0, min(next_retention, next_queues) - time.monotonic())):
            now = time.monotonic()
            if now >= next_retention:
                next_retention = now + self._retention_interval_s
                try:
                    self.apply_retention()
                except LogClosedError:
                    return
                except Exception:  # keep the thread alive; say what failed
                    logger.exception("topic retention pass failed in %s", self.path)
            if now >= next_queues:
                next_queues = now + self._queue_interval_s
                registry = self._queues
                if registry is not None and not self._closed:
                    try:
                        registry.maintenance()
                    except LogClosedError:
                        return
                    except Exception:
                        logger.exception("queue maintenance failed in %s", self.path)

    # -- topics ------------------------------------------------------------------------------
    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        retention_ms: int | None = None,
        retention_bytes: int | None = None,
        segment_bytes: int | None = None,
        compression: str | None = None,
        max_message_bytes: int | None = None,
        *,
        cleanup_policy: str | None = None,
        delete_retention_ms: int | None = None,
        min_cleanable_dirty_ratio: float | None = None,
        min_compaction_lag_ms: int | None = None,
        max_compaction_lag_ms: int | None = None,
        segment_ms: int | None = None,
        flush: str | None = None,
        flush_interval_ms: int | None = None,
    ) -> Topic:
        """Create a topic of ``partitions`` partitions; None settings follow the broker's defaults.

        ``retention_bytes`` is per partition, as in Kafka; ``retention_ms``/``retention_bytes``
        of -1 mean no limit (Kafka's -1). ``max_message_bytes`` bounds each record's value for
        the server's fronts (``Topic.message_limit``; None: the server's ``max_message_bytes``).
        ``cleanup_policy`` (Kafka's ``cleanup.policy``): ``"delete"`` (the default: retention
        deletes old segments), ``"compact"`` (the log cleaner keeps the latest record of every
        key, retention off; keyless records are refused: InvalidRecord) or ``"compact,delete"``
        (both). The cleaner's settings, Kafka's: ``delete_retention_ms`` (how long a tombstone,
        a null value, stays once cleaned; default one day), ``min_cleanable_dirty_ratio``
        (0.5), ``min_compaction_lag_ms`` (0), ``max_compaction_lag_ms`` (None: no bound).
        ``flush`` / ``flush_interval_ms``: the partitions' flush policy (``Log.open``'s: what
        an acknowledged record survives) over the broker's (Kafka's ``flush.messages=1`` is
        ``"always"``, ``flush.ms`` is ``"interval"`` at that many ms); a server answers such a
        topic's produce requests after the fsync whatever its own ``--flush``.
        Raises TopicAlreadyExists, InvalidName or ConfigError.
        """
        with self._lock:
            self._check_open()
            topic = self._catalog.create(
                name,
                partitions,
                {
                    "retention_ms": retention_ms,
                    "retention_bytes": retention_bytes,
                    "segment_bytes": segment_bytes,
                    "compression": compression,
                    "max_message_bytes": max_message_bytes,
                    "cleanup_policy": cleanup_policy,
                    "delete_retention_ms": delete_retention_ms,
                    "min_cleanable_dirty_ratio": min_cleanable_dirty_ratio,
                    "min_compaction_lag_ms": min_compaction_lag_ms,
                    "max_compaction_lag_ms": max_compaction_lag_ms,
                    "segment_ms": segment_ms,
                    "flush": flush,
                    "flush_interval_ms": flush_interval_ms,
                },
            )
            if topic.compacted:
                self._cleaner.start()
            return topic

    @property
    def cleaner_totals(self) -> CleanStats:
        """What the log cleaner did since this broker opened (segments and bytes in and out,
        records removed), every pass summed."""
        return self._cleaner.totals

    def compact(self, topic: str | None = None, *, force: bool = False) -> CleanStats:
        """Run the log cleaner now over ``topic`` (None: every compacted topic), as its
        background thread does every ``cleaner_interval_ms``; ``force`` ignores
        ``min_cleanable_dirty_ratio``. Returns what it did (segments and bytes in and out,
        records removed)."""
        self._check_open()
        return self._cleaner.run(topic, force=force)

    def alter_topic(self, name: str, settings: dict, *, replace: bool = False,
                    validate_only: bool = False) -> Topic:
        """Change topic ``name``'s own settings (``create_topic``'s keywords; Kafka's AlterConfigs
        with ``replace=True``, where every setting not named returns to the broker's default, and
        IncrementalAlterConfigs without). A None value returns that setting to the default.
        Validated as ``create_topic`` validates (ConfigError, nothing changed); ``validate_only``
        changes nothing. Durable when it returns, and in force for every front's next request
        (retention, segment size and compression for what is written next; existing segments
        stay as written)."""
        with self._lock:
            self._check_open()
            return self._catalog.alter(name, settings, replace=replace, validate_only=validate_only)

    def topic(self, name: str) -> Topic:
        """The topic ``name``; raises TopicDoesNotExist (or InvalidName)."""
        self._check_open()
        return self._catalog.get(name)

    def topic_defaults(self) -> dict:
        """The settings a topic without its own has (``create_topic``'s keywords; None: no limit,
        or for ``max_message_bytes`` the server's default)."""
        return self._catalog.defaults()

    def topics(self) -> list[str]:
        """Names of all topics, sorted."""
        self._check_open()
        return self._catalog.names()

    def create_partitions(self, name: str, partitions: int) -> Topic:
        """Grow topic ``name`` to ``partitions`` partitions in total (Kafka's CreatePartitions).
        Existing partitions keep their records; keys map to partitions by the new count from
        now on. ConfigError when the count would not grow; crash-safe (catalog.py)."""
        with self._lock:
            self._check_open()
            return self._catalog.add_partitions(name, partitions)

    def delete_records(self, name: str, partition: int, before_offset: int) -> int:
        """Make ``before_offset`` the first offset of the partition (Kafka's DeleteRecords): the
        records below it are no longer read and their whole segments are deleted. -1 means the
        end offset. Returns the new start offset (never lower than it was); OffsetOutOfRange
        past the end offset."""
        log = self.topic(name).log(partition)
        end = log.end_offset
        if before_offset == -1:
            before_offset = end
        if not isinstance(before_offset, int) or isinstance(before_offset, bool) or not 0 <= before_offset <= end:
            raise OffsetOutOfRange(f"cannot delete records of {name}[{partition}] before offset "
                                   f"{before_offset!r}: the end offset is {end}", offset=before_offset,
                                   start_offset=log.start_offset, end_offset=end)
        log.delete_before(before_offset)
        return log.start_offset

    def delete_topic(self, name: str) -> None:
        """Delete a topic, its data and every group's committed offsets for it."""
        with self._lock:
            self._check_open()
            self._catalog.delete(name)
            self._groups.remove_topic(name)
            if self._share_groups is not None:
                self._share_groups.forget_topic(name)

    # -- producers and consumers -------------------------------------------------------------
    def producer(self, *, idempotent: bool = False) -> Producer:
        """A Producer. ``idempotent=True``: an IdempotentProducer (idempotent.py), whose
        batches carry a producer id and per-partition sequences so that each is appended
        once however often it is retried; a gap raises OutOfOrderSequence."""
        self._check_open()
        if idempotent:
            from .idempotent import IdempotentProducer

            return IdempotentProducer(self, clock_ms=self._clock_ms)
        return Producer(self, clock_ms=self._clock_ms)

    def consumer(
        self,
        topics=None,
        group: str | None = None,
        *,
        auto_offset_reset: str = "earliest",
        reset_out_of_range: bool = False,
        max_partition_bytes: int = 1 << 20,
        session_timeout_ms: int = 30_000,
    ) -> Consumer:
        """A consumer of ``topics`` (a name or a list), or of nothing until ``assign``.
        With ``group`` and ``topics`` it is a member of the group: the broker divides the
        partitions among the members (consumer.py); a member that does not poll for
        ``session_timeout_ms`` is removed. Positions start at the group's committed
        offsets and ``commit()`` stores them. A VQS consumer's group is a VQS name
        (``validate_name``; Kafka clients may use any non-empty group id)."""
        self._check_open()
        if group is not None:
            validate_name(group, "group")
        return Consumer(
            self,
            topics,
            group,
            group_offsets=None if group is None else self._groups.get(group),
            auto_offset_reset=auto_offset_reset,
            reset_out_of_range=reset_out_of_range,
            max_partition_bytes=max_partition_bytes,
            session_timeout_ms=session_timeout_ms,
        )

    @property
    def producer_states(self):
        """Idempotent producers' ids and sequences (producer_state.py), made on first use."""
        self._check_open()
        if self._producer_states is None:
            from .producer_state import ProducerStates

            with self._lock:
                if self._producer_states is None:
                    self._producer_states = ProducerStates(self.path)
        return self._producer_states

    # -- consumer groups ---------------------------------------------------------------------
    @property
    def coordinator(self):
        """The group coordinator (membership and rebalances; coordinator.py), made on first use."""
        self._check_open()
        if self._coordinator is None:
            from .coordinator import GroupCoordinator

            configs = self.group_configs  # (read now: the coordinator's lock never waits on a file)
            with self._lock:
                if self._coordinator is None:
                    c = GroupCoordinator(partitions=lambda t: self.topic(t).partitions)
                    c.consumer.own_settings = configs.consumer_settings
                    self._coordinator = c
        return self._coordinator

    @property
    def group_configs(self):
        """The group ids' own configs (Kafka's names; vqs.broker.group_configs), read on first use."""
        self._check_open()
        if self._group_configs is None:
            from .group_configs import GroupConfigs

            with self._lock:
                if self._group_configs is None:
                    self._group_configs = GroupConfigs(self.path)
        return self._group_configs

    def group_config_values(self, group: str) -> dict[str, tuple[str, bool]]:
        """Every group config of group id ``group`` with the value in force, {Kafka key: (value,
        True if the group's own)}: its own, else the broker's setting. InvalidName for a bad id."""
        validate_group(group)
        return self.group_configs.values(group, self._group_bases())

    def alter_group_configs(self, group: str, changes: dict, *, replace: bool = False,
                            validate_only: bool = False) -> None:
        """Set (a value) or delete (None: back to the broker's setting) Kafka group configs
        of group id ``group``, whatever kind of group it is: a consumer-protocol group's
        ``consumer.session.timeout.ms`` and ``consumer.heartbeat.interval.ms``, a share group's
        ``share.*`` and dead-letter configs; ``replace``: every config not named goes back to the
        broker's (Kafka's AlterConfigs). Checked first (ConfigError naming a bad one, nothing
        changed: group_configs.py's ``checked``); ``validate_only`` only checks. Durable on
        return, in force for the group's next heartbeat, fetch or acknowledgement; concurrent
        alterations of one group apply one after the other (``GroupConfigs.alter``)."""
        from .group_configs import checked

        self._check_open()
        validate_group(group)
        bases = self._group_bases()
        self.group_configs.alter(
            group, lambda own: checked({} if replace else own, changes, bases, self.topics),
            validate_only=validate_only,
            before_write=lambda: check_room(self.path, self.log_defaults.get("min_free_bytes"),
                                            "altering a group's configs"))

    def _group_bases(self) -> dict:
        """Where a group without configs of its own takes each value (group_configs.SOURCES)."""
        return {"consumer": self.coordinator.consumer, "share": self.share_groups.settings}

    @property
    def share_groups(self):
        """The share groups (membership, assignment, durable delivery state; vqs.broker.share),
        made on first use."""
        self._check_open()
        if self._share_groups is None:
            from .share import ShareGroups

            with self._lock:
                if self._share_groups is None:
                    d = self.log_defaults
                    self._share_groups = ShareGroups(self, flush=d.get("flush", "interval"),
                                                     flush_interval_ms=d.get("flush_interval_ms", 100),
                                                     min_free_bytes=d.get("min_free_bytes"))
        return self._share_groups

    def share_consumer(self, topics, group: str):
        """A member of share group ``group`` reading ``topics`` with queue semantics: each record
        is acquired by one member, acknowledged (accept, release, reject), redelivered when its
        lock ends (vqs.broker.share.consumer). The same groups Kafka's ShareConsumer joins."""
        self._check_open()
        validate_group(group)
        from .share import ShareConsumer

        return ShareConsumer(self, topics, group)

    def share_group_names(self) -> list[str]:
        """The share groups with members now or stored state, sorted."""
        self._check_open()
        return self.share_groups.groups()

    def describe_share_group(self, group: str) -> dict | None:
        """A share group's members (epochs, topics, partitions) and, per share partition, its
        start offset, records in flight and their delivery counts; None for an unknown group."""
        self._check_open()
        validate_group(group)
        return self.share_groups.describe_full(group)

    def group_members(self, group: str) -> dict:
        """The group's live members, state and generation (``GroupCoordinator.membership``)."""
        self._check_open()
        validate_group(group)
        return self.coordinator.membership(group)

    def groups(self) -> list[str]:
        """Names of the groups that have committed offsets, sorted."""
        self._check_open()
        return self._groups.names()

    def group_offsets(self, group: str) -> dict[TopicPartition, int]:
        """A group's committed offsets (empty if it has none)."""
        self._check_open()
        return self._groups.get(group).all()

    def commit_offsets(self, group: str, offsets: dict, metadata: dict | None = None,
                       leader_epochs: dict | None = None) -> None:
        """Commit ``{(topic, partition): next_offset}`` for ``group`` (e.g. for a server client);
        ``metadata`` ``{(topic, partition): str}`` and ``leader_epochs`` ``{(topic, partition): int}``:
        each partition's commit metadata and leader epoch (Kafka's), kept until its next commit
        (group_offsets.py)."""
        self._check_open()
        checked = {}
        for tp, off in offsets.items():
            topic, partition = tp
            self.topic(topic).log(partition)  # validates both
            checked[TopicPartition(topic, partition)] = off
        meta = {TopicPartition(*tp): m for tp, m in (metadata or {}).items()}
        epochs = {TopicPartition(*tp): e for tp, e in (leader_epochs or {}).items()}
        self._groups.get(group).commit(checked, meta, epochs)

    def group_offsets_metadata(self, group: str) -> dict[TopicPartition, str]:
        """The commit metadata of a group's partitions committed with some (the others: none)."""
        self._check_open()
        return self._groups.get(group).metadata()

    def group_commits(self, group: str) -> dict[TopicPartition, tuple[int, str, int]]:
        """Every committed partition's (next_offset, metadata, leader_epoch) at one instant
        (leader epoch -1: none), as Kafka's OffsetFetch answers them."""
        self._check_open()
        return self._groups.get(group).commits()

    def delete_group_offsets(self, group: str, partitions) -> int:
        """Forget the group's committed offsets of ``partitions`` ((topic, partition) pairs), as
        Kafka's OffsetDelete; the number forgotten. The caller checks no member reads them."""
        self._check_open()
        return self._groups.get(group).delete([(t, int(p)) for t, p in partitions])

    def describe_group(self, group: str) -> list[PartitionLag]:
        """Every partition of every topic the group has committed on: committed, start and
        end offsets, and lag, sorted by topic and partition.

        ``lag = max(0, end_offset - committed)``. A partition of such a topic that the
        group never committed has ``committed=None`` and ``lag = end_offset - start_offset``:
        a consumer of the group starts there at the start offset (``auto_offset_reset``
        ``"earliest"``, the default), so all of it is unread — what Kafka's
        ``kafka-consumer-groups --describe`` counts with ``auto.offset.reset=earliest``.
        Topics that no longer exist are left out (``group_offsets`` still lists them).
        """
        self._check_open()
        committed_by_topic: dict[str, dict[int, int]] = {}
        for (topic, p), committed in self._groups.get(group).all().items():
            committed_by_topic.setdefault(topic, {})[p] = committed
        rows = []
        for topic in sorted(committed_by_topic):
            committed = committed_by_topic[topic]
            try:
                t = self._catalog.get(topic)
                logs = [(p, t.log(p)) for p in range(t.partitions)]
            except (VQSError, ValueError):
                continue
            for p, log_ in logs:
                start, end = log_.start_offset, log_.end_offset
                c = committed.get(p)
                lag = end - start if c is None else max(0, end - c)
                rows.append(PartitionLag(topic, p, c, start, end, lag))
        return rows

    def offsets(self, topic: str, timestamp_ms: int | None = None) -> list[dict]:
        """Every partition's ``start_offset`` and ``end_offset`` (and, given ``timestamp_ms``, its
        ``offset_for_time``: the first offset at or after that time, None past the end), as
        REST's ``GET /topics/{t}/offsets`` and ``vqs.Client.offsets`` give them."""
        t = self.topic(topic)
        rows = []
        for p in range(t.partitions):
            lg = t.log(p)
            row = {"partition": p, "start_offset": lg.start_offset, "end_offset": lg.end_offset}
            if timestamp_ms is not None:
                row["offset_for_time"] = lg.offset_for_time(timestamp_ms)
            rows.append(row)
        return rows

    def delete_group(self, group: str) -> bool:
        """Forget a group's committed offsets; False if it had none."""
        self._check_open()
        return self._groups.delete(group)

    # -- queues (vqs.broker.queue.registry) --------------------------------------------------------
    def _queue_registry(self):
        registry = self._queues
        if registry is None:
            with self._lock:
                self._check_open()
                if self._queues is None:
                    from .queue.registry import QueueRegistry  # late: queue code loads on first use

                    self._queues = QueueRegistry(
                        layout.queues_dir(self.path),
                        clock=self._clock,
                        defaults=dict(self.defaults),
                    )
                registry = self._queues
        return registry

    @property
    def queue_registry(self):
        """The QueueRegistry of DATA/queues (created on first use), for operations
        beyond create/get/list/delete (dead-letter sources, message move tasks)."""
        self._check_open()
        return self._queue_registry()

    def redrive(self, source: str, destination: str | None = None, *, max_per_second: float | None = None):
        """Move the messages of dead-letter queue ``source`` back to the queues they came from
        (or to ``destination``) on a background thread: SQS's StartMessageMoveTask. Returns the
        ``MoveTask`` (``status``, ``moved``, ``to_move``); one runs per source at a time."""
        self._check_open()
        validate_name(source, "queue")
        if destination is not None:
            validate_name(destination, "queue")
        return self._queue_registry().start_message_move_task(source, destination, max_per_second=max_per_second)

    def redrive_tasks(self, source: str, max_results: int = 10) -> list:
        """The message move tasks of queue ``source``, newest first (``MoveTask``)."""
        self._check_open()
        validate_name(source, "queue")
        return self._queue_registry().list_message_move_tasks(source, max_results)

    def create_queue(self, name: str, /, **attributes):
        """Create an SQS-style queue (attributes: see ``QueueRegistry.create``)."""
        self._check_open()
        validate_name(name, "queue")
        return self._queue_registry().create(name, **attributes)

    def queue(self, name: str):
        """The queue ``name``; raises QueueDoesNotExist."""
        self._check_open()
        validate_name(name, "queue")
        return self._queue_registry().get(name)

    def queues(self, prefix: str | None = None) -> list[str]:
        """Names of the queues (starting with ``prefix``, if given)."""
        self._check_open()
        if self._queues is None and not os.path.isdir(layout.queues_dir(self.path)):
            return []  # none yet: no need to make DATA/queues (a full disk may refuse it)
        return self._queue_registry().list(prefix)

    def delete_queue(self, name: str) -> None:
        self._check_open()
        validate_name(name, "queue")
        self._queue_registry().delete(name)
