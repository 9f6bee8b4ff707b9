"""VQS: a durable message queue and log for Python.

One checksummed, segmented log (``vqs.Log``) serves three consumption models:
streams (topics, partitions, offsets, consumer groups), SQS-style queues
(receive, lease, delete) and an in-process ``queue.Queue``-like HybridQueue.
"""

import importlib
from typing import TYPE_CHECKING

from .errors import (
    ConfigError,
    CorruptRecordError,
    DiskFullError,
    FencedMember,
    GroupFull,
    GroupNotEmpty,
    InconsistentGroupProtocol,
    InvalidName,
    InvalidRecord,
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

__version__ = "0.1.0"



#: the public names beyond the errors, each loaded from its module on first use (PEP 562):
#: ``import vqs`` costs the error hierarchy only, and a process that needs one part (a
#: cleaner's worker, the CLI, a HybridQueue) imports that part alone. The fronts with
#: optional dependencies (Client: httpx) load only so.
_LAZY = {
    "Log": "storage", "set_max_open_files": "storage",
    "Record": "record", "RecordBatch": "record",
    **dict.fromkeys(("Broker", "Consumer", "ConsumerRecord", "PartitionLag", "Producer", "RecordMetadata",
                     "Topic", "TopicPartition"), "broker"),
    "IdempotentProducer": "broker.idempotent",
    "LeaseKeeper": "broker.lease_keeper", "AsyncLeaseKeeper": "broker.lease_keeper",
    "Client": "client", "AsyncClient": "client.aio",
    "HybridQueue": "hybrid", "HybridMetrics": "hybrid",
    # asyncio.Queue over a HybridQueue; QueueShutDown is asyncio's on 3.13+
    "AsyncHybridQueue": "hybrid.aio", "QueueShutDown": "hybrid.aio",
}

if TYPE_CHECKING:
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
    from .broker.lease_keeper import AsyncLeaseKeeper, LeaseKeeper
    from .client import Client
    from .client.aio import AsyncClient
    from .hybrid import HybridMetrics, HybridQueue
    from .hybrid.aio import AsyncHybridQueue, QueueShutDown
    from .record import Record, RecordBatch
    from .storage import Log, set_max_open_files


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'vqs' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # (the next lookup is a plain attribute)
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


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
    "InvalidRecord",
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
