"""Batch reads: offset ranges per topic partition, read as Arrow record batches.

Planning (on the driver) turns ``startingOffsets``/``endingOffsets`` (or
timestamps) into one :class:`OffsetRange` per topic partition, split further
when ``minPartitions`` asks for more tasks. ``read()`` (on an executor, on a
fresh copy of the reader) reads its range from the log (path mode: a lazy
``Log.scan_batches`` on a read-ahead thread, each batch CRC-checked there a
few batches before it is converted and sent; url mode: ``read_batches`` from the server) and yields Arrow batches built by :class:`~vqs.spark.schema.ArrowConverter`
straight from the log's columnar buffers: all the source's columns, or only
those of a user-specified schema (``columns``, see
:func:`~vqs.spark.schema.projected_columns`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing

from pyspark.sql.datasource import DataSourceReader, InputPartition

from ..errors import ConfigError, OffsetOutOfRange, VQSError
from .options import EARLIEST, LATEST, ReadOptions
from .pyworker import settle
from .read_ahead import ReadAhead
from .schema import ArrowConverter, concat

#: read() combines log batches smaller than this into one Arrow batch.
MIN_ARROW_ROWS = 4096


class DataLossError(VQSError):
    """Offsets a query needs are gone (deleted by retention, or the log was
    replaced) and ``failOnDataLoss`` is true."""


class OffsetRange(InputPartition):
    """Records ``[start, end)`` of one topic partition: one Spark task."""

    def __init__(self, topic: str, partition: int, start: int, end: int):
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end

    @property
    def size(self) -> int:
        return self.end - self.start

    def __repr__(self) -> str:
        return f"OffsetRange({self.topic}/{self.partition} [{self.start}, {self.end}))"


def make_source(opts):
    """The data access object of ``opts``: path mode or url mode."""
    if opts.path:
        from .datadir import PathSource

        return PathSource(opts.path)
    from .remote import UrlSource

    return UrlSource(opts.url, token=opts.token, timeout_ms=opts.timeout_ms)


def _data_loss(opts: ReadOptions, message: str) -> None:
    if opts.fail_on_data_loss:
        raise DataLossError(
            message + ". Some data may have been lost (deleted by retention). "
            "Set option failOnDataLoss to false to skip it."
        )


def _offset_for(spec, ts, topic: str, p: int, lo: int, hi: int, src, default_latest: bool) -> int:
    if ts is not None:
        off = src.offset_for_time(topic, p, ts)
        return hi if off is None else max(off, lo)
    if spec == "earliest":
        return lo
    if spec == "latest":
        return hi
    off = spec.get(topic, {}).get(p)
    if off is None:
        return hi if default_latest else lo
    if off == EARLIEST:
        return lo
    if off == LATEST:
        return hi
    return off


def check_partitions(spec, option: str, topic: str, partitions: int) -> None:
    """A JSON offsets spec may leave partitions out (they take the default) but
    must not name one the topic lacks: a typo would otherwise read every
    partition from the default, silently."""
    if not isinstance(spec, dict):
        return
    for p in spec.get(topic, {}):
        if p >= partitions:
            raise ConfigError(
                f"option '{option}' names partition {p} of topic '{topic}', which has {partitions} "
                f"partition{'' if partitions == 1 else 's'} (0-{partitions - 1})"
            )


def plan_ranges(src, opts: ReadOptions) -> list[OffsetRange]:
    """Resolve the options into one range per topic partition (batch read)."""
    ranges = []
    for topic in opts.topics:
        src.partition_count(topic, option="topics" if len(opts.topics) > 1 else "topic")
        offsets = src.partition_offsets(topic)
        check_partitions(opts.starting, "startingOffsets", topic, len(offsets))
        check_partitions(opts.ending, "endingOffsets", topic, len(offsets))
        for p, (lo, hi) in enumerate(offsets):
            start = _offset_for(opts.starting, opts.starting_timestamp, topic, p, lo, hi, src, False)
            end = _offset_for(opts.ending, opts.ending_timestamp, topic, p, lo, hi, src, True)
            if start > hi:
                raise ConfigError(
                    f"option 'startingOffsets': offset {start} of {topic}/{p} is past its end offset {hi}"
                )
            if end > hi:
                raise ConfigError(
                    f"option 'endingOffsets': offset {end} of {topic}/{p} is past its end offset {hi}"
                )
            if end < start:  # as Spark's Kafka source: an inverted range is a mistake, not an empty read
                option = "endingTimestamp" if opts.ending_timestamp is not None else "endingOffsets"
                raise ConfigError(
                    f"option '{option}': end offset {end} of {topic}/{p} is before its starting offset {start}"
                )
            if start < lo:
                _data_loss(opts, f"{topic}/{p}: starting offset {start} is below the log start offset {lo}")
                start = lo
            if end > start:
                ranges.append(OffsetRange(topic, p, start, end))
    return split_ranges(ranges, opts.min_partitions)


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Split ranges into about ``min_partitions`` tasks, in proportion to their
    sizes (as Kafka's KafkaOffsetRangeCalculator does); never split below one
    record per task."""
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    if total == 0:
        return ranges
    # Every range gets one part, the rest go by largest remainder of its
    # proportional share, so the count is exactly min_partitions (unless the
    # ranges hold fewer records).
    shares = [r.size * min_partitions / total for r in ranges]
    parts = [1] * len(ranges)
    spare = min_partitions - len(ranges)
    want = [max(0.0, s - 1) for s in shares]
    for i in range(len(ranges)):
        k = min(int(want[i]), ranges[i].size - parts[i], spare)
        parts[i] += k
        spare -= k
    for i in sorted(range(len(ranges)), key=lambda i: -(want[i] - int(want[i]))):
        if spare <= 0:
            break
        if parts[i] < ranges[i].size:
            parts[i] += 1
            spare -= 1
    out = []
    for r, n_parts in zip(ranges, parts):
        step, extra = divmod(r.size, n_parts)
        s = r.start
        for i in range(n_parts):
            e = s + step + (1 if i < extra else 0)
            out.append(OffsetRange(r.topic, r.partition, s, e))
            s = e
    return out


