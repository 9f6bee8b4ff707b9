"""What a gRPC client sees of an error: a status code, a message and trailing metadata.

The one table from the VQSError hierarchy to gRPC status codes (REST's is
vqs/server/errors.py; the message text is shared with it, ``client_message``):

==========================================  =====================
TopicDoesNotExist, QueueDoesNotExist,       NOT_FOUND
PartitionDoesNotExist, ResourceNotFound
TopicAlreadyExists, QueueAlreadyExists      ALREADY_EXISTS
OffsetOutOfRange                            OUT_OF_RANGE
DiskFullError, MessageTooLarge, OverLimit   RESOURCE_EXHAUSTED
InvalidName, ConfigError, a queue error     INVALID_ARGUMENT
that is a ValueError (bad parameter,
receipt handle, attribute, batch)
any other queue error (MessageNotInflight,  FAILED_PRECONDITION
PurgeQueueInProgress, ...), ReadOnlyError,
FencedMember (a commit from outside a group
that has members), InconsistentGroupProtocol
LogClosedError                              UNAVAILABLE (deleted under the call, or stopping)
CorruptRecordError                          DATA_LOSS
anything else                               INTERNAL, a fixed text
==========================================  =====================

Details ride in trailing metadata: ``vqs-error-type`` (the embedded error's
class name, e.g. ``ReceiptHandleIsInvalid``), ``vqs-sqs-code`` for a queue
error, and ``vqs-start-offset`` / ``vqs-end-offset`` for OUT_OF_RANGE.

Invariant: no status message names a server path or carries a traceback (the
message is ``client_message``'s; an unexpected exception is logged with its
traceback and answered with a fixed text).
"""

from __future__ import annotations

import logging

import grpc

from ... import errors as E
from ..errors import client_message, error_type

logger = logging.getLogger("vqs.server")

INTERNAL_TEXT = "the server could not complete the request; the server log has the details"

# checked in order: the first class the error is an instance of decides
_CODES: tuple[tuple[type, grpc.StatusCode], ...] = (
    (E.TopicDoesNotExist, grpc.StatusCode.NOT_FOUND),
    (E.QueueDoesNotExist, grpc.StatusCode.NOT_FOUND),
    (E.PartitionDoesNotExist, grpc.StatusCode.NOT_FOUND),
    (E.ResourceNotFound, grpc.StatusCode.NOT_FOUND),
    (E.TopicAlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
    (E.QueueAlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
    (E.OffsetOutOfRange, grpc.StatusCode.OUT_OF_RANGE),
    (E.DiskFullError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (E.MessageTooLarge, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (E.OverLimit, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (E.GroupFull, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (E.InvalidName, grpc.StatusCode.INVALID_ARGUMENT),
    (E.ConfigError, grpc.StatusCode.INVALID_ARGUMENT),
    (ValueError, grpc.StatusCode.INVALID_ARGUMENT),  # the queue errors about a request's values
    (E.QueueError, grpc.StatusCode.FAILED_PRECONDITION),
    (E.FencedMember, grpc.StatusCode.FAILED_PRECONDITION),
    (E.InconsistentGroupProtocol, grpc.StatusCode.FAILED_PRECONDITION),
    (E.ReadOnlyError, grpc.StatusCode.FAILED_PRECONDITION),
    (E.LogClosedError, grpc.StatusCode.UNAVAILABLE),
    (E.CorruptRecordError, grpc.StatusCode.DATA_LOSS),
)


class RpcError(Exception):
    """An error the gRPC front raises itself (a request it refuses before the broker)."""

    def __init__(self, code: grpc.StatusCode, message: str, metadata: tuple = ()):
        self.code = code
        self.message = message
        self.metadata = metadata
        super().__init__(message)


def invalid(message: str) -> RpcError:
    return RpcError(grpc.StatusCode.INVALID_ARGUMENT, message)


def status_of(exc: BaseException) -> tuple[grpc.StatusCode, str, tuple]:
    """(code, message, trailing metadata) for any exception a handler raised."""
    if isinstance(exc, RpcError):
        return exc.code, exc.message, exc.metadata
    if isinstance(exc, E.VQSError):
        code = grpc.StatusCode.INTERNAL
        for klass, c in _CODES:
            if isinstance(exc, klass):
                code = c
                break
        md = [("vqs-error-type", error_type(exc))]
        if isinstance(exc, E.QueueError):
            md.append(("vqs-sqs-code", exc.code))
        if isinstance(exc, E.OffsetOutOfRange):
            md += [("vqs-start-offset", str(exc.start_offset)), ("vqs-end-offset", str(exc.end_offset))]
        if code is grpc.StatusCode.INTERNAL:
            logger.error("%s: %s", type(exc).__name__, exc)
            return code, INTERNAL_TEXT, tuple(md)
        return code, client_message(exc), tuple(md)
    logger.error("unexpected error in a gRPC call", exc_info=exc)
    return grpc.StatusCode.INTERNAL, INTERNAL_TEXT, ()
