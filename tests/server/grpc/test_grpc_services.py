"""Every RPC of the gRPC front against a real ``vqs serve --grpc-port``, with grpcio's client.

Also: errors as status codes (never a server path), deadlines and cancelled
streams, the health service and server reflection, and receipt handles shared
with the HTTP fronts.
"""

from __future__ import annotations

import threading
import time

import grpc
import httpx
import pytest


def _err(fn, *a, **kw) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as ei:
        fn(*a, **kw)
    return ei.value


def _md(e) -> dict:
    return dict(e.trailing_metadata() or ())


# ---------------------------------------------------------------------------------- topics
def test_topics_create_list_describe_delete(stubs, pb, unique):
    info = stubs.topics.CreateTopic(pb.CreateTopicRequest(name=unique, partitions=3, retention_ms=60_000))
    assert (info.name, info.partitions) == (unique, 3)
    assert info.config["retention_ms"] == "60000"
    assert [p.partition for p in info.partition_info] == [0, 1, 2]
    assert unique in stubs.topics.ListTopics(pb.ListTopicsRequest()).names
    assert stubs.topics.DescribeTopic(pb.DescribeTopicRequest(name=unique)).partitions == 3
    e = _err(stubs.topics.CreateTopic, pb.CreateTopicRequest(name=unique))
    assert e.code() == grpc.StatusCode.ALREADY_EXISTS
    stubs.topics.DeleteTopic(pb.DeleteTopicRequest(name=unique))
    assert unique not in stubs.topics.ListTopics(pb.ListTopicsRequest()).names
    e = _err(stubs.topics.DescribeTopic, pb.DescribeTopicRequest(name=unique))
    assert e.code() == grpc.StatusCode.NOT_FOUND and _md(e)["vqs-error-type"] == "TopicDoesNotExist"
    e = _err(stubs.topics.CreateTopic, pb.CreateTopicRequest(name="../escape"))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    e = _err(stubs.topics.CreateTopic, pb.CreateTopicRequest(name=unique + "x", partitions=100_000))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "max_partitions_per_topic" in e.details()


# ---------------------------------------------------------------------------------- records
def test_a_compacted_topic_takes_keyed_records_only(stubs, pb, unique):
    info = stubs.topics.CreateTopic(pb.CreateTopicRequest(name=unique, cleanup_policy="compact",
                                                          delete_retention_ms=1000, min_cleanable_dirty_ratio=0.2))
    assert info.config["cleanup_policy"] == "compact" and info.config["delete_retention_ms"] == "1000"
    assert info.config["min_cleanable_dirty_ratio"] == "0.2"
    e = _err(stubs.records.Produce, pb.ProduceRequest(topic=unique, values=[b"no key"]))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "compacted" in e.details()
    assert stubs.records.Produce(pb.ProduceRequest(topic=unique, values=[b"v"], keys=[b"k"])).count == 1
    e = _err(stubs.topics.CreateTopic, pb.CreateTopicRequest(name=unique + "-bad", cleanup_policy="shred"))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_a_topic_with_its_own_flush_takes_produces(stubs, pb, unique):
    """``flush="always"`` on a topic of the session's server: its produces run off the loop,
    answered once fsynced (tests/server/test_topic_flush_inline.py has the rule)."""
    info = stubs.topics.CreateTopic(pb.CreateTopicRequest(name=unique, flush="always", flush_interval_ms=250))
    assert info.config["flush"] == "always" and info.config["flush_interval_ms"] == "250"
    assert stubs.records.Produce(pb.ProduceRequest(topic=unique, values=[b"a", b"b"])).count == 2
    e = _err(stubs.topics.CreateTopic, pb.CreateTopicRequest(name=unique + "-bad", flush="sometimes"))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "flush" in e.details()


