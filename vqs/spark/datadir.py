"""Path mode: the Spark connector's access to a VQS data directory.

The layout is the Broker's (vqs.broker.layout, the one place naming the files)::

    DATA/.lock                      the owner's directory lock (the Broker's)
    DATA/topics/{topic}/topic.json  {"name", "id", "partitions", "config"}
    DATA/topics/{topic}/{p}/        partition p: a Log directory

Reading takes no lock: every partition is opened with
``Log.open(dir, readonly=True)``, which sees a consistent prefix while the
owner keeps appending.

Writing needs ownership. A writer (a Spark task, or the driver committing a
streaming micro-batch) takes a *shared* ``flock`` on ``DATA/.lock``: it fails
at once, naming the holder's pid, when another process (a Broker, a server)
owns the directory exclusively, and it keeps a Broker from opening the
directory while Spark writes. Several Spark writers share the directory; each
partition log is then opened as its writer with the log's own lock, which
serialises Spark tasks writing the same partition. A writer holds at most one
partition lock at a time and waits for a busy one, so writers cannot deadlock.
"""

from __future__ import annotations

import json
import logging
import os
import time

from ..broker import layout
from ..broker.catalog import cleanup_policy, log_value
from ..errors import ConfigError, InvalidRecord, LogLockedError, VQSError
from ..storage import DirLock, Log, MapCache

logger = logging.getLogger(__name__)

#: The segment mappings path-mode scans keep in this process (a Spark Python
#: worker is reused for task after task, query after query, over the same
#: segments): a kept mapping saves the kernel's page-table work of mapping and
#: unmapping a segment for every task, about as much CPU as the CRC check of
#: its data (vqs/storage/map_cache.py). 16 segments of 128 MiB: 2 GiB of
#: address space and 16 file descriptors at most; the pages are the page
#: cache's, shared, and reclaimable as any file page.
SCAN_MAPS = MapCache(max_entries=16)

#: topic.json "config" keys passed to Log.open when a writer opens a partition.
_LOG_CONFIG_KEYS = (
    "segment_bytes", "segment_ms", "retention_ms", "retention_bytes", "compression",
    "index_interval_bytes", "batch_max_records", "batch_max_bytes", "recovery",
)


def partition_dir(data_dir: str, topic: str, partition: int) -> str:
    return layout.partition_dir(layout.topic_dir(data_dir, topic), partition)


def read_topic_meta(data_dir: str, topic: str) -> dict | None:
    """The topic's topic.json, or None if the topic does not exist."""
    path = layout.topic_file(layout.topic_dir(data_dir, topic))
    try:
        with open(path, "rb") as f:
            meta = json.loads(f.read())
    except FileNotFoundError:
        return None
    except ValueError as e:
        raise VQSError(f"{path} is not valid JSON: {e}") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("partitions"), int):
        raise VQSError(f"{path} has no partition count")
    return meta


def require_data_dir(data_dir: str) -> None:
    if not os.path.isdir(data_dir):
        raise ConfigError(f"option 'path': {data_dir!r} is not a directory (a VQS data directory)")


