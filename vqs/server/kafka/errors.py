"""Kafka error codes used by the listener, and the mapping from VQS errors to them."""

from __future__ import annotations

from ... import errors as E
from ..errors import corrupt_data_message

NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
INVALID_TOPIC_EXCEPTION = 17
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
INVALID_REQUEST = 42
POLICY_VIOLATION = 44
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
INVALID_PRODUCER_EPOCH = 47
KAFKA_STORAGE_ERROR = 56
SASL_AUTHENTICATION_FAILED = 58
UNKNOWN_PRODUCER_ID = 59
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
UNKNOWN_LEADER_EPOCH = 75
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82
GROUP_SUBSCRIBED_TO_TOPIC = 86
INVALID_RECORD = 87
RESOURCE_NOT_FOUND = 91
DUPLICATE_RESOURCE = 92
UNACCEPTABLE_CREDENTIAL = 93
UNKNOWN_TOPIC_ID = 100
UNKNOWN_SERVER_ERROR = -1

COORDINATOR_STATUS = {
    "ok": NONE,
    "unknown_member": UNKNOWN_MEMBER_ID,
    "illegal_generation": ILLEGAL_GENERATION,
    "rebalance_in_progress": REBALANCE_IN_PROGRESS,
    "inconsistent_protocol": INCONSISTENT_GROUP_PROTOCOL,
    "fenced_instance_id": FENCED_INSTANCE_ID,
}


def code_for(e: BaseException) -> int:
    """The Kafka error code of a VQS error raised while serving a partition or topic."""
    if isinstance(e, (E.TopicDoesNotExist, E.PartitionDoesNotExist)):
        return UNKNOWN_TOPIC_OR_PARTITION
    if isinstance(e, E.OffsetOutOfRange):
        return OFFSET_OUT_OF_RANGE
    if isinstance(e, E.TopicAlreadyExists):
        return TOPIC_ALREADY_EXISTS
    if isinstance(e, E.InvalidName):
        return INVALID_TOPIC_EXCEPTION
    if isinstance(e, E.MessageTooLarge):
        return MESSAGE_TOO_LARGE
    if isinstance(e, E.InvalidRecord):
        return INVALID_RECORD
    if isinstance(e, E.LogClosedError):
        return UNKNOWN_TOPIC_OR_PARTITION  # deleted under the request
    if isinstance(e, (E.DiskFullError,)):
        return KAFKA_STORAGE_ERROR
    if isinstance(e, E.ConfigError):
        return INVALID_CONFIG
    if isinstance(e, E.CorruptRecordError):  # the server's stored data: as Kafka answers a corrupt log's read
        corrupt_data_message(e)  # (logged, a line a minute per damaged place)
        return CORRUPT_MESSAGE
    return UNKNOWN_SERVER_ERROR
