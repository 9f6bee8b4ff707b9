"""vqs.Client: the embedded API's shapes over HTTP."""

from __future__ import annotations

import threading
import time

import pytest

import vqs
import vqs.client as vc
from vqs.errors import (
    ConfigError,
    InvalidRecord,
    MessageTooLarge,
    OffsetOutOfRange,
    PartitionDoesNotExist,
    TopicAlreadyExists,
    TopicDoesNotExist,
)


@pytest.fixture
def client(base_url):
    with vc.Client(base_url) as c:
        yield c


def test_topics_producer_consumer(client, unique):
    t = client.create_topic(unique, partitions=3)
    assert t.partitions == 3 and unique in client.topics()
    with pytest.raises(TopicAlreadyExists):
        client.create_topic(unique)
    with pytest.raises(TopicDoesNotExist):
        client.topic(unique + "-missing")
    p = client.producer()
    md = p.send(unique, b"v0", key=b"user-1", headers=[("h", b"1")])
    assert md.topic == unique and md.offset == 0
    mds = p.send_batch(unique, [f"v{i}".encode() for i in range(1, 101)], keys=[f"user-{i % 7}" for i in range(1, 101)])
    assert len(mds) == 100
    # the same key always lands on the same partition (server-side partitioner)
    assert {m.partition for m, i in zip(mds, range(1, 101)) if i % 7 == 1} == {md.partition}
    c = client.consumer(unique, group=unique + "-g")
    seen = []
    while len(seen) < 101:
        recs = c.poll(max_records=50, timeout=2)
        assert recs
        seen += recs
    assert sorted(r.value for r in seen) == sorted([b"v0"] + [f"v{i}".encode() for i in range(1, 101)])
    r0 = next(r for r in seen if r.value == b"v0")
    assert r0.key == b"user-1" and r0.headers == (("h", b"1"),)
    c.commit()
    lag = {row.partition: row.lag for row in client.describe_group(unique + "-g")}
    assert set(lag.values()) == {0}
    # the next member of the group (c left: its partitions are free) starts where the group committed
    c.close()
    c2 = client.consumer(unique, group=unique + "-g")
    assert c2.poll(timeout=0) == []
    p.send(unique, b"late", partition=2)
    assert [r.value for r in c2.poll(timeout=5)] == [b"late"]
    c2.close()
    assert client.delete_group(unique + "-g") is True


def test_alter_topic_as_the_broker_does(client, unique):
    client.create_topic(unique)
    t = client.alter_topic(unique, {"flush": "always", "max_message_bytes": 100})
    assert t.config["flush"] == "always" and t.config["max_message_bytes"] == 100
    with pytest.raises(MessageTooLarge):
        client.producer().send(unique, b"x" * 101)  # in force for the next request
    assert client.alter_topic(unique, {"max_message_bytes": None}).config["max_message_bytes"] is None
    with pytest.raises(vqs.VQSError, match="flush") as e:  # (the API's 400, naming the field)
        client.alter_topic(unique, {"flush": "sometimes"})
    assert e.value.field == "flush"
    with pytest.raises(TopicDoesNotExist):
        client.alter_topic(unique + "-none", {"flush": "always"})
    assert client.alter_topic(unique, {}, replace=True).config["flush"] == client.health()["flush"]  # the server's


def test_group_configs_as_the_broker_does(client, unique):
    group = f"cfg-{unique}"
    client.alter_group_configs(group, {"share.record.lock.duration.ms": 60_000})
    values = client.group_config_values(group)
    assert values["share.record.lock.duration.ms"] == ("60000", True)
    assert values["share.delivery.count.limit"] == ("5", False)
    with pytest.raises(ConfigError, match=r"share\.delivery\.count\.limit"):
        client.alter_group_configs(group, {"share.delivery.count.limit": "many"})
    client.alter_group_configs(group, {"share.record.lock.duration.ms": None})
    assert not any(own for _, own in client.group_config_values(group).values())


def test_a_topics_max_message_bytes_is_the_clients_limit_too(client, unique):
    client.create_topic(unique, max_message_bytes=64)
    p = client.producer()
    p.send(unique, b"x" * 64)
    with pytest.raises(vqs.MessageTooLarge):
        p.send(unique, b"x" * 65)
    with pytest.raises(vqs.MessageTooLarge):
        p.send_batch(unique, [b"ok", b"x" * 65])
    assert client.topic(unique).end_offsets() == [1]


