"""Request validation: SQS's limits, message attributes, batch entries.

Everything here is a pure function of its arguments (and the queue's
configuration): nothing touches queue state, so validation can run before the
queue lock is taken and an invalid request changes nothing. The error raised
for each rule is SQS's (vqs.errors, with SQS's message wording).
"""

from __future__ import annotations

import re

from ...errors import (
    BatchEntryIdsNotDistinct,
    BatchRequestTooLong,
    EmptyBatchRequest,
    InvalidBatchEntryId,
    InvalidMessageContents,
    InvalidParameterValue,
    MissingParameter,
    QueueError,
    QueueMessageTooLarge,
    TooManyEntriesInBatchRequest,
)
from .config import MAX_DELAY_S, MAX_VISIBILITY_S, MAX_WAIT_S, QueueConfig
from .dedup import content_dedup_id
from .message import H_ATTR, H_DEDUP, H_DELAY, H_GROUP, H_TRACE

MAX_BATCH_ENTRIES = 10
MAX_BATCH_BYTES = 1048576  # SQS: a send batch's messages together
MAX_MESSAGE_ATTRIBUTES = 10

_ENTRY_ID = re.compile(r"[A-Za-z0-9_-]{1,80}")
_ATTR_NAME = re.compile(r"[\w.-]{1,256}")  # letters (any script), digits, _ . - (SQS takes "attr.1øßä")
GROUP_ID = re.compile(r"[!-~]{1,128}")  # alphanumerics and punctuation
# Characters SQS refuses in bodies and attribute strings (outside XML 1.0 Char).
_BAD_CHARS = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


class Prepared:
    """A validated message ready to append: its record value and headers, and
    what the queue needs to know beyond them (delay, FIFO group and dedup key)."""

    __slots__ = ("value", "headers", "delay_ms", "group", "dedup_key", "dedup_id", "entry_id", "size")


def prepare(config: QueueConfig, body, delay_seconds, attributes, group_id, dedup_id, *,
            entry_id=None, trace_header=None) -> Prepared:
    """Validate one message of a send for a queue with ``config``.

    ``trace_header`` is SQS's AWSTraceHeader system attribute (an X-Ray trace
    header): stored with the message (header ``H_TRACE``), not counted in its size.
    On a FIFO queue a ``delay_seconds`` of 0 is as if absent (the queue's delay
    applies); any other per-message delay is refused there."""
    fifo = config.fifo
    max_bytes = config.max_message_bytes
    p = Prepared()
    p.entry_id = entry_id
    if body.__class__ is bytes:
        value = body
    elif isinstance(body, str):
        if _BAD_CHARS.search(body):
            raise InvalidMessageContents(
                "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | "
                "#x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF"
            )
        value = body.encode("utf-8")
    elif isinstance(body, (bytearray, memoryview)):
        value = bytes(body)
    elif body is None:
        raise MissingParameter("The request must contain the parameter MessageBody.")
    else:
        raise InvalidParameterValue(f"MessageBody must be str or bytes, not {type(body).__name__}")
    if not value:
        raise MissingParameter("The request must contain the parameter MessageBody.")
    size = len(value)
    headers = None
    if attributes:
        headers, asize = encode_attributes(attributes)
        size += asize
    if size > max_bytes:
        raise QueueMessageTooLarge(
            f"One or more parameters are invalid. Reason: Message must be shorter than "
            f"{max_bytes} bytes."
        )
    if delay_seconds is None or (fifo and delay_seconds == 0 and delay_seconds.__class__ is int):
        delay_ms = config.delay_seconds * 1000
    else:
        if fifo:
            raise InvalidParameterValue(
                "Value " + str(delay_seconds) + " for parameter DelaySeconds is invalid. Reason: "
                "The request include parameter that is not valid for this queue type."
            )
        if not isinstance(delay_seconds, int) or isinstance(delay_seconds, bool) or not 0 <= delay_seconds <= MAX_DELAY_S:
            raise InvalidParameterValue(
                f"Value {delay_seconds} for parameter DelaySeconds is invalid. Reason: "
                f"DelaySeconds must be >= 0 and <= {MAX_DELAY_S}."
            )
        delay_ms = delay_seconds * 1000
    p.delay_ms = delay_ms
    group = None
    if group_id is not None:
        if not isinstance(group_id, str) or not GROUP_ID.fullmatch(group_id):
            raise InvalidParameterValue(
                f"Value {group_id} for parameter MessageGroupId is invalid. Reason: "
                "MessageGroupId can only include alphanumeric and punctuation characters. "
                "1 to 128 in length."
            )
        group = group_id
    p.dedup_id = None
    if fifo:
        if group is None:
            raise MissingParameter("The request must contain the parameter MessageGroupId.")
        if dedup_id is None:
            if not config.content_based_deduplication:
                raise InvalidParameterValue(
                    "The queue should either have ContentBasedDeduplication enabled or "
                    "MessageDeduplicationId provided explicitly"
                )
            dedup_id = content_dedup_id(value)
        elif not isinstance(dedup_id, str) or not GROUP_ID.fullmatch(dedup_id):
            raise InvalidParameterValue(
                f"Value {dedup_id} for parameter MessageDeduplicationId is invalid. Reason: "
                "MessageDeduplicationId can only include alphanumeric and punctuation "
                "characters. 1 to 128 in length."
            )
        p.dedup_id = dedup_id
    elif dedup_id is not None:
        raise InvalidParameterValue(
            f"Value {dedup_id} for parameter MessageDeduplicationId is invalid. Reason: The "
            "request includes a parameter that is not valid for this queue type."
        )
    p.group = group
    extra = []
    if group is not None:
        extra.append((H_GROUP, group.encode()))
    if p.dedup_id is not None:
        extra.append((H_DEDUP, p.dedup_id.encode()))
    if delay_ms:
        extra.append((H_DELAY, str(delay_ms).encode()))
    if trace_header is not None:
        if not isinstance(trace_header, str) or not trace_header or _BAD_CHARS.search(trace_header):
            raise InvalidParameterValue(
                "Value for message system attribute AWSTraceHeader is invalid: a non-empty string is required."
            )
        extra.append((H_TRACE, trace_header.encode("utf-8")))
    if extra:
        headers = tuple(extra) + (headers or ())
    p.value = value
    p.headers = headers
    p.size = size
    return p


