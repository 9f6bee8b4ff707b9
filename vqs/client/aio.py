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
from ..wire import BATCH_CONTENT_TYPE
from . import shapes as S
from .aio_consumer import AsyncConsumer
from .error_map import from_failed_entry, from_response
from .queues import RemoteMoveTask
from .shapes import RemoteMessage, _handle, _message_json
from .share import AsyncShareConsumer
from .topics import batch_body, produce_columns
from .transport import DEFAULT_URL, _check_path, base_url, check_token


class AsyncTransport:
    """Awaited requests to one VQS server, with its token and timeout."""

    def __init__(self, url: str, token: str | None, timeout: float, transport=None):
        import httpx

        self.url = base_url(url)
        check_token(token)
        # x-vqs-client: as vqs.Client's (transport.py): no web page can send it cross-site unasked
        headers = {"user-agent": "vqs-client", "x-vqs-client": "python"}
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

    async def metrics(self) -> str:
        """The server's metrics (Prometheus text)."""
        return (await self._t.request("GET", "/metrics")).text

    # topics
    async def create_topic(self, name: str, partitions: int = 1, retention_ms: int | None = None,
                           retention_bytes: int | None = None, segment_bytes: int | None = None,
                           compression: str | None = None, max_message_bytes: int | None = None,
                           **settings) -> AsyncTopic:
        """As ``Client.create_topic`` (``settings``: ``cleanup_policy`` and the cleaner's settings,
        ``flush`` and ``flush_interval_ms``)."""
        body = S.topic_body(name, partitions, {"retention_ms": retention_ms, "retention_bytes": retention_bytes,
                                               "segment_bytes": segment_bytes, "compression": compression,
                                               "max_message_bytes": max_message_bytes, **settings})
        return AsyncTopic(self, await self._t.json("POST", "/topics", json=body))

    async def alter_topic(self, name: str, settings: dict, *, replace: bool = False,
                          validate_only: bool = False) -> AsyncTopic:
        """As ``Client.alter_topic``."""
        return AsyncTopic(self, await self._t.json("PATCH", f"/topics/{validate_name(name, 'topic name')}",
                                                   json=dict(settings), params=S.alter_params(replace, validate_only)))

    async def create_partitions(self, name: str, partitions: int) -> AsyncTopic:
        """Grow topic ``name`` to ``partitions`` partitions in total, as ``Broker.create_partitions``."""
        return AsyncTopic(self, await self._t.json("POST", f"/topics/{validate_name(name, 'topic name')}/partitions",
                                                   json={"partitions": partitions}))

    async def topic(self, name: str) -> AsyncTopic:
        return AsyncTopic(self, await self._t.json("GET", f"/topics/{name}"))

    async def topics(self) -> list[str]:
        """Every topic, internal ones (``__`` prefix) included, as ``Broker.topics()``."""
        return (await self._t.json("GET", "/topics", params={"all": "true"}))["topics"]

    async def delete_topic(self, name: str) -> None:
        await self._t.request("DELETE", f"/topics/{name}")

    async def offsets(self, topic: str, timestamp_ms: int | None = None) -> list[dict]:
        params = None if timestamp_ms is None else {"timestamp_ms": timestamp_ms}
        return (await self._t.json("GET", f"/topics/{topic}/offsets", params=params))["partitions"]

    async def _fetch(self, topic: str, partition: int, offset: int, max_records: int, max_bytes: int,
                     timeout: float, stored: bool = False) -> tuple[list, int, int]:
        r = await self._t.request(
            "GET", f"/topics/{topic}/messages", expect=(200,),
            params=S.read_params(partition, offset, max_records, max_bytes, timeout, stored),
            headers={"accept": BATCH_CONTENT_TYPE}, timeout=max(self._t.timeout, timeout + 30))
        return S.read_answer(r.headers, r.content)

    async def read_batches(self, topic: str, partition: int, offset: int, *, max_records: int = 100_000,
                           max_bytes: int = 1 << 20, timeout: float = 0.0) -> tuple[list, int, int]:
        """As ``Client.read_batches``: (RecordBatches holding exactly the records from ``offset``
        on, the next offset, the end offset); long polls ``timeout`` s on the server."""
        return await self._fetch(topic, partition, offset, max_records, max_bytes, timeout)

    async def read_stored_batches(self, topic: str, partition: int, offset: int, *, max_records: int = 100_000,
                                  max_bytes: int = 1 << 20, timeout: float = 0.0) -> tuple[list, int, int]:
        """As ``Client.read_stored_batches``: the whole stored batches (the first may begin
        below ``offset``), CRC-verified here, the next offset and the end offset."""
        return await self._fetch(topic, partition, offset, max_records, max_bytes, timeout, stored=True)

    async def read(self, topic: str, partition: int, offset: int, *, max_records: int = 500,
                   max_bytes: int = 1 << 20, timeout: float = 0.0) -> tuple[list, int]:
        """(ConsumerRecords of one partition from ``offset``, the next offset); long polls
        ``timeout`` seconds on the server when there is nothing yet."""
        batches, nxt, _ = await self._fetch(topic, partition, offset, max_records, max_bytes, timeout)
        return S.records_of(topic, partition, batches), nxt

    def producer(self, *, idempotent: bool = False, retry_timeout: float = 30.0):
        """An aiokafka-style producer. ``idempotent=True``: an AsyncIdempotentProducer
        (aio_idempotent.py), whose every send is appended exactly once, retried by itself on
        connection errors and 503s for up to ``retry_timeout`` seconds."""
        if idempotent:
            from .aio_idempotent import AsyncIdempotentProducer

            return AsyncIdempotentProducer(self._t, retry_timeout=retry_timeout)
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

    async def _group(self, group: str) -> dict | None:
        r = await self._t.request("GET", f"/groups/{group}", expect=(200, 404))
        return None if r.status_code == 404 else r.json()

    async def describe_group(self, group: str) -> list:
        """As ``Broker.describe_group``: PartitionLag rows, none for an unknown group."""
        return S.group_lag(await self._group(group))

    async def group_offsets(self, group: str) -> dict:
        """{TopicPartition: committed offset}; {} for a group the server does not know."""
        return S.group_offsets(await self._group(group))

    async def group_members(self, group: str) -> dict:
        """As ``Broker.group_members``: the group's live members, state and generation."""
        return S.group_members(await self._group(group))

    async def commit_offsets(self, group: str, offsets: dict) -> None:
        await self._t.request("POST", f"/groups/{group}/offsets", json=S.commit_body(offsets))

    async def delete_group(self, group: str) -> bool:
        """True if the group existed."""
        r = await self._t.request("DELETE", f"/groups/{group}", expect=(204, 404))
        return r.status_code == 204

    async def group_config_values(self, group: str) -> dict[str, tuple[str, bool]]:
        """As ``Client.group_config_values``."""
        return S.config_values(await self._t.json("GET", f"/groups/{S.path_name(group)}/config"))

    async def alter_group_configs(self, group: str, changes: dict, *, validate_only: bool = False) -> None:
        """As ``Client.alter_group_configs``."""
        await self._t.json("PATCH", f"/groups/{S.path_name(group)}/config", json=dict(changes),
                           params=S.alter_params(False, validate_only))

    def share_consumer(self, topics, group: str) -> AsyncShareConsumer:
        """A share-group member (share.py): it joins on ``start`` (or ``async with``, or its
        first ``poll``)."""
        return AsyncShareConsumer(self._t, topics, group)

    async def share_group_names(self) -> list[str]:
        return (await self._t.json("GET", "/share-groups"))["groups"]

    async def describe_share_group(self, group: str) -> dict | None:
        """None for a group the server does not know."""
        r = await self._t.request("GET", f"/share-groups/{group}", expect=(200, 404))
        return None if r.status_code == 404 else r.json()

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

    async def redrive(self, source: str, destination: str | None = None, *,
                      max_per_second: int | None = None) -> RemoteMoveTask:
        """As ``Broker.redrive``: start moving dead-letter queue ``source``'s messages back."""
        return RemoteMoveTask(await self._t.json("POST", f"/queues/{source}/redrive",
                                                 json=S.redrive_body(destination, max_per_second), expect=(202,)))

    async def redrive_tasks(self, source: str, max_results: int = 10) -> list[RemoteMoveTask]:
        """The move tasks of queue ``source``, newest first."""
        doc = await self._t.json("GET", f"/queues/{source}/redrive", params={"max_results": max_results})
        return [RemoteMoveTask(d) for d in doc["tasks"]]


