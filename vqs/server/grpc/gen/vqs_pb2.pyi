from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AcknowledgeType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACCEPT: _ClassVar[AcknowledgeType]
    RELEASE: _ClassVar[AcknowledgeType]
    REJECT: _ClassVar[AcknowledgeType]
    RENEW: _ClassVar[AcknowledgeType]
ACCEPT: AcknowledgeType
RELEASE: AcknowledgeType
REJECT: AcknowledgeType
RENEW: AcknowledgeType

class CreateTopicRequest(_message.Message):
    __slots__ = ("name", "partitions", "retention_ms", "retention_bytes", "segment_bytes", "compression", "cleanup_policy", "delete_retention_ms", "min_cleanable_dirty_ratio", "min_compaction_lag_ms", "max_compaction_lag_ms", "flush", "flush_interval_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    RETENTION_MS_FIELD_NUMBER: _ClassVar[int]
    RETENTION_BYTES_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_BYTES_FIELD_NUMBER: _ClassVar[int]
    COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    CLEANUP_POLICY_FIELD_NUMBER: _ClassVar[int]
    DELETE_RETENTION_MS_FIELD_NUMBER: _ClassVar[int]
    MIN_CLEANABLE_DIRTY_RATIO_FIELD_NUMBER: _ClassVar[int]
    MIN_COMPACTION_LAG_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_COMPACTION_LAG_MS_FIELD_NUMBER: _ClassVar[int]
    FLUSH_FIELD_NUMBER: _ClassVar[int]
    FLUSH_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: int
    retention_ms: int
    retention_bytes: int
    segment_bytes: int
    compression: str
    cleanup_policy: str
    delete_retention_ms: int
    min_cleanable_dirty_ratio: float
    min_compaction_lag_ms: int
    max_compaction_lag_ms: int
    flush: str
    flush_interval_ms: int
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[int] = ..., retention_ms: _Optional[int] = ..., retention_bytes: _Optional[int] = ..., segment_bytes: _Optional[int] = ..., compression: _Optional[str] = ..., cleanup_policy: _Optional[str] = ..., delete_retention_ms: _Optional[int] = ..., min_cleanable_dirty_ratio: _Optional[float] = ..., min_compaction_lag_ms: _Optional[int] = ..., max_compaction_lag_ms: _Optional[int] = ..., flush: _Optional[str] = ..., flush_interval_ms: _Optional[int] = ...) -> None: ...

class ListTopicsRequest(_message.Message):
    __slots__ = ("include_internal",)
    INCLUDE_INTERNAL_FIELD_NUMBER: _ClassVar[int]
    include_internal: bool
    def __init__(self, include_internal: _Optional[bool] = ...) -> None: ...

class ListTopicsResponse(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class DescribeTopicRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class PartitionInfo(_message.Message):
    __slots__ = ("partition", "start_offset", "end_offset", "size_bytes", "segments")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    partition: int
    start_offset: int
    end_offset: int
    size_bytes: int
    segments: int
    def __init__(self, partition: _Optional[int] = ..., start_offset: _Optional[int] = ..., end_offset: _Optional[int] = ..., size_bytes: _Optional[int] = ..., segments: _Optional[int] = ...) -> None: ...

class TopicInfo(_message.Message):
    __slots__ = ("name", "partitions", "config", "partition_info")
    class ConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    PARTITION_INFO_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: int
    config: _containers.ScalarMap[str, str]
    partition_info: _containers.RepeatedCompositeFieldContainer[PartitionInfo]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[int] = ..., config: _Optional[_Mapping[str, str]] = ..., partition_info: _Optional[_Iterable[_Union[PartitionInfo, _Mapping]]] = ...) -> None: ...

class DeleteTopicRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteTopicResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Header(_message.Message):
    __slots__ = ("name", "value", "null_value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    NULL_VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: bytes
    null_value: bool
    def __init__(self, name: _Optional[str] = ..., value: _Optional[bytes] = ..., null_value: _Optional[bool] = ...) -> None: ...

class Headers(_message.Message):
    __slots__ = ("headers",)
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    headers: _containers.RepeatedCompositeFieldContainer[Header]
    def __init__(self, headers: _Optional[_Iterable[_Union[Header, _Mapping]]] = ...) -> None: ...

class ProduceRequest(_message.Message):
    __slots__ = ("topic", "partition", "values", "keys", "timestamps_ms", "headers", "batch_id", "null_values", "null_keys")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMPS_MS_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    NULL_VALUES_FIELD_NUMBER: _ClassVar[int]
    NULL_KEYS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    values: _containers.RepeatedScalarFieldContainer[bytes]
    keys: _containers.RepeatedScalarFieldContainer[bytes]
    timestamps_ms: _containers.RepeatedScalarFieldContainer[int]
    headers: _containers.RepeatedCompositeFieldContainer[Headers]
    batch_id: int
    null_values: _containers.RepeatedScalarFieldContainer[int]
    null_keys: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., values: _Optional[_Iterable[bytes]] = ..., keys: _Optional[_Iterable[bytes]] = ..., timestamps_ms: _Optional[_Iterable[int]] = ..., headers: _Optional[_Iterable[_Union[Headers, _Mapping]]] = ..., batch_id: _Optional[int] = ..., null_values: _Optional[_Iterable[int]] = ..., null_keys: _Optional[_Iterable[int]] = ...) -> None: ...

class OffsetRange(_message.Message):
    __slots__ = ("partition", "base_offset", "count")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    BASE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    partition: int
    base_offset: int
    count: int
    def __init__(self, partition: _Optional[int] = ..., base_offset: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...

class ProduceResponse(_message.Message):
    __slots__ = ("batch_id", "count", "ranges")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    RANGES_FIELD_NUMBER: _ClassVar[int]
    batch_id: int
    count: int
    ranges: _containers.RepeatedCompositeFieldContainer[OffsetRange]
    def __init__(self, batch_id: _Optional[int] = ..., count: _Optional[int] = ..., ranges: _Optional[_Iterable[_Union[OffsetRange, _Mapping]]] = ...) -> None: ...

class FetchRequest(_message.Message):
    __slots__ = ("topic", "partition", "offset", "group", "max_records", "max_bytes", "wait_ms")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    MAX_RECORDS_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    offset: int
    group: str
    max_records: int
    max_bytes: int
    wait_ms: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., offset: _Optional[int] = ..., group: _Optional[str] = ..., max_records: _Optional[int] = ..., max_bytes: _Optional[int] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class RecordBatch(_message.Message):
    __slots__ = ("topic", "partition", "offsets", "timestamps_ms", "values", "keys", "headers", "next_offset", "start_offset", "end_offset", "null_values", "null_keys")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMPS_MS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    NULL_VALUES_FIELD_NUMBER: _ClassVar[int]
    NULL_KEYS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    offsets: _containers.RepeatedScalarFieldContainer[int]
    timestamps_ms: _containers.RepeatedScalarFieldContainer[int]
    values: _containers.RepeatedScalarFieldContainer[bytes]
    keys: _containers.RepeatedScalarFieldContainer[bytes]
    headers: _containers.RepeatedCompositeFieldContainer[Headers]
    next_offset: int
    start_offset: int
    end_offset: int
    null_values: _containers.RepeatedScalarFieldContainer[int]
    null_keys: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., offsets: _Optional[_Iterable[int]] = ..., timestamps_ms: _Optional[_Iterable[int]] = ..., values: _Optional[_Iterable[bytes]] = ..., keys: _Optional[_Iterable[bytes]] = ..., headers: _Optional[_Iterable[_Union[Headers, _Mapping]]] = ..., next_offset: _Optional[int] = ..., start_offset: _Optional[int] = ..., end_offset: _Optional[int] = ..., null_values: _Optional[_Iterable[int]] = ..., null_keys: _Optional[_Iterable[int]] = ...) -> None: ...