def test_produce_and_fetch_keep_columns(stubs, pb, unique):
    stubs.topics.CreateTopic(pb.CreateTopicRequest(name=unique))
    hs = [pb.Headers(headers=[pb.Header(name="h", value=b"1")]), pb.Headers()]
    ack = stubs.records.Produce(pb.ProduceRequest(topic=unique, values=[b"a", b"\xff"], keys=[b"k", b""], null_keys=[1],
                                                  timestamps_ms=[1000, 2000], headers=hs, batch_id=7))
    assert ack.batch_id == 7 and ack.count == 2
    assert [(r.partition, r.base_offset, r.count) for r in ack.ranges] == [(0, 0, 2)]
    got = stubs.records.Fetch(pb.FetchRequest(topic=unique, offset=0))
    assert list(got.offsets) == [0, 1] and list(got.values) == [b"a", b"\xff"]
    assert list(got.keys) == [b"k", b""] and list(got.null_keys) == [1] and list(got.timestamps_ms) == [1000, 2000]
    assert [(h.name, h.value) for h in got.headers[0].headers] == [("h", b"1")] and not got.headers[1].headers
    assert (got.next_offset, got.start_offset, got.end_offset) == (2, 0, 2)
    one = stubs.records.Fetch(pb.FetchRequest(topic=unique, offset=1, max_records=5))
    assert list(one.offsets) == [1] and not one.keys  # its key was null: no key
    # no offset: the group's committed offset
    stubs.groups.Commit(pb.CommitRequest(group=unique, offsets=[pb.PartitionOffset(topic=unique, offset=1)]))
    assert list(stubs.records.Fetch(pb.FetchRequest(topic=unique, group=unique)).offsets) == [1]
    # the same records over HTTP
    r = httpx.get(f"http://127.0.0.1:{stubs.port}/topics/{unique}/messages", params={"offset": 0})
    assert [m["value"] for m in r.json()["messages"][:1]] == ["a"]


def test_null_values_and_keys_are_told_from_empty_ones(stubs, pb, unique):
    stubs.topics.CreateTopic(pb.CreateTopicRequest(name=unique))
    stubs.records.Produce(pb.ProduceRequest(topic=unique, values=[b"v", b"", b""], null_values=[2],
                                            keys=[b"", b"", b"k"], null_keys=[1]))
    got = stubs.records.Fetch(pb.FetchRequest(topic=unique, offset=0))
    assert list(got.values) == [b"v", b"", b""] and list(got.null_values) == [2]
    assert list(got.keys) == [b"", b"", b"k"] and list(got.null_keys) == [1]
    r = httpx.get(f"http://127.0.0.1:{stubs.port}/topics/{unique}/messages", params={"offset": 0}).json()
    assert [(m["key"], m["value"]) for m in r["messages"]] == [("", "v"), (None, ""), ("k", None)]
    e = _err(stubs.records.Produce, pb.ProduceRequest(topic=unique, values=[b"v"], null_values=[1]))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "null_values" in e.details()


def test_null_header_values_are_told_from_empty_ones(stubs, pb, unique):
    stubs.topics.CreateTopic(pb.CreateTopicRequest(name=unique))
    hs = pb.Headers(headers=[pb.Header(name="n", null_value=True), pb.Header(name="e"), pb.Header(name="v", value=b"x")])
    stubs.records.Produce(pb.ProduceRequest(topic=unique, values=[b"v"], headers=[hs]))
    got = stubs.records.Fetch(pb.FetchRequest(topic=unique, offset=0))
    assert [(h.name, h.value, h.null_value) for h in got.headers[0].headers] == [
        ("n", b"", True), ("e", b"", False), ("v", b"x", False)]
    r = httpx.get(f"http://127.0.0.1:{stubs.port}/topics/{unique}/messages", params={"offset": 0}).json()
    assert r["messages"][0]["headers"] == [["n", None], ["e", ""], ["v", "x"]]