class PathSource:
    """Read access to the topics of a data directory (no lock; readonly logs)."""

    #: Bytes per ``read_batches`` when option ``maxBytesPerRead`` is not set
    #: (mapped reads: a larger one costs no memory). The reader itself scans
    #: (``scan_batches``: a segment at a time), which no byte count bounds.
    read_bytes_default = 16 << 20

    def __init__(self, data_dir: str):
        self.data_dir = data_dir
        self._logs: dict[tuple[str, int], object] = {}

    # -- catalog ---------------------------------------------------------
    def partition_count(self, topic: str, *, option: str = "topic") -> int:
        require_data_dir(self.data_dir)
        meta = read_topic_meta(self.data_dir, topic)
        if meta is None:
            raise ConfigError(
                f"option '{option}': topic {topic!r} does not exist in {self.data_dir}"
            )
        return int(meta["partitions"])

    # -- logs ------------------------------------------------------------
    def log(self, topic: str, partition: int, *, refresh: bool = False):
        key = (topic, partition)
        lg = self._logs.get(key)
        if lg is None:
            d = partition_dir(self.data_dir, topic, partition)
            if not os.path.isdir(d):
                raise VQSError(f"partition directory {d} is missing (topic {topic!r}, partition {partition})")
            lg = Log.open(d, readonly=True)
            self._logs[key] = lg
        elif refresh:
            lg.refresh()
        return lg

    def offsets(self, topic: str, partition: int, *, refresh: bool = True) -> tuple[int, int]:
        """(start_offset, end_offset) of a partition, as of now."""
        lg = self.log(topic, partition, refresh=refresh)
        return lg.start_offset, lg.end_offset

    def partition_offsets(self, topic: str) -> list[tuple[int, int]]:
        """(start_offset, end_offset) of every partition, as of now."""
        return [self.offsets(topic, p) for p in range(self.partition_count(topic))]

    def offset_for_time(self, topic: str, partition: int, ts_ms: int) -> int | None:
        return self.log(topic, partition, refresh=True).offset_for_time(ts_ms)

    def read_batches(self, topic: str, partition: int, offset: int, max_bytes: int):
        """Whole CRC-checked RecordBatches holding records >= offset (the first
        may begin below it). Raises OffsetOutOfRange below the start offset."""
        lg = self.log(topic, partition)
        batches = lg.read_batches(offset, max_bytes=max_bytes, mapped=True)
        if not batches:
            # A readonly log sees what was written when it was opened or last
            # refreshed; a planned range may end beyond that.
            lg.refresh()
            batches = lg.read_batches(offset, max_bytes=max_bytes, mapped=True)
        return batches

    def scan_batches(self, topic: str, partition: int, offset: int, end: int):
        """Whole CRC-checked RecordBatches holding records in [offset, end),
        lazily (``Log.scan_batches``: each segment mapped once, each batch's
        CRC checked when it is asked for, right before the reader converts and
        sends it). Raises OffsetOutOfRange below the start offset."""
        lg = self.log(topic, partition)
        if lg.end_offset < end:
            # A readonly log sees what was written when it was opened or last
            # refreshed; a planned range may end beyond that.
            lg.refresh()
        return lg.scan_batches(offset, end, maps=SCAN_MAPS)

    def close(self) -> None:
        logs, self._logs = self._logs, {}
        for lg in logs.values():
            try:
                lg.close()
            except Exception:  # a readonly log holds nothing to lose: close the others
                logger.warning("closing %s failed", lg, exc_info=True)

    def __getstate__(self):  # never pickle open logs
        return {"data_dir": self.data_dir, "_logs": {}}


class SharedOwnership:
    """A shared flock on ``DATA/.lock``: Spark writers share the directory,
    and nobody else (a Broker, a server) may own it meanwhile."""

    def __init__(self, data_dir: str):
        self.data_dir = data_dir
        self._lock = DirLock(data_dir, shared=True)

    def acquire(self) -> SharedOwnership:
        require_data_dir(self.data_dir)
        try:
            self._lock.acquire()
        except LogLockedError as e:
            raise _owned_error(e) from None
        return self

    def release(self) -> None:
        self._lock.release()

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


def _owned_error(err: LogLockedError) -> LogLockedError:
    who = f"pid {err.holder_pid}" if err.holder_pid else "another process"
    err.args = (
        f"cannot write to {err.path} with option 'path': it is owned by {who} "
        "(a Broker or a VQS server); write through that server with option 'url', "
        "or stop it first",
    )
    return err


def log_config(meta: dict) -> dict:
    cfg = meta.get("config") or {}
    out = {k: log_value(k, cfg[k]) for k in _LOG_CONFIG_KEYS if k in cfg}
    if cleanup_policy(cfg.get("cleanup_policy")) == "compact":  # as the broker opens it: no retention
        out["retention_ms"] = out["retention_bytes"] = None
    return out


def check_keys(meta: dict, topic: str, keys) -> None:
    """A compacted topic takes keyed records only (the broker's Topic.check_keys rule)."""
    policy = (meta.get("config") or {}).get("cleanup_policy") or ""
    if "compact" in policy and (keys is None or any(k is None for k in keys)):
        raise InvalidRecord(f"topic {topic!r} is compacted (cleanup_policy={policy}): every record needs a key")


def open_partition_writer(data_dir: str, topic: str, partition: int, meta: dict, timeout_s: float):
    """Open partition ``partition`` of ``topic`` as its writer, waiting up to
    ``timeout_s`` while another Spark writer holds it. The caller must hold a
    :class:`SharedOwnership` of the data directory."""
    d = partition_dir(data_dir, topic, partition)
    os.makedirs(d, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    delay = 0.002
    while True:
        try:
            return Log.open(d, flush="never", **log_config(meta))
        except LogLockedError as e:
            if time.monotonic() >= deadline:
                raise LogLockedError(d, e.holder_pid) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