class SubscribeRequest(_message.Message):
    __slots__ = ("topic", "partitions", "offset", "timestamp_ms", "group", "latest", "max_records", "max_bytes")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    LATEST_FIELD_NUMBER: _ClassVar[int]
    MAX_RECORDS_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    offset: int
    timestamp_ms: int
    group: str
    latest: bool
    max_records: int
    max_bytes: int
    def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ..., offset: _Optional[int] = ..., timestamp_ms: _Optional[int] = ..., group: _Optional[str] = ..., latest: _Optional[bool] = ..., max_records: _Optional[int] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class PartitionOffset(_message.Message):
    __slots__ = ("topic", "partition", "offset")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    offset: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class CommitRequest(_message.Message):
    __slots__ = ("group", "offsets")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    group: str
    offsets: _containers.RepeatedCompositeFieldContainer[PartitionOffset]
    def __init__(self, group: _Optional[str] = ..., offsets: _Optional[_Iterable[_Union[PartitionOffset, _Mapping]]] = ...) -> None: ...

class CommitResponse(_message.Message):
    __slots__ = ("committed",)
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    committed: int
    def __init__(self, committed: _Optional[int] = ...) -> None: ...

class CommittedRequest(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: str
    def __init__(self, group: _Optional[str] = ...) -> None: ...

class CommittedResponse(_message.Message):
    __slots__ = ("offsets",)
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    offsets: _containers.RepeatedCompositeFieldContainer[PartitionOffset]
    def __init__(self, offsets: _Optional[_Iterable[_Union[PartitionOffset, _Mapping]]] = ...) -> None: ...

class LagRequest(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: str
    def __init__(self, group: _Optional[str] = ...) -> None: ...

class PartitionLag(_message.Message):
    __slots__ = ("topic", "partition", "committed", "start_offset", "end_offset", "lag")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAG_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    committed: int
    start_offset: int
    end_offset: int
    lag: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., committed: _Optional[int] = ..., start_offset: _Optional[int] = ..., end_offset: _Optional[int] = ..., lag: _Optional[int] = ...) -> None: ...

class LagResponse(_message.Message):
    __slots__ = ("partitions", "total_lag")
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_LAG_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionLag]
    total_lag: int
    def __init__(self, partitions: _Optional[_Iterable[_Union[PartitionLag, _Mapping]]] = ..., total_lag: _Optional[int] = ...) -> None: ...

class CreateQueueRequest(_message.Message):
    __slots__ = ("name", "attributes")
    class AttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    name: str
    attributes: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., attributes: _Optional[_Mapping[str, str]] = ...) -> None: ...

class QueueInfo(_message.Message):
    __slots__ = ("name", "attributes")
    class AttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    name: str
    attributes: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., attributes: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ListQueuesRequest(_message.Message):
    __slots__ = ("prefix",)
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    def __init__(self, prefix: _Optional[str] = ...) -> None: ...

class ListQueuesResponse(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class DeleteQueueRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteQueueResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class MessageAttribute(_message.Message):
    __slots__ = ("data_type", "string_value", "binary_value")
    DATA_TYPE_FIELD_NUMBER: _ClassVar[int]
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    BINARY_VALUE_FIELD_NUMBER: _ClassVar[int]
    data_type: str
    string_value: str
    binary_value: bytes
    def __init__(self, data_type: _Optional[str] = ..., string_value: _Optional[str] = ..., binary_value: _Optional[bytes] = ...) -> None: ...

class SendEntry(_message.Message):
    __slots__ = ("body", "delay_seconds", "attributes", "group_id", "dedup_id")
    class AttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: MessageAttribute
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[MessageAttribute, _Mapping]] = ...) -> None: ...
    BODY_FIELD_NUMBER: _ClassVar[int]
    DELAY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    DEDUP_ID_FIELD_NUMBER: _ClassVar[int]
    body: bytes
    delay_seconds: int
    attributes: _containers.MessageMap[str, MessageAttribute]
    group_id: str
    dedup_id: str
    def __init__(self, body: _Optional[bytes] = ..., delay_seconds: _Optional[int] = ..., attributes: _Optional[_Mapping[str, MessageAttribute]] = ..., group_id: _Optional[str] = ..., dedup_id: _Optional[str] = ...) -> None: ...

class SendRequest(_message.Message):
    __slots__ = ("queue", "entries")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    queue: str
    entries: _containers.RepeatedCompositeFieldContainer[SendEntry]
    def __init__(self, queue: _Optional[str] = ..., entries: _Optional[_Iterable[_Union[SendEntry, _Mapping]]] = ...) -> None: ...

