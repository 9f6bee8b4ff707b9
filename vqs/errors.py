"""The VQS error hierarchy: every error VQS raises on purpose derives from VQSError.

Messages name the file, offset or setting involved, so a user can act on them.
"""

from __future__ import annotations

import queue as _queue


def shown(value, limit: int = 64) -> str:
    """``repr(value)`` cut to ``limit`` characters, for an error message: a refused value is
    named, never echoed whole (a 10**400 or a 5 MB string stays a few dozen characters;
    Python's own repr refuses ints past 4,300 digits)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value[: limit + 1] if isinstance(value, (str, bytes)) else value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class VQSError(Exception):
    """Root of every error VQS raises on purpose."""


class ConfigError(VQSError, ValueError):
    """A setting or argument has a value VQS cannot use (the message names it)."""


class LogLockedError(VQSError):
    """Another process (or another open Log, Broker or HybridQueue in this one)
    owns the directory. The message says what works instead for what was being
    opened (``hint``)."""

    #: What a refused ``Log.open`` can do instead.
    LOG_HINT = "follow it with Log.open(path, readonly=True), or go through the VQS server that owns it"

    def __init__(self, path: str, holder_pid: int | None, hint: str | None = None):
        self.path = path
        self.holder_pid = holder_pid
        who = f"pid {holder_pid}" if holder_pid else "another process"
        super().__init__(f"{path} is locked by {who}; one process owns a data directory ({hint or self.LOG_HINT})")


class LogClosedError(VQSError):
    """The log (or broker, queue) was closed."""


class DiskFullError(VQSError):
    """A write was refused for space: the space governor keeps ``min_free_bytes``
    free for control writes (vqs/disk/space.py), or the kernel found the
    filesystem full (ENOSPC) or the quota spent (EDQUOT). Soft: nothing is
    latched, reads, receives, deletes and commits go on, and writes resume on
    their own once space is freed (by deleting). ``path`` names the file.

    What was acknowledged before it, per flush policy:
    ``always``: written and fsynced, never lost; ``interval``: in the write
    buffer, whose room the governor counted, written by the next flush or
    ``close``; ``never``: as ``interval``, written when a batch fills or at
    ``close``. A Log append that raised it was not acknowledged and is never
    written later (a topic or queue send that raised may be: at least once)."""

    def __init__(self, message: str, *, path: str | None = None):
        self.path = path
        super().__init__(message)


class LogFailedError(VQSError):
    """A write or fsync of this log failed with an I/O error (EIO, ...): the
    kernel may have dropped its dirty pages, so the log accepts no more writes
    until it is reopened (a restart recovers it from what is on disk). ``path``
    names the file. Reads of what was written go on; other logs are unaffected."""

    def __init__(self, message: str, *, path: str | None = None):
        self.path = path
        super().__init__(message)


class TooManyOpenFiles(VQSError):
    """Opening a file failed: the process's open-file limit (``RLIMIT_NOFILE``),
    or the system's, is reached even after VQS closed the files it could.

    The message names the file, the limit (``soft_limit``, ``hard_limit``) and
    the settings to change: the limit (``ulimit -n``) or VQS's cap on the
    segment files it keeps open (``max_open_files``)."""

    def __init__(self, message: str, *, path: str | None = None, soft_limit: int = -1,
                 hard_limit: int = -1, max_open_files: int = -1):
        self.path = path
        self.soft_limit = soft_limit
        self.hard_limit = hard_limit
        self.max_open_files = max_open_files
        super().__init__(message)


class ReadOnlyError(VQSError):
    """A write was attempted on a log opened with readonly=True."""


class OffsetOutOfRange(VQSError):
    """The requested offset is below the log start offset (deleted by retention)
    or above the log end offset."""

    def __init__(self, message: str, *, offset: int, start_offset: int, end_offset: int):
        self.offset = offset
        self.start_offset = start_offset
        self.end_offset = end_offset
        super().__init__(message)


class CorruptRecordError(VQSError):
    """A record batch failed validation (CRC, bounds or structure)."""

    def __init__(self, message: str, *, path: str | None = None, position: int | None = None):
        self.path = path
        self.position = position
        super().__init__(message)


class CleanerWorkerError(VQSError):
    """The log cleaner's worker process ended or failed in a way the pass cannot go on
    from (the log is untouched; the next pass starts again)."""


class MessageTooLarge(VQSError, ValueError):
    """A message or batch exceeds the configured size limit."""


class InvalidRecord(VQSError, ValueError):
    """A record a topic does not take: one without a key on a compacted topic (Kafka's INVALID_RECORD)."""


class InvalidName(VQSError, ValueError):
    """A topic, queue or group name is not allowed."""


class TopicDoesNotExist(VQSError):
    """The named topic is not in the broker's catalog."""

    def __init__(self, name: str):
        self.name = name
        super().__init__(f"topic {name!r} does not exist")


class PartitionDoesNotExist(ConfigError):
    """A partition number outside a topic's partitions (a ConfigError, as before it had
    its own class): ``topic``, ``partition`` and ``partitions`` (the topic's count)."""

    def __init__(self, topic: str, partition: object, partitions: int):
        self.topic = topic
        self.partition = partition
        self.partitions = partitions
        super().__init__(
            f"topic {topic!r} has {partitions} partition(s) (0..{partitions - 1}); "
            f"there is no partition {partition!r}"
        )


class FencedMember(VQSError):
    """A consumer-group member was refused: it is no longer in the group (its session
    expired, or it left), its generation is stale, or it named partitions it does not
    own; or a consumer outside the group committed while the group has members. The
    partitions have moved on: nothing was committed. A VQS consumer rejoins on its next
    ``poll`` (records it read but did not commit are read again by their next owner)."""


class InconsistentGroupProtocol(VQSError):
    """A consumer tried to join a group whose members speak the other membership protocol:
    Kafka clients (JoinGroup/SyncGroup, client-side assignment) and VQS consumers
    (server-side assignment) cannot share one group id. The message names the group."""


class GroupNotEmpty(VQSError):
    """An operation that needs a group without members (changing a share group's offsets)
    was asked of a group that has some. The message names the group."""


class GroupFull(VQSError):
    """A new member was refused: its share group already has the most members a group may
    have (200, Kafka's ``group.share.max.size``). Nothing changed; a member may join once
    another leaves or its session ends. The message names the group."""


class TopicAlreadyExists(VQSError):
    """create_topic was given the name of an existing topic."""

    def __init__(self, name: str):
        self.name = name
        super().__init__(f"topic {name!r} already exists")


# --- queues (vqs.broker.queue*): SQS's errors. ``code`` is the AWS JSON error code,
# ``query_code`` the query-protocol code (x-amzn-query-error), ``sender_fault`` its
# Sender/Receiver part, ``http_status`` AWS's status. These class attributes are the one
# table of the queue errors' SQS identities (one class per code); the SQS front reads it.


class QueueError(VQSError):
    """Base of the SQS-style queue errors."""

    code = "InternalError"
    query_code = "InternalError"
    sender_fault = True
    http_status = 400


class QueueDoesNotExist(QueueError):
    """The named queue does not exist."""

    code = "QueueDoesNotExist"
    query_code = "AWS.SimpleQueueService.NonExistentQueue"

    def __init__(self, name: str):
        self.name = name
        super().__init__("The specified queue does not exist.")


class QueueAlreadyExists(QueueError):
    """create_queue named an existing queue with different attribute values."""

    code = "QueueNameExists"
    query_code = "QueueAlreadyExists"

    def __init__(self, name: str, detail: str = ""):
        self.name = name
        super().__init__(
            f"A queue already exists with the same name and a different value for attribute {detail}"
            if detail else "A queue already exists with the same name and different attributes."
        )


class InvalidAttributeName(QueueError, ValueError):
    """An unknown (or read-only) queue attribute name."""

    code = "InvalidAttributeName"
    query_code = "InvalidAttributeName"


class InvalidAttributeValue(QueueError, ValueError):
    """A queue attribute has a value outside SQS's limits (the message names it)."""

    code = "InvalidAttributeValue"
    query_code = "InvalidAttributeValue"


class InvalidParameterValue(QueueError, ValueError):
    """A request parameter is invalid (max_messages, wait_seconds, delay, ids...)."""

    code = "InvalidParameterValue"
    query_code = "InvalidParameterValue"


class MissingParameter(QueueError, ValueError):
    """A required parameter (e.g. MessageGroupId on a FIFO queue) is missing."""

    code = "MissingParameter"
    query_code = "MissingParameter"


class InvalidMessageContents(QueueError, ValueError):
    """A message body holds characters SQS does not allow."""

    code = "InvalidMessageContents"
    query_code = "InvalidMessageContents"


class ReceiptHandleIsInvalid(QueueError, ValueError):
    """A receipt handle is malformed, forged, or from another queue."""

    code = "ReceiptHandleIsInvalid"
    query_code = "ReceiptHandleIsInvalid"

    def __init__(self, handle: object = None):
        self.handle = handle
        h = handle if isinstance(handle, str) and len(handle) <= 200 else "..."
        super().__init__(f'The input receipt handle "{h}" is not a valid receipt handle.')


class ReceiptHandleExpired(InvalidParameterValue):
    """FIFO queues: the receipt handle's lease expired (or the message was received again)."""

    def __init__(self, handle: object = None):
        self.handle = handle
        h = handle if isinstance(handle, str) and len(handle) <= 200 else "..."
        super().__init__(
            f"Value {h} for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired."
        )


class MessageNotAvailable(InvalidParameterValue):
    """change_visibility with a receipt handle whose message no longer exists (deleted)."""

    def __init__(self, handle: object = None):
        self.handle = handle
        h = handle if isinstance(handle, str) and len(handle) <= 200 else "..."
        super().__init__(
            f"Value {h} for parameter ReceiptHandle is invalid. Reason: Message does not exist "
            "or is not available for visibility timeout change."
        )


class MessageNotInflight(QueueError):
    """change_visibility on a message that is not in flight under that receipt handle."""

    code = "MessageNotInflight"
    query_code = "AWS.SimpleQueueService.MessageNotInflight"

    def __init__(self, message: str = "The message referred to isn't in flight."):
        super().__init__(message)


class OverLimit(QueueError):
    """Too many messages in flight (SQS: 120,000 per queue)."""

    code = "OverLimit"
    query_code = "OverLimit"
    http_status = 403


class PurgeQueueInProgress(QueueError):
    """purge() was called again within 60 seconds."""

    code = "PurgeQueueInProgress"
    query_code = "AWS.SimpleQueueService.PurgeQueueInProgress"
    http_status = 403

    def __init__(self, name: str):
        self.name = name
        super().__init__(
            f"Only one PurgeQueue operation on {name} is allowed every 60 seconds."
        )


class EmptyBatchRequest(QueueError, ValueError):
    """A batch request has no entries."""

    code = "EmptyBatchRequest"
    query_code = "AWS.SimpleQueueService.EmptyBatchRequest"

    def __init__(self, message: str = "There should be at least one entry in the request."):
        super().__init__(message)


class TooManyEntriesInBatchRequest(QueueError, ValueError):
    """A batch request has more than 10 entries."""

    code = "TooManyEntriesInBatchRequest"
    query_code = "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"

    def __init__(self, n: int):
        super().__init__(f"Maximum number of entries per request are 10. You have sent {n}.")


class BatchEntryIdsNotDistinct(QueueError, ValueError):
    """Two entries of a batch request have the same Id."""

    code = "BatchEntryIdsNotDistinct"
    query_code = "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"

    def __init__(self, entry_id: str):
        self.entry_id = entry_id
        super().__init__(f"Id {entry_id} repeated.")


class InvalidBatchEntryId(QueueError, ValueError):
    """A batch entry Id is not 1-80 characters of [A-Za-z0-9_-]."""

    code = "InvalidBatchEntryId"
    query_code = "AWS.SimpleQueueService.InvalidBatchEntryId"

    def __init__(self, entry_id: object):
        self.entry_id = entry_id
        super().__init__(
            "A batch entry id can only contain alphanumeric characters, hyphens and "
            f"underscores. It can be at most 80 letters long. ({entry_id!r})"
        )


class BatchRequestTooLong(QueueError, ValueError):
    """The messages of a send batch together exceed 1 MiB."""

    code = "BatchRequestTooLong"
    query_code = "AWS.SimpleQueueService.BatchRequestTooLong"


class QueueMessageTooLarge(MessageTooLarge, InvalidParameterValue):
    """A queue message (body plus message attributes) exceeds MaximumMessageSize;
    SQS reports it as InvalidParameterValue."""


class ProducerError(VQSError):
    """Base of the idempotent producer's refusals (``producer(idempotent=True)``): the batch
    was not appended."""


class OutOfOrderSequence(ProducerError):
    """An idempotent producer's batch does not follow its last one on that partition (a gap:
    the server lost acknowledged records in a crash under ``flush="interval"``/``"never"``, or
    the topic was recreated). The message names the producer, the partition and the sequences."""


class ProducerFenced(ProducerError):
    """An idempotent producer's epoch is older than one that already wrote to the partition."""


class UnknownProducerId(ProducerError):
    """A producer id this data directory never handed out."""


class SerializationError(VQSError, TypeError):
    """An item could not be serialized (or deserialized) by the configured
    serializer (HybridQueue's ``serializer=`` setting)."""


class RemoteError(VQSError):
    """The VQS server refused a request (``vqs.Client``): ``status`` is the HTTP
    status, ``code`` the server's stable error code, ``field`` the offending field."""

    def __init__(self, message: str, *, status: int, code: str, field: str | None = None):
        self.status = status
        self.code = code
        self.field = field
        super().__init__(message)


class ServerUnreachable(VQSError, ConnectionError):
    """A ``vqs.Client`` request did not complete: the server could not be reached,
    the connection broke before the answer, or the answer did not come within the
    client's ``timeout``. ``url`` names the server; ``__cause__`` is the transport's
    own exception. Whether the request took effect is unknown: an idempotent
    producer (``client.producer(idempotent=True)``) retries it safely; another
    caller decides."""

    def __init__(self, message: str, *, url: str | None = None):
        self.url = url
        super().__init__(message)


class UnsupportedOperation(QueueError):
    """The operation is not allowed now (e.g. a second message move task for a queue)."""

    code = "UnsupportedOperation"
    query_code = "AWS.SimpleQueueService.UnsupportedOperation"


class ResourceNotFound(QueueError):
    """A message move task (or its source) does not exist, or is not active."""

    code = "ResourceNotFoundException"
    query_code = "ResourceNotFoundException"
    http_status = 404



class InvalidRecordState(VQSError):
    """A share-group acknowledgement of a record the member does not hold: its lock ended,
    another member acquired it, or it was settled already (Kafka's INVALID_RECORD_STATE)."""

if hasattr(_queue, "ShutDown"):  # Python 3.13+
    ShutDown = _queue.ShutDown
else:

    class ShutDown(Exception):  # type: ignore[no-redef]
        """Raised when put/get with shut-down queue: a backport of Python
        3.13's ``queue.ShutDown`` for 3.11 and 3.12 (on 3.13+ ``vqs.ShutDown``
        *is* ``queue.ShutDown``, so ``except queue.ShutDown`` catches it).

        What ``put`` raises on a shut-down HybridQueue, and ``get`` once it
        is empty (or at once after ``shutdown(immediate=True)``). Like
        ``queue.Empty`` and ``queue.Full`` it is not a VQSError: it has to be
        the stdlib's own class where the stdlib has one."""
