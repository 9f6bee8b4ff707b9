"""Structured Streaming reads: offsets ``{"topic": {"partition": next_offset}}``.

* ``initialOffset()`` resolves ``startingOffsets``/``startingTimestamp``
  (default ``latest``, as Kafka's source) when a query starts without a
  checkpoint; a restarted query resumes from its checkpointed offsets.
* ``latestOffset(start, limit)`` is admission control: with
  ``maxOffsetsPerTrigger`` (``getDefaultReadLimit`` returns ``ReadMaxRows``)
  a micro-batch takes at most that many records, split across partitions in
  proportion to what each has available (largest remainders, so the total is
  exact and every partition with data makes progress).
* ``Trigger.AvailableNow``: ``prepareForTriggerAvailableNow`` freezes the end
  offsets of that moment; later micro-batches never pass them, and the query
  ends once it reaches them (still honouring ``maxOffsetsPerTrigger``).
* ``read()`` of a planned range is deterministic, so a replayed micro-batch
  sees exactly the records it saw the first time (unless retention deleted
  them: data loss, per ``failOnDataLoss``).
* A partition added to a topic is read from offset 0.

The reader that plans runs in one long-lived Python worker on the driver; the
partitions are read on executors by fresh copies, so no state set while
planning is needed by ``read()``. ``commit()`` runs a batch late and
``stop()`` is not reliably called: neither does anything that matters.
"""

from __future__ import annotations

import logging

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from ..errors import ConfigError
from .options import ReadOptions
from .pyworker import settle
from .reader import (
    OffsetRange,
    _data_loss,
    _offset_for,
    _read_and_close,
    check_partitions,
    make_source,
    split_ranges,
)

logger = logging.getLogger(__name__)


def _key(p: int) -> str:
    return str(p)


def rate_limit(start: dict, latest: dict, max_rows: int) -> dict:
    """End offsets taking at most ``max_rows`` records past ``start``, in
    proportion to what each partition has available."""
    avail = []
    for t, parts in latest.items():
        for p, hi in parts.items():
            lo = start.get(t, {}).get(p, 0)
            if hi > lo:
                avail.append((t, p, lo, hi - lo))
    total = sum(a[3] for a in avail)
    end = {t: dict(parts) for t, parts in latest.items()}
    if total <= max_rows:
        return end
    shares = []
    given = 0
    for t, p, lo, n in avail:
        exact = max_rows * n / total
        take = min(n, int(exact))
        shares.append([t, p, lo, n, take, exact - take])
        given += take
    # Hand out the remainder by largest fractional part (ties: topic, partition order).
    for s in sorted(shares, key=lambda s: -s[5]):
        if given >= max_rows:
            break
        if s[4] < s[3]:
            s[4] += 1
            given += 1
    for t, p, lo, _n, take, _ in shares:
        end[t][p] = lo + take
    return end


class VQSStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: ReadOptions, columns=None):
        self.opts = opts
        self.columns = columns  # None: the whole source schema
        self._src = None
        self._target: dict | None = None
        src = make_source(opts)
        try:
            for t in opts.topics:
                src.partition_count(t, option="topics" if len(opts.topics) > 1 else "topic")
        finally:
            src.close()

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_src"] = None
        return d

    def _source(self):
        if self._src is None:
            self._src = make_source(self.opts)
        return self._src

    def _current(self) -> dict:
        """{topic: {"p": (start, end)}} as of now."""
        src = self._source()
        out = {}
        for t in self.opts.topics:
            src.partition_count(t, option="topics" if len(self.opts.topics) > 1 else "topic")
            out[t] = {_key(p): lohi for p, lohi in enumerate(src.partition_offsets(t))}
        return out

    # -- offsets ---------------------------------------------------------
    def initialOffset(self) -> dict:
        src = self._source()
        cur = self._current()
        offs = {}
        for t, parts in cur.items():
            check_partitions(self.opts.starting, "startingOffsets", t, len(parts))
            offs[t] = {}
            for p, (lo, hi) in parts.items():
                off = _offset_for(
                    self.opts.starting, self.opts.starting_timestamp, t, int(p), lo, hi, src, False
                )
                if off > hi:
                    raise ConfigError(
                        f"option 'startingOffsets': offset {off} of {t}/{p} is past its end offset {hi}"
                    )
                offs[t][p] = off
        return offs

    def _latest(self, start: dict) -> dict:
        cur = self._current()
        latest = {}
        for t, parts in cur.items():
            latest[t] = {}
            sp = start.get(t, {})
            for p, (_lo, hi) in parts.items():
                s = sp.get(p, 0)
                if hi < s:
                    _data_loss(
                        self.opts,
                        f"{t}/{p}: the end offset went back from {s} to {hi} (was the topic re-created?)",
                    )
                    hi = s
                if self._target is not None:
                    cap = self._target.get(t, {}).get(p)
                    hi = s if cap is None else max(s, min(hi, cap))
                latest[t][p] = hi
            for p in sp:
                if p not in parts:
                    _data_loss(self.opts, f"{t}/{p}: the partition disappeared")
        return latest

    def latestOffset(self, start: dict, limit) -> dict:
        latest = self._latest(start)
        if isinstance(limit, ReadMaxRows):
            return rate_limit(start, latest, limit.max_rows)
        return latest

    def reportLatestOffset(self):
        try:
            return {t: {p: hi for p, (lo, hi) in parts.items()} for t, parts in self._current().items()}
        except Exception:  # progress reporting only: a failure must not fail the query
            logger.debug("reportLatestOffset: cannot read the latest offsets", exc_info=True)
            return None

    def getDefaultReadLimit(self):
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {t: {p: hi for p, (lo, hi) in parts.items()} for t, parts in self._current().items()}

    # -- planning and reading ---------------------------------------------
    def partitions(self, start: dict, end: dict):
        src = self._source()
        ranges = []
        for t, parts in end.items():
            sp = start.get(t, {})
            now = None
            for p, e in parts.items():
                s = sp.get(p, 0)
                if e <= s:
                    continue
                if now is None:
                    now = src.partition_offsets(t)
                lo = now[int(p)][0] if int(p) < len(now) else 0
                if s < lo:
                    _data_loss(self.opts, f"{t}/{p}: offset {s} is below the log start offset {lo}")
                    s = min(lo, e)
                if e > s:
                    ranges.append(OffsetRange(t, int(p), s, e))
        return split_ranges(ranges, self.opts.min_partitions)

    def read(self, partition):
        settle()
        if not isinstance(partition, OffsetRange):
            return iter(())
        return _read_and_close(self.opts, partition, self.columns)

    def commit(self, end: dict) -> None:
        pass

    def stop(self) -> None:
        if self._src is not None:
            self._src.close()
            self._src = None


class RefusedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The stream reader of a query whose options or topics were refused: every call
    raises that error (``streamReader()`` returns it instead of raising, as PySpark
    reports an error raised by the reader's calls but not by its creation)."""

    def __init__(self, error: Exception):
        self.error = error

    def _refuse(self, *args, **kwargs):
        raise self.error

    initialOffset = latestOffset = partitions = read = commit = _refuse
    getDefaultReadLimit = prepareForTriggerAvailableNow = reportLatestOffset = _refuse

    def stop(self) -> None:
        pass