def prepare_entry(config: QueueConfig, e) -> Prepared:
    """Validate one entry of ``send_batch`` (a body, or a dict of the send's fields)."""
    if isinstance(e, dict):
        unknown = set(e) - {"body", "delay_seconds", "attributes", "group_id", "dedup_id", "id", "trace_header"}
        if unknown:
            raise InvalidParameterValue(f"unknown batch entry field(s): {', '.join(sorted(unknown))}")
        return prepare(config, e.get("body"), e.get("delay_seconds"), e.get("attributes"),
                       e.get("group_id"), e.get("dedup_id"), entry_id=e.get("id"),
                       trace_header=e.get("trace_header"))
    return prepare(config, e, None, None, None, None)


def check_fifo_batch(config: QueueConfig, keys: list) -> None:
    """SQS: a FIFO SendMessageBatch fails as a whole (nothing is sent) when an
    entry has no MessageGroupId, or no MessageDeduplicationId while the queue
    does not deduplicate by content. ``keys``: (group id, dedup id) per entry."""
    for group, dedup in keys:
        if group is None:
            raise InvalidParameterValue("The request must contain the parameter MessageGroupId.")
        if dedup is None and not config.content_based_deduplication:
            raise InvalidParameterValue(
                "The queue should either have ContentBasedDeduplication enabled or "
                "MessageDeduplicationId provided explicitly"
            )

def check_batch(preps: list) -> None:
    """Entry ids distinct and well formed; the messages (bodies and message
    attributes, as SQS counts them) together within 1 MiB."""
    ids = [p.entry_id for p in preps if p.entry_id is not None]
    check_entry_ids(ids)
    total = sum(p.size for p in preps)
    if total > MAX_BATCH_BYTES:
        raise BatchRequestTooLong(
            f"Batch requests cannot be longer than {MAX_BATCH_BYTES} bytes. You have sent {total} bytes."
        )

def check_entry_ids(ids: list) -> None:
    """Batch entry ids: each 1-80 of [A-Za-z0-9_-], no two alike (None: not given)."""
    seen = set()
    for i in ids:
        if i is None:
            continue
        if not isinstance(i, str) or not _ENTRY_ID.fullmatch(i):
            raise InvalidBatchEntryId(i)
        if i in seen:
            raise BatchEntryIdsNotDistinct(i)
        seen.add(i)


def failure(entry_id, err: QueueError) -> dict:
    """One failed entry of a batch's result, SQS-shaped."""
    return {"id": entry_id, "code": err.code, "sender_fault": err.sender_fault, "message": str(err)}


