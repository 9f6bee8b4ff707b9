"""Rows: Arrow batches to be written, split per topic partition (shared by both modes).

Input columns: ``value`` (binary or string, required; a NULL is written as
a null value, a tombstone, distinct from an empty one) and, optionally,
``key`` (binary/string; NULL: no key), ``partition`` (int), ``topic`` (string; else the
``topic`` option), ``headers`` (``array<struct<key string, value binary>>``)
and ``timestamp`` (timestamp; else the time of the append). Other columns are
ignored, so a DataFrame read from ``vqs`` can be written back as it is.

Partition choice per record, as the Broker's producer does: the ``partition``
column if set, else ``murmur2(key)`` (Kafka's partitioner) for a keyed record,
else one partition per Spark task (``task partition id % partitions``), so
that keyless records of a task stay together and tasks spread over the
partitions.

Invariants: a :class:`Rows` holds the records of one topic partition in input
order, its optional columns (keys, headers, timestamps) None or as long as
``values``; :meth:`Router.route` keeps the input order within each
(topic, partition) group. Both writers (writer.py: path mode, remote.py: url
mode) route with :class:`Router` and hand Rows to an appender (appenders.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..broker.partitioner import partition_for_key
from ..errors import ConfigError, VQSError


def _binary(col: pa.Array) -> pa.Array:
    t = col.type
    if t == pa.binary():
        return col
    if t in (pa.string(), pa.large_string(), pa.large_binary(), pa.binary_view(), pa.string_view()):
        return col.cast(pa.binary())
    raise ConfigError(f"cannot write a column of Arrow type {t} as bytes")


def _column(rb: pa.RecordBatch, name: str):
    i = rb.schema.get_field_index(name)
    if i < 0:
        # case-insensitive, as Spark's column names are
        for j, f in enumerate(rb.schema):
            if f.name.lower() == name:
                return rb.column(j)
        return None
    return rb.column(i)


@dataclass
class Rows:
    """Records ready for Log.append_batch (one topic partition)."""

    values: list
    keys: list | None
    headers: list | None
    timestamps: list | None

    def __len__(self) -> int:
        return len(self.values)

    def slice(self, a: int) -> Rows:
        return self.part(a, len(self.values))

    def part(self, a: int, b: int) -> Rows:
        return Rows(
            self.values[a:b],
            None if self.keys is None else self.keys[a:b],
            None if self.headers is None else self.headers[a:b],
            None if self.timestamps is None else self.timestamps[a:b],
        )

    def extend(self, other: Rows) -> None:
        n0 = len(self.values)
        self.values.extend(other.values)
        for name in ("keys", "headers", "timestamps"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine is None and theirs is None:
                continue
            if mine is None:
                mine = [None] * n0
                setattr(self, name, mine)
            mine.extend(theirs if theirs is not None else [None] * len(other.values))

    def append_to(self, log) -> int:
        ts = self.timestamps
        if ts is not None and any(t is None for t in ts):
            # a partial timestamp column: fill the gaps with now
            import time

            now = int(time.time() * 1000)
            ts = [now if t is None else t for t in ts]
        return log.append_batch(self.values, keys=self.keys, headers=self.headers, timestamps_ms=ts)


def _headers_list(col: pa.Array) -> list:
    out = []
    for item in col.to_pylist():
        if not item:
            out.append(None)
            continue
        hs = []
        for h in item:
            v = h["value"]
            hs.append((h["key"], None if v is None else v.encode() if isinstance(v, str) else bytes(v)))  # NULL: null
        out.append(tuple(hs))
    return out


class Router:
    """Splits Arrow batches into per-(topic, partition) Rows."""

    def __init__(self, partitions_of, default_topic: str | None, sticky_seed: int):
        self.partitions_of = partitions_of  # topic -> partition count (raises if it does not exist)
        self.default_topic = default_topic
        self.sticky_seed = sticky_seed
        self._parts: dict[str, int] = {}

    def partitions(self, topic: str) -> int:
        n = self._parts.get(topic)
        if n is None:
            n = self._parts[topic] = int(self.partitions_of(topic))
        return n

    def route(self, rb: pa.RecordBatch) -> list[tuple[str, int, Rows]]:
        n = rb.num_rows
        if n == 0:
            return []
        values = _binary(_column(rb, "value")).to_pylist()  # a NULL value: a null value (None)
        kcol = _column(rb, "key")
        keys = None
        if kcol is not None and kcol.null_count < n:
            keys = _binary(kcol).to_pylist()
        hcol = _column(rb, "headers")
        headers = _headers_list(hcol) if hcol is not None and hcol.null_count < n else None
        tcol = _column(rb, "timestamp")
        timestamps = None
        if tcol is not None and tcol.null_count < n:
            per_ms = {"s": None, "ms": 1, "us": 1000, "ns": 1_000_000}[tcol.type.unit]
            raw = pc.cast(tcol, pa.int64())
            raw = pc.multiply(raw, 1000) if per_ms is None else pc.divide(raw, per_ms) if per_ms > 1 else raw
            timestamps = raw.to_pylist()
        rows = Rows(values, keys, headers, timestamps)

        # the 'topic' option overrides a 'topic' column (as Spark's Kafka sink): a DataFrame
        # read from one topic is written to another as is
        topic_col = _column(rb, "topic") if self.default_topic is None else None
        if topic_col is None or topic_col.null_count == n:
            if self.default_topic is None:
                raise VQSError("a record has no topic: give option 'topic' or a non-null 'topic' column")
            topics = None
            uniq = [self.default_topic]
        else:
            if topic_col.null_count and self.default_topic is None:
                raise VQSError("a record has a null 'topic' and there is no 'topic' option")
            if topic_col.null_count:
                topic_col = pc.fill_null(topic_col, self.default_topic)
            uniq = pc.unique(topic_col).to_pylist()
            topics = None if len(uniq) == 1 else topic_col.to_pylist()

        pcol = _column(rb, "partition")
        explicit = None
        if pcol is not None and pcol.null_count < n:
            explicit = pcol.to_numpy(zero_copy_only=False)

        out = []
        for topic in uniq:
            nparts = self.partitions(topic)
            idx = None if topics is None else [i for i, t in enumerate(topics) if t == topic]
            parts = self._partitions(rows, idx, explicit, nparts, topic)
            if isinstance(parts, int):
                out.append((topic, parts, rows if idx is None else _take(rows, idx)))
                continue
            order = np.argsort(parts, kind="stable")
            sp = parts[order]
            bounds = np.flatnonzero(np.diff(sp)) + 1
            base = np.arange(n) if idx is None else np.asarray(idx)
            for chunk in np.split(order, bounds):
                p = int(parts[chunk[0]])
                out.append((topic, p, _take(rows, base[chunk].tolist())))
        return out

    def _partitions(self, rows: Rows, idx, explicit, nparts: int, topic: str):
        sticky = self.sticky_seed % nparts
        sel = range(len(rows)) if idx is None else idx
        if explicit is None and rows.keys is None:
            return sticky
        if explicit is None and nparts == 1:
            return 0
        out = np.empty(len(sel), dtype=np.int64)
        keys = rows.keys
        for j, i in enumerate(sel):
            p = None
            if explicit is not None:
                e = explicit[i]
                if e == e:  # not NaN (a null partition)
                    p = int(e)
                    if not 0 <= p < nparts:
                        raise VQSError(f"column 'partition' is {p}; topic {topic!r} has partitions 0..{nparts - 1}")
            if p is None:
                k = None if keys is None else keys[i]
                p = sticky if k is None else partition_for_key(k, nparts)
            out[j] = p
        if (out == out[0]).all():
            return int(out[0])
        return out


def _take(rows: Rows, idx: list) -> Rows:
    return Rows(
        [rows.values[i] for i in idx],
        None if rows.keys is None else [rows.keys[i] for i in idx],
        None if rows.headers is None else [rows.headers[i] for i in idx],
        None if rows.timestamps is None else [rows.timestamps[i] for i in idx],
    )
