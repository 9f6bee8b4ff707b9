"""Share-group offset admin APIs (DescribeShareGroupOffsets 90, AlterShareGroupOffsets 91,
DeleteShareGroupOffsets 92) over raw requests (confluent-kafka 2.16 has no share-group offset
admin calls), with confluent-kafka's ShareConsumer reading what they set."""

from __future__ import annotations

import time

import pytest
from kafka_server_proc import KafkaServer
from raw_client import RawKafka

from vqs.server.kafka.codec import Writer

ck = pytest.importorskip("confluent_kafka")
if not hasattr(ck, "ShareConsumer"):
    pytest.skip("confluent-kafka without ShareConsumer", allow_module_level=True)
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, UNKNOWN_TOPIC_OR_PARTITION = 68, 69, 3


def _describe(raw, group, topics=None) -> tuple[int, dict]:
    """(group error, {(topic, partition): (start offset, error)})."""
    w = Writer().compact_array(1).compact_string(group)
    if topics is None:
        w.uvarint(0)  # null
    else:
        w.compact_array(len(topics))
        for t, ps in topics:
            w.compact_string(t).compact_array(len(ps))
            for p in ps:
                w.int32(p)
            w.tags()
    r = raw.flex_request(90, 0, bytes(w.tags().tags().b))
    r.int32()
    assert r.compact_array_len() == 1
    assert r.compact_string() == group
    out = {}
    for _ in range(r.compact_array_len()):
        t = r.compact_string()
        assert r.uuid() == raw.topic_id(t)
        for _ in range(r.compact_array_len()):
            p, start, _epoch, err = r.int32(), r.int64(), r.int32(), r.int16()
            r.compact_string()
            r.tagged_fields()
            out[(t, p)] = (start, err)
        r.tagged_fields()
    err = r.int16()
    r.compact_string()
    return err, out


def _topic_rows(r) -> dict:
    out = {}
    for _ in range(r.compact_array_len()):
        t = r.compact_string()
        r.uuid()
        for _ in range(r.compact_array_len()):
            p, err = r.int32(), r.int16()
            r.compact_string()
            r.tagged_fields()
            out[(t, p)] = err
        r.tagged_fields()
    return out


def _alter(raw, group, offsets: dict) -> tuple[int, dict]:
    by_topic: dict = {}
    for (t, p), o in offsets.items():
        by_topic.setdefault(t, []).append((p, o))
    w = Writer().compact_string(group).compact_array(len(by_topic))
    for t, parts in by_topic.items():
        w.compact_string(t).compact_array(len(parts))
        for p, o in parts:
            w.int32(p).int64(o).tags()
        w.tags()
    r = raw.flex_request(91, 0, bytes(w.tags().b))
    r.int32()
    err = r.int16()
    r.compact_string()
    return err, _topic_rows(r)


def _delete(raw, group, topics) -> tuple[int, dict]:
    w = Writer().compact_string(group).compact_array(len(topics))
    for t in topics:
        w.compact_string(t).tags()
    r = raw.flex_request(92, 0, bytes(w.tags().b))
    r.int32()
    err = r.int16()
    r.compact_string()
    return err, _topic_rows(r)


def _consume(server, group, n, accept=True, linger=2.0):
    """Read ``n`` records with a fresh share consumer (and nothing more for ``linger`` s); their values."""
    c = ck.ShareConsumer({"bootstrap.servers": server.bootstrap, "group.id": group, "fetch.wait.max.ms": 200})
    c.subscribe(["work"])
    got: list = []
    try:
        deadline = time.monotonic() + 20
        while len(got) < n:
            assert time.monotonic() < deadline, got
            got += [m.value() for m in c.poll(0.3) if m.error() is None]
        end = time.monotonic() + linger
        while time.monotonic() < end:
            got += [m.value() for m in c.poll(0.3) if m.error() is None]
        if accept:
            c.commit_sync(10)
    finally:
        c.close()
    return sorted(got)


def test_describe_alter_and_delete_share_group_offsets(tmp_path):
    server = KafkaServer(tmp_path / "data", env={"VQS_KAFKA_SHARE_AUTO_OFFSET_RESET": "earliest",
                                                 "VQS_KAFKA_SHARE_HEARTBEAT_INTERVAL_MS": "500"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        admin.create_topics([NewTopic("work", num_partitions=2, replication_factor=1)])["work"].result(10)
        p = ck.Producer({"bootstrap.servers": server.bootstrap})
        for i in range(20):
            p.produce("work", value=b"p%d-%02d" % (i % 2, i // 2), partition=i % 2)
        assert p.flush(10) == 0
        assert len(_consume(server, "g", 20)) == 20
        raw = RawKafka(server.kafka_port)
        try:
            assert _describe(raw, "g") == (0, {("work", 0): (10, 0), ("work", 1): (10, 0)})
            assert _describe(raw, "g", [("work", [1]), ("nowhere", [0])]) == (
                0, {("work", 1): (10, 0), ("nowhere", 0): (-1, UNKNOWN_TOPIC_OR_PARTITION)})
            assert _describe(raw, "nobody")[0] == GROUP_ID_NOT_FOUND

            # a group with a member is not altered
            member = ck.ShareConsumer({"bootstrap.servers": server.bootstrap, "group.id": "g"})
            member.subscribe(["work"])
            try:
                deadline = time.monotonic() + 20
                while _delete(raw, "g", ["nowhere"])[0] != NON_EMPTY_GROUP:  # (changes nothing)
                    assert time.monotonic() < deadline
                    member.poll(0.3)
                assert _alter(raw, "g", {("work", 0): 3})[0] == NON_EMPTY_GROUP
                assert _delete(raw, "g", ["work"])[0] == NON_EMPTY_GROUP
            finally:
                member.close()
            assert _describe(raw, "g")[1][("work", 0)] == (10, 0)

            # empty: partition 0 goes back to offset 3
            assert _alter(raw, "g", {("work", 0): 3}) == (0, {("work", 0): 0})
            assert _describe(raw, "g", [("work", [0])])[1] == {("work", 0): (3, 0)}
            assert _consume(server, "g", 7) == [b"p0-%02d" % i for i in range(3, 10)]
            assert _describe(raw, "g", [("work", [0])])[1] == {("work", 0): (10, 0)}

            # deleted: the next fetch starts where share.auto.offset.reset says (earliest here)
            assert _delete(raw, "g", ["work", "nowhere"]) == (
                0, {("work", 0): 0, ("work", 1): 0, ("nowhere", 0): UNKNOWN_TOPIC_OR_PARTITION})
            assert _describe(raw, "g", [("work", [0, 1])])[1] == {("work", 0): (-1, 0), ("work", 1): (-1, 0)}
            assert len(_consume(server, "g", 20)) == 20
            assert _alter(raw, "g", {("work", 1): 4}) == (0, {("work", 1): 0})
        finally:
            raw.close()
        server.kill9()  # the altered offset is durable when answered
        server.start()
        raw = RawKafka(server.kafka_port)
        try:
            assert _describe(raw, "g", [("work", [1])])[1] == {("work", 1): (4, 0)}
        finally:
            raw.close()
    finally:
        assert server.stop() == 0, server.log()
