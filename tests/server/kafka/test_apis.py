"""The cluster-level APIs against a real server, raw and through confluent-kafka's AdminClient:
the versions ApiVersions advertises (Produce 0-2 advertised for old clients' feature gating and
refused on use), arrays bounded before anything is allocated, and topic configs as Kafka means
them (CreateTopics' validation, DescribeConfigs' values in force)."""

from __future__ import annotations

import struct
import uuid

import pytest
from raw_client import RawKafka

from vqs.server.kafka.codec import Writer

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic  # noqa: E402


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _legacy_produce(version: int, topic: str, acks: int = 1) -> bytes:
    """A Produce v0-2 body (no transactional id; one partition holding a v0 message set)."""
    message_set = struct.pack(">qi", 0, 14) + b"\0" * 14
    return bytes(Writer().int16(acks).int32(5_000).array(1).string(topic).array(1).int32(0)
                 .bytes_(message_set).b)


def test_produce_0_to_2_is_advertised_and_refused_on_use(kafka_server):
    k = RawKafka(kafka_server.kafka_port)
    r = k.request(18, 0, b"")
    assert r.int16() == 0
    apis = {r.int16(): (r.int16(), r.int16()) for _ in range(r.int32())}
    assert apis[0] == (0, 8)  # old librdkafka reads a minimum above 0 as "no gzip, snappy, lz4"
    topic = _name("legacy")
    for v in (0, 1, 2):
        r = k.request(0, v, _legacy_produce(v, topic))
        assert r.int32() == 1 and r.string() == topic and r.int32() == 1
        assert r.int32() == 0 and r.int16() == 35  # UNSUPPORTED_VERSION for the partition
        assert r.int64() == -1
        if v >= 2:
            assert r.int64() == -1  # log append time
        if v >= 1:
            assert r.int32() == 0  # throttle time
        assert r.remaining == 0
    k.corr += 1  # acks=0: no answer, and the connection goes on (the next answer is the next request's)
    k.send_frame(bytes(Writer().int16(0).int16(0).int32(k.corr).string("raw-test").b) + _legacy_produce(0, topic, 0))
    assert k.request(18, 0, b"").int16() == 0
    k.close()
    admin = AdminClient({"bootstrap.servers": kafka_server.bootstrap})
    assert topic not in admin.list_topics(timeout=10).topics  # nothing created or written


@pytest.mark.parametrize("count, frame_bytes", [
    (1_000_001, 2 * 1_000_001),  # over Kafka's 1,000,000 elements, though the bytes are there
    (50_000, 10),                 # more elements than the bytes left could hold
])
def test_an_oversized_array_closes_the_connection_before_allocating(kafka_server, count, frame_bytes):
    k = RawKafka(kafka_server.kafka_port)
    k.corr += 1
    head = Writer().int16(3).int16(1).int32(k.corr).string("raw-test").int32(count)  # Metadata topics
    k.send_frame(bytes(head.b) + b"\0" * frame_bytes)  # empty strings: 2 bytes each
    assert k.recv_frame() is None
    k = RawKafka(kafka_server.kafka_port)  # DescribeConfigs' key list (read through the same rule)
    k.corr += 1
    head = (Writer().int16(32).int16(1).int32(k.corr).string("raw-test").array(1).int8(2).string("t")
            .int32(count))
    k.send_frame(bytes(head.b) + b"\0" * frame_bytes)
    assert k.recv_frame() is None
    k = RawKafka(kafka_server.kafka_port)
    assert k.request(18, 0, b"").int16() == 0  # the server carries on
    k.close()
    assert "at most 1000000 items" in kafka_server.log()


