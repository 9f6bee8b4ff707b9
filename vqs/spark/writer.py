"""Batch and streaming writes (Arrow writers).

Input columns: ``value`` (binary or string, required) and, optionally,
``key`` (binary/string), ``partition`` (int), ``topic`` (string; else the
``topic`` option), ``headers`` (``array<struct<key string, value binary>>``)
and ``timestamp`` (timestamp; else the time of the append). Other columns are
ignored, so a DataFrame read from ``vqs`` can be written back as it is.

Partition choice per record, as the Broker's producer does: the ``partition``
column if set, else ``murmur2(key)`` (Kafka's partitioner) for a keyed record,
else one partition per Spark task (``task partition id % partitions``), so
that keyless records of a task stay together and tasks spread over the
partitions.

**Batch writes** append from the tasks directly (path mode: each task shares
the data directory and holds one partition log at a time, see datadir.py).
A task retried by Spark appends its records again: at least once, as Spark's
Kafka sink.

**Streaming writes** are exactly once per (query id, batch id). Tasks stage
their rows in Arrow IPC files under ``DATA/spark/sinks/{queryId}/{batchId}/``;
``commit()`` (on the driver, once every task succeeded) appends them and
records the batch in ``DATA/spark/sinks/{queryId}/state.json``:

1. state says this batch (or a later one) is done -> a replay: drop the staged
   files, append nothing;
2. otherwise write state ``pending`` (the staged files, in order), then per
   topic partition, under its log lock: record the partition's end offset
   ``before`` in the state, append, fsync;
3. write state ``done`` and remove the staged files.

If the driver dies inside step 2, the replayed micro-batch finds the pending
state and resumes it from the *first attempt's* files: a partition already
holding ``n`` records past ``before`` gets only the rest. (This assumes no
other writer appended to those partitions in between.)
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    ByteType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from ..broker.partitioner import partition_for_key
from ..errors import ConfigError, VQSError
from .datadir import (
    SharedOwnership,
    open_partition_writer,
    read_topic_meta,
)
from .options import WriteOptions

SINKS_DIR = os.path.join("spark", "sinks")
STATE_FILE = "state.json"


# --------------------------------------------------------------- validation
def check_write_schema(schema: StructType, opts: WriteOptions) -> None:
    """Fail at planning when the DataFrame cannot be written (names the column)."""
    fields = {f.name.lower(): f for f in schema.fields}
    v = fields.get("value")
    if v is None:
        raise ConfigError(
            "a DataFrame written to vqs needs a 'value' column (binary or string); "
            f"it has {', '.join(schema.fieldNames()) or 'no columns'}"
        )
    checks = {
        "value": (BinaryType, StringType),
        "key": (BinaryType, StringType),
        "topic": (StringType,),
        "partition": (IntegerType, LongType, ShortType, ByteType),
        "timestamp": (TimestampType, TimestampNTZType),
    }
    for name, types in checks.items():
        f = fields.get(name)
        if f is not None and not isinstance(f.dataType, types):
            raise ConfigError(
                f"column '{name}' has type {f.dataType.simpleString()}; "
                f"vqs expects {' or '.join(t().simpleString() for t in types)}"
            )
    h = fields.get("headers")
    if h is not None:
        ok = (
            isinstance(h.dataType, ArrayType)
            and isinstance(h.dataType.elementType, StructType)
            and [f.name for f in h.dataType.elementType.fields] == ["key", "value"]
            and isinstance(h.dataType.elementType.fields[0].dataType, StringType)
            and isinstance(h.dataType.elementType.fields[1].dataType, (BinaryType, StringType))
        )
        if not ok:
            raise ConfigError(
                f"column 'headers' has type {h.dataType.simpleString()}; "
                "vqs expects array<struct<key:string,value:binary>>"
            )
    if opts.topic is None and "topic" not in fields:
        raise ConfigError("option 'topic' is required (or a 'topic' column in the DataFrame)")


# --------------------------------------------------------------- planning
def prepare_path_write(opts: WriteOptions) -> None:
    """Driver-side checks of a path-mode write: the directory is not owned by
    another process, and the ``topic`` option's topic exists (it is created,
    with ``topicPartitions`` partitions, if it does not)."""
    if opts.topic is not None and read_topic_meta(opts.path, opts.topic) is None:
        if not os.path.isdir(opts.path):
            os.makedirs(opts.path, exist_ok=True)
        from ..broker import Broker
        from ..errors import LogLockedError, TopicAlreadyExists

        try:
            with Broker(opts.path) as b:
                try:
                    b.create_topic(opts.topic, partitions=opts.topic_partitions)
                except TopicAlreadyExists:
                    pass
        except LogLockedError as e:
            if read_topic_meta(opts.path, opts.topic) is None:
                raise VQSError(
                    f"cannot create topic {opts.topic!r} in {opts.path}: the directory is in use "
                    f"({e}); create the topic first"
                ) from None
    # Fails now, naming the owner's pid, if a Broker or server owns the directory.
    SharedOwnership(opts.path).acquire().release()


# --------------------------------------------------------------- rows -> appends
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
            hs.append((h["key"], b"" if v is None else v.encode() if isinstance(v, str) else bytes(v)))
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
        value = _column(rb, "value")
        if value.null_count:
            raise VQSError("column 'value' has a null; every record needs a value (use b'' for empty)")
        values = _binary(value).to_pylist()
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

        topic_col = _column(rb, "topic")
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


def path_partitions_of(data_dir: str):
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
    partition log open at a time (see datadir.py). The caller holds a
    SharedOwnership of the directory."""

    def __init__(self, data_dir: str, timeout_s: float):
        self.data_dir = data_dir
        self.timeout_s = timeout_s
        self._cur: tuple[str, int] | None = None
        self._log = None
        self._meta: dict[str, dict] = {}

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
        rows.append_to(self.log(topic, partition))

    def release(self) -> None:
        """Close (write and fsync) the open partition log, releasing its lock."""
        if self._log is not None:
            lg, self._log, self._cur = self._log, None, None
            lg.close()

    close = release