class SendResponse(_message.Message):
    __slots__ = ("message_ids",)
    MESSAGE_IDS_FIELD_NUMBER: _ClassVar[int]
    message_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, message_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ReceiveRequest(_message.Message):
    __slots__ = ("queue", "max_messages", "wait_seconds", "visibility_timeout")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    WAIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    VISIBILITY_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    queue: str
    max_messages: int
    wait_seconds: int
    visibility_timeout: int
    def __init__(self, queue: _Optional[str] = ..., max_messages: _Optional[int] = ..., wait_seconds: _Optional[int] = ..., visibility_timeout: _Optional[int] = ...) -> None: ...

class QueueMessage(_message.Message):
    __slots__ = ("id", "receipt_handle", "body", "attributes", "receive_count", "sent_timestamp_ms", "first_receive_timestamp_ms", "group_id", "dedup_id", "sequence_number")
    class AttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: MessageAttribute
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[MessageAttribute, _Mapping]] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_HANDLE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    RECEIVE_COUNT_FIELD_NUMBER: _ClassVar[int]
    SENT_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    FIRST_RECEIVE_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    DEDUP_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    id: str
    receipt_handle: str
    body: bytes
    attributes: _containers.MessageMap[str, MessageAttribute]
    receive_count: int
    sent_timestamp_ms: int
    first_receive_timestamp_ms: int
    group_id: str
    dedup_id: str
    sequence_number: str
    def __init__(self, id: _Optional[str] = ..., receipt_handle: _Optional[str] = ..., body: _Optional[bytes] = ..., attributes: _Optional[_Mapping[str, MessageAttribute]] = ..., receive_count: _Optional[int] = ..., sent_timestamp_ms: _Optional[int] = ..., first_receive_timestamp_ms: _Optional[int] = ..., group_id: _Optional[str] = ..., dedup_id: _Optional[str] = ..., sequence_number: _Optional[str] = ...) -> None: ...

class ReceiveResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[QueueMessage]
    def __init__(self, messages: _Optional[_Iterable[_Union[QueueMessage, _Mapping]]] = ...) -> None: ...

class DeleteRequest(_message.Message):
    __slots__ = ("queue", "receipt_handle")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_HANDLE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    receipt_handle: str
    def __init__(self, queue: _Optional[str] = ..., receipt_handle: _Optional[str] = ...) -> None: ...

class DeleteResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ChangeVisibilityRequest(_message.Message):
    __slots__ = ("queue", "receipt_handle", "visibility_timeout")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_HANDLE_FIELD_NUMBER: _ClassVar[int]
    VISIBILITY_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    queue: str
    receipt_handle: str
    visibility_timeout: int
    def __init__(self, queue: _Optional[str] = ..., receipt_handle: _Optional[str] = ..., visibility_timeout: _Optional[int] = ...) -> None: ...

class ChangeVisibilityResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ShareJoinRequest(_message.Message):
    __slots__ = ("group", "topics")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    group: str
    topics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, group: _Optional[str] = ..., topics: _Optional[_Iterable[str]] = ...) -> None: ...

class ShareJoinResponse(_message.Message):
    __slots__ = ("member_id", "assignment")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    assignment: _containers.RepeatedCompositeFieldContainer[TopicPartition]
    def __init__(self, member_id: _Optional[str] = ..., assignment: _Optional[_Iterable[_Union[TopicPartition, _Mapping]]] = ...) -> None: ...

class TopicPartition(_message.Message):
    __slots__ = ("topic", "partition")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ...) -> None: ...

class ShareReceiveRequest(_message.Message):
    __slots__ = ("group", "member_id", "max_records", "wait_ms", "max_bytes")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_RECORDS_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    group: str
    member_id: str
    max_records: int
    wait_ms: int
    max_bytes: int
    def __init__(self, group: _Optional[str] = ..., member_id: _Optional[str] = ..., max_records: _Optional[int] = ..., wait_ms: _Optional[int] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class ShareRecords(_message.Message):
    __slots__ = ("records", "delivery_counts")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_COUNTS_FIELD_NUMBER: _ClassVar[int]
    records: RecordBatch
    delivery_counts: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, records: _Optional[_Union[RecordBatch, _Mapping]] = ..., delivery_counts: _Optional[_Iterable[int]] = ...) -> None: ...

