"""REST errors: JSON ``{"error": {"code", "message", "field"}}`` with the right status,
and what of an embedded error a remote client may see.

Codes are stable strings (clients switch on them); messages name the
offending field or resource. An error that describes the request (a missing
topic, a queue error, ...) also carries ``type``, the embedded API's precise
name for it (``ReceiptHandleExpired``, where the code says only
``invalid_parameter_value``), and a queue error its SQS code as ``sqs_code``.

Invariant: no message sent to a remote client names a server path or carries
a traceback. The embedded API's messages name files (``log /data/t/0 is
closed``), which is right for a library user and wrong for a network client:
an error that describes the request (a name, a size, a receipt handle) keeps
its message; OffsetOutOfRange is re-worded from its fields; an error about the
server's own state (a closed or read-only log, corruption on disk, an I/O
failure) gets a fixed text, and its original goes to the server log.

Corruption in the server's own data (a CorruptRecordError from its storage:
a stored batch that fails its CRC, a damaged segment) is a server fault: 500
``corrupt_data`` (type ``CorruptRecordError``, so clients raise that class and
``vqs`` exits 4), naming the topic and partition (or queue) and what failed,
never a path; logged at error, a line a minute per damaged place. A client's
corrupt request body is the client's: the routes that decode one answer 400
``corrupt_batch`` before this table is consulted (rest/produce.py).
"""

from __future__ import annotations

import logging
import re
from urllib.parse import unquote

from .. import errors as E
from ..log_throttle import Throttle

logger = logging.getLogger("vqs.server")
_lasting = Throttle(logger)  # a full disk or a failed log: a line a minute per file, not per request


class APIError(Exception):
    def __init__(self, status: int, code: str, message: str, field: str | None = None,
                 headers: dict | None = None, extra: dict | None = None):
        self.extra = extra or {}
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.headers = headers or {}
        super().__init__(message)

    def body(self) -> dict:
        err = {"code": self.code, "message": self.message}
        if self.field:
            err["field"] = self.field
        err.update(self.extra)
        return {"error": err}


# errors that describe the request: (status, code); their own message goes to the client
_REQUEST_ERRORS: dict[type, tuple[int, str]] = {
    E.TopicDoesNotExist: (404, "topic_not_found"),
    E.QueueDoesNotExist: (404, "queue_not_found"),
    E.TopicAlreadyExists: (409, "topic_exists"),
    E.QueueAlreadyExists: (409, "queue_exists"),
    E.InvalidName: (400, "invalid_name"),
    E.MessageTooLarge: (413, "message_too_large"),
    E.InvalidRecord: (400, "invalid_record"),
    E.OffsetOutOfRange: (400, "offset_out_of_range"),
    E.FencedMember: (409, "fenced_member"),
    E.InconsistentGroupProtocol: (409, "inconsistent_group_protocol"),
    E.GroupNotEmpty: (409, "group_not_empty"),
    E.GroupFull: (429, "group_full"),
    E.ConfigError: (400, "invalid_argument"),
    E.OutOfOrderSequence: (409, "out_of_order_sequence"),
    E.ProducerFenced: (409, "producer_fenced"),
    E.UnknownProducerId: (400, "unknown_producer_id"),
}

# errors about the server's own state: (status, code, the client's message)
_SERVER_ERRORS: dict[type, tuple[int, str, str]] = {
    E.LogClosedError: (503, "closing", "the topic or queue is closed (deleted, or the server is stopping)"),
    E.DiskFullError: (507, "disk_full", "the server's disk is full: this write was refused; writes work again "
                                        "once space is freed (retry then); reads, receives and deletes go on"),
    E.LogFailedError: (503, "log_failed", "this topic or queue had a disk I/O error and accepts no writes "
                                          "until the server restarts; other topics and queues are served"),
    E.TooManyOpenFiles: (503, "too_many_open_files", "the server has no file descriptor left (its open-file limit, "
                                                     "RLIMIT_NOFILE, is reached): retry later; the server log names "
                                                     "the limit and the settings to change"),
    E.ReadOnlyError: (409, "read_only", "the data is read-only"),
    E.CorruptRecordError: (500, "corrupt_data", "stored data failed validation; the server log has the details"),
}

#: where a stored file lies in a data directory: topics/<name>/<partition>[/<segment>.log], queues/<name>/...
_STORED = re.compile(r"/(topics|queues)/([A-Za-z0-9._-]+)(?:/(\d+))?(?:/(\d{20})\.log)?(?:/|$)")


def corrupt_data_message(exc: E.CorruptRecordError) -> str:
    """What a remote client is told of corruption in the server's stored data: where (the topic
    and partition, or queue, and the segment's first offset) and what failed, without a path.
    Logged at error, at most a line a minute per damaged file and position."""
    key = f"corrupt:{exc.path}:{exc.position}" if exc.path else f"corrupt:{exc}"
    _lasting.warn(key, "%s: %s", type(exc).__name__, exc, level=logging.ERROR)
    text = str(exc)
    m = _STORED.search(exc.path or "")
    if m is None:
        return _SERVER_ERRORS[E.CorruptRecordError][2]
    kind, name, part, base = m.groups()
    where = f"{kind[:-1]} {name!r}" + (f" partition {int(part)}" if part is not None and kind == "topics" else "")
    if base is not None:
        where += f" (its segment from offset {int(base)})"
    detail = ""
    if text.startswith(f"{exc.path}: "):
        detail = text[len(exc.path) + 2:]
    if "/" in detail or len(detail) > 300:  # (it names no file of the server, nor runs on)
        detail = ""
    return (f"the server's stored data of {where} is damaged" + (f": {detail}" if detail else "")
            + "; the server log has the details")