def test_consumer_long_poll_over_many_partitions(client, unique):
    client.create_topic(unique, partitions=4)
    c = client.consumer(unique)
    out = {}

    def poll():
        t0 = time.monotonic()
        out["recs"] = c.poll(timeout=10)
        out["dt"] = time.monotonic() - t0

    th = threading.Thread(target=poll)
    th.start()
    time.sleep(0.4)
    client.producer().send(unique, b"x", partition=3)
    th.join(15)
    assert [r.value for r in out["recs"]] == [b"x"] and out["dt"] < 5


def test_seek_and_out_of_range(client, unique):
    client.create_topic(unique)
    client.producer().send_batch(unique, [b"a", b"b", b"c"])
    c = client.consumer()
    c.assign([(unique, 0)])
    c.seek((unique, 0), 1)
    assert [r.value for r in c.poll()] == [b"b", b"c"]
    assert c.position((unique, 0)) == 3
    c.seek((unique, 0), 10)
    with pytest.raises(OffsetOutOfRange):
        c.poll()
    assert [r.offset for r in client.topic(unique).read(0, 2)] == [2]


def test_a_partition_that_does_not_exist(client, unique, tmp_path):
    """The remote consumer refuses it as the embedded one does: PartitionDoesNotExist (a
    ConfigError) naming the topic and its partition count, before changing its assignment."""
    client.create_topic(unique, partitions=2)
    c = client.consumer()
    c.assign([(unique, 1)])
    with pytest.raises(PartitionDoesNotExist) as remote:
        c.assign([(unique, 0), (unique, 9)])
    assert isinstance(remote.value, ConfigError) and c.assignment() == [(unique, 1)]
    assert str(remote.value) == f"topic {unique!r} has 2 partition(s) (0..1); there is no partition 9"
    assert (remote.value.topic, remote.value.partition, remote.value.partitions) == (unique, 9, 2)
    with pytest.raises(TopicDoesNotExist):
        c.assign([(unique + "-missing", 0)])
    with vqs.Broker(tmp_path / "d") as b:
        b.create_topic(unique, partitions=2)
        with pytest.raises(PartitionDoesNotExist) as embedded:
            b.consumer().assign([(unique, 9)])
    assert str(embedded.value) == str(remote.value)


def test_queues_over_http(client, unique):
    q = client.create_queue(unique, visibility_timeout=5)
    assert unique in client.queues()
    mid = q.send("hello", attributes={"a": "b"})
    q.send_batch([b"\x00binary", "two"])
    ms = q.receive(max_messages=10, wait_seconds=1)
    assert {m.body for m in ms} == {b"hello", b"\x00binary", b"two"}
    first = next(m for m in ms if m.id == mid)
    assert first.receive_count == 1 and first.attributes["a"]["StringValue"] == "b"
    q.change_visibility(ms[1].receipt_handle, 0)
    q.delete(first.receipt_handle)
    res = q.delete_batch([m.receipt_handle for m in ms[2:]])
    assert res["deleted"] == len(ms) - 2
    attrs = q.get_attributes()
    assert attrs["VisibilityTimeout"] == "5"
    q.set_attributes(visibility_timeout=7)
    assert q.get_attributes()["VisibilityTimeout"] == "7"
    q.tag({"x": "y"})
    assert q.tags() == {"x": "y"}
    q.purge()
    client.delete_queue(unique)
    assert unique not in client.queues()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dropping_server(answer: bytes | None):
    """A TCP server on 127.0.0.1 that reads a request, then sends ``answer`` (or nothing) and
    closes: a server that died mid-request. Returns (url, stop)."""
    import socket

    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    ls.settimeout(0.2)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = ls.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(65536)
                if answer:
                    conn.sendall(answer)
        ls.close()

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{ls.getsockname()[1]}", stop.set


