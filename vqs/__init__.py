"""VQS: a durable message queue and log for Python.

One checksummed, segmented log (``vqs.Log``) serves three consumption models:
streams (topics, partitions, offsets, consumer groups), SQS-style queues
(receive, lease, delete) and an in-process ``queue.Queue``-like HybridQueue.
"""

from .errors import (
    ConfigError,
    CorruptRecordError,
    InvalidName,
    LogClosedError,
    LogLockedError,
    MessageTooLarge,
    OffsetOutOfRange,
    QueueDoesNotExist,
    QueueAlreadyExists,
    ReadOnlyError,
    ReceiptHandleIsInvalid,
    SerializationError,
    TopicAlreadyExists,
    TopicDoesNotExist,
    VQSError,
)
from .storage import Log, Record, RecordBatch
from .broker import (
    Broker, Consumer, ConsumerRecord, PartitionLag, Producer, RecordMetadata, Topic, TopicPartition,
)

__version__ = "0.1.0"



def __getattr__(name: str):
    # Fronts with optional dependencies load on first use: `import vqs` needs none.
    if name == "Client":
        from .client import Client

        return Client
    if name in ("HybridQueue", "HybridMetrics"):
        from . import hybrid

        return getattr(hybrid, name)
    raise AttributeError(f"module 'vqs' has no attribute {name!r}")


__all__ = [
    "Log", "Record", "RecordBatch", "Broker", "Consumer", "ConsumerRecord", "Producer",
    "RecordMetadata", "Topic", "TopicPartition", "PartitionLag", "Client", "HybridQueue",
    "QueueDoesNotExist", "QueueAlreadyExists", "ReceiptHandleIsInvalid", "TopicAlreadyExists",
    "TopicDoesNotExist", "SerializationError", "HybridMetrics",
    "VQSError", "ConfigError", "CorruptRecordError", "InvalidName", "LogClosedError",
    "LogLockedError", "MessageTooLarge", "OffsetOutOfRange", "ReadOnlyError",
]
