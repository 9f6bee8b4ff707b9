"""The two wire protocols of SQS, decoded to and encoded from one shape.

Actions work on the AWS JSON 1.0 shapes (what ``X-Amz-Target: AmazonSQS.<Action>``
requests carry and responses return; binary values as base64 strings). The
query protocol (``Action=...&Attribute.1.Name=...`` form or query string, XML
responses) is translated into those shapes on the way in and out.
"""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qsl
from xml.sax.saxutils import escape

from ..rest.conventions import json_bytes, json_loads
from .errors import SQSError

NAMESPACE = "http://queue.amazonaws.com/doc/2012-11-05/"
JSON_CONTENT_TYPE = "application/x-amz-json-1.0"

ACTIONS = (
    "AddPermission", "CancelMessageMoveTask", "ChangeMessageVisibility", "ChangeMessageVisibilityBatch",
    "CreateQueue", "DeleteMessage", "DeleteMessageBatch", "DeleteQueue", "GetQueueAttributes",
    "GetQueueUrl", "ListDeadLetterSourceQueues", "ListMessageMoveTasks", "ListQueueTags", "ListQueues",
    "PurgeQueue", "ReceiveMessage", "RemovePermission", "SendMessage", "SendMessageBatch",
    "SetQueueAttributes", "StartMessageMoveTask", "TagQueue", "UntagQueue",
)

#: Bounds checked before a query-protocol request is parsed: its parameter count and a
#: parameter name's dotted parts (the deepest SQS name has 7:
#: ``SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringListValue.1``).
MAX_PARAMETERS = 1000
MAX_NAME_PARTS = 8

_INT_FIELDS = {"DelaySeconds", "MaxNumberOfMessages", "VisibilityTimeout", "WaitTimeSeconds",
               "MaxResults", "MaxNumberOfMessagesPerSecond"}

# query-protocol list/map members (flattened, AWS's locationName) -> JSON member
_QUERY_LISTS = {
    "AttributeName": "AttributeNames",
    "MessageAttributeName": "MessageAttributeNames",
    "MessageSystemAttributeName": "MessageSystemAttributeNames",
    "TagKey": "TagKeys",
    "AWSAccountId": "AWSAccountIds",
    "ActionName": "Actions",
    "SendMessageBatchRequestEntry": "Entries",
    "DeleteMessageBatchRequestEntry": "Entries",
    "ChangeMessageVisibilityBatchRequestEntry": "Entries",
    "StringListValue": "StringListValues",
    "BinaryListValue": "BinaryListValues",
}
# The member names of the JSON model (AttributeNames.1, Entries.1.Id, Attributes.1.Name or
# .key, ...) are taken too: what a query serializer sends from a model without the
# query names (botocore's current SQS model with its protocol set to query).
_QUERY_LISTS.update({v: v for v in set(_QUERY_LISTS.values())})
_QUERY_MAPS = {  # flattened maps: Name/Value or Key/Value entries
    "Attribute": ("Attributes", "Name", "Value"),
    "MessageAttribute": ("MessageAttributes", "Name", "Value"),
    "MessageSystemAttribute": ("MessageSystemAttributes", "Name", "Value"),
    "Tag": ("Tags", "Key", "Value"),
}
_QUERY_MAPS.update({v[0]: v for v in list(_QUERY_MAPS.values())})
_MAP_KEYS = {"Name": ("Name", "key"), "Key": ("Key", "key"), "Value": ("Value", "value")}


# ------------------------------------------------------------------------- JSON 1.0
def parse_json(target: str, body: bytes) -> tuple[str, dict]:
    prefix, _, action = target.partition(".")
    if prefix != "AmazonSQS" or action not in ACTIONS:
        raise SQSError("InvalidAction", f"The action {action or target} is not valid for this endpoint.")
    if not body.strip():
        return action, {}
    try:
        params = json_loads(body)  # json.loads's value (msgspec parses what it can, ~8x faster)
    except (ValueError, UnicodeDecodeError):
        raise SQSError("SerializationException", "The request body is not valid JSON.") from None
    if not isinstance(params, dict):
        raise SQSError("SerializationException", "The request body must be a JSON object.")
    return action, params


def render_json(output: dict | None) -> bytes:
    """Compact JSON, non-ASCII kept as UTF-8 (``json_bytes``: json.dumps's bytes, with one encoder
    made once rather than one per call)."""
    return json_bytes(output or {})