def test_produce_errors_are_status_codes(stubs, pb, unique):
    stubs.topics.CreateTopic(pb.CreateTopicRequest(name=unique, partitions=2))
    e = _err(stubs.records.Produce, pb.ProduceRequest(topic=unique + "-none", values=[b"x"]))
    assert e.code() == grpc.StatusCode.NOT_FOUND
    e = _err(stubs.records.Produce, pb.ProduceRequest(topic=unique, values=[b"x"], partition=5))
    assert e.code() == grpc.StatusCode.NOT_FOUND and "partition" in e.details()
    e = _err(stubs.records.Produce, pb.ProduceRequest(topic=unique, values=[]))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    e = _err(stubs.records.Produce, pb.ProduceRequest(topic=unique, values=[b"x", b"y"], keys=[b"k"]))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "keys" in e.details()
    big = b"x" * ((1 << 20) + 1)  # max_message_bytes: 1 MiB
    e = _err(stubs.records.Produce, pb.ProduceRequest(topic=unique, values=[b"ok", big]))
    assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "max_message_bytes" in e.details()
    assert stubs.topics.DescribeTopic(pb.DescribeTopicRequest(name=unique)).partition_info[0].end_offset == 0
    e = _err(stubs.records.Fetch, pb.FetchRequest(topic=unique, offset=99))
    assert e.code() == grpc.StatusCode.OUT_OF_RANGE
    md = _md(e)
    assert (md["vqs-start-offset"], md["vqs-end-offset"]) == ("0", "0")
    assert "/" not in e.details()  # never a server path


def test_a_topics_own_max_message_bytes_applies_to_grpc_too(stubs, pb, unique):
    base = f"http://127.0.0.1:{stubs.port}"
    r = httpx.post(base + "/topics", json={"name": unique, "max_message_bytes": 2048}, timeout=10)
    assert r.status_code == 201, r.text
    e = _err(stubs.records.Produce, pb.ProduceRequest(topic=unique, values=[b"x" * 2049]))
    assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "2048" in e.details()
    assert stubs.records.Produce(pb.ProduceRequest(topic=unique, values=[b"x" * 2048])).count == 1
    large = unique + "-large"
    assert httpx.post(base + "/topics", json={"name": large, "max_message_bytes": 2 << 20}, timeout=10).is_success
    assert stubs.records.Produce(pb.ProduceRequest(topic=large, values=[b"x" * (3 << 19)])).count == 1


def test_produce_stream_acks_every_batch_in_order(stubs, pb, unique):
    stubs.topics.CreateTopic(pb.CreateTopicRequest(name=unique))
    reqs = (pb.ProduceRequest(topic=unique, values=[b"%d-%d" % (i, j) for j in range(10)], batch_id=i)
            for i in range(50))
    acks = list(stubs.records.ProduceStream(reqs))
    assert [a.batch_id for a in acks] == list(range(50))
    assert [a.ranges[0].base_offset for a in acks] == list(range(0, 500, 10))
    got = stubs.records.Fetch(pb.FetchRequest(topic=unique, offset=0, max_records=1000))
    assert list(got.values) == [b"%d-%d" % (i, j) for i in range(50) for j in range(10)]


def test_produce_stream_ends_with_the_refused_batch(stubs, pb, unique):
    stubs.topics.CreateTopic(pb.CreateTopicRequest(name=unique))
    reqs = [pb.ProduceRequest(topic=unique, values=[b"a"], batch_id=1),
            pb.ProduceRequest(topic=unique + "-missing", values=[b"b"], batch_id=2),
            pb.ProduceRequest(topic=unique, values=[b"c"], batch_id=3)]
    acks = []
    with pytest.raises(grpc.RpcError) as ei:
        for a in stubs.records.ProduceStream(iter(reqs)):
            acks.append(a.batch_id)
    assert acks == [1] and ei.value.code() == grpc.StatusCode.NOT_FOUND
    assert stubs.topics.DescribeTopic(pb.DescribeTopicRequest(name=unique)).partition_info[0].end_offset == 1


