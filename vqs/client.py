"""``vqs.Client``: the embedded API's shapes, over HTTP to a VQS server.

    client = vqs.Client("http://127.0.0.1:8642", token=None)
    client.create_topic("events", partitions=3)
    with client.producer() as p:
        p.send("events", b"hello", key=b"user-1")
    c = client.consumer("events", group="billing")
    for rec in c.poll(timeout=1.0): ...
    c.commit()
    q = client.create_queue("jobs", visibility_timeout=60)
    q.send("work"); [m] = q.receive(wait_seconds=5); q.delete(m.receipt_handle)

Produce and consume use the binary record-batch body (the log's own format);
one ``httpx.Client`` (keep-alive connection pool) is shared by everything made
from a Client. Errors come back as the embedded API's exceptions where one
exists (TopicDoesNotExist, QueueDoesNotExist, OffsetOutOfRange, ...), else as
``RemoteError`` with the server's status and code.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterable, Sequence

from . import errors as E
from .storage.record_batch import encode_batch_parts
from .wire import BATCH_CONTENT_TYPE, END_OFFSET, NEXT_OFFSET, decode_body

DEFAULT_URL = "http://127.0.0.1:8642"
_BATCH_CT = BATCH_CONTENT_TYPE.encode()
# requests are written as headers then body: without TCP_NODELAY the body waits for an ACK
_SOCKET_OPTIONS = [(6, 1, 1)]  # (IPPROTO_TCP, TCP_NODELAY, 1)


def _tp(tp):
    from .broker.topic import TopicPartition

    topic, partition = tp
    return TopicPartition(topic, int(partition))


def _bytes(v, what="value") -> bytes:
    if isinstance(v, bytes):
        return v
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, str):
        return v.encode("utf-8")
    raise TypeError(f"{what} must be bytes or str, not {type(v).__name__}")


def _headers(h):
    if not h:
        return None
    items = h.items() if isinstance(h, dict) else h
    return [(str(k), _bytes(v, "header value")) for k, v in items]


class Client:
    """A connection to a VQS server with the shapes of ``vqs.Broker``."""

    def __init__(self, url: str = DEFAULT_URL, token: str | None = None, *, timeout: float = 60.0,
                 transport=None):
        import httpx

        self.url = url.rstrip("/")
        headers = {"user-agent": "vqs-client"}
        if token:
            headers["authorization"] = f"Bearer {token}"
        if transport is None:
            transport = httpx.HTTPTransport(socket_options=_SOCKET_OPTIONS)
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout, transport=transport,
                                  limits=httpx.Limits(max_keepalive_connections=32, max_connections=64))
        self._closed = False
        self._timeout = timeout
        # The produce/consume hot paths go straight to httpx's connection pool (httpcore):
        # same keep-alive connections, without httpx's per-request machinery (~0.5 ms each).
        self._pool = None
        self._raw_headers = [(k.encode(), v.encode()) for k, v in headers.items()]
        if isinstance(transport, httpx.HTTPTransport):
            import httpcore

            self._pool = httpcore.ConnectionPool(max_connections=64, max_keepalive_connections=32,
                                                 socket_options=_SOCKET_OPTIONS)

    def _hot(self, method: str, path: str, params: dict, headers: list, content: bytes | None = None,
             timeout: float | None = None):
        """(status, headers dict, body) of a request on the hot path."""
        from urllib.parse import urlencode

        url = f"{self.url}{path}?{urlencode(params)}" if params else f"{self.url}{path}"
        if self._pool is None:
            r = self._http.request(method, url, content=content, headers={k.decode(): v.decode() for k, v in headers},
                                   timeout=timeout or self._timeout)
            return r.status_code, r.headers, r.content, r
        t = timeout or self._timeout
        r = self._pool.request(method, url, headers=self._raw_headers + headers, content=content,
                               extensions={"timeout": {"connect": t, "read": t, "write": t, "pool": t}})
        hs = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in r.headers}
        return r.status, hs, r.content, None

    def _hot_error(self, status: int, body: bytes, r):
        if r is not None:
            return self._error(r)
        import httpx

        return self._error(httpx.Response(status, content=body))

    # ----------------------------------------------------------------------- plumbing
    def _request(self, method: str, path: str, *, expect=(200, 201, 204), **kw):
        r = self._http.request(method, path, **kw)
        if r.status_code not in expect:
            raise self._error(r)
        return r

    def _json(self, method: str, path: str, **kw):
        r = self._request(method, path, **kw)
        return r.json() if r.content else None

    @staticmethod
    def _error(r) -> Exception:
        try:
            doc = r.json()
        except ValueError:  # not JSON (an empty body, a proxy's error page): keep the status and text
            doc = None
        err = doc.get("error") if isinstance(doc, dict) else None
        if not isinstance(err, dict):
            err = {}
        code = err.get("code", f"http_{r.status_code}")
        msg = err.get("message") or r.text[:500] or f"HTTP {r.status_code}"
        field = err.get("field")
        if code == "topic_not_found":
            ex = E.TopicDoesNotExist.__new__(E.TopicDoesNotExist)
            E.VQSError.__init__(ex, msg)
            ex.name = None
            return ex
        if code == "queue_not_found":
            ex = E.QueueDoesNotExist.__new__(E.QueueDoesNotExist)
            E.VQSError.__init__(ex, msg)
            ex.name = None
            return ex
        if code == "topic_exists":
            ex = E.TopicAlreadyExists.__new__(E.TopicAlreadyExists)
            E.VQSError.__init__(ex, msg)
            ex.name = None
            return ex
        if code == "offset_out_of_range":
            extra = err.get("detail") or {}
            return E.OffsetOutOfRange(msg, offset=extra.get("offset", -1), start_offset=extra.get("start_offset", -1),
                                      end_offset=extra.get("end_offset", -1))
        if code == "invalid_name":
            return E.InvalidName(msg)
        if code == "message_too_large":
            return E.MessageTooLarge(msg)
        cls = getattr(E, err.get("sqs_code") or "", None)  # the server's name of a queue error's class
        if isinstance(cls, type) and issubclass(cls, E.QueueError):
            ex = cls.__new__(cls)
            E.VQSError.__init__(ex, msg)
            return ex
        return E.RemoteError(msg, status=r.status_code, code=code, field=field)

    def close(self) -> None:
        self._closed = True
        self._http.close()
        if self._pool is not None:
            self._pool.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    # -------------------------------------------------------------------- operations
    def health(self) -> dict:
        r = self._http.get("/health")
        return r.json()

    def metrics(self) -> str:
        return self._request("GET", "/metrics").text

    # ------------------------------------------------------------------------- topics
    def create_topic(self, name: str, partitions: int = 1, retention_ms: int | None = None,
                     retention_bytes: int | None = None, segment_bytes: int | None = None,
                     compression: str | None = None) -> RemoteTopic:
        body = {"name": name, "partitions": partitions}
        for k, v in (("retention_ms", retention_ms), ("retention_bytes", retention_bytes),
                     ("segment_bytes", segment_bytes), ("compression", compression)):
            if v is not None:
                body[k] = v
        return RemoteTopic(self, self._json("POST", "/topics", json=body))

    def topic(self, name: str) -> RemoteTopic:
        return RemoteTopic(self, self._json("GET", f"/topics/{name}"))

    def topics(self) -> list[str]:
        return self._json("GET", "/topics")["topics"]

    def delete_topic(self, name: str) -> None:
        self._request("DELETE", f"/topics/{name}")

    def producer(self) -> RemoteProducer:
        return RemoteProducer(self)

    def consumer(self, topics=None, group: str | None = None, *, auto_offset_reset: str = "earliest",
                 max_partition_bytes: int = 1 << 20) -> RemoteConsumer:
        return RemoteConsumer(self, topics, group, auto_offset_reset=auto_offset_reset,
                              max_partition_bytes=max_partition_bytes)

    def offsets(self, topic: str, timestamp_ms: int | None = None) -> list[dict]:
        params = {} if timestamp_ms is None else {"timestamp_ms": timestamp_ms}
        return self._json("GET", f"/topics/{topic}/offsets", params=params)["partitions"]

    def read_batches(self, topic: str, partition: int, offset: int, *, max_records: int = 100_000,
                     max_bytes: int = 1 << 20, timeout: float = 0.0):
        """Stateless fetch of decoded RecordBatch objects holding exactly the records from
        ``offset`` on (at most ``max_records``), and the next offset. Long polls ``timeout`` s."""
        status, hs, body, r = self._hot(
            "GET", f"/topics/{topic}/messages",
            {"partition": partition, "offset": offset, "limit": max_records, "max_bytes": max_bytes,
             "wait_ms": int(timeout * 1000)},
            [(b"accept", BATCH_CONTENT_TYPE.encode())], timeout=max(self._timeout, timeout + 30))
        if status != 200:
            raise self._hot_error(status, body, r)
        return decode_body(body, where="server response"), int(hs[NEXT_OFFSET]), int(hs[END_OFFSET])

    def read(self, topic: str, partition: int, offset: int, *, max_records: int = 500,
             max_bytes: int = 1 << 20, timeout: float = 0.0) -> list:
        """Stateless fetch, like ``Topic.read``: ConsumerRecords of one partition from ``offset``."""
        from .broker.topic import ConsumerRecord

        batches, _, _ = self.read_batches(topic, partition, offset, max_records=max_records,
                                          max_bytes=max_bytes, timeout=timeout)
        out = []
        for b in batches:
            for r in b.records():
                out.append(ConsumerRecord(topic, partition, r.offset, r.timestamp_ms, r.key, r.value, r.headers))
        return out

    # ------------------------------------------------------------------------- groups
    def groups(self) -> list[str]:
        return self._json("GET", "/groups")["groups"]

    def describe_group(self, group: str) -> list:
        from .broker.topic import PartitionLag

        rows = self._json("GET", f"/groups/{group}")["partitions"]
        return [PartitionLag(**row) for row in rows]

    def group_offsets(self, group: str) -> dict:
        r = self._http.get(f"/groups/{group}")
        if r.status_code == 404:
            return {}
        if r.status_code != 200:
            raise self._error(r)
        return {_tp((row["topic"], row["partition"])): row["committed"] for row in r.json()["partitions"]}

    def commit_offsets(self, group: str, offsets: dict) -> None:
        body = {"offsets": [{"topic": t, "partition": p, "offset": o} for (t, p), o in offsets.items()]}
        self._request("POST", f"/groups/{group}/offsets", json=body)

    def delete_group(self, group: str) -> bool:
        r = self._http.delete(f"/groups/{group}")
        if r.status_code == 404:
            return False
        if r.status_code != 204:
            raise self._error(r)
        return True

    # ------------------------------------------------------------------------- queues
    def create_queue(self, name: str, **attributes) -> RemoteQueue:
        body = {"name": name, **attributes}
        return RemoteQueue(self, name, self._json("POST", "/queues", json=body))

    def queue(self, name: str) -> RemoteQueue:
        return RemoteQueue(self, name, self._json("GET", f"/queues/{name}"))

    def queues(self, prefix: str | None = None) -> list[str]:
        params = {} if prefix is None else {"prefix": prefix}
        return self._json("GET", "/queues", params=params)["queues"]

    def delete_queue(self, name: str) -> None:
        self._request("DELETE", f"/queues/{name}")


class RemoteTopic:
    """A topic on the server (a snapshot of its description, offsets fetched live)."""

    def __init__(self, client: Client, desc: dict):
        self._client = client
        self.name = desc["name"]
        self.partitions = desc["partitions"]
        self.config = desc.get("config", {})
        self._desc = desc

    def __repr__(self) -> str:
        return f"RemoteTopic({self.name!r}, partitions={self.partitions})"

    def describe(self) -> dict:
        return self._client._json("GET", f"/topics/{self.name}")

    def start_offsets(self) -> list[int]:
        return [p["start_offset"] for p in self._client.offsets(self.name)]

    def end_offsets(self) -> list[int]:
        return [p["end_offset"] for p in self._client.offsets(self.name)]

    def start_offset(self, partition: int) -> int:
        return self.start_offsets()[partition]

    def end_offset(self, partition: int) -> int:
        return self.end_offsets()[partition]

    def read(self, partition: int, offset: int, *, max_records: int = 500, max_bytes: int = 1 << 20,
             timeout: float = 0.0) -> list:
        return self._client.read(self.name, partition, offset, max_records=max_records, max_bytes=max_bytes,
                                 timeout=timeout)


class RemoteProducer:
    """``Producer`` over HTTP: every send is acknowledged by the server before it returns
    (the server's flush policy says what the acknowledgement promises)."""

    def __init__(self, client: Client):
        self._client = client

    def send(self, topic: str, value, key=None, headers=None, partition: int | None = None,
             timestamp_ms: int | None = None):
        return self.send_batch(topic, [value], keys=None if key is None else [key],
                               headers=None if headers is None else [headers], partition=partition,
                               timestamps_ms=None if timestamp_ms is None else [timestamp_ms])[0]

    def send_batch(self, topic: str, values: Sequence, keys: Sequence | None = None,
                   headers: Sequence | None = None, partition: int | None = None,
                   timestamps_ms: Sequence[int] | None = None) -> list:
        from .broker.topic import RecordMetadata

        n = len(values)
        if n == 0:
            return []
        for name, seq in (("keys", keys), ("headers", headers), ("timestamps_ms", timestamps_ms)):
            if seq is not None and len(seq) != n:
                raise E.ConfigError(f"send_batch: {name} has {len(seq)} items, values has {n}")
        vals = [v if v.__class__ is bytes else _bytes(v) for v in values]
        ks = None if keys is None or all(k is None for k in keys) else [None if k is None else _bytes(k, "key") for k in keys]
        hs = None if headers is None or not any(headers) else [_headers(h) for h in headers]
        ts = 0 if timestamps_ms is None else list(timestamps_ms)
        body = b"".join(encode_batch_parts(0, vals, keys=ks, headers=hs, timestamps=ts))
        params = {} if partition is None else {"partition": partition}
        c = self._client
        status, _, data, r = c._hot("POST", f"/topics/{topic}/messages", params,
                                    [(b"content-type", _BATCH_CT)], content=body)
        if status != 200:
            raise c._hot_error(status, data, r)
        out = []
        for rg in json.loads(data)["ranges"]:
            p, base = rg["partition"], rg["base_offset"]
            out.extend(RecordMetadata(topic, p, base + i) for i in range(rg["count"]))
        return out

    def flush(self) -> None:
        """Nothing is buffered client-side: every send was acknowledged."""

    def close(self) -> None:
        pass

    def __enter__(self) -> RemoteProducer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class RemoteConsumer:
    """``Consumer`` over HTTP: positions live in the client; ``commit`` stores them
    on the server for the group. ``poll`` long-polls the server when idle."""

    def __init__(self, client: Client, topics=None, group: str | None = None, *,
                 auto_offset_reset: str = "earliest", max_partition_bytes: int = 1 << 20):
        if auto_offset_reset not in ("earliest", "latest"):
            raise E.ConfigError(f"auto_offset_reset must be earliest or latest, not {auto_offset_reset!r}")
        self._client = client
        self.group = group
        self._reset = auto_offset_reset
        self._max_bytes = max_partition_bytes
        self._positions: dict = {}
        self._assigned: list = []
        self._next = 0
        self._closed = False
        self._committed_cache: dict | None = None
        if topics is not None:
            self.subscribe(topics)

    def __repr__(self) -> str:
        return f"RemoteConsumer(group={self.group!r}, assignment={self._assigned!r})"

    def subscribe(self, topics) -> None:
        if isinstance(topics, str):
            topics = [topics]
        tps = []
        for t in topics:
            n = self._client.topic(t).partitions
            tps.extend(_tp((t, p)) for p in range(n))
        self.assign(tps)

    def assign(self, partitions: Iterable) -> None:
        self._assigned = [_tp(tp) for tp in partitions]
        self._positions = {tp: self._positions[tp] for tp in self._assigned if tp in self._positions}

    def assignment(self) -> list:
        return list(self._assigned)

    def _offsets(self, topic: str) -> list[dict]:
        return self._client.offsets(topic)

    def _reset_offset(self, tp) -> int:
        row = self._offsets(tp.topic)[tp.partition]
        return row["start_offset"] if self._reset == "earliest" else row["end_offset"]

    def _position(self, tp) -> int:
        pos = self._positions.get(tp)
        if pos is None:
            if self.group is not None:
                if self._committed_cache is None:
                    self._committed_cache = self._client.group_offsets(self.group)
                pos = self._committed_cache.get(tp)
            if pos is None:
                pos = self._reset_offset(tp)
            self._positions[tp] = pos
        return pos

    def position(self, tp) -> int:
        return self._position(_tp(tp))

    def seek(self, tp, offset: int) -> None:
        self._positions[_tp(tp)] = int(offset)

    def seek_to_beginning(self, partitions=None) -> None:
        for tp in self._tps(partitions):
            self._positions[tp] = self._offsets(tp.topic)[tp.partition]["start_offset"]

    def seek_to_end(self, partitions=None) -> None:
        for tp in self._tps(partitions):
            self._positions[tp] = self._offsets(tp.topic)[tp.partition]["end_offset"]

    def seek_to_timestamp(self, timestamp_ms: int, partitions=None) -> None:
        for tp in self._tps(partitions):
            row = self._client.offsets(tp.topic, timestamp_ms)[tp.partition]
            off = row.get("offset_for_time")
            self._positions[tp] = row["end_offset"] if off is None else off

    def _tps(self, partitions):
        return self._assigned if partitions is None else [_tp(tp) for tp in partitions]

    def beginning_offsets(self, partitions=None) -> dict:
        return {tp: self._offsets(tp.topic)[tp.partition]["start_offset"] for tp in self._tps(partitions)}

    def end_offsets(self, partitions=None) -> dict:
        return {tp: self._offsets(tp.topic)[tp.partition]["end_offset"] for tp in self._tps(partitions)}

    def lag(self, partitions=None) -> dict:
        ends = self.end_offsets(partitions)
        return {tp: max(0, end - self._position(tp)) for tp, end in ends.items()}

    def poll(self, max_records: int = 500, timeout: float = 0.0) -> list:
        """Records from the assigned partitions (round robin), waiting up to ``timeout`` s."""
        if self._closed:
            raise E.LogClosedError("consumer is closed")
        if not self._assigned:
            return []
        deadline = time.monotonic() + timeout
        while True:
            out = self._fetch(max_records, 0.0 if len(self._assigned) > 1 else max(0.0, deadline - time.monotonic()))
            if out:
                return out
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            if len(self._assigned) > 1:
                # wait for any assigned partition on the server, then fetch again
                body = {"partitions": [{"topic": tp.topic, "partition": tp.partition, "offset": self._position(tp)}
                                       for tp in self._assigned],
                        "wait_ms": int(left * 1000)}
                self._client._request("POST", "/wait", json=body,
                                      timeout=left + 30)

    def _fetch(self, max_records: int, wait: float) -> list:
        from .broker.topic import ConsumerRecord

        out: list = []
        n = len(self._assigned)
        for i in range(n):
            if len(out) >= max_records:
                break
            tp = self._assigned[(self._next + i) % n]
            pos = self._position(tp)
            batches, nxt, _ = self._client.read_batches(tp.topic, tp.partition, pos,
                                                        max_records=max_records - len(out),
                                                        max_bytes=self._max_bytes, timeout=wait)
            for b in batches:
                for r in b.records():
                    out.append(ConsumerRecord(tp.topic, tp.partition, r.offset, r.timestamp_ms, r.key, r.value,
                                              r.headers))
            self._positions[tp] = nxt
        self._next = (self._next + 1) % n
        return out

    def commit(self, offsets: dict | None = None) -> None:
        if self.group is None:
            raise E.ConfigError("commit() needs a consumer group (consumer(..., group='name'))")
        if offsets is None:
            offsets = {tp: self._positions[tp] for tp in self._assigned if tp in self._positions}
        else:
            offsets = {_tp(tp): int(o) for tp, o in offsets.items()}
        if offsets:
            self._client.commit_offsets(self.group, offsets)
            if self._committed_cache is not None:
                self._committed_cache.update(offsets)

    def committed(self, tp):
        if self.group is None:
            return None
        return self._client.group_offsets(self.group).get(_tp(tp))

    def close(self) -> None:
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> RemoteConsumer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __iter__(self):
        while not self._closed:
            yield from self.poll(timeout=1.0)


class RemoteMessage:
    """A received queue message (``.id .body .receipt_handle .receive_count
    .sent_timestamp_ms .attributes``)."""

    __slots__ = ("id", "body", "receipt_handle", "receive_count", "sent_timestamp_ms", "attributes",
                 "group_id", "dedup_id", "sequence_number", "first_receive_timestamp_ms")

    def __init__(self, d: dict):
        self.id = d["id"]
        self.body = base64.b64decode(d["body_b64"]) if "body_b64" in d else d["body"].encode("utf-8")
        self.receipt_handle = d["receipt_handle"]
        self.receive_count = d.get("receive_count", 1)
        self.sent_timestamp_ms = d.get("sent_timestamp_ms")
        self.attributes = d.get("attributes") or {}
        self.group_id = d.get("group_id")
        self.dedup_id = d.get("dedup_id")
        self.sequence_number = d.get("sequence_number")
        self.first_receive_timestamp_ms = d.get("first_receive_timestamp_ms")

    def __repr__(self) -> str:
        return f"RemoteMessage(id={self.id!r}, body={self.body[:40]!r}, receive_count={self.receive_count})"


def _body_json(body) -> dict:
    if isinstance(body, str):
        return {"body": body}  # text: SQS's character rules apply
    return {"body_b64": base64.b64encode(_bytes(body, "body")).decode("ascii")}  # bytes as they are


class RemoteQueue:
    """A queue on the server, with ``vqs`` Queue's methods."""

    def __init__(self, client: Client, name: str, desc: dict | None = None):
        self._client = client
        self.name = name
        self._desc = desc or {}

    def __repr__(self) -> str:
        return f"RemoteQueue({self.name!r})"

    def _p(self, suffix: str = "") -> str:
        return f"/queues/{self.name}{suffix}"

    def send(self, body, delay_seconds: int | None = None, attributes: dict | None = None,
             group_id: str | None = None, dedup_id: str | None = None) -> str:
        m = _body_json(body)
        for k, v in (("delay_seconds", delay_seconds), ("attributes", attributes), ("group_id", group_id),
                     ("dedup_id", dedup_id)):
            if v is not None:
                m[k] = v
        return self._client._json("POST", self._p("/messages"), json={"messages": [m]})["message_ids"][0]

    def send_batch(self, bodies: Sequence, **kw) -> list[str]:
        msgs = []
        for b in bodies:
            if isinstance(b, dict):
                m = _body_json(b["body"])
                m.update({k: v for k, v in b.items() if k != "body" and v is not None})
            else:
                m = _body_json(b)
                m.update({k: v for k, v in kw.items() if v is not None})
            msgs.append(m)
        return self._client._json("POST", self._p("/messages"), json={"messages": msgs})["message_ids"]

    def receive(self, max_messages: int = 1, wait_seconds: float | None = None,
                visibility_timeout: int | None = None) -> list[RemoteMessage]:
        body: dict = {"max_messages": max_messages}
        if wait_seconds is not None:
            body["wait_seconds"] = wait_seconds
        if visibility_timeout is not None:
            body["visibility_timeout"] = visibility_timeout
        d = self._client._json("POST", self._p("/receive"), json=body, timeout=(wait_seconds or 20) + 30)
        return [RemoteMessage(m) for m in d["messages"]]

    def delete(self, receipt_handle: str) -> None:
        d = self._client._json("POST", self._p("/delete"), json={"receipt_handles": [receipt_handle]})
        if d.get("failed"):
            f = d["failed"][0]
            raise self._failed(f)

    def delete_batch(self, receipt_handles: Sequence[str]) -> dict:
        return self._client._json("POST", self._p("/delete"), json={"receipt_handles": list(receipt_handles)})

    @staticmethod
    def _failed(f: dict) -> Exception:
        cls = getattr(E, f.get("code", ""), None)
        if isinstance(cls, type) and issubclass(cls, E.VQSError):
            ex = cls.__new__(cls)
            E.VQSError.__init__(ex, f.get("message", ""))
            return ex
        return E.RemoteError(f.get("message", ""), status=400, code=f.get("code", "failed"))

    def change_visibility(self, receipt_handle: str, seconds: int) -> None:
        self._client._request("POST", self._p("/visibility"),
                              json={"receipt_handle": receipt_handle, "visibility_timeout": seconds})

    def purge(self) -> None:
        self._client._request("POST", self._p("/purge"))

    def get_attributes(self) -> dict:
        """The queue's SQS attributes (GetQueueAttributes, every name)."""
        return self._client._json("GET", self._p())["attributes"]

    def set_attributes(self, **attributes) -> None:
        self._client._request("PATCH", self._p(), json=attributes)

    def tags(self) -> dict:
        return self._client._json("GET", self._p("/tags"))["tags"]

    def tag(self, tags: dict) -> None:
        self._client._request("PUT", self._p("/tags"), json={"tags": tags})

    def untag(self, keys: Sequence[str]) -> None:
        self._client._request("DELETE", self._p("/tags"), params={"keys": list(keys)})
