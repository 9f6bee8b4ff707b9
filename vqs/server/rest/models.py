"""The JSON request bodies of the REST API (pydantic): their fields and limits.

These models are the API's input contract (they also make the OpenAPI
schema): unknown fields are refused (``extra="forbid"``), and every bound is
the one the embedded API enforces (SQS's for queues), so a request that passes
here fails later only on state (a missing topic, a full queue), not on shape.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, StrictFloat, StrictInt

from .conventions import MAX_WAIT_MS, MEMBER_PATTERN, NAME_PATTERN

# ---------------------------------------------------------- produce query parameters
#: The query parameters of ``POST /topics/{topic}/messages``: name -> (min, max, description).
#: The route reads them from the raw query (the fast path answers plain produces before
#: FastAPI parses anything), so this table is what checks them (rest/producers.py) and what
#: the OpenAPI schema says of them (``query_parameters``).
PRODUCE_QUERY: dict[str, tuple[int, int, str]] = {
    "partition": (0, 10_000, "the partition of a binary body's records (JSON messages name their own); "
                             "required with producer_id"),
    "producer_id": (0, (1 << 63) - 1, "an id from POST /producers: makes the request idempotent (appended "
                                       "once however often it is retried); needs producer_epoch, sequence "
                                       "and partition"),
    "producer_epoch": (0, (1 << 15) - 1, "the epoch POST /producers returned with the id"),
    "sequence": (0, (1 << 31) - 1, "the sequence of the request's first record in this partition: the "
                                   "previous request's sequence plus its record count (wraps at 2^31)"),
}


def query_parameters(table: dict[str, tuple[int, int, str]]) -> list[dict]:
    """OpenAPI parameter objects (optional integer query parameters) for a table like PRODUCE_QUERY."""
    return [{"name": name, "in": "query", "required": False, "description": desc,
             "schema": {"type": "integer", "minimum": lo, "maximum": hi}}
            for name, (lo, hi, desc) in table.items()]


# --------------------------------------------------------------------- topics, groups
#: a JSON integer (never true/false, a float or a string) of at most Kafka's long, as the
#: embedded API's settings (vqs.storage.LONG_MAX)
Long = Annotated[StrictInt, Field(le=(1 << 63) - 1)]
class TopicSettings(BaseModel):
    """A topic's own settings (``Broker.create_topic``'s): each None or absent is the server's default."""

    model_config = ConfigDict(extra="forbid")
    retention_ms: Long | None = Field(None, ge=-1, description="-1: unlimited (Kafka's -1)")
    retention_bytes: Long | None = Field(None, ge=-1, description="per partition; -1: unlimited")
    segment_bytes: StrictInt | None = Field(None, ge=4096, le=(1 << 31) - 1)
    segment_ms: Long | None = Field(None, ge=1)
    compression: Literal["zstd", "lz4", "gzip"] | None = None
    max_message_bytes: StrictInt | None = Field(None, ge=1, le=1 << 30)  # None: the server's max_message_bytes
    cleanup_policy: Literal["delete", "compact", "compact,delete", "delete,compact"] | None = None
    delete_retention_ms: Long | None = Field(None, ge=0)
    min_cleanable_dirty_ratio: StrictFloat | None = Field(None, ge=0, le=1)
    min_compaction_lag_ms: Long | None = Field(None, ge=0)
    max_compaction_lag_ms: Long | None = Field(None, ge=1)
    flush: Literal["always", "interval", "never"] | None = Field(
        None, description="the partitions' flush policy (None: the server's --flush): always answers a "
                          "produce once fsynced")
    flush_interval_ms: Long | None = Field(None, ge=1)


class TopicCreate(TopicSettings):
    name: str = Field(..., pattern=NAME_PATTERN)
    partitions: int = Field(1, ge=1, le=10_000)


class PartitionsCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    partitions: int = Field(..., ge=1, le=10_000, description="the new partition count in total: more than now")


class OffsetCommit(BaseModel):
    model_config = ConfigDict(extra="forbid")
    topic: str = Field(..., pattern=NAME_PATTERN)
    partition: int = Field(..., ge=0, le=10_000)
    offset: int = Field(..., ge=0, le=(1 << 63) - 1)


class GroupConfigChanges(RootModel[dict[str, str | int | bool | None]]):
    """A group id's configs to set (a value) or reset (null: back to the server's), Kafka's names
    (``consumer.session.timeout.ms``, ``share.record.lock.duration.ms``, ...)."""

    root: dict[str, str | int | bool | None] = Field(..., max_length=64)


class GroupCommit(BaseModel):
    model_config = ConfigDict(extra="forbid")
    offsets: list[OffsetCommit] = Field(..., max_length=100_000)
    member_id: str | None = Field(None, pattern=MEMBER_PATTERN,
                                  description="a member's commit: checked against its generation and partitions")
    generation: int | None = Field(None, ge=-1, le=(1 << 31) - 1)


class PartitionRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    topic: str = Field(..., pattern=NAME_PATTERN)
    partition: int = Field(..., ge=0, le=10_000)


class MemberJoin(BaseModel):
    """A VQS consumer joins a group: the server assigns it partitions of ``topics``."""

    model_config = ConfigDict(extra="forbid")
    topics: list[str] = Field(..., min_length=1, max_length=1000)
    session_timeout_ms: int = Field(30_000, ge=100, le=3_600_000)
    client_id: str = Field("vqs-client", pattern=NAME_PATTERN, max_length=100)


class MemberHeartbeat(BaseModel):
    """What the member holds after acting on the answer of ``generation``."""

    model_config = ConfigDict(extra="forbid")
    generation: int = Field(..., ge=-1, le=(1 << 31) - 1)
    owned: list[PartitionRef] = Field(default_factory=list, max_length=100_000)
    wait_ms: int = Field(0, ge=0, le=MAX_WAIT_MS,
                         description="wait up to this long (and half the session) for a different assignment")


class WaitPartition(OffsetCommit):
    """A (topic, partition, offset) to wait on: the same fields as a commit."""


class WaitRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    partitions: list[WaitPartition] = Field(..., min_length=1, max_length=10_000)
    wait_ms: int = Field(0, ge=0, le=MAX_WAIT_MS,
                         description="how long to wait, at most 20000 ms (20 s, SQS's long-poll cap)")


# ----------------------------------------------------------------------------- queues
class Redrive(BaseModel):
    model_config = ConfigDict(extra="forbid")
    destination: str | None = Field(None, pattern=NAME_PATTERN)
    max_per_second: int | None = Field(None, ge=1, le=500)  # SQS's MaxNumberOfMessagesPerSecond


class QueueCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(..., pattern=NAME_PATTERN)
    visibility_timeout: int = Field(30, ge=0, le=43200)
    delay_seconds: int = Field(0, ge=0, le=900)
    receive_wait_seconds: int = Field(0, ge=0, le=20)
    retention_seconds: int = Field(345600, ge=60, le=1209600)
    max_message_bytes: int = Field(1048576, ge=1024, le=1048576)
    dead_letter_queue: str | None = Field(None, pattern=NAME_PATTERN)
    max_receive_count: int | None = Field(None, ge=1, le=1000)
    fifo: bool = False
    content_based_deduplication: bool = False
    tags: dict[str, str] = Field(default_factory=dict, max_length=50)


class QueueUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    visibility_timeout: int | None = Field(None, ge=0, le=43200)
    delay_seconds: int | None = Field(None, ge=0, le=900)
    receive_wait_seconds: int | None = Field(None, ge=0, le=20)
    retention_seconds: int | None = Field(None, ge=60, le=1209600)
    max_message_bytes: int | None = Field(None, ge=1024, le=1048576)
    dead_letter_queue: str | None = Field(None, pattern=NAME_PATTERN)
    max_receive_count: int | None = Field(None, ge=1, le=1000)
    content_based_deduplication: bool | None = None


class MessageAttributeIn(BaseModel):
    """A typed message attribute in SQS's shape: ``DataType`` String, Number or Binary
    (each with an optional ``.label``), and ``StringValue``, or ``BinaryValue`` as base64.
    The broker checks the pairing of type and value, as for the embedded API."""

    model_config = ConfigDict(extra="forbid")
    DataType: str = Field(..., min_length=1, max_length=256)
    StringValue: str | None = Field(None, max_length=1 << 20)
    BinaryValue: str | None = Field(None, max_length=(1 << 20) * 4 // 3 + 4)


class QueueMessageIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    body: str | None = Field(None, max_length=1 << 20)
    body_b64: str | None = Field(None, max_length=(1 << 20) * 4 // 3 + 4)
    delay_seconds: int | None = Field(None, ge=0, le=900)
    # a plain string is a String attribute
    attributes: dict[str, str | MessageAttributeIn] | None = Field(None, max_length=10)
    group_id: str | None = Field(None, max_length=128)
    dedup_id: str | None = Field(None, max_length=128)


class QueueSend(BaseModel):
    model_config = ConfigDict(extra="forbid")
    messages: list[QueueMessageIn] = Field(..., min_length=1, max_length=1000)


class QueueReceive(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_messages: int = Field(1, ge=1, le=1000)
    wait_seconds: float | None = Field(None, ge=0, le=20,
                                       description="long poll, at most 20 s (as SQS); default: the queue's")
    visibility_timeout: int | None = Field(None, ge=0, le=43200)


class QueueDelete(BaseModel):
    model_config = ConfigDict(extra="forbid")
    receipt_handles: list[str] = Field(..., min_length=1, max_length=1000)


class VisibilityChange(BaseModel):
    model_config = ConfigDict(extra="forbid")
    receipt_handle: str = Field(..., min_length=1, max_length=4096)
    visibility_timeout: int = Field(..., ge=0, le=43200)


class Tags(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tags: dict[str, str] = Field(..., max_length=50)