def test_compacted_topics_are_taken_and_described(kafka_server):
    admin = AdminClient({"bootstrap.servers": kafka_server.bootstrap})
    for policy, stored in (("compact", "compact"), ("delete,compact", "compact,delete")):
        topic = _name("compacted")
        admin.create_topics([NewTopic(topic, 1, 1, config={
            "cleanup.policy": policy, "min.compaction.lag.ms": "5", "max.compaction.lag.ms": "9223372036854775807",
            "min.cleanable.dirty.ratio": "0.25", "segment.ms": "600000"})])[topic].result(10)
        cfg = _describe(admin, topic)
        assert cfg["cleanup.policy"].value == stored
        assert cfg["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        assert cfg["min.compaction.lag.ms"].value == "5" and cfg["min.cleanable.dirty.ratio"].value == "0.25"
        assert cfg["max.compaction.lag.ms"].value == "9223372036854775807"  # Kafka's "no bound"
        assert cfg["delete.retention.ms"].value == "86400000"
        assert cfg["delete.retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
        assert cfg["segment.ms"].value == "600000"


def _describe(admin, topic):
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return admin.describe_configs([res])[res].result(10)


def test_unlimited_retention_and_max_message_bytes_are_taken_and_described(kafka_server):
    admin = AdminClient({"bootstrap.servers": kafka_server.bootstrap})
    topic = _name("changelog")  # what Quix Streams asks for its changelog topics (less compaction)
    admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "-1", "retention.bytes": "-1",
                                                       "max.message.bytes": "2097152",
                                                       "cleanup.policy": "delete"})])[topic].result(10)
    cfg = _describe(admin, topic)
    assert cfg["retention.ms"].value == "-1" and cfg["retention.bytes"].value == "-1"
    assert cfg["max.message.bytes"].value == "2097152"
    assert cfg["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert cfg["max.message.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert cfg["cleanup.policy"].value == "delete"
    plain = _name("plain")
    admin.create_topics([NewTopic(plain, 1, 1, config={"retention.ms": "0"})])[plain].result(10)
    cfg = _describe(admin, plain)
    assert cfg["retention.ms"].value == "0"  # zero is a limit, not "unset"
    assert cfg["max.message.bytes"].value == str(1 << 20)  # the server's max_message_bytes
    assert cfg["max.message.bytes"].source == ConfigSource.DEFAULT_CONFIG.value


@pytest.mark.parametrize("config, words", [
    ({"no.such.config": "1"}, "unknown topic config"),
    ({"cleanup.policy": "shred"}, "must be delete, compact or compact,delete"),
    ({"cleanup.policy": "compact,shred"}, "cleanup.policy"),
    ({"min.cleanable.dirty.ratio": "1.5"}, "min.cleanable.dirty.ratio"),
    ({"delete.retention.ms": "-1"}, "delete.retention.ms"),
    ({"max.compaction.lag.ms": "0"}, "max.compaction.lag.ms"),
    ({"retention.ms": "-2"}, "retention.ms"),
    ({"retention.bytes": "ten"}, "retention.bytes"),
    ({"max.message.bytes": "0"}, "max.message.bytes"),
    ({"compression.type": "brotli"}, "compression.type"),
])
@pytest.mark.parametrize("validate_only", [False, True])
def test_an_unknown_or_invalid_config_is_invalid_config(kafka_server, config, words, validate_only):
    admin = AdminClient({"bootstrap.servers": kafka_server.bootstrap})
    topic = _name("badcfg")
    fut = admin.create_topics([NewTopic(topic, 1, 1, config=config)], validate_only=validate_only)[topic]
    with pytest.raises(ck.KafkaException) as e:
        fut.result(10)
    err = e.value.args[0]
    assert err.code() == KafkaError.INVALID_CONFIG, err
    assert words in err.str()
    assert topic not in admin.list_topics(timeout=10).topics


def _list_offsets(k: RawKafka, version: int, topic: str, timestamps: list[int]) -> list[tuple[int, int, int, int]]:
    """ListOffsets (flexible from v6) of partition 0 at each of ``timestamps``: [(error, timestamp,
    offset, leader epoch)]."""
    flex = version >= 6
    w = Writer().int32(-1).int8(0)
    if flex:
        w.compact_array(1).compact_string(topic).compact_array(len(timestamps))
    else:
        w.array(1).string(topic).array(len(timestamps))
    for ts in timestamps:
        w.int32(0).int32(-1).int64(ts)
        if flex:
            w.tags()
    if flex:
        w.tags()
        if version >= 10:
            w.int32(30_000)
        w.tags()
    r = k.flex_request(2, version, bytes(w.b)) if flex else k.request(2, version, bytes(w.b))
    r.int32()  # throttle
    assert (r.compact_array_len() if flex else r.int32()) == 1
    assert (r.compact_string() if flex else r.string()) == topic
    out = []
    for _ in range(r.compact_array_len() if flex else r.int32()):
        assert r.int32() == 0
        out.append((r.int16(), r.int64(), r.int64(), r.int32()))
        if flex:
            r.tagged_fields()
    if flex:
        r.tagged_fields()
        r.tagged_fields()
    assert r.remaining == 0
    return out


def test_list_offsets_special_timestamps_by_version(kafka_server):
    """ListOffsets v1-10: each special timestamp from the version that brought it (-3 v7, -4 v8,
    -5 v9), UNSUPPORTED_VERSION below it and for one Kafka does not define."""
    topic = _name("lo-raw")
    admin = AdminClient({"bootstrap.servers": kafka_server.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    p = Producer({"bootstrap.servers": kafka_server.bootstrap, "linger.ms": 20})
    for ts in (1_000, 3_000, 2_000):
        p.produce(topic, value=b"v", timestamp=ts)
    assert p.flush(10) == 0
    k = RawKafka(kafka_server.kafka_port)
    assert _list_offsets(k, 10, topic, [-1, -2, -3, -4, -5, 2_500, -7]) == [
        (0, -1, 3, 0), (0, -1, 0, 0), (0, 3_000, 1, 0), (0, -1, 0, 0), (0, -1, -1, -1), (0, 3_000, 1, 0),
        (35, -1, -1, -1)]
    assert [e for e, *_ in _list_offsets(k, 6, topic, [-1, -2, -3, -4, -5])] == [0, 0, 35, 35, 35]
    assert [e for e, *_ in _list_offsets(k, 8, topic, [-3, -4, -5])] == [0, 0, 35]
    assert _list_offsets(k, 5, topic, [-1, 1_500]) == [(0, -1, 3, 0), (0, 3_000, 1, 0)]
    k.close()
