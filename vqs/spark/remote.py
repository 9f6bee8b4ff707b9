"""Url mode: the Spark connector through a VQS server (``vqs.Client``).

Executors on any machine read partitions with the binary record-batch fetch
(``GET /topics/{t}/messages?stored=1`` with ``Accept:
application/vnd.vqs.batch``: the stored batches as the log holds them, no
re-encoding on the server), so ``read()`` builds Arrow columns from the same
columnar batches as in path mode,
and write with binary produce requests, one per topic partition and chunk.

**Exactly-once streaming sink over HTTP.** There are no server transactions,
so the sink stages and commits, keeping its state in two topics of its own on
the server (one partition each, per streaming query id)::

    __spark_stage.{queryId}   rows staged by the write tasks (keys, headers,
                              timestamps as they will be published)
    __spark_state.{queryId}   JSON state records; the last one is the state

``write()`` (executors) routes the micro-batch's rows to their target topic
partitions and appends each group to the stage topic; its commit message lists
the groups and their stage offsets. ``commit()`` (driver) then:

1. the state says this batch (or a later one) is done: a replay; publish nothing;
2. else record ``pending`` with the groups (in a fixed order), and for each
   group: record the target partition's end offset ``before``, copy the staged
   records to the target in one request, record the group as published;
3. record ``done``.

A replay finding ``pending`` for its batch resumes it with the *first
attempt's* groups. A group recorded with ``before`` but not as published may or
may not have reached the target (the driver died between the request and the
state record): the target is searched from ``before`` for the group's records,
and only what is missing is published. So a micro-batch is published once
even when Spark replays it and other producers write to the same partitions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from ..errors import (
    ConfigError,
    OffsetOutOfRange,
    RemoteError,
    ServerUnreachable,
    TopicAlreadyExists,
    TopicDoesNotExist,
    VQSError,
)
from ..wire import MAX_PRODUCE_RECORDS
from .rows import Router, Rows
from .task import task_info

#: A produce request carries at most this many value bytes.
MAX_REQUEST_BYTES = 8 << 20
STAGE_RETENTION_MS = 7 * 86_400_000


def _client(url: str, token: str | None, timeout_ms: int):
    try:
        from ..client import Client
    except ModuleNotFoundError as e:
        if e.name != "httpx":
            raise
        raise ConfigError(f"option 'url' needs the VQS client (pip install vqs[server]): {e}") from None
    return Client(url, token=token, timeout=timeout_ms / 1000)


def _unreachable(url: str, e: Exception) -> ConfigError:
    return ConfigError(f"option 'url': cannot reach a VQS server at {url}: {e}")


def _credentials(url: str, e: RemoteError) -> ConfigError | None:
    """The server's refusal of the credentials (401: none, 403: not its token) as an
    error naming option 'token'; None for any other refusal."""
    if e.status == 401:
        return ConfigError(f"option 'token': the VQS server at {url} requires a bearer token; give it "
                           f"as option 'token' (the server said: {e})")
    if e.status == 403:
        return ConfigError(f"option 'token': the token is not valid for the VQS server at {url} "
                           f"(the server said: {e})")
    return None


class UrlSource:
    """Read access to the topics of a VQS server (same interface as PathSource)."""

    #: Bytes per fetch when option ``maxBytesPerRead`` is not set: each fetch's
    #: response is held in memory while its batches are converted.
    read_bytes_default = 4 << 20

    def __init__(self, url: str, token: str | None = None, timeout_ms: int = 30_000):
        self.url = url
        self.token = token
        self.timeout_ms = timeout_ms
        self._c = None

    def __getstate__(self):
        return {"url": self.url, "token": self.token, "timeout_ms": self.timeout_ms, "_c": None}

    @property
    def client(self):
        if self._c is None:
            self._c = _client(self.url, self.token, self.timeout_ms)
        return self._c

    def partition_count(self, topic: str, *, option: str = "topic") -> int:
        try:
            return int(self.client.topic(topic).partitions)
        except TopicDoesNotExist:
            raise ConfigError(f"option '{option}': topic {topic!r} does not exist on {self.url}") from None
        except ServerUnreachable as e:
            raise _unreachable(self.url, e) from None
        except RemoteError as e:
            raise (_credentials(self.url, e) or e) from None

    def partition_offsets(self, topic: str) -> list[tuple[int, int]]:
        rows = self.client.offsets(topic)
        return [(r["start_offset"], r["end_offset"]) for r in sorted(rows, key=lambda r: r["partition"])]

    def offsets(self, topic: str, partition: int, *, refresh: bool = True) -> tuple[int, int]:
        return self.partition_offsets(topic)[partition]

    def offset_for_time(self, topic: str, partition: int, ts_ms: int) -> int | None:
        rows = self.client.offsets(topic, timestamp_ms=ts_ms)
        for r in rows:
            if r["partition"] == partition:
                return r.get("offset_for_time")
        return None

    def read_batches(self, topic: str, partition: int, offset: int, max_bytes: int):
        """Whole CRC-checked RecordBatches holding records >= offset (the first may
        begin below it), as the server stores them (``Client.read_stored_batches``)."""
        batches, _next, _end = self.client.read_stored_batches(
            topic, partition, offset, max_records=100_000, max_bytes=max_bytes
        )
        return batches

    def close(self) -> None:
        if self._c is not None:
            c, self._c = self._c, None
            c.close()


# ------------------------------------------------------------------ writing
def prepare_url_write(opts) -> dict | None:
    """Driver-side checks of a url-mode write: the server answers, and the
    ``topic`` option's topic exists (created with ``topicPartitions`` if not).
    Returns that topic's settings (None without the option)."""
    c = _client(opts.url, opts.token, opts.timeout_ms)
    try:
        if opts.topic is None:
            c.topics()
            return None
        try:
            return c.topic(opts.topic).config
        except TopicDoesNotExist:
            try:
                c.create_topic(opts.topic, partitions=opts.topic_partitions)
            except TopicAlreadyExists:
                pass
            return c.topic(opts.topic).config
    except ServerUnreachable as e:
        raise _unreachable(opts.url, e) from None
    except RemoteError as e:
        raise (_credentials(opts.url, e) or e) from None
    finally:
        c.close()


