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
    ReadOnlyError,
    VQSError,
)
from .storage import Log, Record, RecordBatch

__version__ = "0.1.0"

__all__ = [
    "Log", "Record", "RecordBatch",
    "VQSError", "ConfigError", "CorruptRecordError", "InvalidName", "LogClosedError",
    "LogLockedError", "MessageTooLarge", "OffsetOutOfRange", "ReadOnlyError",
]
