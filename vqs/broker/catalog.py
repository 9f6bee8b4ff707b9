"""The catalog of topics in a data directory (DATA/topics).

Layout (layout.py)::

    DATA/topics/{topic}/topic.json   {"name", "id", "partitions", "config": {...}}
    DATA/topics/{topic}/{p}/         partition p: a Log directory

Crash safety: a topic is created in ``{topic}~new`` (topic.json written and
fsynced, partition directories made) and renamed into place, and deleted by
renaming it to ``{topic}~deleted`` before removing it; the parent directory is
fsynced after each rename. ``~`` cannot occur in a valid name, so these never
collide with a topic, and a crash at any point leaves either the whole topic
or none of it. Leftovers are removed when the catalog is opened.

A topic's ``id`` (Kafka's topic id, 32 hex digits) is drawn at random when
it is created and kept by every rewrite of topic.json: a topic deleted and
made again under its name is a different topic to clients that name topics
by id. A topic.json written before ids has none; such a topic's id is a
UUID-5 of its name (what every id was before), the same on every open.

Partitions are added in place (``add_partitions``): the new partition
directories are made and the topic directory fsynced first, then topic.json
is replaced atomically with the new count. topic.json is the commit point: a
crash before its rename leaves the old count (the extra directories are
ignored on open and emptied by the next ``add_partitions``: nothing can have
been written to a partition topic.json never named), a crash after it leaves
the new count with every directory it names in place.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import uuid

from ..cleaner import CompactionSettings
from ..disk import check_room
from ..errors import (
    ConfigError,
    CorruptRecordError,
    DiskFullError,
    TopicAlreadyExists,
    TopicDoesNotExist,
    shown,
)
from ..record import CODEC_NAMES
from ..storage import (
    FLUSH_POLICIES,
    LONG_MAX,
    Log,
    atomic_write,
    check_int,
    fsync_dir,
    make_dirs,
    raise_if_disk_full,
    rename_aside,
)
from .layout import TOPIC_FILE, partition_dir, topic_file, topics_dir
from .names import validate_name
from .topic import Topic

logger = logging.getLogger(__name__)

MAX_PARTITIONS = 10_000
# Per-topic settings create_topic accepts; each overrides the broker default. LOG_SETTINGS
# are passed to every partition's Log; max_message_bytes is a rule of the topic's producers
# (every front checks it before appending: Topic.message_limit); COMPACTION_SETTINGS are the
# log cleaner's (compaction.py), cleanup_policy's "compact" turns it on.
LOG_SETTINGS = ("retention_ms", "retention_bytes", "segment_bytes", "segment_ms", "compression", "flush",
                "flush_interval_ms")
COMPACTION_SETTINGS = ("delete_retention_ms", "min_cleanable_dirty_ratio", "min_compaction_lag_ms",
                       "max_compaction_lag_ms")
TOPIC_SETTINGS = (*LOG_SETTINGS, "max_message_bytes", "cleanup_policy", *COMPACTION_SETTINGS)
#: cleanup_policy values (Kafka's cleanup.policy; "delete,compact" is taken as "compact,delete")
CLEANUP_POLICIES = ("delete", "compact", "compact,delete")
COMPRESSIONS = tuple(CODEC_NAMES.values())  # None and the storage codecs' names
_LEGACY_ID_NAMESPACE = uuid.UUID("6f3b1c2e-5d0a-4f4e-9a51-7c2d8e9b0a14")  # ids before topic.json had one
UNLIMITED = -1  # retention_ms / retention_bytes: no limit, even over a broker default (Kafka's -1)
MAX_MESSAGE_BYTES = 1 << 30  # a value must fit in one stored batch (record_batch.MAX_BATCH_BYTES)
MAX_SEGMENT_BYTES = (1 << 31) - 1  # Kafka's segment.bytes is a Java int


def _check_int(name: str, value, minimum: int, maximum: int = LONG_MAX) -> None:
    check_int(name, value, minimum, optional=True, hi=maximum)  # (storage's rule: one message)


def log_value(key: str, value):
    """A topic.json setting as ``Log.open`` takes it: UNLIMITED retention is the Log's None.
    Every opener of a topic's partitions (the catalog, Spark's path-mode writer) goes
    through this, so a topic with unlimited retention opens everywhere."""
    return None if value == UNLIMITED and key in ("retention_ms", "retention_bytes") else value


def validate_topic_settings(partitions, settings: dict) -> None:
    if not isinstance(partitions, int) or isinstance(partitions, bool) or not (
        1 <= partitions <= MAX_PARTITIONS
    ):
        raise ConfigError(f"partitions must be an integer in 1..{MAX_PARTITIONS}, not {partitions!r}")
    _check_int("retention_ms", settings.get("retention_ms"), UNLIMITED)
    _check_int("retention_bytes", settings.get("retention_bytes"), UNLIMITED)
    # (a Log's smallest segment; at most Kafka's segment.bytes, a Java int)
    _check_int("segment_bytes", settings.get("segment_bytes"), 128, MAX_SEGMENT_BYTES)
    _check_int("segment_ms", settings.get("segment_ms"), 1)
    _check_int("max_message_bytes", settings.get("max_message_bytes"), 1, MAX_MESSAGE_BYTES)
    _check_int("flush_interval_ms", settings.get("flush_interval_ms"), 1)
    if settings.get("flush") not in (None, *FLUSH_POLICIES):
        raise ConfigError(f"flush must be one of {', '.join(FLUSH_POLICIES)} or None, not {shown(settings.get('flush'))}")
    policy = settings.get("cleanup_policy")
    if policy is not None and cleanup_policy(policy) not in CLEANUP_POLICIES:
        raise ConfigError(f"cleanup_policy must be one of {', '.join(CLEANUP_POLICIES)}, not {shown(policy)}")
    compaction_settings({k: settings.get(k) for k in COMPACTION_SETTINGS})  # ConfigError naming the setting
    if settings.get("compression") not in COMPRESSIONS:
        raise ConfigError(
            f"compression must be one of {', '.join(map(repr, COMPRESSIONS))}, not {shown(settings.get('compression'))}"
        )


def cleanup_policy(value) -> str | None:
    """``value`` in its one spelling ("delete,compact" and spaces: "compact,delete"); None stays None."""
    if value is None or not isinstance(value, str):
        return value
    parts = sorted({p.strip() for p in value.split(",")})
    return ",".join(parts)


def compaction_settings(config: dict) -> CompactionSettings:
    """The cleaner's settings from a topic's (None: the default)."""
    return CompactionSettings(**{k: v for k, v in config.items() if k in COMPACTION_SETTINGS and v is not None})


class TopicCatalog:
    """Opens, creates and deletes the topics of data directory ``data_dir`` (in DATA/topics)."""

    def __init__(self, data_dir: str, log_defaults: dict, open_log):
        self.directory = topics_dir(data_dir)
        self._log_defaults = dict(log_defaults)
        self._open_log = open_log  # (path, **kwargs) -> Log
        self._topics: dict[str, Topic] = {}
        self._lock = threading.RLock()

    # -- open ----------------------------------------------------------------------------
    def load(self) -> None:
        """Open every topic on disk; remove leftovers of interrupted creates/deletes."""
        make_dirs(self.directory)
        removed = False
        for entry in sorted(os.listdir(self.directory)):
            path = os.path.join(self.directory, entry)
            if "~" in entry:
                shutil.rmtree(path, ignore_errors=True)
                removed = True
                continue
            if not os.path.isdir(path):
                continue
            meta_path = topic_file(path)
            try:
                meta = self._read_meta(meta_path, entry)
            except FileNotFoundError:
                logger.warning("ignoring %s: a directory without %s is not a topic", path, TOPIC_FILE)
                continue
            try:
                self._topics[entry] = self._open_topic(entry, meta["partitions"], meta["config"], meta["id"])
            except BaseException:
                self.close()
                raise
        if removed:
            fsync_dir(self.directory)

    @staticmethod
    def _read_meta(path: str, dirname: str) -> dict:
        try:
            with open(path, "rb") as f:
                meta = json.loads(f.read())
            name, partitions, config = meta["name"], meta["partitions"], meta.get("config") or {}
            if name != dirname or not isinstance(config, dict):
                raise ValueError(f"name {name!r} does not match its directory {dirname!r}")
            tid = meta.get("id")
            if tid is not None and not (isinstance(tid, str) and len(tid) == 32):
                raise ValueError(f"id {tid!r} is not 32 hex digits")
            tid = uuid.uuid5(_LEGACY_ID_NAMESPACE, name) if tid is None else uuid.UUID(hex=tid)
            validate_name(name, "topic")
            validate_topic_settings(partitions, config)
        except FileNotFoundError:
            raise
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise CorruptRecordError(f"unreadable topic metadata {path}: {e}", path=path) from e
        return {"name": name, "partitions": partitions, "config": config, "id": tid.bytes}

    def _log_kwargs(self, explicit: dict) -> dict:
        """``Log.open``'s settings for a topic's partitions: the broker's, the topic's over them."""
        kwargs = dict(self._log_defaults)
        # UNLIMITED overrides a broker default with the Log's "no limit" (None)
        kwargs.update({k: log_value(k, v) for k, v in explicit.items() if v is not None and k in LOG_SETTINGS})
        policy = cleanup_policy(explicit.get("cleanup_policy")) or "delete"
        if policy == "compact":
            # compaction alone: nothing is deleted by age or size (Kafka's cleanup.policy=compact)
            kwargs["retention_ms"] = kwargs["retention_bytes"] = None
        lag = explicit.get("max_compaction_lag_ms")
        if "compact" in policy and lag is not None:
            # the active segment is never cleaned: it rolls by then (Kafka's KIP-354)
            seg_ms = kwargs.get("segment_ms", Log.open.__kwdefaults__["segment_ms"])
            kwargs["segment_ms"] = lag if seg_ms is None else min(seg_ms, lag)
        return kwargs

    @staticmethod
    def _effective(log, kwargs: dict, explicit: dict) -> dict:
        """A topic's ``config``: its settings in force, as its logs apply them (defaults included)."""
        config = {k: getattr(log, k, kwargs.get(k)) for k in LOG_SETTINGS}
        config["flush"] = log.flush_policy
        config["max_message_bytes"] = explicit.get("max_message_bytes")  # None: the caller's default
        config["cleanup_policy"] = cleanup_policy(explicit.get("cleanup_policy")) or "delete"
        defaults = CompactionSettings()
        config.update({k: explicit.get(k, getattr(defaults, k)) for k in COMPACTION_SETTINGS})
        return config

    def _open_topic(self, name: str, partitions: int, explicit: dict, topic_id: bytes) -> Topic:
        directory = os.path.join(self.directory, name)
        kwargs = self._log_kwargs(explicit)
        logs = []
        try:
            for p in range(partitions):
                # defer_clean_marker: reopening an idle partition writes nothing
                # (no marker removal, checkpoint or fsync until its first write).
                logs.append(self._open_log(partition_dir(directory, p), lock=False,
                                           defer_clean_marker=True, **kwargs))
        except BaseException:
            for opened in logs:
                try:
                    opened.close()
                except Exception:  # pragma: no cover - best effort while failing; the original error is raised
                    logger.exception("closing %s after a failed open of topic %s", opened, name)
            raise
        config = self._effective(logs[0], kwargs, explicit)
        return Topic(name, directory, partitions, config, logs, overrides=dict(explicit), topic_id=topic_id)

    # -- queries ---------------------------------------------------------------------------
    def defaults(self) -> dict:
        """What each of TOPIC_SETTINGS is for a topic without its own: the broker's default, else
        the Log's (None: no limit; max_message_bytes None: the caller's default)."""
        compaction = CompactionSettings()
        found = {**Log.open.__kwdefaults__, **self._log_defaults, "max_message_bytes": None,
                 "cleanup_policy": "delete", **{k: getattr(compaction, k) for k in COMPACTION_SETTINGS}}
        return {k: log_value(k, found.get(k)) for k in TOPIC_SETTINGS}

    def get(self, name: str) -> Topic:
        topic = self._topics.get(name)
        if topic is None:
            validate_name(name, "topic")
            raise TopicDoesNotExist(name)
        return topic

    def names(self) -> list[str]:
        return sorted(self._topics)

    def all(self) -> list[Topic]:
        return list(self._topics.values())

    # -- create / delete --------------------------------------------------------------------
    def create(self, name: str, partitions: int, settings: dict) -> Topic:
        validate_name(name, "topic")
        validate_topic_settings(partitions, settings)
        explicit = {k: settings[k] for k in TOPIC_SETTINGS if settings.get(k) is not None}
        if "cleanup_policy" in explicit:
            explicit["cleanup_policy"] = cleanup_policy(explicit["cleanup_policy"])
        with self._lock:
            if name in self._topics:
                raise TopicAlreadyExists(name)
            final = os.path.join(self.directory, name)
            if os.path.exists(final):
                raise TopicAlreadyExists(name)  # a stray directory we did not load: keep it
            # a data write (vqs/disk/space.py): refused under the floor, as appends are
            check_room(self.directory, settings.get("min_free_bytes", self._log_defaults.get("min_free_bytes")),
                       "creating topic")
            tmp = final + "~new"
            shutil.rmtree(tmp, ignore_errors=True)
            make_dirs(tmp)  # (btrfs under a spent quota: even a directory needs space)
            try:
                for p in range(partitions):
                    os.mkdir(partition_dir(tmp, p))
                topic_id = uuid.uuid4().bytes
                meta = {"name": name, "id": topic_id.hex(), "partitions": partitions, "config": explicit}
                atomic_write(
                    topic_file(tmp),
                    json.dumps(meta, indent=1, sort_keys=True).encode() + b"\n",
                )
                os.rename(tmp, final)
            except BaseException as e:
                shutil.rmtree(tmp, ignore_errors=True)
                raise_if_disk_full(e, tmp)  # (a full disk: DiskFullError, not a raw OSError)
                raise
            fsync_dir(self.directory)
            try:
                topic = self._open_topic(name, partitions, explicit, topic_id)
            except BaseException:
                self._remove_dir(name)
                raise
            self._topics[name] = topic
            return topic

    def add_partitions(self, name: str, partitions: int) -> Topic:
        """Grow topic ``name`` to ``partitions`` partitions (crash safety: module doc).
        ConfigError if ``partitions`` is not more than the topic has, or above MAX_PARTITIONS."""
        validate_topic_settings(partitions, {})
        with self._lock:
            topic = self.get(name)
            old = topic.partitions
            if partitions <= old:
                raise ConfigError(
                    f"topic {name!r} has {old} partitions: the count can only grow, not become {partitions}"
                )
            check_room(self.directory, self._log_defaults.get("min_free_bytes"), "adding partitions")
            directory = topic.directory
            try:
                for p in range(old, partitions):
                    path = partition_dir(directory, p)
                    shutil.rmtree(path, ignore_errors=True)  # an interrupted grow's: never written
                    os.mkdir(path)
                fsync_dir(directory)
                meta = {"name": name, "id": topic.topic_id.hex(), "partitions": partitions,
                        "config": dict(topic.overrides)}
                atomic_write(topic_file(directory), json.dumps(meta, indent=1, sort_keys=True).encode() + b"\n")
            except BaseException as e:
                raise_if_disk_full(e, directory)
                raise
            kwargs = self._log_kwargs(topic.overrides)
            logs = []
            try:
                for p in range(old, partitions):
                    logs.append(self._open_log(partition_dir(directory, p), lock=False,
                                               defer_clean_marker=True, **kwargs))
            except BaseException:
                for opened in logs:
                    try:
                        opened.close()
                    except Exception:  # pragma: no cover - best effort; the original error is raised
                        logger.exception("closing %s after a failed grow of topic %s", opened, name)
                raise  # topic.json has the new count: the next open has every partition
            topic._add_partitions(logs)
            return topic

    def alter(self, name: str, settings: dict, *, replace: bool = False, validate_only: bool = False) -> Topic:
        """Change topic ``name``'s own settings (TOPIC_SETTINGS keys): a value sets one, None
        returns it to the broker's default; ``replace``: every setting not named returns to its
        default. Checked as ``create`` checks them (ConfigError, nothing changed), and with
        ``validate_only`` only checked. topic.json is replaced atomically first (the commit
        point: a crash before it leaves the old settings, after it the new ones on the next
        open); then the open partitions take them (``Log.reconfigure``) and ``topic.config``
        shows them, so every front applies them from its next request. A partition whose
        flush change finds the disk full (its buffered, acknowledged records unwritten) keeps
        its old flush policy: DiskFullError names it, after every other partition and setting
        took the change; the committed settings stand, and the same call again completes it
        (roll forward: the topic reports what topic.json holds)."""
        unknown = sorted(set(settings) - set(TOPIC_SETTINGS))
        if unknown:
            raise ConfigError(f"unknown topic setting(s) {', '.join(unknown)}; known: {', '.join(TOPIC_SETTINGS)}")
        with self._lock:
            topic = self.get(name)
            explicit = {} if replace else dict(topic.overrides)
            explicit.update(settings)
            explicit = {k: v for k, v in explicit.items() if v is not None}
            validate_topic_settings(topic.partitions, explicit)
            if "cleanup_policy" in explicit:
                explicit["cleanup_policy"] = cleanup_policy(explicit["cleanup_policy"])
            if validate_only:
                return topic
            kwargs = self._log_kwargs(explicit)
            log_settings = {k: kwargs[k] for k in LOG_SETTINGS if k in kwargs}
            check_room(self.directory, self._log_defaults.get("min_free_bytes"), "altering a topic")
            meta = {"name": name, "id": topic.topic_id.hex(), "partitions": topic.partitions, "config": explicit}
            try:
                atomic_write(topic_file(topic.directory), json.dumps(meta, indent=1, sort_keys=True).encode() + b"\n")
            except BaseException as e:
                raise_if_disk_full(e, topic.directory)
                raise
            logs = [topic.log(p) for p in range(topic.partitions)]
            pending: list[int] = []
            for p, log in enumerate(logs):
                try:
                    log.reconfigure(**log_settings)  # (validated above: the same bounds as open)
                except DiskFullError:
                    pending.append(p)  # (its flush change only: log_settings.py)
            topic.overrides = explicit
            topic.config = self._effective(logs[0], kwargs, explicit)
            topic._config_changed()  # (compacted: the cleaner reads it; flush_always: the fronts)
            if pending:
                raise DiskFullError(
                    f"topic {name}: the new settings are saved and in force, but partition(s) "
                    f"{', '.join(map(str, pending))} keep their flush policy until the records they "
                    f"buffered are written: the disk is full; the same change again once there is "
                    f"room (or the next open) completes it", path=topic_file(topic.directory))
            return topic

    def delete(self, name: str) -> None:
        with self._lock:
            topic = self.get(name)
            del self._topics[name]
            try:
                topic._close()
            except DiskFullError:
                pass  # (a full disk: what its logs could not write goes with the topic)
            finally:
                try:
                    self._remove_dir(name)
                except DiskFullError:  # (btrfs under a spent quota: not even the rename)
                    path = os.path.join(self.directory, name)
                    meta = self._read_meta(topic_file(path), name)
                    self._topics[name] = self._open_topic(name, meta["partitions"], meta["config"], meta["id"])
                    raise

    def _remove_dir(self, name: str) -> None:
        final = os.path.join(self.directory, name)
        doomed = final + "~deleted"
        shutil.rmtree(doomed, ignore_errors=True)
        rename_aside(final, doomed)
        fsync_dir(self.directory)
        shutil.rmtree(doomed, ignore_errors=True)

    def close(self) -> None:
        with self._lock:
            topics, self._topics = list(self._topics.values()), {}
        errors = []
        for topic in topics:
            try:
                topic._close()
            except Exception as e:  # close the rest anyway
                errors.append(e)
        if errors:
            for extra in errors[1:]:  # the first is raised; the others would be lost
                logger.error("closing a topic of %s also failed", self.directory, exc_info=extra)
            raise errors[0]