class ShareReceiveResponse(_message.Message):
    __slots__ = ("batches",)
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    batches: _containers.RepeatedCompositeFieldContainer[ShareRecords]
    def __init__(self, batches: _Optional[_Iterable[_Union[ShareRecords, _Mapping]]] = ...) -> None: ...

class ShareAck(_message.Message):
    __slots__ = ("topic", "partition", "offset", "type")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    offset: int
    type: AcknowledgeType
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., offset: _Optional[int] = ..., type: _Optional[_Union[AcknowledgeType, str]] = ...) -> None: ...

class ShareAcknowledgeRequest(_message.Message):
    __slots__ = ("group", "member_id", "acks")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    ACKS_FIELD_NUMBER: _ClassVar[int]
    group: str
    member_id: str
    acks: _containers.RepeatedCompositeFieldContainer[ShareAck]
    def __init__(self, group: _Optional[str] = ..., member_id: _Optional[str] = ..., acks: _Optional[_Iterable[_Union[ShareAck, _Mapping]]] = ...) -> None: ...

class ShareAckResult(_message.Message):
    __slots__ = ("ok", "error")
    OK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    error: str
    def __init__(self, ok: _Optional[bool] = ..., error: _Optional[str] = ...) -> None: ...

class ShareAcknowledgeResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ShareAckResult]
    def __init__(self, results: _Optional[_Iterable[_Union[ShareAckResult, _Mapping]]] = ...) -> None: ...

class ShareLeaveRequest(_message.Message):
    __slots__ = ("group", "member_id")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    group: str
    member_id: str
    def __init__(self, group: _Optional[str] = ..., member_id: _Optional[str] = ...) -> None: ...

class ShareLeaveResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListShareGroupsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListShareGroupsResponse(_message.Message):
    __slots__ = ("groups",)
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, groups: _Optional[_Iterable[str]] = ...) -> None: ...

class DescribeShareGroupRequest(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: str
    def __init__(self, group: _Optional[str] = ...) -> None: ...

class ShareMemberInfo(_message.Message):
    __slots__ = ("member_id", "epoch", "client_id", "client_host", "topics", "assignment")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_HOST_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    epoch: int
    client_id: str
    client_host: str
    topics: _containers.RepeatedScalarFieldContainer[str]
    assignment: _containers.RepeatedCompositeFieldContainer[TopicPartition]
    def __init__(self, member_id: _Optional[str] = ..., epoch: _Optional[int] = ..., client_id: _Optional[str] = ..., client_host: _Optional[str] = ..., topics: _Optional[_Iterable[str]] = ..., assignment: _Optional[_Iterable[_Union[TopicPartition, _Mapping]]] = ...) -> None: ...

class SharePartitionInfo(_message.Message):
    __slots__ = ("topic", "partition", "start_offset", "cursor", "acquired", "available", "delivery_counts")
    class DeliveryCountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    ACQUIRED_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_COUNTS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    start_offset: int
    cursor: int
    acquired: int
    available: int
    delivery_counts: _containers.ScalarMap[int, int]
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., start_offset: _Optional[int] = ..., cursor: _Optional[int] = ..., acquired: _Optional[int] = ..., available: _Optional[int] = ..., delivery_counts: _Optional[_Mapping[int, int]] = ...) -> None: ...

class ShareGroupInfo(_message.Message):
    __slots__ = ("group", "state", "epoch", "members", "partitions")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    group: str
    state: str
    epoch: int
    members: _containers.RepeatedCompositeFieldContainer[ShareMemberInfo]
    partitions: _containers.RepeatedCompositeFieldContainer[SharePartitionInfo]
    def __init__(self, group: _Optional[str] = ..., state: _Optional[str] = ..., epoch: _Optional[int] = ..., members: _Optional[_Iterable[_Union[ShareMemberInfo, _Mapping]]] = ..., partitions: _Optional[_Iterable[_Union[SharePartitionInfo, _Mapping]]] = ...) -> None: ...
