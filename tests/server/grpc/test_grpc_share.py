"""Share groups over gRPC (``vqs.v1.ShareGroups``) with grpcio's client against a real
``vqs serve --grpc-port``: members share a topic's records, acknowledge them (accept,
release, reject, renew), leaving releases; a member joined over REST receives over gRPC;
long polls wake on a produce; a response keeps its byte bound without acquiring records it
does not carry; requests out of bounds are refused before anything is acquired."""

from __future__ import annotations

import threading
import time

import grpc
import httpx
import pytest

import vqs


def _err(fn, *a, **kw) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as ei:
        fn(*a, **kw)
    return ei.value


def _records(resp) -> list[tuple[bytes, int, int]]:
    """(value, offset, delivery count) of every record of a ShareReceiveResponse."""
    out = []
    for b in resp.batches:
        assert len(b.delivery_counts) == len(b.records.offsets)
        out += list(zip(b.records.values, b.records.offsets, b.delivery_counts, strict=True))
    return out


def _ack(pb, topic, offset, kind):
    return pb.ShareAck(topic=topic, partition=0, offset=offset, type=kind)


def _describe(stubs, group) -> dict:
    r = httpx.get(f"http://127.0.0.1:{stubs.port}/share-groups/{group}", timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def test_members_share_records_and_acknowledge_them(stubs, pb, unique):
    stubs.topics.CreateTopic(pb.CreateTopicRequest(name=unique))
    g = "workers-" + unique
    a = stubs.share.Join(pb.ShareJoinRequest(group=g, topics=[unique]))
    b = stubs.share.Join(pb.ShareJoinRequest(group=g, topics=[unique]))
    assert a.member_id and b.member_id != a.member_id
    assert [(x.topic, x.partition) for x in a.assignment] == [(unique, 0)]
    recv = stubs.share.Receive
    assert _records(recv(pb.ShareReceiveRequest(group=g, member_id=a.member_id))) == []  # starts at the end
    stubs.records.Produce(pb.ProduceRequest(topic=unique, values=[b"j%d" % i for i in range(6)]))
    got_a = _records(recv(pb.ShareReceiveRequest(group=g, member_id=a.member_id, max_records=3, wait_ms=5000)))
    got_b = _records(recv(pb.ShareReceiveRequest(group=g, member_id=b.member_id, max_records=10, wait_ms=5000)))
    assert got_a == [(b"j0", 0, 1), (b"j1", 1, 1), (b"j2", 2, 1)]
    assert got_b == [(b"j3", 3, 1), (b"j4", 4, 1), (b"j5", 5, 1)]
    d = _describe(stubs, g)["partitions"][0]
    assert (d["acquired"], d["available"], d["delivery_counts"]) == (6, 0, {"1": 6})
    p = stubs.share.DescribeShareGroup(pb.DescribeShareGroupRequest(group=g)).partitions[0]
    assert (p.acquired, p.available, dict(p.delivery_counts)) == (6, 0, {1: 6})

    res = stubs.share.Acknowledge(pb.ShareAcknowledgeRequest(group=g, member_id=a.member_id, acks=[
        _ack(pb, unique, 0, pb.ACCEPT), _ack(pb, unique, 1, pb.RELEASE), _ack(pb, unique, 2, pb.REJECT),
        _ack(pb, unique, 3, pb.ACCEPT)]))  # the last: b holds it
    assert [r.ok for r in res.results] == [True, True, True, False]
    assert "not acquired by this member" in res.results[3].error
    again = _records(recv(pb.ShareReceiveRequest(group=g, member_id=a.member_id, wait_ms=5000)))
    assert again == [(b"j1", 1, 2)]  # released: delivered again, its count kept
    renew = stubs.share.Acknowledge(pb.ShareAcknowledgeRequest(group=g, member_id=a.member_id,
                                                               acks=[_ack(pb, unique, 1, pb.RENEW)]))
    assert [r.ok for r in renew.results] == [True]  # still held: accept works after a renew
    stubs.share.Acknowledge(pb.ShareAcknowledgeRequest(group=g, member_id=a.member_id,
                                                       acks=[_ack(pb, unique, 1, pb.ACCEPT)]))
    stubs.share.Leave(pb.ShareLeaveRequest(group=g, member_id=b.member_id))  # releases j3..j5
    rest = _records(recv(pb.ShareReceiveRequest(group=g, member_id=a.member_id, wait_ms=5000)))
    assert rest == [(b"j3", 3, 2), (b"j4", 4, 2), (b"j5", 5, 2)]
    stubs.share.Acknowledge(pb.ShareAcknowledgeRequest(group=g, member_id=a.member_id,
                                                       acks=[_ack(pb, unique, o, pb.ACCEPT) for o in (3, 4, 5)]))
    d = _describe(stubs, g)
    assert d["partitions"][0]["start_offset"] == 6 and len(d["members"]) == 1
    info = stubs.share.DescribeShareGroup(pb.DescribeShareGroupRequest(group=g))  # REST's, over gRPC
    assert (info.group, info.state, info.epoch) == (g, d["state"], d["epoch"])
    assert [m.member_id for m in info.members] == [a.member_id]
    assert [(x.topic, x.partition) for x in info.members[0].assignment] == [(unique, 0)]
    p = info.partitions[0]
    assert (p.start_offset, p.cursor, p.acquired, p.available, dict(p.delivery_counts)) == (6, 6, 0, 0, {})
    assert g in stubs.share.ListShareGroups(pb.ListShareGroupsRequest()).groups
    e = _err(stubs.share.DescribeShareGroup, pb.DescribeShareGroupRequest(group=g + "-none"))
    assert e.code() == grpc.StatusCode.NOT_FOUND
    stubs.share.Leave(pb.ShareLeaveRequest(group=g, member_id=a.member_id))
    e = _err(recv, pb.ShareReceiveRequest(group=g, member_id=a.member_id))
    assert e.code() == grpc.StatusCode.NOT_FOUND and "join again" in e.details()
    stubs.share.Leave(pb.ShareLeaveRequest(group=g, member_id=a.member_id))  # twice: nothing to do


def test_a_member_joined_over_rest_receives_and_acknowledges_over_grpc(stubs, pb, unique):
    stubs.topics.CreateTopic(pb.CreateTopicRequest(name=unique))
    g = "mixed-" + unique
    with vqs.Client(f"http://127.0.0.1:{stubs.port}") as client:
        m = client.share_consumer(unique, g)
        assert m.poll() == []  # over REST: the group starts at the end
        stubs.records.Produce(pb.ProduceRequest(topic=unique, values=[b"x", b"y"]))
        got = _records(stubs.share.Receive(pb.ShareReceiveRequest(group=g, member_id=m.member_id, wait_ms=5000)))
        assert got == [(b"x", 0, 1), (b"y", 1, 1)]
        m.acknowledge((unique, 0, 1))  # over REST
        res = stubs.share.Acknowledge(pb.ShareAcknowledgeRequest(group=g, member_id=m.member_id, acks=[
            _ack(pb, unique, 1, pb.ACCEPT), _ack(pb, unique, 0, pb.ACCEPT)]))
        assert [r.ok for r in res.results] == [False, True]  # 1 was settled over REST already
        assert _describe(stubs, g)["partitions"][0]["start_offset"] == 2
        m.close()
        e = _err(stubs.share.Receive, pb.ShareReceiveRequest(group=g, member_id=m.member_id))
        assert e.code() == grpc.StatusCode.NOT_FOUND


def test_a_waiting_receive_wakes_on_a_produce(stubs, pb, unique):
    stubs.topics.CreateTopic(pb.CreateTopicRequest(name=unique))
    g = "wait-" + unique
    m = stubs.share.Join(pb.ShareJoinRequest(group=g, topics=[unique]))
    started = threading.Event()
    out = []

    def receive():
        started.set()
        out.append(stubs.share.Receive(pb.ShareReceiveRequest(group=g, member_id=m.member_id, wait_ms=15_000)))

    th = threading.Thread(target=receive)
    th.start()
    started.wait()
    time.sleep(0.3)  # let the call reach its wait (an earlier produce passes too, only faster)
    t0 = time.monotonic()
    stubs.records.Produce(pb.ProduceRequest(topic=unique, values=[b"late"]))
    th.join(15)
    assert _records(out[0]) == [(b"late", 0, 1)] and time.monotonic() - t0 < 2
    # an empty wait answers just before the call's deadline
    t0 = time.monotonic()
    empty = stubs.share.Receive(pb.ShareReceiveRequest(group=g, member_id=m.member_id, wait_ms=15_000), timeout=1.0)
    assert _records(empty) == [] and time.monotonic() - t0 < 1.0
    stubs.share.Leave(pb.ShareLeaveRequest(group=g, member_id=m.member_id))


def test_a_response_keeps_its_byte_bound_and_acquires_nothing_it_does_not_carry(stubs, pb, unique):
    stubs.topics.CreateTopic(pb.CreateTopicRequest(name=unique))
    g = "big-" + unique
    m = stubs.share.Join(pb.ShareJoinRequest(group=g, topics=[unique]))
    stubs.share.Receive(pb.ShareReceiveRequest(group=g, member_id=m.member_id))  # the group starts here
    value = b"v" * (100 << 10)
    stubs.records.Produce(pb.ProduceRequest(topic=unique, values=[value] * 40))
    got = _records(stubs.share.Receive(pb.ShareReceiveRequest(group=g, member_id=m.member_id, max_records=100)))
    size = sum(len(v) for v, _o, _c in got)  # max_bytes unset: 1 MiB
    assert 8 < len(got) < 40 and size <= (1 << 20) + len(value)
    assert _describe(stubs, g)["partitions"][0]["acquired"] == len(got)  # nothing held back
    stubs.share.Leave(pb.ShareLeaveRequest(group=g, member_id=m.member_id))


def test_requests_out_of_bounds_are_refused(stubs, pb, unique):
    stubs.topics.CreateTopic(pb.CreateTopicRequest(name=unique))
    g = "bounds-" + unique
    s = stubs.share
    for req in (pb.ShareJoinRequest(group=g), pb.ShareJoinRequest(group=g, topics=["t"] * 101),
                pb.ShareJoinRequest(group="", topics=[unique]), pb.ShareJoinRequest(group=g, topics=["../x"])):
        assert _err(s.Join, req).code() == grpc.StatusCode.INVALID_ARGUMENT, req
    m = s.Join(pb.ShareJoinRequest(group=g, topics=[unique]))
    for req in (pb.ShareReceiveRequest(group=g, member_id=m.member_id, max_records=10_001),
                pb.ShareReceiveRequest(group=g, member_id=m.member_id, max_records=-1),
                pb.ShareReceiveRequest(group=g, member_id=m.member_id, wait_ms=-5),
                pb.ShareReceiveRequest(group=g, member_id=m.member_id, max_bytes=-1),
                pb.ShareReceiveRequest(group=g, member_id="m" * 201)):
        assert _err(s.Receive, req).code() == grpc.StatusCode.INVALID_ARGUMENT, req
    e = _err(s.Receive, pb.ShareReceiveRequest(group=g, member_id="no-such-member"))
    assert e.code() == grpc.StatusCode.NOT_FOUND
    acks = [pb.ShareAck(topic=unique, offset=0)] * 10_001
    e = _err(s.Acknowledge, pb.ShareAcknowledgeRequest(group=g, member_id=m.member_id, acks=acks))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    e = _err(s.Acknowledge, pb.ShareAcknowledgeRequest(group=g, member_id=m.member_id,
                                                      acks=[pb.ShareAck(topic=unique, offset=0, type=9)]))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "acknowledge type" in e.details()
    e = _err(s.Acknowledge, pb.ShareAcknowledgeRequest(group=g, member_id=m.member_id,
                                                      acks=[pb.ShareAck(topic=unique + "-none", offset=0)]))
    assert e.code() == grpc.StatusCode.NOT_FOUND
    s.Leave(pb.ShareLeaveRequest(group=g, member_id=m.member_id))
