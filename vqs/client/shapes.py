"""Requests and answers of the client, without I/O: shared by the blocking
``Client`` (core.py, topics.py, queues.py, share.py) and ``AsyncClient``
(aio.py, aio_consumer.py, aio_share.py), which only send them.

Guarantees: both clients build the same request for the same call and make
the same objects (``ConsumerRecord``, ``RecordMetadata``, ``PartitionLag``,
``PeekedMessage``, ``RemoteMoveTask``, ``ShareRecord``) of the same answer,
so their results and errors cannot drift apart. A queue message travels as
queues.py's module doc says (text as text, other bodies and binary attribute
values as base64, a received body always bytes); a lone surrogate in a body or
receipt handle is refused here, before a request, as the embedded queue
refuses it.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from urllib.parse import quote

from .. import errors as E
from ..broker.names import validate_name
from ..wire import END_OFFSET, NEXT_OFFSET, decode_body
from .transport import SURROGATE
from .values import as_bytes, as_tp

#: ``group_members`` of a group the server does not know (as ``Broker.group_members``).
EMPTY_GROUP = {"state": "Empty", "generation": 0, "protocol_type": "", "protocol": "", "members": []}
SHARE_ACK_KINDS = ("accept", "release", "reject", "renew")


# ------------------------------------------------------------------------------- topics
def topic_body(name: str, partitions: int, options: dict) -> dict:
    """``POST /topics``'s body: the name (InvalidName before a request), the partitions and
    the topic settings that were given (None: the server's default; a setting it does not
    know, it refuses)."""
    body = {"name": validate_name(name, "topic name"), "partitions": partitions}
    body.update((k, v) for k, v in options.items() if v is not None)
    return body


def path_name(name: str) -> str:
    """A group id as one segment of a path (quoted: a group id may hold any character)."""
    return quote(name, safe="")


def config_values(answer: dict) -> dict[str, tuple[str, bool]]:
    """``GET /groups/{g}/config``'s answer as ``Broker.group_config_values`` gives it."""
    own = answer.get("own") or {}
    return {k: (v, k in own) for k, v in (answer.get("config") or {}).items()}


def alter_params(replace: bool, validate_only: bool) -> dict:
    """``PATCH /topics/{t}``'s query: only the flags that are set."""
    return {k: "true" for k, v in (("replace", replace), ("validate_only", validate_only)) if v}


def read_params(partition: int, offset: int, max_records: int, max_bytes: int, timeout: float,
                stored: bool = False) -> dict:
    """A fetch's query (``GET /topics/{t}/messages``); ``stored``: the whole stored batches."""
    p = {"partition": partition, "offset": offset, "limit": max_records, "max_bytes": max_bytes,
         "wait_ms": int(timeout * 1000)}
    if stored:
        p["stored"] = 1
    return p


def read_answer(headers, body: bytes) -> tuple[list, int, int]:
    """(decoded RecordBatches, next offset, end offset) of a fetch's answer (CRC-verified)."""
    return decode_body(body, where="server response"), int(headers[NEXT_OFFSET]), int(headers[END_OFFSET])


def records_of(topic: str, partition: int, batches) -> list:
    """The ConsumerRecords of a fetch's batches, in offset order."""
    from ..broker.topic import ConsumerRecord

    return [ConsumerRecord(topic, partition, r.offset, r.timestamp_ms, r.key, r.value, r.headers)
            for b in batches for r in b.records()]


def produce_answer(topic: str, doc: dict) -> list:
    """One RecordMetadata per record of a produce answer's ``ranges``, in input order."""
    from ..broker.topic import RecordMetadata

    out = []
    for rg in doc["ranges"]:
        p, base = rg["partition"], rg["base_offset"]
        out.extend(RecordMetadata(topic, p, base + i) for i in range(rg["count"]))
    return out