def test_subscribe_receives_records_produced_afterwards(stubs, pb, unique):
    stubs.topics.CreateTopic(pb.CreateTopicRequest(name=unique, partitions=2))
    stubs.records.Produce(pb.ProduceRequest(topic=unique, partition=0, values=[b"old"]))
    stream = stubs.records.Subscribe(pb.SubscribeRequest(topic=unique, latest=True), timeout=20)
    got: list = []
    done = threading.Event()

    def read():
        for batch in stream:
            got.extend((batch.partition, o, v) for o, v in zip(batch.offsets, batch.values))
            if len(got) >= 4:
                done.set()
                return

    t = threading.Thread(target=read)
    t.start()
    time.sleep(0.3)  # the stream is waiting (nothing to send): records come after it
    stubs.records.Produce(pb.ProduceRequest(topic=unique, partition=1, values=[b"n0", b"n1"]))
    stubs.records.Produce(pb.ProduceRequest(topic=unique, partition=0, values=[b"n2", b"n3"]))
    assert done.wait(10), got
    stream.cancel()
    t.join(5)
    assert sorted(got) == [(0, 1, b"n2"), (0, 2, b"n3"), (1, 0, b"n0"), (1, 1, b"n1")]


def test_subscribe_start_positions(stubs, pb, unique):
    stubs.topics.CreateTopic(pb.CreateTopicRequest(name=unique))
    stubs.records.Produce(pb.ProduceRequest(topic=unique, values=[b"a", b"b", b"c", b"d"],
                                            timestamps_ms=[1000, 2000, 3000, 4000]))
    stubs.groups.Commit(pb.CommitRequest(group=unique, offsets=[pb.PartitionOffset(topic=unique, offset=3)]))

    def first(**start):
        stream = stubs.records.Subscribe(pb.SubscribeRequest(topic=unique, **start), timeout=10)
        batch = next(stream)
        stream.cancel()
        return batch.offsets[0]

    assert first() == 0
    assert first(offset=2) == 2
    assert first(timestamp_ms=2500) == 2
    assert first(group=unique) == 3
    e = _err(lambda: next(stubs.records.Subscribe(pb.SubscribeRequest(topic=unique, offset=9), timeout=5)))
    assert e.code() == grpc.StatusCode.OUT_OF_RANGE


def test_deadlines_are_honoured(stubs, pb, unique):
    stubs.topics.CreateTopic(pb.CreateTopicRequest(name=unique))
    stubs.queues.CreateQueue(pb.CreateQueueRequest(name=unique))
    t0 = time.monotonic()
    got = stubs.records.Fetch(pb.FetchRequest(topic=unique, offset=0, wait_ms=20_000), timeout=0.5)
    assert not got.values and time.monotonic() - t0 < 1.5  # empty, before the deadline
    t0 = time.monotonic()
    r = stubs.queues.Receive(pb.ReceiveRequest(queue=unique, wait_seconds=20), timeout=0.6)
    assert not r.messages and time.monotonic() - t0 < 1.8
    t0 = time.monotonic()
    e = _err(lambda: list(stubs.records.Subscribe(pb.SubscribeRequest(topic=unique), timeout=0.5)))
    assert e.code() == grpc.StatusCode.DEADLINE_EXCEEDED and time.monotonic() - t0 < 1.5


def test_a_cancelled_subscription_frees_the_server(stubs, pb, unique, grpc_server):
    stubs.topics.CreateTopic(pb.CreateTopicRequest(name=unique))
    stubs.records.Produce(pb.ProduceRequest(topic=unique, values=[b"x"] * 5))
    streams = [stubs.records.Subscribe(pb.SubscribeRequest(topic=unique, max_records=1)) for _ in range(20)]
    for s in streams:
        assert next(s).values == [b"x"]
        s.cancel()
        e = _err(next, s)
        assert e.code() == grpc.StatusCode.CANCELLED
    # the server goes on serving, and logged no failure for the cancelled calls
    ack = stubs.records.Produce(pb.ProduceRequest(topic=unique, values=[b"y"]))
    assert ack.ranges[0].base_offset == 5
    assert "Traceback" not in grpc_server.log() and "failed" not in grpc_server.log()