class AsyncTopic:
    """A topic on the server (a snapshot of its description, offsets fetched live), as
    ``RemoteTopic``."""

    def __init__(self, client: AsyncClient, desc: dict):
        self._client = client
        self.name = desc["name"]
        self.partitions = desc["partitions"]
        self.config = desc.get("config", {})
        self._desc = desc

    def __repr__(self) -> str:
        return f"AsyncTopic({self.name!r}, partitions={self.partitions})"

    async def describe(self) -> dict:
        return await self._client._t.json("GET", f"/topics/{self.name}")

    async def start_offsets(self) -> list[int]:
        return [p["start_offset"] for p in await self._client.offsets(self.name)]

    async def end_offsets(self) -> list[int]:
        return [p["end_offset"] for p in await self._client.offsets(self.name)]

    async def start_offset(self, partition: int) -> int:
        return (await self.start_offsets())[partition]

    async def end_offset(self, partition: int) -> int:
        return (await self.end_offsets())[partition]

    async def read(self, partition: int, offset: int, *, max_records: int = 500, max_bytes: int = 1 << 20,
                   timeout: float = 0.0) -> list:
        """ConsumerRecords of ``partition`` from ``offset``, as ``RemoteTopic.read``."""
        return (await self._client.read(self.name, partition, offset, max_records=max_records,
                                        max_bytes=max_bytes, timeout=timeout))[0]


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
        if len(values) == 0:
            return []
        body = batch_body(*produce_columns(values, keys, headers, timestamps_ms))
        r = await self._t.request("POST", f"/topics/{topic}/messages", expect=(200,),
                                  params=None if partition is None else {"partition": partition},
                                  headers={"content-type": BATCH_CONTENT_TYPE}, content=body)
        return S.produce_answer(topic, _json.loads(r.content))

    async def flush(self) -> None:
        """Nothing is buffered client-side: every send was acknowledged."""


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
        msgs = S.send_batch_messages(bodies, kw)
        return (await self._t.json("POST", self._p("/messages"), json={"messages": msgs}))["message_ids"]

    async def receive(self, max_messages: int = 1, wait_seconds: float | None = None,
                      visibility_timeout: int | None = None) -> list[RemoteMessage]:
        body = S.receive_body(max_messages, wait_seconds, visibility_timeout)
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

    async def peek(self, max_messages: int = 10, from_offset: int = 0) -> list:
        """As ``RemoteQueue.peek``: PeekedMessages from ``from_offset`` on, none received."""
        return S.peek_answer(await self._t.json("GET", self._p("/peek"), params={"max_messages": max_messages,
                                                                                  "from_offset": from_offset}))

    async def get_attributes(self) -> dict:
        """The queue's SQS attributes (GetQueueAttributes, every name)."""
        return (await self._t.json("GET", self._p()))["attributes"]

    async def set_attributes(self, **attributes) -> None:
        await self._t.request("PATCH", self._p(), json=attributes)

    async def tags(self) -> dict:
        return (await self._t.json("GET", self._p("/tags")))["tags"]

    async def tag(self, tags: dict) -> None:
        await self._t.request("PUT", self._p("/tags"), json={"tags": tags})

    async def untag(self, keys: Sequence[str]) -> None:
        await self._t.request("DELETE", self._p("/tags"), params={"keys": list(keys)})

    def lease_keeper(self, *, visibility_timeout: int = 30, max_in_flight: int = 10):
        """An ``AsyncLeaseKeeper`` on this queue (``async with q.lease_keeper() as k``)."""
        from ..broker.lease_keeper import AsyncLeaseKeeper

        return AsyncLeaseKeeper(self, visibility_timeout=visibility_timeout, max_in_flight=max_in_flight)
