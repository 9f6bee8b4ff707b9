"""Options of the ``vqs`` Spark data source, parsed and checked once, at planning.

Spark hands a data source its options as a case-insensitive map of strings.
Every check happens here, on the driver, before a task runs: a bad option
raises :class:`vqs.errors.ConfigError` whose message names the option, so the
query fails at ``load()``/``start()``/``save()`` instead of inside a task.

The names follow Spark's Kafka source (``startingOffsets``, ``endingOffsets``,
``maxOffsetsPerTrigger``, ``minPartitions``, ``failOnDataLoss``,
``includeHeaders``) so a Kafka pipeline changes its format and little else.
This module imports neither pyspark nor pyarrow.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import ConfigError

EARLIEST = -2  # in offsets JSON, as in Kafka
LATEST = -1

READ_OPTIONS = (
    "path", "url", "topic", "topics", "startingOffsets", "endingOffsets",
    "startingTimestamp", "endingTimestamp", "maxOffsetsPerTrigger", "minPartitions",
    "failOnDataLoss", "includeHeaders", "maxBytesPerRead", "timeoutMs", "token", "reader", "vectors",
)
WRITE_OPTIONS = (
    "path", "url", "topic", "topicPartitions", "lockTimeoutMs", "timeoutMs", "token", "reader",
)
#: Read options a streaming read only takes (a batch read refuses them). The batch-only
#: ones (endingOffsets, endingTimestamp) are refused by a stream with their own message.
STREAM_ONLY = ("maxOffsetsPerTrigger",)
#: Options Spark passes by itself, which we accept and ignore: a streaming sink gets its
#: query's ``checkpointLocation`` and ``queryName`` (``path``, from ``load(path)`` and
#: ``save(path)``, is ours).
SPARK_OPTIONS = ("checkpointLocation", "queryName")
#: Options of Spark's Kafka source and sink that have no name here, and VQS's way instead.
#: (``kafka.*``, the Kafka client's settings: see _kafka_hint.)
KAFKA_OPTIONS = {
    "subscribe": ("subscribe", "'topic', or 'topics' (comma-separated)"),
    "subscribepattern": ("subscribePattern", "'topics' (a list of names; there are no patterns)"),
    "assign": ("assign", "'topic'/'topics' (a read takes every partition; a filter on column "
                         "'partition' narrows it)"),
    "startingoffsetsbytimestamp": ("startingOffsetsByTimestamp", "'startingTimestamp' (one timestamp, "
                                                                 "every partition)"),
    "endingoffsetsbytimestamp": ("endingOffsetsByTimestamp", "'endingTimestamp' (one timestamp, every partition)"),
    "maxrecordspertrigger": ("maxRecordsPerTrigger", "'maxOffsetsPerTrigger'"),
    "kafkaconsumer.polltimeoutms": ("kafkaConsumer.pollTimeoutMs", "'timeoutMs'"),
}


def _known(names) -> dict[str, str]:
    return {n.lower(): n for n in names}


_READ = _known(READ_OPTIONS)
_WRITE = _known(WRITE_OPTIONS)
_STREAM_ONLY = _known(STREAM_ONLY)
_SPARK = _known(SPARK_OPTIONS)


def _check_unknown(options: Mapping[str, str], kind: str, streaming: bool | None = None) -> None:
    """Refuse an option this ``kind`` ("read" or "write") of query does not take, naming
    it: one of the other kind, a streaming read's on a batch read (``streaming=False``;
    None: not known yet), a Kafka option (with VQS's equivalent), a misspelling (with a
    suggestion). Only what Spark passes by itself (SPARK_OPTIONS) is let through."""
    known, other = (_READ, _WRITE) if kind == "read" else (_WRITE, _READ)
    for key in options:
        k = key.lower()
        if k in _SPARK:
            continue
        if k in known:
            if streaming is False and k in _STREAM_ONLY:
                raise ConfigError(f"option '{known[k]}' is for streaming reads only; a batch read reads "
                                  "every record between its starting and ending offsets")
            continue
        if k in other:
            raise ConfigError(f"option '{other[k]}' is for {'writes' if kind == 'read' else 'reads'} only; "
                              f"a {kind} does not take it")
        raise ConfigError(_unknown(key, kind, known))


def _unknown(key: str, kind: str, known: dict[str, str]) -> str:
    k = key.lower()
    msg = f"unknown {kind} option '{key}'"
    kafka = KAFKA_OPTIONS.get(k)
    if kafka is not None:
        return f"{msg}: Kafka's '{kafka[0]}' is {kafka[1]} here"
    if k.startswith("kafka."):
        return f"{msg}: the Kafka client's settings do not apply; VQS takes 'url' (a server, with 'token') or 'path'"
    close = difflib.get_close_matches(k, list(known), n=1, cutoff=0.8)
    if close:
        return f"{msg}: did you mean '{known[close[0]]}'?"
    return f"{msg}; the {kind} options are {', '.join(known.values())}"


def _get(options: Mapping[str, str], name: str) -> str | None:
    v = options.get(name.lower())
    if v is None:
        v = options.get(name)
    if v is None:
        return None
    return str(v).strip()


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    v = _get(options, name)
    if v is None or v == "":
        return default
    lv = v.lower()
    if lv in ("true", "1", "yes"):
        return True
    if lv in ("false", "0", "no"):
        return False
    raise ConfigError(f"option '{name}' must be true or false, got {v!r}")


def _int(options: Mapping[str, str], name: str, *, minimum: int = 1) -> int | None:
    v = _get(options, name)
    if v is None or v == "":
        return None
    try:
        n = int(v)
    except ValueError:
        raise ConfigError(f"option '{name}' must be an integer, got {v!r}") from None
    if n < minimum:
        raise ConfigError(f"option '{name}' must be >= {minimum}, got {n}")
    return n


def _location(options: Mapping[str, str]) -> tuple[str | None, str | None]:
    path = _get(options, "path") or None
    url = _get(options, "url") or None
    if path and url:
        raise ConfigError("options 'path' and 'url' are exclusive: give a data directory or a server URL")
    if not path and not url:
        raise ConfigError(
            "option 'path' (a VQS data directory) or 'url' (a VQS server, http://host:port) is required"
        )
    if url and not (url.startswith(("http://", "https://"))):
        raise ConfigError(f"option 'url' must start with http:// or https://, got {url!r}")
    return path, url


def _topic_name(name: str, option: str) -> str:
    from ..broker.names import validate_name
    from ..errors import InvalidName

    try:
        return validate_name(name, "topic")
    except InvalidName as e:
        raise ConfigError(f"option '{option}': {e}") from None


def parse_offsets_spec(value: str | None, option: str, topics: list[str], default: str):
    """Parse ``earliest``/``latest``/JSON ``{"topic": {"p": offset}}``.

    Returns ``"earliest"``, ``"latest"`` or a dict ``{topic: {partition: offset}}``
    whose offsets may be EARLIEST (-2) or LATEST (-1), as in Kafka.
    """
    if value is None or value == "":
        return default
    lv = value.lower()
    if lv in ("earliest", "latest"):
        return lv
    try:
        spec = json.loads(value)
    except ValueError:
        raise ConfigError(
            f"option '{option}' must be 'earliest', 'latest' or JSON like "
            f'{{"topic": {{"0": 42}}}}, got {value!r}'
        ) from None
    if not isinstance(spec, dict) or not spec:
        raise ConfigError(f"option '{option}' JSON must be a non-empty object of topics, got {value!r}")
    out: dict[str, dict[int, int]] = {}
    for t, parts in spec.items():
        if t not in topics:
            raise ConfigError(
                f"option '{option}' names topic {t!r}, which is not among the topics read ({', '.join(topics)})"
            )
        if not isinstance(parts, dict):
            raise ConfigError(f"option '{option}': the value for topic {t!r} must be an object of partitions")
        pm: dict[int, int] = {}
        for p, off in parts.items():
            try:
                pi = int(p)
            except (TypeError, ValueError):
                raise ConfigError(f"option '{option}': partition {p!r} of topic {t!r} is not an integer") from None
            if pi < 0:
                raise ConfigError(f"option '{option}': partition {p!r} of topic {t!r} is negative")
            if isinstance(off, bool) or not isinstance(off, int) or off < EARLIEST:
                raise ConfigError(
                    f"option '{option}': offset {off!r} for {t}/{p} must be an offset >= 0, "
                    "-2 (earliest) or -1 (latest)"
                )
            pm[pi] = off
        out[t] = pm
    return out


@dataclass(frozen=True)
class ReadOptions:
    path: str | None
    url: str | None
    topics: tuple[str, ...]
    starting: object  # "earliest" | "latest" | {topic: {p: off}}
    ending: object  # batch only
    starting_timestamp: int | None
    ending_timestamp: int | None
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    max_bytes_per_read: int | None  # None: the source's default (read_bytes_default)
    timeout_ms: int
    streaming: bool = False
    token: str | None = field(default=None, repr=False)
    reader: str = "auto"  # "jvm" | "python" | "auto": which reader serves format("vqs") (vqs/spark/jvm.py)


def parse_read_options(options: Mapping[str, str], *, streaming: bool | None) -> ReadOptions:
    """Check and parse the options of a batch (``streaming=False``) or streaming
    read; ``streaming=None`` (the schema, before Spark says which) skips the
    checks that depend on the mode."""
    _check_unknown(options, "read", streaming)
    path, url = _location(options)
    topic = _get(options, "topic")
    topics = _get(options, "topics")
    if topic and topics:
        raise ConfigError("options 'topic' and 'topics' are exclusive: use 'topics' for several topics")
    if topic:
        names = [_topic_name(topic, "topic")]
    elif topics:
        names = []
        for t in topics.split(","):
            t = t.strip()
            if t:
                n = _topic_name(t, "topics")
                if n not in names:
                    names.append(n)
        if not names:
            raise ConfigError("option 'topics' lists no topic")
    else:
        raise ConfigError("option 'topic' (or 'topics', comma-separated) is required to read")
    starting = parse_offsets_spec(
        _get(options, "startingOffsets"), "startingOffsets", names, "latest" if streaming else "earliest"
    )
    ending_raw = _get(options, "endingOffsets")
    if streaming and ending_raw:
        raise ConfigError("option 'endingOffsets' is for batch reads only; a stream has no end")
    ending = parse_offsets_spec(ending_raw, "endingOffsets", names, "latest")
    if streaming is False:
        if starting == "latest" or (isinstance(starting, dict) and any(
            o == LATEST for pm in starting.values() for o in pm.values())):
            raise ConfigError("option 'startingOffsets' cannot be 'latest' (-1) for a batch read")
        if ending == "earliest" or (isinstance(ending, dict) and any(
            o == EARLIEST for pm in ending.values() for o in pm.values())):
            raise ConfigError("option 'endingOffsets' cannot be 'earliest' (-2) for a batch read")
    st = _int(options, "startingTimestamp", minimum=0)
    et = _int(options, "endingTimestamp", minimum=0)
    if streaming and et is not None:
        raise ConfigError("option 'endingTimestamp' is for batch reads only; a stream has no end")
    if st is not None and et is not None and et < st:
        raise ConfigError(f"option 'endingTimestamp' ({et}) is before 'startingTimestamp' ({st})")
    _vectors(options)
    return ReadOptions(
        path=path,
        url=url,
        topics=tuple(names),
        starting=starting,
        ending=ending,
        starting_timestamp=st,
        ending_timestamp=et,
        max_offsets_per_trigger=_int(options, "maxOffsetsPerTrigger"),
        min_partitions=_int(options, "minPartitions"),
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        include_headers=_bool(options, "includeHeaders", False),
        max_bytes_per_read=_int(options, "maxBytesPerRead") or None,
        timeout_ms=_int(options, "timeoutMs") or 30_000,
        streaming=streaming,
        token=_get(options, "token") or None,
        reader=_reader(options),
    )


def _vectors(options: Mapping[str, str]) -> None:
    """Option ``vectors`` serves the JVM reader only, but a bad value fails
    here too, as it does there: both readers refuse what either would."""
    v = (_get(options, "vectors") or "direct").lower()
    if v not in ("direct", "arrow"):
        raise ConfigError(f"option 'vectors' must be 'direct' or 'arrow', got {_get(options, 'vectors')!r}")


def _reader(options: Mapping[str, str]) -> str:
    v = (_get(options, "reader") or "auto").lower()
    if v not in ("jvm", "python", "auto"):
        raise ConfigError(f"option 'reader' must be 'jvm' or 'python', got {v!r}")
    return v


@dataclass(frozen=True)
class WriteOptions:
    path: str | None
    url: str | None
    topic: str | None
    topic_partitions: int
    lock_timeout_ms: int
    timeout_ms: int
    token: str | None = field(default=None, repr=False)


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Check and parse the options of a batch or streaming write."""
    _check_unknown(options, "write")
    path, url = _location(options)
    topic = _get(options, "topic") or None
    if topic is not None:
        topic = _topic_name(topic, "topic")
    if _get(options, "topics"):
        raise ConfigError("option 'topics' is for reads; a write takes 'topic' or a 'topic' column")
    return WriteOptions(
        path=path,
        url=url,
        topic=topic,
        topic_partitions=_int(options, "topicPartitions") or 1,
        lock_timeout_ms=_int(options, "lockTimeoutMs", minimum=0) if _get(options, "lockTimeoutMs") else 60_000,
        timeout_ms=_int(options, "timeoutMs") or 30_000,
        token=_get(options, "token") or None,
    )