# ---------------------------------------------------------------------------------- groups
def test_groups_commit_committed_lag(stubs, pb, unique):
    stubs.topics.CreateTopic(pb.CreateTopicRequest(name=unique, partitions=2))
    stubs.records.Produce(pb.ProduceRequest(topic=unique, partition=0, values=[b"x"] * 10))
    stubs.records.Produce(pb.ProduceRequest(topic=unique, partition=1, values=[b"x"] * 4))
    r = stubs.groups.Commit(pb.CommitRequest(group=unique, offsets=[pb.PartitionOffset(topic=unique, offset=7)]))
    assert r.committed == 1
    c = stubs.groups.Committed(pb.CommittedRequest(group=unique))
    assert [(o.topic, o.partition, o.offset) for o in c.offsets] == [(unique, 0, 7)]
    lag = stubs.groups.Lag(pb.LagRequest(group=unique))
    rows = [(p.partition, p.committed if p.HasField("committed") else None, p.lag) for p in lag.partitions]
    assert rows == [(0, 7, 3), (1, None, 4)] and lag.total_lag == 7
    e = _err(stubs.groups.Commit, pb.CommitRequest(group=unique, offsets=[
        pb.PartitionOffset(topic=unique, partition=9, offset=1)]))
    assert e.code() == grpc.StatusCode.NOT_FOUND
    assert not stubs.groups.Committed(pb.CommittedRequest(group=unique + "-none")).offsets
    # while a VQS member is in the group, a commit from outside it is refused (as Kafka does)
    url = f"http://127.0.0.1:{stubs.port}"
    m = httpx.post(f"{url}/groups/{unique}/members", json={"topics": [unique]}).json()
    e = _err(stubs.groups.Commit, pb.CommitRequest(group=unique, offsets=[pb.PartitionOffset(topic=unique, offset=8)]))
    assert e.code() == grpc.StatusCode.FAILED_PRECONDITION and _md(e)["vqs-error-type"] == "FencedMember"
    httpx.delete(f"{url}/groups/{unique}/members/{m['member_id']}").raise_for_status()
    assert stubs.groups.Commit(pb.CommitRequest(group=unique, offsets=[
        pb.PartitionOffset(topic=unique, offset=8)])).committed == 1


# ---------------------------------------------------------------------------------- queues
def test_queues_send_receive_visibility_delete(stubs, pb, unique):
    info = stubs.queues.CreateQueue(pb.CreateQueueRequest(name=unique, attributes={"VisibilityTimeout": "30"}))
    assert info.attributes["VisibilityTimeout"] == "30"
    assert unique in stubs.queues.ListQueues(pb.ListQueuesRequest(prefix=unique)).names
    attrs = {"s": pb.MessageAttribute(data_type="String", string_value="v"),
             "b": pb.MessageAttribute(data_type="Binary", binary_value=b"\x00\x01")}
    ids = stubs.queues.Send(pb.SendRequest(queue=unique, entries=[pb.SendEntry(body=b"one", attributes=attrs),
                                                                   pb.SendEntry(body=b"two")])).message_ids
    assert len(ids) == 2
    r = stubs.queues.Receive(pb.ReceiveRequest(queue=unique, max_messages=10, wait_seconds=1))
    assert sorted(m.body for m in r.messages) == [b"one", b"two"]
    m1 = next(m for m in r.messages if m.body == b"one")
    assert m1.attributes["s"].string_value == "v" and m1.attributes["b"].binary_value == b"\x00\x01"
    assert m1.id in ids and m1.receive_count == 1
    assert not stubs.queues.Receive(pb.ReceiveRequest(queue=unique, wait_seconds=0)).messages  # leased
    m2 = next(m for m in r.messages if m.body == b"two")
    stubs.queues.ChangeVisibility(pb.ChangeVisibilityRequest(queue=unique, receipt_handle=m2.receipt_handle,
                                                             visibility_timeout=0))
    again = stubs.queues.Receive(pb.ReceiveRequest(queue=unique, wait_seconds=1)).messages
    assert [m.body for m in again] == [b"two"] and again[0].receive_count == 2
    stubs.queues.Delete(pb.DeleteRequest(queue=unique, receipt_handle=m1.receipt_handle))
    # a handle from the gRPC front deletes through REST: one queue, one set of receipt handles
    rest = httpx.post(f"http://127.0.0.1:{stubs.port}/queues/{unique}/delete",
                      json={"receipt_handles": [again[0].receipt_handle]})
    assert rest.json() == {"deleted": 1, "failed": []}
    e = _err(stubs.queues.Delete, pb.DeleteRequest(queue=unique, receipt_handle="forged"))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert _md(e) == {"vqs-error-type": "ReceiptHandleIsInvalid", "vqs-sqs-code": "ReceiptHandleIsInvalid"}
    e = _err(stubs.queues.Send, pb.SendRequest(queue=unique, entries=[pb.SendEntry(body=b"x")] * 11))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    e = _err(stubs.queues.Receive, pb.ReceiveRequest(queue=unique + "-none"))
    assert e.code() == grpc.StatusCode.NOT_FOUND
    stubs.queues.DeleteQueue(pb.DeleteQueueRequest(name=unique))
    assert unique not in stubs.queues.ListQueues(pb.ListQueuesRequest()).names


