"""``Client.share_consumer(topics, group)``: a share-group member over HTTP, and
``AsyncClient.share_consumer``, the same member as coroutines.

The same shape as the embedded ``broker.share_consumer`` (vqs.broker.share.consumer):
``poll`` returns ``ShareRecord``s (with their delivery counts), ``acknowledge`` accepts,
releases, rejects or renews one, ``close`` releases what the member holds and leaves. The
server keeps the member (``POST /share-groups/{group}/members``, vqs/server/rest/share.py);
one not heard from for its session timeout is closed there. Requests and answers are
``shapes``' (one definition for both); the async member's poll waits on the server,
awaited, never in a thread.
"""

from __future__ import annotations

from . import shapes as S


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

    def _path(self, suffix: str = "") -> str:
        return f"/share-groups/{self.group}/members/{self.member_id}{suffix}"

    def poll(self, max_records: int = 500, timeout: float = 0.0) -> list:
        """Acquire up to ``max_records`` records, the server waiting up to ``timeout`` s (at most its
        ``max_wait_ms``, 20 s by default)."""
        body = S.share_poll_body(max_records, timeout)
        return S.share_records(self._t.json("POST", self._path("/poll"), json=body,
                                            timeout=body["wait_ms"] / 1000 + 30))

    def acknowledge(self, record, kind: str = "accept") -> None:
        """As the embedded consumer's: InvalidRecordState when this member does not hold it."""
        S.share_ack_answer(self._t.json("POST", self._path("/acks"), json=S.share_ack_body(record, kind)))

    def close(self) -> None:
        """Release what this member holds and leave (idempotent)."""
        if not self._closed:
            self._closed = True
            self._t.request("DELETE", self._path(), expect=(204,))

    def __enter__(self) -> RemoteShareConsumer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AsyncShareConsumer:
    """``RemoteShareConsumer`` as coroutines: ``start`` joins (``async with`` joins and
    closes), ``poll``, ``acknowledge``, ``close``."""

    def __init__(self, transport, topics, group: str):
        self._t = transport
        self.group = group
        self.topics = [topics] if isinstance(topics, str) else list(topics)
        self.member_id: str | None = None
        self._closed = False

    def _path(self, suffix: str = "") -> str:
        return f"/share-groups/{self.group}/members/{self.member_id}{suffix}"

    async def start(self) -> None:
        if self.member_id is None:
            doc = await self._t.json("POST", f"/share-groups/{self.group}/members", json={"topics": self.topics},
                                     expect=(201,))
            self.member_id = doc["member_id"]

    async def poll(self, max_records: int = 500, timeout: float = 0.0) -> list:
        await self.start()
        body = S.share_poll_body(max_records, timeout)
        return S.share_records(await self._t.json("POST", self._path("/poll"), json=body,
                                                  timeout=body["wait_ms"] / 1000 + 30))

    async def acknowledge(self, record, kind: str = "accept") -> None:
        body = S.share_ack_body(record, kind)
        await self.start()
        S.share_ack_answer(await self._t.json("POST", self._path("/acks"), json=body))

    async def close(self) -> None:
        if not self._closed and self.member_id is not None:
            self._closed = True
            await self._t.request("DELETE", self._path(), expect=(204,))

    async def __aenter__(self) -> AsyncShareConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