def render_json_error(err: SQSError) -> bytes:
    return json.dumps({"__type": err.json_type, "message": err.message}, ensure_ascii=False).encode("utf-8")


# ---------------------------------------------------------------------------- query
def _nest(pairs: list[tuple[str, str]]) -> dict:
    root: dict = {}
    for key, value in pairs:
        parts = key.split(".", MAX_NAME_PARTS)
        if len(parts) > MAX_NAME_PARTS:
            raise SQSError("InvalidParameterValue", f"parameter name {key[:80]!r}... has more than "
                           f"{MAX_NAME_PARTS} dotted parts")
        node = root
        for p in parts[:-1]:
            nxt = node.get(p)
            if not isinstance(nxt, dict):
                nxt = {}
                node[p] = nxt
            node = nxt
        if isinstance(node.get(parts[-1]), dict):
            continue  # "A=x&A.1=y": keep the structured one
        node[parts[-1]] = value
    return root


def _indexed(d) -> list:
    if not isinstance(d, dict):
        raise SQSError("MalformedQueryString", "a list member must be numbered (Name.1, Name.2, ...)")
    try:
        items = sorted((int(k), v) for k, v in d.items())
    except ValueError:
        raise SQSError("MalformedQueryString", f"list members must be numbered, got {sorted(d)}") from None
    if any(i < 1 for i, _ in items):
        raise SQSError("MalformedQueryString", "list members are numbered from 1")
    return [v for _, v in items]


def _convert(node: dict) -> dict:
    out: dict = {}
    for k, v in node.items():
        if k in _QUERY_MAPS:
            name, kk, vk = _QUERY_MAPS[k]
            m = out.setdefault(name, {})
            if v == "":  # an empty map
                continue
            for entry in _indexed(v):
                key = next((entry[n] for n in _MAP_KEYS[kk] if n in entry), None) if isinstance(entry, dict) else None
                if key is None:
                    raise SQSError("MissingParameter", f"{k}.N.{kk} is required")
                val = next((entry[n] for n in _MAP_KEYS[vk] if n in entry), None)
                m[key] = _convert(val) if isinstance(val, dict) else val
        elif k in _QUERY_LISTS:
            if v == "":  # "Entries=": how the query protocol sends an empty list
                out.setdefault(_QUERY_LISTS[k], [])
                continue
            out[_QUERY_LISTS[k]] = [_convert(e) if isinstance(e, dict) else e for e in _indexed(v)]
        elif isinstance(v, dict):
            out[k] = _convert(v)
        elif k in _INT_FIELDS:
            try:
                out[k] = int(v)
            except ValueError:
                raise SQSError("InvalidParameterValue", f"Value {v} for parameter {k} is invalid. Reason: must be an integer.") from None
        else:
            out[k] = v
    return out


def parse_query(pairs: list[tuple[str, str]]) -> tuple[str, dict]:
    """Decode a query-protocol request (form body plus query string pairs)."""
    params = _convert(_nest([(k, v) for k, v in pairs]))
    action = params.pop("Action", None)
    for k in ("Version", "AWSAccessKeyId", "SignatureVersion", "SignatureMethod", "Signature",
              "Timestamp", "Expires", "X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date",
              "X-Amz-Expires", "X-Amz-SignedHeaders", "X-Amz-Signature", "X-Amz-Security-Token"):
        params.pop(k, None)
    if not action:
        raise SQSError("MissingParameter", "The request must contain the parameter Action.")
    if action not in ACTIONS:
        raise SQSError("InvalidAction", f"The action {action} is not valid for this endpoint.")
    return action, params


def parse_form(body: bytes, max_fields: int = MAX_PARAMETERS) -> list[tuple[str, str]]:
    """The name/value pairs of a form body or query string: at most ``max_fields`` (counted
    before anything is decoded)."""
    if body.count(b"&") >= max_fields and sum(1 for p in body.split(b"&") if p) > max_fields:
        raise SQSError("InvalidParameterValue", f"the request has more than {MAX_PARAMETERS} parameters")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise SQSError("MalformedQueryString", "the request body is not UTF-8") from None
    try:  # (strict: a percent-encoded byte that is not UTF-8 is refused, never replaced)
        return parse_qsl(text, keep_blank_values=True, strict_parsing=False, errors="strict")
    except UnicodeDecodeError:
        raise SQSError("MalformedQueryString", "a parameter's percent-encoded bytes are not UTF-8") from None


