"""Queues over HTTP: ``RemoteQueue`` (``vqs`` Queue's methods) and ``RemoteMessage``.

Guarantees: a text body is sent as text (SQS's character rules apply on the
server), any other body as its bytes (``body_b64``), and a received body is
always bytes, as the embedded API gives it. Message attributes take the
embedded API's forms (a str, an int or float, bytes, or SQS-shaped
``{"DataType", "StringValue" | "BinaryValue"}``) and come back in SQS's shape
with ``BinaryValue`` as bytes; base64 is only their form on the wire. A delete
the server reports as failed raises the embedded API's error for it
(``ReceiptHandleExpired``, ...); ``delete_batch`` returns the server's
per-handle report unchanged.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import errors as E
from .error_map import from_failed_entry
from .transport import SURROGATE
from .values import as_bytes

if TYPE_CHECKING:
    from .transport import Transport


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


class RemoteMoveTask:
    """A message move task as the server reported it (``MoveTask``'s fields: ``handle``,
    ``source``, ``destination``, ``status``, ``moved``, ``to_move``, ``failure_reason``);
    ``active`` while RUNNING or CANCELLING."""

    __slots__ = ("handle", "source", "destination", "status", "moved", "to_move", "max_per_second",
                 "failure_reason", "started_ms")

    def __init__(self, d: dict):
        for k in self.__slots__:
            setattr(self, k, d.get(k))

    @property
    def active(self) -> bool:
        return self.status in ("RUNNING", "CANCELLING")

    def __repr__(self) -> str:
        return f"RemoteMoveTask({self.source!r}, status={self.status!r}, moved={self.moved}/{self.to_move})"


class RemoteQueue:
    """A queue on the server, with ``vqs`` Queue's methods."""

    def __init__(self, transport: Transport, name: str, desc: dict | None = None):
        self._transport = transport
        self.name = name
        self._desc = desc or {}

    def __repr__(self) -> str:
        return f"RemoteQueue({self.name!r})"

    def _p(self, suffix: str = "") -> str:
        return f"/queues/{self.name}{suffix}"

    def send(self, body, delay_seconds: int | None = None, attributes: dict | None = None,
             group_id: str | None = None, dedup_id: str | None = None) -> str:
        m = _message_json(body, (("delay_seconds", delay_seconds), ("attributes", attributes),
                                 ("group_id", group_id), ("dedup_id", dedup_id)))
        return self._transport.json("POST", self._p("/messages"), json={"messages": [m]})["message_ids"][0]

    def send_batch(self, bodies: Sequence, **kw) -> list[str]:
        from .shapes import send_batch_messages

        msgs = send_batch_messages(bodies, kw)
        return self._transport.json("POST", self._p("/messages"), json={"messages": msgs})["message_ids"]

    def receive(self, max_messages: int = 1, wait_seconds: float | None = None,
                visibility_timeout: int | None = None) -> list[RemoteMessage]:
        from .shapes import receive_body

        body = receive_body(max_messages, wait_seconds, visibility_timeout)
        d = self._transport.json("POST", self._p("/receive"), json=body, timeout=(wait_seconds or 20) + 30)
        return [RemoteMessage(m) for m in d["messages"]]

    def delete(self, receipt_handle: str) -> None:
        d = self._transport.json("POST", self._p("/delete"), json={"receipt_handles": [_handle(receipt_handle)]})
        if d.get("failed"):
            f = d["failed"][0]
            raise from_failed_entry(f)

    def delete_batch(self, receipt_handles: Sequence[str]) -> dict:
        return self._transport.json("POST", self._p("/delete"), json={"receipt_handles": list(receipt_handles)})

    def change_visibility(self, receipt_handle: str, seconds: int) -> None:
        self._transport.json("POST", self._p("/visibility"),
                             json={"receipt_handle": _handle(receipt_handle), "visibility_timeout": seconds})

    def peek(self, max_messages: int = 10, from_offset: int = 0) -> list:
        """Up to ``max_messages`` (1-100) pending messages from ``from_offset`` on, oldest first,
        without receiving them, as ``Queue.peek`` gives them: ``PeekedMessage(message, state,
        receive_count, visible_at_ms)``, the message without a receipt handle. The next page
        starts at the last one's ``message.offset + 1``."""
        from .shapes import peek_answer

        return peek_answer(self._transport.json("GET", self._p("/peek"),
                                                params={"max_messages": max_messages, "from_offset": from_offset}))

    def purge(self) -> None:
        self._transport.request("POST", self._p("/purge"))

    def get_attributes(self) -> dict:
        """The queue's SQS attributes (GetQueueAttributes, every name)."""
        return self._transport.json("GET", self._p())["attributes"]

    def set_attributes(self, **attributes) -> None:
        self._transport.request("PATCH", self._p(), json=attributes)

    def tags(self) -> dict:
        return self._transport.json("GET", self._p("/tags"))["tags"]

    def tag(self, tags: dict) -> None:
        self._transport.request("PUT", self._p("/tags"), json={"tags": tags})

    def untag(self, keys: Sequence[str]) -> None:
        self._transport.request("DELETE", self._p("/tags"), params={"keys": list(keys)})

    def lease_keeper(self, *, visibility_timeout: int = 30, max_in_flight: int = 10):
        """A ``LeaseKeeper`` on this queue (``with q.lease_keeper() as k``)."""
        from ..broker.lease_keeper import LeaseKeeper

        return LeaseKeeper(self, visibility_timeout=visibility_timeout, max_in_flight=max_in_flight)
