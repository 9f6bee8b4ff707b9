"""VQS: a durable message queue and log for Python.

One checksummed, segmented log (``vqs.Log``) serves three consumption models:
streams (topics, partitions, offsets, consumer groups), SQS-style queues
(receive, lease, delete) and an in-process ``queue.Queue``-like HybridQueue.
"""

from .broker import (
    Broker,
    Consumer,
    ConsumerRecord,
    PartitionLag,
    Producer,
    RecordMetadata,
    Topic,
    TopicPartition,
)
from .broker.idempotent import IdempotentProducer
from .errors import (
    ConfigError,
    CorruptRecordError,
    DiskFullError,
    FencedMember,
    GroupFull,
    GroupNotEmpty,
    InconsistentGroupProtocol,
    InvalidName,
    LogClosedError,
    LogFailedError,
    LogLockedError,
    MessageTooLarge,
    OffsetOutOfRange,
    OutOfOrderSequence,
    PartitionDoesNotExist,
    ProducerError,
    ProducerFenced,
    QueueAlreadyExists,
    QueueDoesNotExist,
    ReadOnlyError,
    ReceiptHandleIsInvalid,
    RemoteError,
    SerializationError,
    ServerUnreachable,
    ShutDown,
    TooManyOpenFiles,
    TopicAlreadyExists,
    TopicDoesNotExist,
    UnknownProducerId,
    VQSError,
)
from .record import Record, RecordBatch
from .storage import Log, set_max_open_files

__version__ = "0.1.0"



def __getattr__(name: str):
    # Fronts with optional dependencies load on first use: `import vqs` needs none.
    if name == "Client":
        from .client import Client

        return Client
    if name == "AsyncClient":
        from .client.aio import AsyncClient

        return AsyncClient
    if name in ("LeaseKeeper", "AsyncLeaseKeeper"):
        from .broker import lease_keeper

        return getattr(lease_keeper, name)
    if name in ("HybridQueue", "HybridMetrics"):
        from . import hybrid

        return getattr(hybrid, name)
    if name in ("AsyncHybridQueue", "QueueShutDown"):
        # asyncio.Queue over a HybridQueue; QueueShutDown is asyncio's on 3.13+
        from .hybrid import aio

        return getattr(aio, name)
    raise AttributeError(f"module 'vqs' has no attribute {name!r}")


__all__ = [
    "AsyncClient",
    "AsyncHybridQueue",
    "AsyncLeaseKeeper",
    "Broker",
    "Client",
    "ConfigError",
    "Consumer",
    "ConsumerRecord",
    "CorruptRecordError",
    "DiskFullError",
    "FencedMember",
    "GroupFull",
    "GroupNotEmpty",
    "HybridMetrics",
    "HybridQueue",
    "IdempotentProducer",
    "InconsistentGroupProtocol",
    "InvalidName",
    "LeaseKeeper",
    "Log",
    "LogClosedError",
    "LogFailedError",
    "LogLockedError",
    "MessageTooLarge",
    "OffsetOutOfRange",
    "OutOfOrderSequence",
    "PartitionDoesNotExist",
    "PartitionLag",
    "Producer",
    "ProducerError",
    "ProducerFenced",
    "QueueAlreadyExists",
    "QueueDoesNotExist",
    "QueueShutDown",
    "ReadOnlyError",
    "ReceiptHandleIsInvalid",
    "Record",
    "RecordBatch",
    "RecordMetadata",
    "RemoteError",
    "SerializationError",
    "ServerUnreachable",
    "ShutDown",
    "TooManyOpenFiles",
    "Topic",
    "TopicAlreadyExists",
    "TopicDoesNotExist",
    "TopicPartition",
    "UnknownProducerId",
    "VQSError",
    "set_max_open_files",
]
