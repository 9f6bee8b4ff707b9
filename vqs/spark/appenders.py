"""Appenders: where a writer's routed Rows go, chosen once per write by mode.

Both kinds have the same shape: ``partitions_of(topic)``, ``end_offset(topic,
partition)``, ``append(topic, partition, rows)``, ``close()`` (and a ``with``
block). :func:`open_appender` picks one from the write options:

* path mode, :class:`PathAppender`: appends to the partition logs of the data
  directory, holding at most one partition log (and its lock) at a time, so
  writers cannot deadlock (datadir.py). Opened by the factory it also holds a
  SharedOwnership of the directory until closed;
* url mode, :class:`vqs.spark.remote.UrlAppender`: produce requests to the
  server.

Imports point one way: writer.py -> appenders.py -> remote.py -> rows.py.
"""

from __future__ import annotations

from ..errors import VQSError
from .datadir import SharedOwnership, check_keys, open_partition_writer, read_topic_meta
from .options import WriteOptions
from .remote import UrlAppender
from .rows import Rows


def path_partitions_of(data_dir: str):
    """A ``topic -> partition count`` function over the data directory's topic.json files."""

    def partitions_of(topic: str) -> int:
        m = read_topic_meta(data_dir, topic)
        if m is None:
            raise VQSError(
                f"topic {topic!r} (from the 'topic' column) does not exist in {data_dir}; "
                "create it first, or give it as the 'topic' option"
            )
        return int(m["partitions"])

    return partitions_of


class PathAppender:
    """Appends to the partition logs of a data directory, holding at most one
    partition log open at a time (see datadir.py). With ``own=False`` the
    caller holds a SharedOwnership of the directory; with ``own=True`` the
    appender takes one now and releases it in ``close()``."""

    def __init__(self, data_dir: str, timeout_s: float, *, own: bool = False):
        self.data_dir = data_dir
        self.timeout_s = timeout_s
        self.partitions_of = path_partitions_of(data_dir)
        self._cur: tuple[str, int] | None = None
        self._log = None
        self._meta: dict[str, dict] = {}
        self._ownership = SharedOwnership(data_dir).acquire() if own else None

    def log(self, topic: str, partition: int):
        if self._cur != (topic, partition):
            self.release()
            meta = self._meta.get(topic)
            if meta is None:
                meta = self._meta[topic] = read_topic_meta(self.data_dir, topic) or {}
            self._log = open_partition_writer(self.data_dir, topic, partition, meta, self.timeout_s)
            self._cur = (topic, partition)
        return self._log

    def end_offset(self, topic: str, partition: int) -> int:
        return self.log(topic, partition).end_offset

    def append(self, topic: str, partition: int, rows: Rows) -> None:
        lg = self.log(topic, partition)
        check_keys(self._meta[topic], topic, rows.keys)  # (InvalidRecord: nothing appended)
        rows.append_to(lg)

    def release(self) -> None:
        """Close (write and fsync) the open partition log, releasing its lock."""
        if self._log is not None:
            lg, self._log, self._cur = self._log, None, None
            lg.close()

    def close(self) -> None:
        """Release the open partition log, then the directory if this appender owns it."""
        try:
            self.release()
        finally:
            ownership, self._ownership = self._ownership, None
            if ownership is not None:
                ownership.release()

    def __enter__(self) -> PathAppender:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_appender(opts: WriteOptions) -> PathAppender | UrlAppender:
    """The appender of a write's mode (close it when done): through the server
    with option ``url``, else into the ``path`` data directory (owned, shared,
    until closed)."""
    if opts.url:
        return UrlAppender(opts)
    return PathAppender(opts.path, opts.lock_timeout_ms / 1000, own=True)
