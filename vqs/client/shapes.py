"""Requests and answers of the client, without I/O: shared by the blocking
``Client`` (core.py, topics.py, queues.py, share.py) and ``AsyncClient``
(aio.py, aio_consumer.py, aio_share.py), which only send them.

Guarantees: both clients build the same request for the same call and make
the same objects (``ConsumerRecord``, ``RecordMetadata``, ``PartitionLag``,
``PeekedMessage``, ``RemoteMoveTask``, ``ShareRecord``) of the same answer,
so their results and errors cannot drift apart.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

from .. import errors as E
from ..broker.names import validate_name
from ..wire import END_OFFSET, NEXT_OFFSET, decode_body
from .values import as_tp

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
def send_batch_messages(bodies: Sequence, kw: dict) -> list[dict]:
    """``send_batch``'s messages: a dict is one message with its own fields, anything else a
    body with the call's ``kw`` fields."""
    from .queues import _message_json

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
    from .queues import RemoteMessage

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