class UrlAppender:
    """Appends Rows to topic partitions through the server (the url-mode
    appender of appenders.py)."""

    def __init__(self, opts):
        self.opts = opts
        self.client = _client(opts.url, opts.token, opts.timeout_ms)
        self.producer = self.client.producer()

    def partitions_of(self, topic: str) -> int:
        try:
            return int(self.client.topic(topic).partitions)
        except TopicDoesNotExist:
            raise VQSError(
                f"topic {topic!r} (from the 'topic' column) does not exist on {self.opts.url}; "
                "create it first, or give it as the 'topic' option"
            ) from None

    def end_offset(self, topic: str, partition: int) -> int:
        return self.client.offsets(topic)[partition]["end_offset"]

    def append(self, topic: str, partition: int, rows) -> list[tuple[int, int]]:
        """Send rows (in requests of at most MAX_REQUEST_BYTES of values and the server's
        MAX_PRODUCE_RECORDS records); returns the (base offset, count) of each request."""
        out = []
        n = len(rows)
        i = 0
        while i < n:
            j, size = i, 0
            while j < n and (j == i or (size + len(rows.values[j] or b"") <= MAX_REQUEST_BYTES
                                        and j - i < MAX_PRODUCE_RECORDS)):
                size += len(rows.values[j] or b"")  # a null value (None) carries no bytes
                j += 1
            part = rows.part(i, j)
            ts = part.timestamps
            if ts is not None and any(t is None for t in ts):
                ts = [0 if t is None else t for t in ts]  # 0: the server's time
            metas = self.producer.send_batch(
                topic, part.values, keys=part.keys, headers=part.headers, partition=partition, timestamps_ms=ts
            )
            out.append((metas[0].offset, len(metas)))
            i = j
        return out

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> UrlAppender:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass
class UrlStaged(WriterCommitMessage):
    query: str | None = None
    batch: int | None = None
    task: int = 0
    # [topic, partition, [[stage_base, count], ...]] in the order written
    groups: list = field(default_factory=list)


def _stage_topic(query: str) -> str:
    return f"__spark_stage.{query}"


def _state_topic(query: str) -> str:
    return f"__spark_state.{query}"


def _ensure_topic(client, name: str, **settings) -> None:
    # Looked up in the listing, not asked for by name: the sink's own topics are missing on a
    # query's first run, and a refused request would fill the server's error log and console.
    if name in client.topics():
        return
    try:
        client.create_topic(name, partitions=1, **settings)
    except TopicAlreadyExists:
        pass


def load_url_state(client, query: str) -> dict:
    name = _state_topic(query)
    if name not in client.topics():  # a query's first run (see _ensure_topic)
        return {"batch": -1, "state": "done"}
    try:
        end = client.offsets(name)[0]["end_offset"]
    except TopicDoesNotExist:
        return {"batch": -1, "state": "done"}
    if end == 0:
        return {"batch": -1, "state": "done"}
    batches, _, _ = client.read_batches(name, 0, end - 1, max_records=1)
    last = batches[-1]
    return json.loads(last.value(last.count - 1))


def save_url_state(client, query: str, state: dict) -> None:
    client.producer().send_batch(_state_topic(query), [json.dumps(state, sort_keys=True).encode()], partition=0)