# ------------------------------------------------------------------------------- groups
def group_lag(doc: dict | None) -> list:
    """``describe_group``: PartitionLag rows; [] for an unknown group (``doc`` None)."""
    from ..broker.topic import PartitionLag

    return [] if doc is None else [PartitionLag(**row) for row in doc["partitions"]]


def group_offsets(doc: dict | None) -> dict:
    """{TopicPartition: committed offset}; {} for an unknown group (``doc`` None)."""
    if doc is None:
        return {}
    return {as_tp((row["topic"], row["partition"])): row["committed"] for row in doc["partitions"]
            if row["committed"] is not None}


def group_members(doc: dict | None) -> dict:
    """``group_members``: state, generation, protocol and live members."""
    if doc is None:
        return dict(EMPTY_GROUP, members=[])
    return {k: doc.get(k) for k in EMPTY_GROUP}


def commit_body(offsets: dict) -> dict:
    """``POST /groups/{g}/offsets``'s body for {(topic, partition): offset} (no member)."""
    return {"offsets": [{"topic": t, "partition": p, "offset": o} for (t, p), o in offsets.items()]}


# ------------------------------------------------------------------------------- queues
class RemoteMessage:
    """A received queue message (``.id .body .receipt_handle .receive_count
    .sent_timestamp_ms .attributes``)."""

    __slots__ = ("id", "body", "receipt_handle", "receive_count", "sent_timestamp_ms", "attributes",
                 "group_id", "dedup_id", "sequence_number", "first_receive_timestamp_ms", "offset")

    def __init__(self, d: dict):
        self.id = d["id"]
        self.body = base64.b64decode(d["body_b64"]) if "body_b64" in d else d["body"].encode("utf-8")
        self.receipt_handle = d.get("receipt_handle", "")  # "" for a peeked message, as embedded
        self.offset = d.get("offset")
        self.receive_count = d.get("receive_count", 1)
        self.sent_timestamp_ms = d.get("sent_timestamp_ms")
        self.attributes = _attributes_out(d.get("attributes"))
        self.group_id = d.get("group_id")
        self.dedup_id = d.get("dedup_id")
        self.sequence_number = d.get("sequence_number")
        self.first_receive_timestamp_ms = d.get("first_receive_timestamp_ms")

    def __repr__(self) -> str:
        return f"RemoteMessage(id={self.id!r}, body={self.body[:40]!r}, receive_count={self.receive_count})"


def _attributes_out(attrs: dict | None) -> dict:
    """Received attributes as the embedded API gives them: ``BinaryValue`` as bytes."""
    if not attrs:
        return {}
    for a in attrs.values():
        if isinstance(a, dict) and "BinaryValue" in a:
            a["BinaryValue"] = base64.b64decode(a["BinaryValue"])
    return attrs


_BYTES = (bytes, bytearray, memoryview)


def _attributes_json(attrs):
    """Message attributes, given as to the embedded API (str, int/float, bytes, or SQS-shaped
    dicts), in their REST form: a str as it is, anything else typed, binary values as base64."""
    if not isinstance(attrs, dict):
        return attrs  # the server refuses it, as the embedded API does
    out = {}
    for name, v in attrs.items():
        if isinstance(v, dict):
            bv = v.get("BinaryValue")
            if isinstance(bv, _BYTES):
                v = {**v, "BinaryValue": base64.b64encode(bv).decode("ascii")}
            elif bv is not None and str(v.get("DataType", "")).startswith("Binary"):
                # the embedded API's refusal: REST would read a str BinaryValue as base64
                raise E.InvalidParameterValue(f"The message attribute '{name}' with type 'Binary' must use field 'Binary'.")
        elif isinstance(v, _BYTES):
            v = {"DataType": "Binary", "BinaryValue": base64.b64encode(v).decode("ascii")}
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            v = {"DataType": "Number", "StringValue": repr(v)}  # the embedded API's rendering
        out[name] = v
    return out


def _message_json(body, fields) -> dict:
    """One message of a send request: its body and its non-None fields."""
    m = _body_json(body)
    for k, v in fields:
        if v is not None:
            m[k] = _attributes_json(v) if k == "attributes" else v
    return m


