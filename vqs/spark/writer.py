"""Batch and streaming writes (Arrow writers).

Input columns and the partition of each record: rows.py (the Router both
modes share). Where the rows go: appenders.py (path or url mode, one factory).

**Batch writes** append from the tasks directly (path mode: each task shares
the data directory and holds one partition log at a time, see datadir.py).
A task retried by Spark appends its records again: at least once, as Spark's
Kafka sink.

**Streaming writes** (path mode; url mode: remote.py) are exactly once per
(query id, batch id). Tasks stage
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

import pyarrow as pa
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

from ..broker import Broker, layout
from ..broker.names import validate_name
from ..errors import ConfigError, LogLockedError, TopicAlreadyExists, VQSError
from ..storage import atomic_write, fsync_dir
from .appenders import PathAppender, open_appender, path_partitions_of
from .datadir import SharedOwnership, read_topic_meta, require_data_dir
from .options import WriteOptions
from .rows import Router, Rows
from .task import task_info

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


def check_topic_takes_rows(schema: StructType, opts: WriteOptions, config: dict | None) -> None:
    """Fail at planning when no record can go to the ``topic`` option's topic
    (``config``: its settings): a compacted topic takes keyed records only, and
    a DataFrame with no 'key' column has none."""
    policy = (config or {}).get("cleanup_policy") or ""
    if opts.topic is not None and "compact" in policy and "key" not in {f.name.lower() for f in schema.fields}:
        raise ConfigError(
            f"option 'topic': topic {opts.topic!r} is compacted (cleanup_policy={policy}): every record "
            "needs a key, and the DataFrame has no 'key' column"
        )


# --------------------------------------------------------------- planning
def prepare_path_write(opts: WriteOptions) -> dict | None:
    """Driver-side checks of a path-mode write: the directory exists (as for a
    read: a mistyped ``path`` is refused, not made) and is not owned by another
    process, and the ``topic`` option's topic exists (it is created, with
    ``topicPartitions`` partitions, if it does not). Returns that topic's
    settings (None without the option)."""
    require_data_dir(opts.path)
    if opts.topic is not None and read_topic_meta(opts.path, opts.topic) is None:
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
    if opts.topic is None:
        return None
    return (read_topic_meta(opts.path, opts.topic) or {}).get("config") or {}


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
        with open_appender(self.opts) as app:
            router = Router(app.partitions_of, self.opts.topic, info["partition"])
            for rb in iterator:
                for topic, p, rows in router.route(rb):
                    app.append(topic, p, rows)
                    _count(counts, topic, p, len(rows))
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
    validate_name(query, "streaming query id")
    return layout.spark_sink_dir(data_dir, query)


def _batch_dir(sink: str, batch: int) -> str:
    return os.path.join(sink, f"{batch:020d}")


def load_state(sink: str) -> dict:
    try:
        with open(os.path.join(sink, STATE_FILE), "rb") as f:
            return json.loads(f.read())
    except FileNotFoundError:
        return {"batch": -1, "state": "done"}


def save_state(sink: str, state: dict) -> None:
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