# XML rendering of the JSON output shapes --------------------------------------------
_LIST_ELEMENT = {
    "QueueUrls": "QueueUrl",
    "queueUrls": "QueueUrl",
    "Messages": "Message",
    "Failed": "BatchResultErrorEntry",
    "Results": "ListMessageMoveTasksResultEntry",
    "StringListValues": "StringListValue",
    "BinaryListValues": "BinaryListValue",
}
_SUCCESS_ELEMENT = {
    "SendMessageBatch": "SendMessageBatchResultEntry",
    "DeleteMessageBatch": "DeleteMessageBatchResultEntry",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibilityBatchResultEntry",
}
_MAP_ELEMENT = {
    "Attributes": ("Attribute", "Name", "Value"),
    "MessageAttributes": ("MessageAttribute", "Name", "Value"),
    "Tags": ("Tag", "Key", "Value"),
}

# characters XML 1.0 cannot carry; SQS bodies never contain them (they are refused on send)
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _x(v) -> str:
    if isinstance(v, bool):
        v = "true" if v else "false"
    return escape(_XML_BAD.sub("", str(v)), {'"': "&quot;", "\r": "&#xD;"})


def _xml(out: list, key: str, value, action: str) -> None:
    if value is None:
        return
    if isinstance(value, list):
        el = _SUCCESS_ELEMENT.get(action, key) if key == "Successful" else _LIST_ELEMENT.get(key, key)
        for item in value:
            _xml(out, el, item, action)
        return
    if isinstance(value, dict):
        if key in _MAP_ELEMENT:
            el, kn, vn = _MAP_ELEMENT[key]
            for k, v in value.items():
                out.append(f"<{el}><{kn}>{_x(k)}</{kn}>")
                _xml(out, vn, v, action)
                out.append(f"</{el}>")
            return
        out.append(f"<{key}>")
        for k, v in value.items():
            _xml(out, k, v, action)
        out.append(f"</{key}>")
        return
    out.append(f"<{key}>{_x(value)}</{key}>")


def render_xml(action: str, output: dict | None, request_id: str) -> bytes:
    out = [f'<?xml version="1.0"?><{action}Response xmlns="{NAMESPACE}">']
    if output:
        out.append(f"<{action}Result>")
        for k, v in output.items():
            _xml(out, k, v, action)
        out.append(f"</{action}Result>")
    elif action not in _NO_RESULT:
        out.append(f"<{action}Result/>")
    out.append(f"<ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata></{action}Response>")
    return "".join(out).encode("utf-8")


_NO_RESULT = {"AddPermission", "ChangeMessageVisibility", "DeleteMessage", "DeleteQueue", "PurgeQueue",
              "RemovePermission", "SetQueueAttributes", "TagQueue", "UntagQueue"}


# the query protocol words some errors its own way
_QUERY_MESSAGES = {"The specified queue does not exist.": "The specified queue does not exist for this wsdl version."}


def render_xml_error(err: SQSError, request_id: str) -> bytes:
    message = _QUERY_MESSAGES.get(err.message, err.message)
    return (
        f'<?xml version="1.0"?><ErrorResponse xmlns="{NAMESPACE}"><Error><Type>{err.fault}</Type>'
        f"<Code>{_x(err.query_code)}</Code><Message>{_x(message)}</Message><Detail/></Error>"
        f"<RequestId>{request_id}</RequestId></ErrorResponse>"
    ).encode()


# The query protocol's JSON form (a query request with ``Accept: application/json``): the
# XML document's structure as JSON, maps as lists of {Name, Value} (or {Key, Value}).
def _query_jsonish(key: str, value):
    if isinstance(value, dict):
        if key in _MAP_ELEMENT:
            _, kn, vn = _MAP_ELEMENT[key]
            return [{kn: k, vn: _query_jsonish(vn, v)} for k, v in value.items()]
        return {k: _query_jsonish(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_query_jsonish(key, v) for v in value]
    return value


def render_query_json(action: str, output: dict | None, request_id: str) -> bytes:
    result = {("messages" if k == "Messages" else k): _query_jsonish(k, v) for k, v in (output or {}).items()}
    doc = {f"{action}Response": {f"{action}Result": result, "ResponseMetadata": {"RequestId": request_id}}}
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def render_query_json_error(err: SQSError, request_id: str) -> bytes:
    doc = {"Error": {"Type": err.fault, "Code": err.query_code, "Message": _QUERY_MESSAGES.get(err.message, err.message),
                     "Detail": None}, "RequestId": request_id}
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