def test_a_long_poll_receive_wakes_on_send(stubs, pb, unique):
    stubs.queues.CreateQueue(pb.CreateQueueRequest(name=unique))
    out: list = []
    t = threading.Thread(target=lambda: out.append(
        stubs.queues.Receive(pb.ReceiveRequest(queue=unique, wait_seconds=10), timeout=15)))
    t.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    stubs.queues.Send(pb.SendRequest(queue=unique, entries=[pb.SendEntry(body=b"late")]))
    t.join(10)
    assert [m.body for m in out[0].messages] == [b"late"] and time.monotonic() - t0 < 2


# ---------------------------------------------------------------------------------- standard services
def test_health_and_reflection(stubs, pb):
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    h = health_pb2_grpc.HealthStub(stubs.channel)
    for name in ("", "vqs.v1.Records", "vqs.v1.Queues"):
        assert h.Check(health_pb2.HealthCheckRequest(service=name)).status == health_pb2.HealthCheckResponse.SERVING
    r = reflection_pb2_grpc.ServerReflectionStub(stubs.channel)
    answer = next(r.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")])))
    names = {s.name for s in answer.list_services_response.service}
    assert {"vqs.v1.Topics", "vqs.v1.Records", "vqs.v1.Groups", "vqs.v1.Queues", "vqs.v1.ShareGroups",
            "grpc.health.v1.Health"} <= names
    fd = next(r.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(
        file_containing_symbol="vqs.v1.Records")])))
    assert fd.file_descriptor_response.file_descriptor_proto  # a client can be built from it


def test_calls_are_counted_in_the_server_metrics(stubs, pb, unique):
    stubs.topics.CreateTopic(pb.CreateTopicRequest(name=unique))
    with pytest.raises(grpc.RpcError):
        stubs.topics.DescribeTopic(pb.DescribeTopicRequest(name=unique + "-none"))
    text = httpx.get(f"http://127.0.0.1:{stubs.port}/metrics").text
    assert 'vqs_http_requests_total{api="grpc",method="RPC",route="CreateTopic",status="OK"}' in text
    assert 'vqs_http_requests_total{api="grpc",method="RPC",route="DescribeTopic",status="NOT_FOUND"}' in text
    assert 'vqs_errors_total{api="grpc",code="not_found"}' in text


