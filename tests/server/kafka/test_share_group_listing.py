"""Share groups in ListGroups (v0-5, the v4 state and v5 type filters) and DescribeGroups, as Kafka shows them."""

from __future__ import annotations

import time
import uuid

import pytest
from kafka_server_proc import KafkaServer
from raw_client import RawKafka

from vqs.server.kafka.codec import Writer

ck = pytest.importorskip("confluent_kafka")
if not hasattr(ck, "ShareConsumer"):
    pytest.skip("confluent-kafka without ShareConsumer", allow_module_level=True)
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = KafkaServer(tmp_path_factory.mktemp("vqs-share-list") / "data", env={
        "VQS_KAFKA_SHARE_AUTO_OFFSET_RESET": "earliest", "VQS_KAFKA_SHARE_HEARTBEAT_INTERVAL_MS": "500"}).start()
    yield s
    assert s.stop() == 0, s.log()


def _list(server, version: int, states=(), types=()) -> list[tuple]:
    raw = RawKafka(server.kafka_port)
    try:
        w = Writer()
        if version >= 4:
            w.compact_array(len(states))
            for s in states:
                w.compact_string(s)
        if version >= 5:
            w.compact_array(len(types))
            for t in types:
                w.compact_string(t)
        if version >= 3:
            r = raw.flex_request(16, version, bytes(w.tags().b))
        else:
            r = raw.request(16, version, bytes(w.b))
        if version >= 1:
            r.int32()
        assert r.int16() == 0
        out = []
        if version < 3:
            for _ in range(r.array_len()):
                out.append((r.string(), r.string()))
            return out
        for _ in range(r.compact_array_len()):
            row = [r.compact_string(), r.compact_string()]
            if version >= 4:
                row.append(r.compact_string())
            if version >= 5:
                row.append(r.compact_string())
            r.tagged_fields()
            out.append(tuple(row))
        return out
    finally:
        raw.close()


def test_share_groups_are_listed_with_type_share_and_filtered_as_kafka_does(server):
    topic = f"t-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(10)
    p = ck.Producer({"bootstrap.servers": server.bootstrap})
    p.produce(topic, value=b"x")
    p.flush(10)
    classic = ck.Consumer({"bootstrap.servers": server.bootstrap, "group.id": "classic-g",
                           "auto.offset.reset": "earliest"})
    classic.subscribe([topic])
    share = ck.ShareConsumer({"bootstrap.servers": server.bootstrap, "group.id": "share-g"})
    share.subscribe([topic])
    try:
        deadline = time.monotonic() + 20
        got = 0
        while got < 2:
            assert time.monotonic() < deadline
            got += sum(1 for m in share.poll(0.3) if m.error() is None)
            m = classic.poll(0.3)
            got += m is not None and m.error() is None
        assert ("share-g", "share") in _list(server, 2)
        assert ("classic-g", "consumer") in _list(server, 2)
        rows = _list(server, 5)
        assert ("share-g", "share", "Stable", "share") in rows  # a state with or without a state filter
        assert _list(server, 5, types=["share"]) == [("share-g", "share", "Stable", "share")]
        assert [r[0] for r in _list(server, 5, types=["Classic"])] == ["classic-g"]  # case-insensitive
        assert _list(server, 5, types=["consumer"]) == []  # no KIP-848 groups
        assert ("share-g", "share", "Stable") in _list(server, 4, states=["stable"])
        # confluent-kafka's list_consumer_groups (ListGroups v5 with a type filter) leaves share groups out
        listed = admin.list_consumer_groups().result(10)
        ids = {g.group_id for g in listed.valid}
        assert "classic-g" in ids and "share-g" not in ids
        # DescribeGroups (up to v4 here) describes a share group as Kafka does before v6: Dead, no error
        (d,) = admin.describe_consumer_groups(["share-g"]).values()
        desc = d.result(10)
        assert str(desc.state).endswith("DEAD") and not desc.members
    finally:
        share.close()
        classic.close()
    rows = _list(server, 4, states=["Empty"])
    assert ("share-g", "share", "Empty") in rows  # members gone, state kept