def encode_attributes(attributes: dict) -> tuple[tuple, int]:
    """Message attributes -> record headers and their SQS size (name + type + value)."""
    if not isinstance(attributes, dict):
        raise InvalidParameterValue("MessageAttributes must be a dict")
    if len(attributes) > MAX_MESSAGE_ATTRIBUTES:
        raise InvalidParameterValue(
            f"Number of message attributes [{len(attributes)}] exceeds the allowed maximum "
            f"[{MAX_MESSAGE_ATTRIBUTES}]."
        )
    out = []
    size = 0
    for name, v in attributes.items():
        if (not isinstance(name, str) or not _ATTR_NAME.fullmatch(name) or name.startswith(".")
                or name.endswith(".") or ".." in name or name.lower().startswith(("aws.", "amazon."))):
            raise InvalidParameterValue(
                f"Message ({name}) contains invalid attribute name: names are 1-256 letters, "
                "digits and _.- characters, without leading, trailing or doubled periods, and not "
                "starting with AWS. or Amazon."
            )
        if isinstance(v, dict):
            dt = v.get("DataType")
            if not isinstance(dt, str) or not dt:
                raise InvalidParameterValue(f"The message attribute '{name}' must contain a non-empty attribute type.")
            base = dt.split(".", 1)[0]
            if base not in ("String", "Number", "Binary") or len(dt) > 256:
                raise InvalidParameterValue(
                    f"The type of message attribute '{name}' is invalid. You must use only the "
                    "following supported type prefixes: Binary, Number, String."
                )
            if base == "Binary":
                val = v.get("BinaryValue")
                if isinstance(val, str):
                    raise InvalidParameterValue(f"The message attribute '{name}' with type 'Binary' must use field 'Binary'.")
                if val is None:
                    raise InvalidParameterValue(f"The message attribute '{name}' with type 'Binary' must use field 'Binary'.")
                raw = bytes(val)
            else:
                val = v.get("StringValue")
                if not isinstance(val, str):
                    raise InvalidParameterValue(f"The message attribute '{name}' with type '{base}' must use field 'String'.")
                if _BAD_CHARS.search(val):
                    raise InvalidParameterValue(f"Invalid characters found in the value of message attribute '{name}'.")
                if base == "Number":
                    check_number(name, val)
                raw = val.encode("utf-8")
        elif isinstance(v, bool):
            raise InvalidParameterValue(f"message attribute {name!r}: use a str, number or bytes value")
        elif isinstance(v, str):
            dt, raw = "String", v.encode("utf-8")
            if _BAD_CHARS.search(v):
                raise InvalidParameterValue(f"Invalid characters found in the value of message attribute '{name}'.")
        elif isinstance(v, (int, float)):
            dt, raw = "Number", repr(v).encode()
            check_number(name, raw.decode())
        elif isinstance(v, (bytes, bytearray, memoryview)):
            dt, raw = "Binary", bytes(v)
        else:
            raise InvalidParameterValue(f"message attribute {name!r}: use a str, number or bytes value")
        if not raw and not dt.startswith("Binary"):
            raise InvalidParameterValue(f"Message (user) attribute '{name}' must contain a non-empty value of type '{dt}'.")
        size += len(name.encode()) + len(dt.encode()) + len(raw)
        out.append((H_ATTR + name, dt.encode() + b"\0" + raw))
    return tuple(out), size


def check_number(name: str, s: str) -> None:
    if not _NUMBER.fullmatch(s) or len(s.lstrip("+-").replace(".", "").split("e")[0].split("E")[0]) > 38:
        raise InvalidParameterValue(
            f"Can't cast the value of message ({name}) attribute to a number."
        )


def check_batch_size(n: int) -> None:
    """1 to 10 entries."""
    if n == 0:
        raise EmptyBatchRequest()
    if n > MAX_BATCH_ENTRIES:
        raise TooManyEntriesInBatchRequest(n)


def check_visibility(v) -> None:
    """A VisibilityTimeout: an int of 0 to 12 hours, in seconds."""
    if v.__class__ is not int or not 0 <= v <= MAX_VISIBILITY_S:
        raise InvalidParameterValue(
            f"Value {v} for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 "
            f"and <= {MAX_VISIBILITY_S}."
        )


def check_receive(max_messages, wait_seconds, visibility_timeout, default_wait: int,
                  default_vis: int) -> tuple:
    """ReceiveMessage's limits; returns (wait seconds, visibility timeout seconds)
    with the queue's defaults for those not given."""
    if max_messages.__class__ is not int or not 1 <= max_messages <= 10:
        raise InvalidParameterValue(
            f"Value {max_messages} for parameter MaxNumberOfMessages is invalid. "
            "Reason: Must be between 1 and 10, if provided."
        )
    if wait_seconds is None:
        wait = default_wait
    else:
        if (isinstance(wait_seconds, bool) or not isinstance(wait_seconds, (int, float))
                or not 0 <= wait_seconds <= MAX_WAIT_S):
            raise InvalidParameterValue(
                f"Value {wait_seconds} for parameter WaitTimeSeconds is invalid. "
                f"Reason: Must be >= 0 and <= {MAX_WAIT_S}, if provided."
            )
        wait = wait_seconds
    if visibility_timeout is None:
        vis = default_vis
    else:
        if visibility_timeout.__class__ is not int or not 0 <= visibility_timeout <= MAX_VISIBILITY_S:
            raise InvalidParameterValue(
                f"Value {visibility_timeout} for parameter VisibilityTimeout is invalid. "
                f"Reason: Must be >= 0 and <= {MAX_VISIBILITY_S}, if provided."
            )
        vis = visibility_timeout
    return wait, vis


def check_attempt_id(attempt_id) -> None:
    """A FIFO receive's ReceiveRequestAttemptId."""
    if not isinstance(attempt_id, str) or not GROUP_ID.fullmatch(attempt_id):
        raise InvalidParameterValue(
            f"Value {attempt_id} for parameter ReceiveRequestAttemptId is invalid. Reason: "
            "It can only include alphanumeric and punctuation characters. 1 to 128 in length."
        )
