"""``vqs.AsyncClient``: vqs.Client's surface as coroutines, on one ``httpx.AsyncClient``.

    async with vqs.AsyncClient("http://127.0.0.1:8642") as client:
        await client.create_topic("events")
        async with client.producer() as p:
            await p.send_and_wait("events", b"hello")
        async with client.consumer("events", group="billing") as c:
            async for rec in c: ...
        q = await client.create_queue("jobs")
        await q.send("work"); [m] = await q.receive(wait_seconds=5); await q.delete(m.receipt_handle)

Guarantees:
- every request is awaited on the event loop: a long poll (``receive`` with
  ``wait_seconds``, ``getmany`` with a timeout) holds a connection, never a
  thread;
- errors are the same as ``vqs.Client``'s: the embedded API's exceptions for
  the server's error answers (``error_map``), ``ServerUnreachable`` for a
  request that did not complete; no httpx exception reaches a caller;
- request paths are made only of valid names (``transport._check_path``);
- a producer's ``send`` returns once the server acknowledged the message (it
  is ``send_and_wait``: nothing is buffered client-side);
- a consumer made with a group is a member of it (aio_consumer.py): the
  server assigns its partitions; it commits only what ``commit`` is given or
  what it has handed out.
"""

from __future__ import annotations

import json as _json
from collections.abc import Sequence
from urllib.parse import urlencode

from .. import errors as E
from ..broker.names import validate_name
from ..wire import BATCH_CONTENT_TYPE, NEXT_OFFSET, decode_body
from .aio_consumer import AsyncConsumer
from .error_map import from_failed_entry, from_response
from .queues import RemoteMessage, _handle, _message_json
from .topics import batch_body, produce_columns
from .transport import DEFAULT_URL, _check_path, base_url, check_token


class AsyncTransport:
    """Awaited requests to one VQS server, with its token and timeout."""

    def __init__(self, url: str, token: str | None, timeout: float, transport=None):
        import httpx

        self.url = base_url(url)
        check_token(token)
        headers = {"user-agent": "vqs-client"}
        if token:
            headers["authorization"] = f"Bearer {token}"
        self.timeout = timeout
        self.http = httpx.AsyncClient(base_url=self.url, headers=headers, timeout=timeout, transport=transport,
                                      limits=httpx.Limits(max_keepalive_connections=32, max_connections=256))
        self._failures = (httpx.RequestError,)  # transport failures, undecodable answers

    async def request(self, method: str, path: str, *, expect=(200, 201, 204), params=None, **kw):
        _check_path(path)
        if params:
            path = f"{path}?{urlencode(params, doseq=True)}"
        try:
            r = await self.http.request(method, path, **kw)
        except self._failures as e:
            what = "timed out" if "Timeout" in type(e).__name__ else str(e) or type(e).__name__
            raise E.ServerUnreachable(f"{method} {path.partition('?')[0]} on {self.url}: {what}", url=self.url) from e
        if r.status_code not in expect:
            raise from_response(r)
        return r

    async def json(self, method: str, path: str, **kw):
        r = await self.request(method, path, **kw)
        try:
            return r.json() if r.content else None
        except ValueError:
            raise E.RemoteError(f"{method} {path}: the answer is not JSON", status=r.status_code,
                                code="bad_answer") from None

    async def close(self) -> None:
        await self.http.aclose()