def _read_rows(client, topic: str, partition: int, start: int, end: int):
    """Rows (values, keys, headers, timestamps) of records [start, end)."""
    rows = Rows([], None, None, [])
    keys: list = []
    headers: list = []
    pos = start
    while pos < end:
        batches, nxt, _ = client.read_stored_batches(topic, partition, pos, max_records=min(100_000, end - pos),
                                                     max_bytes=8 << 20)
        if not batches:
            raise VQSError(f"{topic}/{partition}: records [{pos}, {end}) are missing")
        for b in batches:
            s = max(0, pos - b.base_offset)
            e = min(b.count, end - b.base_offset)
            if e <= s:
                continue
            rows.values.extend(b.values(s, e))
            keys.extend(b.key(i) for i in range(s, e))
            headers.extend(b.headers(i) or None for i in range(s, e))
            rows.timestamps.extend(b.timestamp(i) for i in range(s, e))
            pos = b.base_offset + e
    if any(k is not None for k in keys):
        rows.keys = keys
    if any(h for h in headers):
        rows.headers = headers
    return rows


class UrlStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts):
        self.opts = opts

    def write(self, iterator) -> UrlStaged:
        info = task_info()
        query, batch = info["query"], info["batch"]
        if query is None or batch is None:
            raise VQSError("the vqs stream writer runs only inside a streaming query (no query/batch id)")
        app = UrlAppender(self.opts)
        try:
            state = load_url_state(app.client, query)
            if state["batch"] > batch or (state["batch"] == batch and state["state"] == "done"):
                for _ in iterator:  # a replay of a published batch
                    pass
                return UrlStaged(query, batch, info["partition"], [])
            router = Router(app.partitions_of, self.opts.topic, info["partition"])
            stage = _stage_topic(query)
            staged = False
            groups: list = []
            for rb in iterator:
                for topic, p, rows in router.route(rb):
                    if not staged:
                        _ensure_topic(app.client, stage, retention_ms=STAGE_RETENTION_MS, segment_bytes=16 << 20)
                        staged = True
                    ranges = app.append(stage, 0, rows)
                    groups.append([topic, p, [list(r) for r in ranges]])
            return UrlStaged(query, batch, info["partition"], groups)
        finally:
            app.close()

    def commit(self, messages, batchId: int) -> None:
        msgs = [m for m in messages if isinstance(m, UrlStaged)]
        if not msgs:
            return
        query = msgs[0].query
        app = UrlAppender(self.opts)
        try:
            c = app.client
            state = load_url_state(c, query)
            if state["state"] == "pending" and state["batch"] < batchId:
                self._publish(app, query, state)  # an interrupted earlier batch first
                state = load_url_state(c, query)
            if state["batch"] > batchId or (state["batch"] == batchId and state["state"] == "done"):
                return
            if state["state"] != "pending" or state["batch"] != batchId:
                groups = [g for m in sorted(msgs, key=lambda m: m.task) for g in m.groups]
                if not groups:
                    return
                _ensure_topic(c, _state_topic(query))
                state = {"batch": batchId, "state": "pending", "groups": groups, "before": {}, "published": []}
                save_url_state(c, query, state)
            self._publish(app, query, state)
        finally:
            app.close()

    def _publish(self, app, query: str, state: dict) -> None:
        c = app.client
        stage = _stage_topic(query)
        for i, (topic, p, ranges) in enumerate(state["groups"]):
            key = str(i)
            if i in state["published"]:
                continue
            rows = None
            for base, count in ranges:
                part = _read_rows(c, stage, 0, base, base + count)
                if rows is None:
                    rows = part
                else:
                    rows.extend(part)
            before = state["before"].get(key)
            done = 0
            if before is None:
                state["before"][key] = app.end_offset(topic, p)
                save_url_state(c, query, state)
            else:
                done = _already_published(c, topic, p, before, rows)
            if done < len(rows):
                app.append(topic, p, rows.part(done, len(rows)))
            state["published"].append(i)
            save_url_state(c, query, state)
        save_url_state(c, query, {"batch": state["batch"], "state": "done"})

    def abort(self, messages, batchId: int) -> None:
        pass  # staged records age out with the stage topic's retention


def _already_published(client, topic: str, partition: int, before: int, rows) -> int:
    """How many of ``rows`` (a prefix) the target holds as a contiguous run at
    or after offset ``before`` (other producers may have written around them)."""
    try:
        end = client.offsets(topic)[partition]["end_offset"]
    except (TopicDoesNotExist, IndexError):
        return 0
    if end <= before or not len(rows):
        return 0
    try:
        there = _read_rows(client, topic, partition, before, end)
    except OffsetOutOfRange:
        return 0
    want_v, want_k = rows.values, rows.keys
    have_v, have_k = there.values, there.keys
    n = len(have_v)
    best = 0
    for s in range(n):
        if have_v[s] != want_v[0]:
            continue
        k = 0
        while (k < len(want_v) and s + k < n and have_v[s + k] == want_v[k]
               and ((want_k is None and (have_k is None or have_k[s + k] is None))
                    or (want_k is not None and have_k is not None and have_k[s + k] == want_k[k]))):
            k += 1
        if s + k == n or k == len(want_v):  # a run reaching the end, or the whole group
            best = max(best, k)
            if k == len(want_v):
                break
    return best