def _batches(src, r: OffsetRange, pos: int, max_bytes: int) -> Iterator:
    """The CRC-checked log batches holding records of ``r`` from ``pos`` on:
    a lazy scan where the source has one (path mode: each batch checked a few
    batches before it is used, on a read-ahead thread, read_ahead.py), else
    reads of ``max_bytes`` (url mode)."""
    scan = getattr(src, "scan_batches", None)
    if scan is not None:
        with ReadAhead(scan(r.topic, r.partition, pos, r.end)) as batches:
            yield from batches
        return
    while pos < r.end:
        batches = src.read_batches(r.topic, r.partition, pos, max_bytes)
        if not batches:
            return
        yield from batches
        pos = batches[-1].next_offset


def read_range(src, r: OffsetRange, opts: ReadOptions, columns=None) -> Iterator:
    """Yield Arrow record batches of the records in ``r`` (deterministic: the
    same range always yields the same records), with ``columns`` only if given
    (else every column of the source)."""
    conv = ArrowConverter(r.topic, r.partition, opts.include_headers, columns)
    pos, end = r.start, r.end
    pending: list = []
    rows = 0
    max_bytes = opts.max_bytes_per_read or src.read_bytes_default
    while pos < end:
        advanced = False
        try:
            with closing(_batches(src, r, pos, max_bytes)) as batches:
                for b in batches:
                    if b.base_offset >= end:
                        pos = end
                        break
                    s = pos - b.base_offset if pos > b.base_offset else 0
                    e = min(b.count, end - b.base_offset)
                    if e > s:
                        pending.append(conv.convert(b, s, e))
                        rows += e - s
                        if rows >= MIN_ARROW_ROWS:
                            yield concat(pending)
                            pending, rows = [], 0
                    nxt = b.base_offset + e
                    if nxt > pos:
                        pos = nxt
                        advanced = True
                    if pos >= end:
                        break
        except OffsetOutOfRange as e:
            if e.start_offset > pos:
                _data_loss(opts, f"{r.topic}/{r.partition}: offset {pos} is below the log start offset {e.start_offset}")
                pos = e.start_offset
                continue
        if pos < end and not advanced:
            _data_loss(
                opts,
                f"{r.topic}/{r.partition}: offsets [{pos}, {end}) were planned but the log ends before them",
            )
            break
    if pending:
        yield concat(pending)


class VQSBatchReader(DataSourceReader):
    """Batch reader; ``partitions()`` runs on the driver, ``read()`` on
    executors, each on its own unpickled copy."""

    def __init__(self, opts: ReadOptions, columns=None):
        self.opts = opts
        self.columns = columns  # None: the whole source schema
        # Check the topics at planning, so a missing topic fails the query
        # before any task starts.
        src = make_source(opts)
        try:
            for t in opts.topics:
                src.partition_count(t, option="topics" if len(opts.topics) > 1 else "topic")
        finally:
            src.close()

    def partitions(self):
        src = make_source(self.opts)
        try:
            return plan_ranges(src, self.opts)
        finally:
            src.close()

    def read(self, partition):
        settle()
        if not isinstance(partition, OffsetRange):  # Spark's placeholder for "no partitions"
            return iter(())
        return _read_and_close(self.opts, partition, self.columns)


def _read_and_close(opts, r, columns=None):
    src = make_source(opts)
    try:
        yield from read_range(src, r, opts, columns)
    finally:
        src.close()