class AsyncClient:
    """A VQS server, every method a coroutine; ``async with`` closes its connections."""

    def __init__(self, url: str = DEFAULT_URL, token: str | None = None, *, timeout: float = 60.0, transport=None):
        self._t = AsyncTransport(url, token, timeout, transport)
        self.url = self._t.url

    async def close(self) -> None:
        await self._t.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncClient({self.url!r})"

    async def health(self) -> dict:
        return await self._t.json("GET", "/health", expect=(200, 503))

    # topics
    async def create_topic(self, name: str, partitions: int = 1, retention_ms: int | None = None,
                           retention_bytes: int | None = None, **compaction) -> dict:
        """As ``Client.create_topic`` (``compaction``: ``cleanup_policy`` and the cleaner's settings)."""
        body: dict = {"name": validate_name(name, "topic name"), "partitions": partitions}
        for k, v in (("retention_ms", retention_ms), ("retention_bytes", retention_bytes), *compaction.items()):
            if v is not None:
                body[k] = v
        return await self._t.json("POST", "/topics", json=body)

    async def create_partitions(self, name: str, partitions: int) -> dict:
        """Grow topic ``name`` to ``partitions`` partitions in total; its description."""
        return await self._t.json("POST", f"/topics/{validate_name(name, 'topic name')}/partitions",
                                  json={"partitions": partitions})

    async def topic(self, name: str) -> dict:
        return await self._t.json("GET", f"/topics/{name}")

    async def topics(self) -> list[str]:
        return (await self._t.json("GET", "/topics", params={"all": "true"}))["topics"]

    async def delete_topic(self, name: str) -> None:
        await self._t.request("DELETE", f"/topics/{name}")

    async def offsets(self, topic: str, timestamp_ms: int | None = None) -> list[dict]:
        params = None if timestamp_ms is None else {"timestamp_ms": timestamp_ms}
        return (await self._t.json("GET", f"/topics/{topic}/offsets", params=params))["partitions"]

    async def read(self, topic: str, partition: int, offset: int, *, max_records: int = 500,
                   max_bytes: int = 1 << 20, timeout: float = 0.0) -> tuple[list, int]:
        """(ConsumerRecords of one partition from ``offset``, the next offset); long polls
        ``timeout`` seconds on the server when there is nothing yet."""
        from ..broker.topic import ConsumerRecord

        r = await self._t.request(
            "GET", f"/topics/{topic}/messages", expect=(200,),
            params={"partition": partition, "offset": offset, "limit": max_records, "max_bytes": max_bytes,
                    "wait_ms": int(timeout * 1000)},
            headers={"accept": BATCH_CONTENT_TYPE}, timeout=max(self._t.timeout, timeout + 30))
        out = [ConsumerRecord(topic, partition, rec.offset, rec.timestamp_ms, rec.key, rec.value, rec.headers)
               for b in decode_body(r.content, where="server response") for rec in b.records()]
        return out, int(r.headers[NEXT_OFFSET])

    def producer(self) -> AsyncProducer:
        return AsyncProducer(self)

    def consumer(self, topics, group: str | None = None, *, auto_offset_reset: str = "earliest",
                 max_records: int = 500, max_partition_bytes: int = 1 << 20,
                 session_timeout_ms: int = 30_000) -> AsyncConsumer:
        """An aiokafka-style consumer of ``topics``; with ``group``, a member of
        it (partitions assigned by the server, rebalanced as members come and
        go: aio_consumer.py)."""
        return AsyncConsumer(self, [topics] if isinstance(topics, str) else list(topics), group,
                             auto_offset_reset=auto_offset_reset, max_records=max_records,
                             max_partition_bytes=max_partition_bytes, session_timeout_ms=session_timeout_ms)

    # groups
    async def groups(self) -> list[str]:
        return (await self._t.json("GET", "/groups"))["groups"]

    async def group_offsets(self, group: str) -> dict:
        """{(topic, partition): committed offset}; {} for a group the server does not know."""
        r = await self._t.request("GET", f"/groups/{group}", expect=(200, 404))
        if r.status_code == 404:
            return {}
        return {(row["topic"], row["partition"]): row["committed"] for row in r.json()["partitions"]
                if row["committed"] is not None}

    async def commit_offsets(self, group: str, offsets: dict) -> None:
        body = {"offsets": [{"topic": t, "partition": p, "offset": o} for (t, p), o in offsets.items()]}
        await self._t.request("POST", f"/groups/{group}/offsets", json=body)

    async def delete_group(self, group: str) -> bool:
        r = await self._t.request("DELETE", f"/groups/{group}", expect=(204, 404))
        return r.status_code == 204

    # queues
    async def create_queue(self, name: str, **attributes) -> AsyncQueue:
        body = {"name": validate_name(name, "queue name"), **attributes}
        return AsyncQueue(self._t, name, await self._t.json("POST", "/queues", json=body))

    async def queue(self, name: str) -> AsyncQueue:
        return AsyncQueue(self._t, name, await self._t.json("GET", f"/queues/{name}"))

    async def queues(self, prefix: str | None = None) -> list[str]:
        return (await self._t.json("GET", "/queues", params={"prefix": prefix} if prefix else None))["queues"]

    async def delete_queue(self, name: str) -> None:
        await self._t.request("DELETE", f"/queues/{name}")