# --------------------------------------------------------------- task info
def task_info() -> dict:
    """Spark task facts the writers need (monkeypatched by unit tests)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return {"partition": 0, "attempt": 0, "query": None, "batch": None}
    batch = ctx.getLocalProperty("streaming.sql.batchId")
    return {
        "partition": ctx.partitionId(),
        "attempt": ctx.attemptNumber(),
        "query": ctx.getLocalProperty("sql.streaming.queryId"),
        "batch": None if batch is None else int(batch),
    }


# --------------------------------------------------------------- batch writer
@dataclass
class VQSCommitMessage(WriterCommitMessage):
    counts: dict = field(default_factory=dict)  # {topic: {partition: records}}


def _count(counts: dict, topic: str, p: int, n: int) -> None:
    c = counts.setdefault(topic, {})
    c[p] = c.get(p, 0) + n


class VQSBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: WriteOptions):
        self.opts = opts

    def write(self, iterator) -> VQSCommitMessage:
        info = task_info()
        counts: dict = {}
        if self.opts.url:
            from .remote import UrlAppender

            app = UrlAppender(self.opts)
            router = Router(app.partitions_of, self.opts.topic, info["partition"])
            try:
                for rb in iterator:
                    for topic, p, rows in router.route(rb):
                        app.append(topic, p, rows)
                        _count(counts, topic, p, len(rows))
            finally:
                app.close()
            return VQSCommitMessage(counts)
        router = Router(path_partitions_of(self.opts.path), self.opts.topic, info["partition"])
        with SharedOwnership(self.opts.path):
            app = PathAppender(self.opts.path, self.opts.lock_timeout_ms / 1000)
            try:
                for rb in iterator:
                    for topic, p, rows in router.route(rb):
                        app.append(topic, p, rows)
                        _count(counts, topic, p, len(rows))
            finally:
                app.close()
        return VQSCommitMessage(counts)

    def commit(self, messages) -> None:
        pass

    def abort(self, messages) -> None:
        # Records appended by the tasks that succeeded stay (a log is append-only).
        pass


# --------------------------------------------------------------- stream writer
@dataclass
class StagedMessage(WriterCommitMessage):
    query: str | None = None
    batch: int | None = None
    file: str | None = None
    task: int = 0
    rows: int = 0


def _sink_dir(data_dir: str, query: str) -> str:
    from ..broker.names import validate_name

    validate_name(query, "streaming query id")
    return os.path.join(data_dir, SINKS_DIR, query)


def _batch_dir(sink: str, batch: int) -> str:
    return os.path.join(sink, f"{batch:020d}")


def load_state(sink: str) -> dict:
    try:
        with open(os.path.join(sink, STATE_FILE), "rb") as f:
            return json.loads(f.read())
    except FileNotFoundError:
        return {"batch": -1, "state": "done"}


def save_state(sink: str, state: dict) -> None:
    from ..storage.durable_file import atomic_write

    atomic_write(os.path.join(sink, STATE_FILE), json.dumps(state, sort_keys=True).encode())


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class VQSStreamWriter(DataSourceStreamArrowWriter):
    """Path mode; url mode is :class:`vqs.spark.remote.UrlStreamWriter`."""

    def __init__(self, opts: WriteOptions):
        self.opts = opts

    # ---- executors
    def write(self, iterator) -> StagedMessage:
        info = task_info()
        query, batch = info["query"], info["batch"]
        if query is None or batch is None:
            raise VQSError("the vqs stream writer runs only inside a streaming query (no query/batch id)")
        sink = _sink_dir(self.opts.path, query)
        state = load_state(sink)
        if state["batch"] > batch or (state["batch"] == batch and state["state"] == "done"):
            for _ in iterator:  # a replay of a published batch: nothing to stage
                pass
            return StagedMessage(query, batch, None, info["partition"], 0)
        bdir = _batch_dir(sink, batch)
        os.makedirs(bdir, exist_ok=True)
        path = os.path.join(bdir, f"part-{info['partition']:05d}-{info['attempt']}-{uuid.uuid4().hex[:12]}.arrow")
        rows = 0
        writer = None
        try:
            for rb in iterator:
                if rb.num_rows == 0:
                    continue
                if writer is None:
                    writer = pa.ipc.new_file(path, rb.schema)
                writer.write_batch(rb)
                rows += rb.num_rows
        finally:
            if writer is not None:
                writer.close()
        if writer is None:
            return StagedMessage(query, batch, None, info["partition"], 0)
        _fsync_file(path)
        from ..storage.durable_file import fsync_dir

        fsync_dir(bdir)
        return StagedMessage(query, batch, os.path.relpath(path, sink), info["partition"], rows)

    # ---- driver
    def commit(self, messages, batchId: int) -> None:
        msgs = [m for m in messages if isinstance(m, StagedMessage)]
        if not msgs:
            return
        query = msgs[0].query
        sink = _sink_dir(self.opts.path, query)
        with SharedOwnership(self.opts.path):
            state = load_state(sink)
            if state["state"] == "pending" and state["batch"] < batchId:
                # An interrupted commit of an earlier batch: finish it first.
                self._publish(sink, state)
                state = load_state(sink)
            if state["batch"] > batchId or (state["batch"] == batchId and state["state"] == "done"):
                self._cleanup(sink, batchId)
                return
            if state["state"] != "pending" or state["batch"] != batchId:
                files = sorted(([m.file, m.task] for m in msgs if m.file), key=lambda f: (f[1], f[0]))
                if not files:
                    return
                state = {"batch": batchId, "state": "pending", "files": files, "before": {}}
                os.makedirs(sink, exist_ok=True)
                save_state(sink, state)
            self._publish(sink, state)
            self._cleanup(sink, batchId)

    def _publish(self, sink: str, state: dict) -> None:
        groups: dict[tuple[str, int], Rows] = {}
        routers: dict[int, Router] = {}
        partitions_of = path_partitions_of(self.opts.path)
        for rel, task in state["files"]:
            router = routers.get(task)
            if router is None:
                router = routers[task] = Router(partitions_of, self.opts.topic, task)
            with pa.memory_map(os.path.join(sink, rel)) as src:
                reader = pa.ipc.open_file(src)
                for i in range(reader.num_record_batches):
                    for topic, p, rows in router.route(reader.get_batch(i)):
                        g = groups.get((topic, p))
                        if g is None:
                            groups[(topic, p)] = rows
                        else:
                            g.extend(rows)
        app = PathAppender(self.opts.path, self.opts.lock_timeout_ms / 1000)
        try:
            for (topic, p), rows in sorted(groups.items()):
                key = f"{topic}/{p}"
                end = app.end_offset(topic, p)  # under the partition's lock from here on
                before = state["before"].get(key)
                if before is None:
                    state["before"][key] = end
                    save_state(sink, state)
                    done = 0
                else:
                    done = max(0, end - before)
                if done < len(rows):
                    app.append(topic, p, rows.slice(done) if done else rows)
                app.release()
        finally:
            app.close()
        save_state(sink, {"batch": state["batch"], "state": "done"})

    def _cleanup(self, sink: str, batch: int) -> None:
        try:
            names = os.listdir(sink)
        except FileNotFoundError:
            return
        for name in names:
            if name.isdigit() and int(name) <= batch:
                shutil.rmtree(os.path.join(sink, name), ignore_errors=True)

    def abort(self, messages, batchId: int) -> None:
        msgs = [m for m in messages if isinstance(m, StagedMessage) and m.file]
        if not msgs:
            return
        sink = _sink_dir(self.opts.path, msgs[0].query)
        state = load_state(sink)
        keep = {f for f, _ in state.get("files", [])} if state["state"] == "pending" else set()
        for m in msgs:
            if m.file not in keep:
                try:
                    os.unlink(os.path.join(sink, m.file))
                except FileNotFoundError:
                    pass

