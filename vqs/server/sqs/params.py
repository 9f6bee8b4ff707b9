"""The request context and the readers that turn SQS request parameters into checked values.

Invariants:
* Every reader raises SQSError (never a bare TypeError/ValueError) for a
  parameter of the wrong type or out of range, with AWS's code and wording;
  an absent optional parameter reads as None (lists/maps as empty).
* Message attributes are decoded to the queue's shape (BinaryValue as bytes)
  and encoded back to the JSON shape (BinaryValue as base64): decode then
  encode is the identity on valid input, so the MD5s computed on either side
  (md5.py) agree with what the client computed.
* ``ActionBase`` is what the action mixins share: the server context, the
  broker, the metrics, and the QueueUrl/ARN -> queue lookup; a queue that does
  not exist (or a name the broker rejects) is always SQS's QueueDoesNotExist.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import TYPE_CHECKING

from ...errors import InvalidName, QueueDoesNotExist
from .errors import SQSError
from .md5 import md5_of_attributes

if TYPE_CHECKING:
    from ...broker import Broker
    from ..context import ServerContext
    from ..metrics import Metrics

_SYSTEM_ATTRS = ("SenderId", "SentTimestamp", "ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp",
                 "SequenceNumber", "MessageDeduplicationId", "MessageGroupId", "AWSTraceHeader",
                 "DeadLetterQueueSourceArn")



def queue_name_of(url: str) -> str:
    """The queue name a ``QueueUrl`` names: its last path segment ("" for none)."""
    return url.rstrip("/").rsplit("/", 1)[-1] if "/" in url else url

class Req:
    """Per-request facts the actions need."""

    __slots__ = ("host", "scheme", "region", "account", "path_queue", "trace_id")

    def __init__(self, host, scheme, region, account, path_queue, trace_id=None):
        self.host = host
        self.scheme = scheme
        self.region = region
        self.account = account
        self.path_queue = path_queue
        self.trace_id = trace_id  # the X-Amzn-Trace-Id request header (AWSTraceHeader of messages sent)

    @property
    def arn_prefix(self) -> str:
        return f"arn:aws:sqs:{self.region}:{self.account}"

    def url(self, name: str) -> str:
        return f"{self.scheme}://{self.host}/{self.account}/{name}"


def _int(params: dict, key: str, lo: int, hi: int, reason: str | None = None):
    v = params.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, str) and re.fullmatch(r"-?\d{1,12}", v):
            v = int(v)
        else:
            raise SQSError("InvalidParameterValue", f"Value {v} for parameter {key} is invalid. Reason: must be an integer.")
    if not lo <= v <= hi:
        raise SQSError("InvalidParameterValue",
                       f"Value {v} for parameter {key} is invalid. Reason: {reason or f'Must be between {lo} and {hi}'}.")
    return v


def _str(params: dict, key: str, required: bool = False):
    v = params.get(key)
    if v is None:
        if required:
            raise SQSError("MissingParameter", f"The request must contain the parameter {key}.")
        return None
    if not isinstance(v, str):
        raise SQSError("InvalidParameterValue", f"Value for parameter {key} is invalid. Reason: must be a string.")
    return v


def _str_map(params: dict, key: str) -> dict:
    v = params.get(key) or {}
    if not isinstance(v, dict) or not all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()):
        raise SQSError("InvalidParameterValue", f"{key} must be a map of strings to strings.")
    return v


def _str_list(params: dict, key: str) -> list:
    v = params.get(key) or []
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise SQSError("InvalidParameterValue", f"{key} must be a list of strings.")
    return v


def _decode_message_attributes(raw, what="MessageAttributes") -> dict | None:
    """JSON-shape message attributes -> the queue's shape (BinaryValue as bytes)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise SQSError("InvalidParameterValue", f"{what} must be a map.")
    out = {}
    for name, v in raw.items():
        if not isinstance(v, dict):
            raise SQSError("InvalidParameterValue", f"The message attribute '{name}' must be a structure.")
        dt = v.get("DataType")
        if not isinstance(dt, str) or not dt:
            raise SQSError("InvalidParameterValue", f"The message attribute '{name}' must contain a non-empty attribute type.")
        a = {"DataType": dt}
        if v.get("StringListValues") or v.get("BinaryListValues"):
            raise SQSError("InvalidParameterValue", f"Message attribute list values in MessageAttribute '{name}' are not supported.")
        if dt.split(".", 1)[0] == "Binary":
            b = v.get("BinaryValue")
            if not isinstance(b, str):
                raise SQSError("InvalidParameterValue", f"The message attribute '{name}' with type 'Binary' must use field 'Binary'.")
            try:
                a["BinaryValue"] = base64.b64decode(b, validate=True)
            except (binascii.Error, ValueError):
                raise SQSError("InvalidParameterValue", f"The message attribute '{name}' has an invalid base64 BinaryValue.") from None
        else:
            s = v.get("StringValue")
            if not isinstance(s, str):
                raise SQSError("InvalidParameterValue",
                               f"The message attribute '{name}' with type '{dt.split('.', 1)[0]}' must use field 'String'.")
            a["StringValue"] = s
        out[name] = a
    return out


