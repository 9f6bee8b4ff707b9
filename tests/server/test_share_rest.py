"""Share-group members over HTTP (``vqs.Client.share_consumer``) on a real server: records
shared between members, released, rejected, accepted; close releases; describe shows them."""

from __future__ import annotations

import pytest

import vqs
from vqs.errors import InvalidRecordState


def _seed(client, topic, n):
    p = client.producer()
    for i in range(n):
        p.send(topic, b"j%d" % i, partition=0)
    p.flush()


def test_members_over_http_share_records_and_acknowledge_them(base_url, unique):
    with vqs.Client(base_url) as client:
        client.create_topic(unique, 1)
        a = client.share_consumer(unique, "workers-" + unique)
        b = client.share_consumer(unique, "workers-" + unique)
        assert a.poll() == []  # a new group starts at the end (latest)
        _seed(client, unique, 6)
        got_a = a.poll(max_records=3, timeout=5)
        got_b = b.poll(max_records=10, timeout=5)
        assert [r.value for r in got_a] == [b"j0", b"j1", b"j2"] and [r.value for r in got_b] == [b"j3", b"j4", b"j5"]
        assert {r.delivery_count for r in got_a + got_b} == {1}
        a.acknowledge(got_a[0])
        a.acknowledge(got_a[1], "release")
        a.acknowledge(got_a[2], "reject")
        with pytest.raises(InvalidRecordState):
            a.acknowledge(got_b[0])  # b holds it
        again = a.poll(timeout=5)
        assert [(r.value, r.delivery_count) for r in again] == [(b"j1", 2)]
        a.acknowledge(again[0])
        b.close()  # releases j3..j5
        rest = a.poll(timeout=5)
        assert [(r.value, r.delivery_count) for r in rest] == [(b"j3", 2), (b"j4", 2), (b"j5", 2)]
        for r in rest:
            a.acknowledge(r)
        d = client.describe_share_group("workers-" + unique)
        assert d["partitions"][0]["start_offset"] == 6 and len(d["members"]) == 1
        a.close()
        with pytest.raises(vqs.VQSError):
            a.poll()  # closed: the server no longer knows the member


def test_the_servers_share_settings_hold_for_http_members_without_a_kafka_port(tmp_path):
    """``kafka_share_*`` are the server's share-group settings on every front: a server with no
    Kafka port gives its HTTP members the record lock and the start it was told (before, they
    took effect only once the Kafka front had touched the share groups)."""
    from vqs_server_proc import ServerProcess

    srv = ServerProcess(tmp_path / "data", env={"VQS_KAFKA_SHARE_AUTO_OFFSET_RESET": "earliest",
                                                "VQS_KAFKA_SHARE_RECORD_LOCK_MS": "1000"}).start()
    try:
        with vqs.Client(srv.url) as client:
            client.create_topic("jobs", 1)
            _seed(client, "jobs", 1)  # before anyone joined: read with earliest, not latest
            a = client.share_consumer("jobs", "g")
            [first] = a.poll(timeout=5)
            b = client.share_consumer("jobs", "g")
            [again] = b.poll(timeout=10)  # a's lock of one second ran out
            assert (first.value, again.value, again.delivery_count) == (b"j0", b"j0", 2)
    finally:
        assert srv.stop() == 0, srv.log()