# A lone surrogate (what Python makes of a non-UTF-8 command-line argument) has no UTF-8 form, so
# no JSON request can carry it: refused here as the embedded queue refuses it, before a request.


def _body_json(body) -> dict:
    if isinstance(body, str):
        if SURROGATE.search(body):
            raise E.InvalidMessageContents(
                "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | "
                "#x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF")
        return {"body": body}  # text: SQS's character rules apply
    return {"body_b64": base64.b64encode(as_bytes(body, "body")).decode("ascii")}  # bytes as they are


def _handle(receipt_handle):
    """``receipt_handle`` if a request can carry it, else ReceiptHandleIsInvalid (as embedded)."""
    if isinstance(receipt_handle, str) and SURROGATE.search(receipt_handle):
        raise E.ReceiptHandleIsInvalid(receipt_handle)
    return receipt_handle


def send_batch_messages(bodies: Sequence, kw: dict) -> list[dict]:
    """``send_batch``'s messages: a dict is one message with its own fields, anything else a
    body with the call's ``kw`` fields."""
    return [_message_json(b["body"], ((k, v) for k, v in b.items() if k != "body")) if isinstance(b, dict)
            else _message_json(b, kw.items()) for b in bodies]


def receive_body(max_messages: int, wait_seconds: float | None, visibility_timeout: int | None) -> dict:
    body: dict = {"max_messages": max_messages}
    if wait_seconds is not None:
        body["wait_seconds"] = wait_seconds
    if visibility_timeout is not None:
        body["visibility_timeout"] = visibility_timeout
    return body


def peek_answer(doc: dict) -> list:
    """``Queue.peek``'s PeekedMessages of ``GET /queues/{q}/peek``'s answer."""
    from ..broker.queue import PeekedMessage

    return [PeekedMessage(RemoteMessage(d), d["state"], d["receive_count"], d.get("visible_at_ms"))
            for d in doc["messages"]]


def redrive_body(destination: str | None, max_per_second: int | None) -> dict:
    return {k: v for k, v in (("destination", destination), ("max_per_second", max_per_second)) if v is not None}


# ------------------------------------------------------------------------------- share groups
def share_poll_body(max_records: int, timeout: float) -> dict:
    """A share poll's body; the wait bounded to 30 s (the server bounds it again)."""
    return {"max_records": max_records, "wait_ms": int(min(max(timeout, 0.0), 30.0) * 1000)}


def _b64(s: str | None) -> bytes | None:
    return None if s is None else base64.b64decode(s)


def share_records(doc: dict) -> list:
    """The ShareRecords (with their delivery counts) of a share poll's answer."""
    from ..broker.share.consumer import ShareRecord
    from ..broker.topic import ConsumerRecord

    return [ShareRecord(ConsumerRecord(r["topic"], r["partition"], r["offset"], r["timestamp_ms"], _b64(r["key_b64"]),
                                       _b64(r["value_b64"]), tuple((n, _b64(v)) for n, v in r["headers"])),
                        r["delivery_count"]) for r in doc["records"]]


def share_ack_body(record, kind: str) -> dict:
    """An acknowledgement's body (``record``: a record or (topic, partition, offset));
    ConfigError for an unknown ``kind`` before a request."""
    if kind not in SHARE_ACK_KINDS:
        raise E.ConfigError(f"acknowledge type must be one of {', '.join(SHARE_ACK_KINDS)}, not {kind!r}")
    if isinstance(record, tuple):
        topic, partition, offset = record
    else:
        topic, partition, offset = record.topic, record.partition, record.offset
    return {"acks": [{"topic": topic, "partition": partition, "offset": offset, "type": kind}]}


def share_ack_answer(doc: dict) -> None:
    """InvalidRecordState when the member did not hold the record."""
    res = doc["results"][0]
    if not res["ok"]:
        raise E.InvalidRecordState(res["error"])
