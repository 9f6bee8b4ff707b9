"""``Client``: the facade of ``vqs.Client``, with the shapes of ``vqs.Broker``.

Guarantees: one Client is one ``Transport`` (one keep-alive pool), shared by
every topic, producer, consumer and queue made from it, and closed with it;
every method answers as the embedded ``Broker``'s does (its return types, its
exceptions, via ``error_map``); the stateless ``read_batches`` returns exactly
the records from ``offset`` on, with the next offset to ask for;
``read_stored_batches`` the whole stored batches holding them (the first may
begin below ``offset``).
"""

from __future__ import annotations

from ..broker.names import validate_name
from ..wire import BATCH_CONTENT_TYPE
from . import shapes as S
from .consumer import RemoteConsumer
from .queues import RemoteMoveTask, RemoteQueue
from .topics import RemoteProducer, RemoteTopic
from .transport import DEFAULT_URL, Transport

_ACCEPT_BATCH = ((b"accept", BATCH_CONTENT_TYPE.encode()),)


class Client:
    """A connection to a VQS server with the shapes of ``vqs.Broker``."""

    def __init__(self, url: str = DEFAULT_URL, token: str | None = None, *, timeout: float = 60.0,
                 transport=None, native: bool | None = None):
        """``native``: send requests over the server's native protocol when it has one (its
        ``--native-port``, learnt from ``/health`` at the first request; docs/native.md), else
        HTTP. None (the default): only when the URL's host is a loopback address (the advertised
        port is the server's own; in front of a remote server may stand a proxy that forwards
        HTTP alone); True: whatever the host; False: always HTTP. An ``https://`` URL or a
        given ``transport`` is always HTTP."""
        self._transport = Transport(url, token, timeout, transport, native)
        self.url = self._transport.url
        self._closed = False

    def close(self) -> None:
        self._closed = True
        self._transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    # -------------------------------------------------------------------- operations
    def health(self) -> dict:
        return self._transport.json("GET", "/health", expect=(200, 503))

    def metrics(self) -> str:
        return self._transport.request("GET", "/metrics").text

    # ------------------------------------------------------------------------- topics
    def create_topic(self, name: str, partitions: int = 1, retention_ms: int | None = None,
                     retention_bytes: int | None = None, segment_bytes: int | None = None,
                     compression: str | None = None, max_message_bytes: int | None = None,
                     **settings) -> RemoteTopic:
        """As ``Broker.create_topic``; ``settings``: its ``cleanup_policy``, ``delete_retention_ms``,
        ``min_cleanable_dirty_ratio``, ``min_compaction_lag_ms``, ``max_compaction_lag_ms``,
        ``segment_ms``, ``flush`` and ``flush_interval_ms``."""
        body = S.topic_body(name, partitions, {"retention_ms": retention_ms, "retention_bytes": retention_bytes,
                                                "segment_bytes": segment_bytes, "compression": compression,
                                                "max_message_bytes": max_message_bytes, **settings})
        return RemoteTopic(self, self._transport, self._transport.json("POST", "/topics", json=body))

    def alter_topic(self, name: str, settings: dict, *, replace: bool = False,
                    validate_only: bool = False) -> RemoteTopic:
        """As ``Broker.alter_topic``: ``settings`` (``create_topic``'s keywords; a None value returns
        that setting to the server's default) become the topic's own; ``replace``: every setting
        not named returns to its default; ``validate_only``: only checked. ConfigError naming a bad
        one (nothing changed)."""
        return RemoteTopic(self, self._transport, self._transport.json(
            "PATCH", f"/topics/{validate_name(name, 'topic name')}", json=dict(settings),
            params=S.alter_params(replace, validate_only)))

    def create_partitions(self, name: str, partitions: int) -> RemoteTopic:
        """Grow topic ``name`` to ``partitions`` partitions in total, as ``Broker.create_partitions``."""
        body = {"partitions": partitions}
        return RemoteTopic(self, self._transport, self._transport.json(
            "POST", f"/topics/{validate_name(name, 'topic name')}/partitions", json=body))

    def topic(self, name: str) -> RemoteTopic:
        return RemoteTopic(self, self._transport, self._transport.json("GET", f"/topics/{name}"))

    def topics(self) -> list[str]:
        """Every topic, internal ones (``__`` prefix) included, as ``Broker.topics()``."""
        return self._transport.json("GET", "/topics?all=true")["topics"]

    def delete_topic(self, name: str) -> None:
        self._transport.request("DELETE", f"/topics/{name}")

    def producer(self, *, idempotent: bool = False, retry_timeout: float = 30.0):
        """A producer. ``idempotent=True``: an IdempotentRemoteProducer (client/idempotent.py),
        whose every send is appended exactly once, retried by itself on connection errors
        and 503s for up to ``retry_timeout`` seconds."""
        if idempotent:
            from .idempotent import IdempotentRemoteProducer

            return IdempotentRemoteProducer(self._transport, retry_timeout=retry_timeout)
        return RemoteProducer(self._transport)

    def consumer(self, topics=None, group: str | None = None, *, auto_offset_reset: str = "earliest",
                 max_partition_bytes: int = 1 << 20, session_timeout_ms: int = 30_000) -> RemoteConsumer:
        """As ``Broker.consumer``: with ``topics`` and ``group``, a member of the group (the
        server assigns its partitions and moves them as members come and go)."""
        return RemoteConsumer(self, self._transport, topics, group, auto_offset_reset=auto_offset_reset,
                              max_partition_bytes=max_partition_bytes, session_timeout_ms=session_timeout_ms)

    def offsets(self, topic: str, timestamp_ms: int | None = None) -> list[dict]:
        params = {} if timestamp_ms is None else {"timestamp_ms": timestamp_ms}
        return self._transport.json("GET", f"/topics/{topic}/offsets", params=params)["partitions"]

    def read_batches(self, topic: str, partition: int, offset: int, *, max_records: int = 100_000,
                     max_bytes: int = 1 << 20, timeout: float = 0.0):
        """Stateless fetch of decoded RecordBatch objects holding exactly the records from
        ``offset`` on (at most ``max_records``), and the next offset. Long polls ``timeout`` s."""
        t = self._transport
        hs, body = t.hot("GET", f"/topics/{topic}/messages",
                         S.read_params(partition, offset, max_records, max_bytes, timeout),
                         _ACCEPT_BATCH, timeout=max(t.timeout, timeout + 30))
        return S.read_answer(hs, body)

    def read_stored_batches(self, topic: str, partition: int, offset: int, *, max_records: int = 100_000,
                            max_bytes: int = 1 << 20, timeout: float = 0.0):
        """Stateless fetch of the stored batches themselves (``stored=1``): whole, decoded
        RecordBatch objects holding the records from ``offset`` on, the first of which may
        begin below ``offset`` (the caller skips those records), as many as fit in ``max_bytes``
        of stored bytes (at least one) until ``max_records`` records from ``offset`` on are
        reached (the last batch is whole, so there may be more); the next offset (the end of
        the last batch) and the end offset. The server sends them as the log holds them, with
        no re-encoding; each is CRC-verified here again. Long polls ``timeout`` s."""
        t = self._transport
        hs, body = t.hot("GET", f"/topics/{topic}/messages",
                         S.read_params(partition, offset, max_records, max_bytes, timeout, stored=True),
                         _ACCEPT_BATCH, timeout=max(t.timeout, timeout + 30))
        return S.read_answer(hs, body)

    def read(self, topic: str, partition: int, offset: int, *, max_records: int = 500,
             max_bytes: int = 1 << 20, timeout: float = 0.0) -> list:
        """Stateless fetch, like ``Topic.read``: ConsumerRecords of one partition from ``offset``."""
        batches, _, _ = self.read_batches(topic, partition, offset, max_records=max_records,
                                          max_bytes=max_bytes, timeout=timeout)
        return S.records_of(topic, partition, batches)

    # ------------------------------------------------------------------------- groups
    def groups(self) -> list[str]:
        return self._transport.json("GET", "/groups")["groups"]

    def share_consumer(self, topics, group: str):
        """A share-group member over HTTP, shaped as ``broker.share_consumer`` (vqs/client/share.py)."""
        from .share import RemoteShareConsumer

        return RemoteShareConsumer(self._transport, topics, group)

    def share_group_names(self) -> list[str]:
        """As ``Broker.share_group_names``."""
        return self._transport.json("GET", "/share-groups")["groups"]

    def describe_share_group(self, group: str) -> dict | None:
        """As ``Broker.describe_share_group``: None for a group the server does not know."""
        r = self._transport.request("GET", f"/share-groups/{group}", expect=(200, 404))
        return None if r.status_code == 404 else r.json()

    def _group(self, group: str) -> dict | None:
        """``GET /groups/{group}``'s answer; None for a group the server does not know."""
        r = self._transport.request("GET", f"/groups/{group}", expect=(200, 404))
        return None if r.status_code == 404 else r.json()

    def describe_group(self, group: str) -> list:
        """As ``Broker.describe_group``: PartitionLag rows, none for an unknown group."""
        return S.group_lag(self._group(group))

    def group_offsets(self, group: str) -> dict:
        """{TopicPartition: committed offset}; {} for a group the server does not know."""
        return S.group_offsets(self._group(group))

    def group_members(self, group: str) -> dict:
        """As ``Broker.group_members``: the group's live members, state and generation."""
        return S.group_members(self._group(group))

    def commit_offsets(self, group: str, offsets: dict) -> None:
        self._transport.request("POST", f"/groups/{group}/offsets", json=S.commit_body(offsets))

    def delete_group(self, group: str) -> bool:
        """True if the group existed."""
        r = self._transport.request("DELETE", f"/groups/{group}", expect=(204, 404))
        return r.status_code == 204

    def group_config_values(self, group: str) -> dict[str, tuple[str, bool]]:
        """As ``Broker.group_config_values``: every group config in force for group id ``group``,
        {Kafka key: (value, True if the group's own)}."""
        return S.config_values(self._transport.json("GET", f"/groups/{S.path_name(group)}/config"))

    def alter_group_configs(self, group: str, changes: dict, *, validate_only: bool = False) -> None:
        """As ``Broker.alter_group_configs``: set (a value) or reset (None) group id ``group``'s own
        configs, Kafka's names; ConfigError naming a bad one (nothing changed)."""
        self._transport.json("PATCH", f"/groups/{S.path_name(group)}/config", json=dict(changes),
                             params=S.alter_params(False, validate_only))

    # ------------------------------------------------------------------------- queues
    def create_queue(self, name: str, **attributes) -> RemoteQueue:
        body = {"name": validate_name(name, "queue name"), **attributes}
        return RemoteQueue(self._transport, name, self._transport.json("POST", "/queues", json=body))

    def queue(self, name: str) -> RemoteQueue:
        return RemoteQueue(self._transport, name, self._transport.json("GET", f"/queues/{name}"))

    def redrive(self, source: str, destination: str | None = None, *,
                max_per_second: int | None = None) -> RemoteMoveTask:
        """As ``Broker.redrive``: start moving dead-letter queue ``source``'s messages back."""
        return RemoteMoveTask(self._transport.json("POST", f"/queues/{source}/redrive",
                                                   json=S.redrive_body(destination, max_per_second), expect=(202,)))

    def redrive_tasks(self, source: str, max_results: int = 10) -> list[RemoteMoveTask]:
        """As ``Broker.redrive_tasks``: the move tasks of queue ``source``, newest first."""
        doc = self._transport.json("GET", f"/queues/{source}/redrive", params={"max_results": max_results})
        return [RemoteMoveTask(d) for d in doc["tasks"]]

    def queues(self, prefix: str | None = None) -> list[str]:
        params = {} if prefix is None else {"prefix": prefix}
        return self._transport.json("GET", "/queues", params=params)["queues"]

    def delete_queue(self, name: str) -> None:
        self._transport.request("DELETE", f"/queues/{name}")