_UNEXPECTED = "the server could not complete the request; the server log has the details"


def _lookup(table: dict, exc: BaseException):
    for klass in type(exc).__mro__:
        hit = table.get(klass)
        if hit is not None:
            return hit
    return None


def client_message(exc: E.VQSError) -> str:
    """The text of ``exc`` a remote client may see (never a server path)."""
    if isinstance(exc, E.OffsetOutOfRange):
        return (f"offset {exc.offset} is out of range: valid offsets are "
                f"{exc.start_offset}..{exc.end_offset} (start..end)")
    if isinstance(exc, E.QueueError) or _lookup(_REQUEST_ERRORS, exc) is not None:
        return str(exc)
    if isinstance(exc, E.CorruptRecordError):
        return corrupt_data_message(exc)
    if isinstance(exc, (E.DiskFullError, E.LogFailedError)):  # lasting: every write meets it
        _lasting.warn(f"{type(exc).__name__}:{exc.path}", "%s: %s", type(exc).__name__, exc)
    elif isinstance(exc, E.TooManyOpenFiles):  # every request that opens a file meets it: a line a minute
        _lasting.warn("TooManyOpenFiles", "%s: %s", type(exc).__name__, exc)
    else:
        logger.error("%s: %s", type(exc).__name__, exc)
    hit = _lookup(_SERVER_ERRORS, exc)
    return hit[2] if hit is not None else _UNEXPECTED


def error_type(exc: E.VQSError) -> str:
    """The precise name of an embedded error a remote client may see: its class's
    name in ``vqs.errors`` (a stable identifier; ``vqs.Client`` raises that class)."""
    return type(exc).__name__


def from_vqs_error(exc: E.VQSError) -> APIError:
    """The REST form of an error of the embedded API."""
    msg = client_message(exc)
    typed = {"type": error_type(exc)}
    if isinstance(exc, E.QueueError) and not isinstance(exc, (E.QueueDoesNotExist, E.QueueAlreadyExists)):
        code = re.sub(r"(?<!^)(?=[A-Z])", "_", exc.code).lower()
        status = 409 if isinstance(exc, E.MessageNotInflight) else exc.http_status
        return APIError(status, code, msg, extra={"sqs_code": exc.code, **typed})
    hit = _lookup(_REQUEST_ERRORS, exc)
    if hit is not None:
        status, code = hit
        if isinstance(exc, E.OffsetOutOfRange):
            return APIError(status, code, msg, "offset", extra={**typed, "detail": {
                "offset": exc.offset, "start_offset": exc.start_offset, "end_offset": exc.end_offset}})
        return APIError(status, code, msg, "name" if isinstance(exc, E.InvalidName) else None, extra=typed)
    hit = _lookup(_SERVER_ERRORS, exc)
    if hit is not None:  # out of descriptors passes (connections close): the client may retry
        return APIError(hit[0], hit[1], msg,
                        headers={"Retry-After": "1"} if isinstance(exc, E.TooManyOpenFiles) else None,
                        extra=typed if isinstance(exc, E.CorruptRecordError) else None)
    return APIError(400, "invalid_request", msg)


_INTERNAL = "internal error; the server log has the details"


def deleted_under(exc: BaseException, ctx, path: str) -> E.VQSError | None:
    """The broker's own ``TopicDoesNotExist`` / ``QueueDoesNotExist`` when ``exc`` is the
    ``LogClosedError`` of the topic or queue a request to ``path`` names, deleted while the
    request ran (not the server stopping): such a request answers as one made a moment later
    would, 404, never 503 ``closing``. None otherwise (a name created again meanwhile too)."""
    if not isinstance(exc, E.LogClosedError) or ctx is None or ctx.stopping or ctx.broker is None:
        return None
    parts = path.split("/")
    if len(parts) < 3 or parts[1] not in ("topics", "queues") or not parts[2]:
        return None
    broker = ctx.broker
    try:
        (broker.topic if parts[1] == "topics" else broker.queue)(unquote(parts[2]))
    except (E.TopicDoesNotExist, E.QueueDoesNotExist) as gone:
        return gone
    except E.VQSError:  # the broker closing, a bad name: the original error stands
        return None
    return None


def rest_error(exc: Exception, metrics, where: str, ctx=None) -> APIError:
    """The REST answer to ``exc`` raised while answering ``where`` (``"POST /path"``), counted
    in ``vqs_errors``: an APIError as it is, an embedded error as ``from_vqs_error`` maps it,
    anything else a 500 ``internal`` whose details (which may name server files) go to the
    server log only. The app's exception handlers and the lean dispatch both answer with it.
    Given the server's ``ctx``, a topic or queue deleted under the request answers as a
    missing one (``deleted_under``)."""
    if ctx is not None:
        exc = deleted_under(exc, ctx, where.partition(" ")[2]) or exc
    if isinstance(exc, APIError):
        api = exc
    elif isinstance(exc, E.VQSError):
        api = from_vqs_error(exc)
    elif isinstance(exc, UnicodeEncodeError) and exc.reason == "surrogates not allowed":
        # a request's string (JSON "\ud800", parsed by the framework) no UTF-8 text can hold
        api = APIError(400, "invalid_argument", "a string in the request holds a lone surrogate "
                       "(U+D800-U+DFFF), which is not a character")
    else:
        logger.error("unhandled error on %s", where, exc_info=exc)
        api = APIError(500, "internal", _INTERNAL)
    metrics.errors.labels("rest", api.code).inc()
    return api
