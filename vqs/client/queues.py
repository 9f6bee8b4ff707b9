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
import json as _json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .error_map import from_failed_entry
from .shapes import RemoteMessage, _handle, _message_json, peek_answer, receive_body, send_batch_messages
from .transport import SURROGATE

if TYPE_CHECKING:
    from .transport import Transport


def _one_body(body) -> bytes | None:
    """A one-message send's JSON, as ``_message_json`` would make it, for a bytes or str body
    (None: any other, for ``_message_json``, whose errors it raises)."""
    if body.__class__ is bytes:
        return b'{"messages": [{"body_b64": "%s"}]}' % base64.b64encode(body)
    if body.__class__ is str and not SURROGATE.search(body):
        return b'{"messages": [{"body": %s}]}' % _json.dumps(body).encode()
    return None


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
        if delay_seconds is None and attributes is None and group_id is None and dedup_id is None:
            data = _one_body(body)  # the common send: its JSON written directly, the same document
            if data is not None:
                return self._transport.json("POST", self._p("/messages"), data=data)["message_ids"][0]
        m = _message_json(body, (("delay_seconds", delay_seconds), ("attributes", attributes),
                                 ("group_id", group_id), ("dedup_id", dedup_id)))
        return self._transport.json("POST", self._p("/messages"), json={"messages": [m]})["message_ids"][0]

    def send_batch(self, bodies: Sequence, **kw) -> list[str]:
        msgs = send_batch_messages(bodies, kw)
        return self._transport.json("POST", self._p("/messages"), json={"messages": msgs})["message_ids"]

    def receive(self, max_messages: int = 1, wait_seconds: float | None = None,
                visibility_timeout: int | None = None) -> list[RemoteMessage]:
        t = self._transport
        # the answer is awaited the client's timeout, and at least 30 s past the longest wait
        timeout = max(t.timeout, (wait_seconds or 20) + 30)
        if wait_seconds is None and visibility_timeout is None and max_messages.__class__ is int:
            d = t.json("POST", self._p("/receive"), data=b'{"max_messages": %d}' % max_messages, timeout=timeout)
        else:
            body = receive_body(max_messages, wait_seconds, visibility_timeout)
            d = t.json("POST", self._p("/receive"), json=body, timeout=timeout)
        return [RemoteMessage(m) for m in d["messages"]]

    def delete(self, receipt_handle: str) -> None:
        if receipt_handle.__class__ is str:
            data = b'{"receipt_handles": [%s]}' % _json.dumps(_handle(receipt_handle)).encode()
            d = self._transport.json("POST", self._p("/delete"), data=data)
        else:
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