def _encode_message_attributes(attrs: dict) -> dict:
    out = {}
    for name, a in attrs.items():
        d = {"DataType": a["DataType"]}
        if "BinaryValue" in a:
            d["BinaryValue"] = base64.b64encode(bytes(a["BinaryValue"])).decode("ascii")
        else:
            d["StringValue"] = a["StringValue"]
        out[name] = d
    return out


def _select_attributes(attrs: dict, names: list) -> dict:
    """The message attributes ReceiveMessage's MessageAttributeNames select: ``All``,
    ``*`` and ``.*`` every one; ``Prefix.*`` those whose name starts with ``Prefix``
    (so ``Hel.*`` selects ``Hello`` and ``Help.Me``); any other entry, that name."""
    if not names or not attrs:
        return {}
    if "All" in names or ".*" in names or "*" in names:
        return attrs
    prefixes = tuple(n[:-2] for n in names if n.endswith(".*"))
    return {k: v for k, v in attrs.items() if k in names or (prefixes and k.startswith(prefixes))}


def _system_attributes(raw) -> tuple[dict | None, str | None]:
    """MessageSystemAttributes on send: only AWSTraceHeader (String) exists."""
    if not raw:
        return None, None
    attrs = _decode_message_attributes(raw, "MessageSystemAttributes")
    for name, a in attrs.items():
        if name != "AWSTraceHeader":
            raise SQSError("InvalidParameterValue",
                           f"Message system attribute name '{name}' is invalid. Valid names: AWSTraceHeader.")
        if a["DataType"] != "String":
            raise SQSError("InvalidParameterValue", "Message system attribute AWSTraceHeader must be of type String.")
    return attrs, md5_of_attributes(attrs)



class ActionBase:
    """The state and lookups the action mixins (queue_actions.py, message_actions.py) use; SQSService sets them."""

    ctx: ServerContext
    broker: Broker
    metrics: Metrics
    _tasks: list

    def _queue_name(self, params: dict, req: Req, key: str = "QueueUrl") -> str:
        name = queue_name_of(_str(params, key, required=True))
        if not name:
            raise SQSError("QueueDoesNotExist")
        return name

    def _queue(self, params: dict, req: Req, key: str = "QueueUrl"):
        name = self._queue_name(params, req, key)
        try:
            return self.broker.queue(name)
        except (QueueDoesNotExist, InvalidName):
            raise SQSError("QueueDoesNotExist") from None

    def _name_from_arn(self, arn: str, what: str) -> str:
        if not isinstance(arn, str) or not arn.startswith("arn:") or arn.count(":") != 5:
            raise SQSError("InvalidParameterValue", f"Value {arn} for parameter {what} is invalid. Reason: not a queue ARN.")
        return arn.rsplit(":", 1)[1]
