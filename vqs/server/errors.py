"""REST errors: JSON ``{"error": {"code", "message", "field"}}`` with the right status.

Codes are stable strings (clients switch on them); messages name the
offending field or resource.
"""

from __future__ import annotations

import re

from .. import errors as E


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


def _cls(name: str):
    return getattr(E, name, None)


def from_vqs_error(exc: BaseException) -> APIError | None:
    """Map an error of the embedded API to its REST form (None: not a client error)."""
    name = type(exc).__name__
    msg = str(exc)
    table = {
        "TopicDoesNotExist": (404, "topic_not_found"),
        "QueueDoesNotExist": (404, "queue_not_found"),
        "GroupDoesNotExist": (404, "group_not_found"),
        "TopicAlreadyExists": (409, "topic_exists"),
        "QueueAlreadyExists": (409, "queue_exists"),
        "QueueNameExists": (409, "queue_exists"),
        "InvalidName": (400, "invalid_name"),
        "MessageTooLarge": (413, "message_too_large"),
        "OffsetOutOfRange": (400, "offset_out_of_range"),
        "ReceiptHandleIsInvalid": (400, "invalid_receipt_handle"),
        "InvalidReceiptHandle": (400, "invalid_receipt_handle"),
        "MessageNotInflight": (409, "message_not_in_flight"),
        "ConfigError": (400, "invalid_argument"),
        "ReadOnlyError": (409, "read_only"),
        "LogClosedError": (503, "closing"),
        "CorruptRecordError": (400, "corrupt_batch"),
        "InvalidAttribute": (400, "invalid_attribute"),
    }
    qe = getattr(E, "QueueError", None)
    if qe is not None and isinstance(exc, qe) and name not in ("QueueDoesNotExist", "QueueAlreadyExists"):
        code = re.sub(r"(?<!^)(?=[A-Z])", "_", exc.code).lower()
        status = exc.http_status if exc.http_status != 400 or "NotInflight" not in name else 409
        return APIError(status, code, msg, extra={"sqs_code": name})
    for klass in type(exc).__mro__:
        hit = table.get(klass.__name__)
        if hit:
            status, code = hit
            field = None
            extra = None
            if name == "OffsetOutOfRange":
                field = "offset"
                extra = {"detail": {"offset": exc.offset, "start_offset": exc.start_offset,
                                    "end_offset": exc.end_offset}}
            elif name == "InvalidName":
                field = "name"
            return APIError(status, code, msg, field, extra=extra)
    if isinstance(exc, E.VQSError):
        return APIError(400, "invalid_request", msg)
    return None
