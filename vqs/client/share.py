"""``Client.share_consumer(topics, group)``: a share-group member over HTTP.

The same shape as the embedded ``broker.share_consumer`` (vqs.broker.share.consumer):
``poll`` returns ``ShareRecord``s (with their delivery counts), ``acknowledge`` accepts,
releases, rejects or renews one, ``close`` releases what the member holds and leaves. The
server keeps the member (``POST /share-groups/{group}/members``, vqs/server/rest/share.py);
one not heard from for its session timeout is closed there.
"""

from __future__ import annotations

import base64

from ..broker.share.consumer import ShareRecord
from ..broker.topic import ConsumerRecord
from ..errors import ConfigError, InvalidRecordState

_KINDS = ("accept", "release", "reject", "renew")


def _bytes(s: str | None) -> bytes | None:
    return None if s is None else base64.b64decode(s)


class RemoteShareConsumer:
    """A member of share group ``group`` on a server (module doc). Not thread-safe."""

    def __init__(self, transport, topics, group: str):
        if isinstance(topics, str):
            topics = [topics]
        self._t = transport
        self.group = group
        self.topics = list(topics)
        doc = self._t.json("POST", f"/share-groups/{group}/members", json={"topics": self.topics}, expect=(201,))
        self.member_id = doc["member_id"]
        self._closed = False

    def poll(self, max_records: int = 500, timeout: float = 0.0) -> list[ShareRecord]:
        """Acquire up to ``max_records`` records, the server waiting up to ``timeout`` s (at most its
        ``max_wait_ms``, 20 s by default)."""
        wait_ms = int(min(max(timeout, 0.0), 30.0) * 1000)
        doc = self._t.json("POST", f"/share-groups/{self.group}/members/{self.member_id}/poll",
                           json={"max_records": max_records, "wait_ms": wait_ms}, timeout=wait_ms / 1000 + 30)
        out = []
        for r in doc["records"]:
            rec = ConsumerRecord(r["topic"], r["partition"], r["offset"], r["timestamp_ms"], _bytes(r["key_b64"]),
                                 _bytes(r["value_b64"]), tuple((n, _bytes(v)) for n, v in r["headers"]))
            out.append(ShareRecord(rec, r["delivery_count"]))
        return out

    def acknowledge(self, record, kind: str = "accept") -> None:
        """As the embedded consumer's: InvalidRecordState when this member does not hold it."""
        if kind not in _KINDS:
            raise ConfigError(f"acknowledge type must be one of {', '.join(_KINDS)}, not {kind!r}")
        if isinstance(record, tuple):
            topic, partition, offset = record
        else:
            topic, partition, offset = record.topic, record.partition, record.offset
        doc = self._t.json("POST", f"/share-groups/{self.group}/members/{self.member_id}/acks",
                           json={"acks": [{"topic": topic, "partition": partition, "offset": offset, "type": kind}]})
        res = doc["results"][0]
        if not res["ok"]:
            raise InvalidRecordState(res["error"])

    def close(self) -> None:
        """Release what this member holds and leave (idempotent)."""
        if not self._closed:
            self._closed = True
            self._t.request("DELETE", f"/share-groups/{self.group}/members/{self.member_id}", expect=(204,))

    def __enter__(self) -> RemoteShareConsumer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