@pytest.mark.parametrize("answer", [None, b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial"],
                         ids=["closed", "truncated"])
def test_a_lost_connection_is_a_vqs_error_never_an_httpx_one(answer):
    url, stop = _dropping_server(answer)
    try:
        with vc.Client(url, timeout=5) as c:
            for call in (c.topics, lambda: c.producer().send("t", b"v", partition=0), c.health,
                         lambda: c.queue("q").send("m")):
                with pytest.raises(vqs.ServerUnreachable) as ei:
                    call()
                assert isinstance(ei.value, vqs.VQSError) and isinstance(ei.value, ConnectionError)
                assert ei.value.url == url and url in str(ei.value)
                assert ei.value.__cause__ is not None  # the transport's own exception, chained
    finally:
        stop()


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999", "http://[::1", "ftp://127.0.0.1:8642", "http://",
                                 "127.0.0.1:notaport", "http://127.0.0.1:8642/?x=1", "http://a\udcffb",
                                 "http://127.0.0.1:8642/a\udcffb"])
def test_a_malformed_url_is_a_config_error_where_it_is_given(url):
    """Never a ValueError or an httpx error of a later request: ConfigError naming the URL, from
    the Client and the AsyncClient alike."""
    import asyncio

    with pytest.raises(ConfigError, match="url "):
        vc.Client(url)

    async def make():
        async with vqs.AsyncClient(url):
            pass

    with pytest.raises(ConfigError, match="url "):
        asyncio.run(make())


@pytest.mark.parametrize("token", ["a\udcffb", "t\u00e9", "a\nb", "a\0b"])
def test_a_token_no_header_can_carry_is_a_config_error_where_it_is_given(token):
    import asyncio

    for url in ("http://127.0.0.1:8642", "http://127.0.0.1:8642/prefix"):  # the lean and the httpx path
        with pytest.raises(ConfigError, match="token"):
            vc.Client(url, token=token)

    async def make():
        async with vqs.AsyncClient("http://127.0.0.1:8642", token=token):
            pass

    with pytest.raises(ConfigError, match="token"):
        asyncio.run(make())


@pytest.mark.parametrize("prefix", ["", "/behind-a-proxy"], ids=["lean", "httpx"])
def test_an_unreadable_answer_is_a_vqs_error_never_an_httpx_or_json_one(prefix):
    """An answer that is not JSON, or whose Content-Encoding does not decode (a proxy's page):
    a VQSError on either transport path (a base URL with a path goes through httpx), and from
    the AsyncClient."""
    import asyncio

    for answer in (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
                   b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 5\r\n\r\nabcde"):
        url, stop = _dropping_server(answer)
        try:
            with vc.Client(url + prefix, timeout=5) as c:
                for call in (c.topics, lambda: c.queue("q").send("m")):
                    with pytest.raises(vqs.VQSError):
                        call()

            async def async_topics(base):
                async with vqs.AsyncClient(base, timeout=5) as c:
                    await c.topics()

            with pytest.raises(vqs.VQSError):
                asyncio.run(async_topics(url + prefix))
        finally:
            stop()


def test_a_refused_connection_and_a_timeout_are_vqs_errors():
    url = f"http://127.0.0.1:{_free_port()}"
    with vc.Client(url, timeout=2) as c:
        with pytest.raises(vqs.ServerUnreachable):
            c.topics()
        with pytest.raises(vqs.ServerUnreachable):
            c.producer().send("t", b"v", partition=0)
    import socket

    silent = socket.socket()  # accepts (the backlog) and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(4)
    try:
        with vc.Client(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout=0.3) as c:
            with pytest.raises(vqs.ServerUnreachable, match="timed out"):
                c.topics()
            with pytest.raises(vqs.ServerUnreachable, match="timed out"):
                c.producer().send("t", b"v", partition=0)
    finally:
        silent.close()


def test_a_compacted_topic_over_rest(client, http, unique):
    client.create_topic(unique, cleanup_policy="compact", delete_retention_ms=5000)
    assert http.get(f"/topics/{unique}").json()["config"]["cleanup_policy"] == "compact"
    assert http.get(f"/topics/{unique}").json()["config"]["delete_retention_ms"] == 5000
    p = client.producer()
    with pytest.raises(InvalidRecord, match="compacted"):
        p.send(unique, b"no key")
    r = http.post(f"/topics/{unique}/messages", json={"messages": [{"value": "x"}]})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_record"
    assert p.send(unique, b"v", key=b"k").offset == 0
    r = http.post("/topics", json={"name": unique + "-bad", "cleanup_policy": "shred"})
    assert r.status_code in (400, 422)