def test_a_subscription_to_a_deleted_topic_ends_not_found(stubs, pb, unique):
    stubs.topics.CreateTopic(pb.CreateTopicRequest(name=unique))
    stubs.records.Produce(pb.ProduceRequest(topic=unique, values=[b"x"]))
    stream = stubs.records.Subscribe(pb.SubscribeRequest(topic=unique), timeout=20)
    assert list(next(stream).values) == [b"x"]  # now waiting for more
    t0 = time.monotonic()
    stubs.topics.DeleteTopic(pb.DeleteTopicRequest(name=unique))
    e = _err(next, stream)
    assert e.code() == grpc.StatusCode.NOT_FOUND and time.monotonic() - t0 < 5


def _server_threads(pid: int) -> int:
    import os

    return len(os.listdir(f"/proc/{pid}/task"))


def _waiting_long_polls(port: int) -> float:
    for line in httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text.splitlines():
        if line.startswith("vqs_long_poll_waiters "):
            return float(line.split()[1])
    return 0.0


def test_waiting_receives_hold_no_thread_each(stubs, pb, unique, grpc_server):
    """Forty receives waiting on one queue cost the server one watcher thread, not forty."""
    stubs.queues.CreateQueue(pb.CreateQueueRequest(name=unique))
    before = _server_threads(grpc_server.proc.pid)
    calls = [stubs.queues.Receive.future(pb.ReceiveRequest(queue=unique, wait_seconds=20), timeout=30)
             for _ in range(40)]
    deadline = time.monotonic() + 10
    while _waiting_long_polls(stubs.port) < 40:
        assert time.monotonic() < deadline, "the receives never started waiting"
        time.sleep(0.02)
    assert _server_threads(grpc_server.proc.pid) - before < 8
    stubs.queues.Send(pb.SendRequest(queue=unique, entries=[pb.SendEntry(body=b"m%d" % i) for i in range(10)]))
    stubs.queues.Send(pb.SendRequest(queue=unique, entries=[pb.SendEntry(body=b"m%d" % i) for i in range(10, 20)]))
    stubs.queues.Send(pb.SendRequest(queue=unique, entries=[pb.SendEntry(body=b"m%d" % i) for i in range(20, 30)]))
    stubs.queues.Send(pb.SendRequest(queue=unique, entries=[pb.SendEntry(body=b"m%d" % i) for i in range(30, 40)]))
    got = sorted(m.body for c in calls for m in c.result(timeout=25).messages)
    assert got == sorted(b"m%d" % i for i in range(40))


def test_bad_input_is_invalid_argument_with_a_short_message(stubs, pb):
    """A 1 MiB name is named, not echoed (a default client refused a 5 MB status message as
    RESOURCE_EXHAUSTED); more headers than the format counts, or a key longer than it can
    hold, is INVALID_ARGUMENT before anything is appended (it was INTERNAL: struct.error);
    a queue attribute called ``name`` is an unknown attribute (it was INTERNAL: TypeError)."""
    stubs.topics.CreateTopic(pb.CreateTopicRequest(name="bad-input", partitions=1))
    with pytest.raises(grpc.RpcError) as e:
        stubs.records.Produce(pb.ProduceRequest(topic="x" * (1 << 20), values=[b"v"]))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and len(e.value.details()) < 1000
    for hs in ([pb.Header(name="h", value=b"") for _ in range(70_000)], [pb.Header(name="n" * 70_000, value=b"")]):
        with pytest.raises(grpc.RpcError) as e:
            stubs.records.Produce(pb.ProduceRequest(topic="bad-input", values=[b"v"], headers=[pb.Headers(headers=hs)]))
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()
    with pytest.raises(grpc.RpcError) as e:  # a million empty values and one: 2 MB on the wire
        stubs.records.Produce(pb.ProduceRequest(topic="bad-input", values=[b""] * 1_000_001))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "1000000" in e.value.details()
    with pytest.raises(grpc.RpcError) as e:
        stubs.queues.CreateQueue(pb.CreateQueueRequest(name="bad-attrs", attributes={"name": "x"}))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "name" in e.value.details()