class AsyncProducer:
    """aiokafka-style: ``start``/``stop`` (or ``async with``), ``send`` and ``send_and_wait``
    both return the message's ``RecordMetadata`` once the server acknowledged it."""

    def __init__(self, client: AsyncClient):
        self._t = client._t

    async def start(self) -> None:
        """Nothing to open: requests share the client's connections."""

    async def stop(self) -> None:
        """Nothing buffered: every send was acknowledged."""

    async def __aenter__(self) -> AsyncProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    async def send(self, topic: str, value, key=None, headers=None, partition: int | None = None,
                   timestamp_ms: int | None = None):
        return (await self.send_batch(topic, [value], keys=None if key is None else [key],
                                      headers=None if headers is None else [headers], partition=partition,
                                      timestamps_ms=None if timestamp_ms is None else [timestamp_ms]))[0]

    send_and_wait = send

    async def send_batch(self, topic: str, values: Sequence, keys: Sequence | None = None,
                         headers: Sequence | None = None, partition: int | None = None,
                         timestamps_ms: Sequence[int] | None = None) -> list:
        from ..broker.topic import RecordMetadata

        if len(values) == 0:
            return []
        body = batch_body(*produce_columns(values, keys, headers, timestamps_ms))
        r = await self._t.request("POST", f"/topics/{topic}/messages", expect=(200,),
                                  params=None if partition is None else {"partition": partition},
                                  headers={"content-type": BATCH_CONTENT_TYPE}, content=body)
        out = []
        for rg in _json.loads(r.content)["ranges"]:
            out.extend(RecordMetadata(topic, rg["partition"], rg["base_offset"] + i) for i in range(rg["count"]))
        return out


class AsyncQueue:
    """A queue on the server, ``vqs`` Queue's methods as coroutines."""

    def __init__(self, transport: AsyncTransport, name: str, desc: dict | None = None):
        self._t = transport
        self.name = name
        self._desc = desc or {}

    def __repr__(self) -> str:
        return f"AsyncQueue({self.name!r})"

    def _p(self, suffix: str = "") -> str:
        return f"/queues/{self.name}{suffix}"

    async def send(self, body, delay_seconds: int | None = None, attributes: dict | None = None,
                   group_id: str | None = None, dedup_id: str | None = None) -> str:
        m = _message_json(body, (("delay_seconds", delay_seconds), ("attributes", attributes),
                                 ("group_id", group_id), ("dedup_id", dedup_id)))
        return (await self._t.json("POST", self._p("/messages"), json={"messages": [m]}))["message_ids"][0]

    async def send_batch(self, bodies: Sequence, **kw) -> list[str]:
        msgs = [_message_json(b["body"], ((k, v) for k, v in b.items() if k != "body")) if isinstance(b, dict)
                else _message_json(b, kw.items()) for b in bodies]
        return (await self._t.json("POST", self._p("/messages"), json={"messages": msgs}))["message_ids"]

    async def receive(self, max_messages: int = 1, wait_seconds: float | None = None,
                      visibility_timeout: int | None = None) -> list[RemoteMessage]:
        body: dict = {"max_messages": max_messages}
        if wait_seconds is not None:
            body["wait_seconds"] = wait_seconds
        if visibility_timeout is not None:
            body["visibility_timeout"] = visibility_timeout
        d = await self._t.json("POST", self._p("/receive"), json=body, timeout=(wait_seconds or 20) + 30)
        return [RemoteMessage(m) for m in d["messages"]]

    async def delete(self, receipt_handle: str) -> None:
        d = await self._t.json("POST", self._p("/delete"), json={"receipt_handles": [_handle(receipt_handle)]})
        if d.get("failed"):
            raise from_failed_entry(d["failed"][0])

    async def delete_batch(self, receipt_handles: Sequence[str]) -> dict:
        return await self._t.json("POST", self._p("/delete"), json={"receipt_handles": list(receipt_handles)})

    async def change_visibility(self, receipt_handle: str, seconds: int) -> None:
        await self._t.request("POST", self._p("/visibility"),
                              json={"receipt_handle": _handle(receipt_handle), "visibility_timeout": seconds})

    async def purge(self) -> None:
        await self._t.request("POST", self._p("/purge"))

    async def get_attributes(self) -> dict:
        return (await self._t.json("GET", self._p()))["attributes"]

    def lease_keeper(self, *, visibility_timeout: int = 30, max_in_flight: int = 10):
        """An ``AsyncLeaseKeeper`` on this queue (``async with q.lease_keeper() as k``)."""
        from ..broker.lease_keeper import AsyncLeaseKeeper

        return AsyncLeaseKeeper(self, visibility_timeout=visibility_timeout, max_in_flight=max_in_flight)
