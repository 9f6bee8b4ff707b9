"""Topic configs altered over Kafka (AlterConfigs, IncrementalAlterConfigs) and described
(DescribeConfigs, topic and broker) by confluent-kafka's and kafka-python's admin clients against
a real server: persisted, in force on the other fronts, validated as Kafka does."""

from __future__ import annotations

import uuid

import pytest
from kafka_server_proc import KafkaServer
from raw_client import RawKafka

import vqs
from vqs.server.kafka.codec import Writer

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _topic(admin, config: dict | None = None) -> str:
    name = _name("cfg")
    admin.create_topics([NewTopic(name, 1, 1, config=config or {})])[name].result(10)
    return name


def _describe(admin, name: str, rtype=ConfigResource.Type.TOPIC) -> dict:
    res = ConfigResource(rtype, name)
    return admin.describe_configs([res])[res].result(10)


def _incremental(admin, topic: str, *ops, validate_only: bool = False):
    entries = [ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops]
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    return admin.incremental_alter_configs([res], validate_only=validate_only)[res]


def _error(fut) -> ck.KafkaError:
    with pytest.raises(ck.KafkaException) as e:
        fut.result(10)
    return e.value.args[0]


@pytest.fixture
def admin(kafka_server):
    a = AdminClient({"bootstrap.servers": kafka_server.bootstrap})
    a.bootstrap = kafka_server.bootstrap
    return a


def admin_bootstrap(admin) -> str:
    return admin.bootstrap


def test_incremental_alter_sets_deletes_and_validates(admin):
    topic = _topic(admin, {"retention.ms": "60000"})
    _incremental(admin, topic, ("retention.bytes", "1048576", AlterConfigOpType.SET),
                 ("max.message.bytes", "2048", AlterConfigOpType.SET)).result(10)
    cfg = _describe(admin, topic)
    assert cfg["retention.ms"].value == "60000"  # not named: kept
    assert cfg["retention.bytes"].value == "1048576"
    assert cfg["retention.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert list(cfg["retention.bytes"].synonyms) == ["retention.bytes", "log.retention.bytes"]  # (v1+)
    assert cfg["max.message.bytes"].value == "2048" and not cfg["max.message.bytes"].is_read_only
    _incremental(admin, topic, ("retention.ms", None, AlterConfigOpType.DELETE)).result(10)
    cfg = _describe(admin, topic)
    assert cfg["retention.ms"].value == "-1" and cfg["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    _incremental(admin, topic, ("segment.bytes", "4096", AlterConfigOpType.SET), validate_only=True).result(10)
    assert _describe(admin, topic)["segment.bytes"].value == str(128 << 20)  # validate_only: unchanged


def test_cleanup_policy_is_a_list_appended_to_and_subtracted_from(admin):
    topic = _topic(admin)
    _incremental(admin, topic, ("cleanup.policy", "compact", AlterConfigOpType.APPEND)).result(10)
    assert _describe(admin, topic)["cleanup.policy"].value == "compact,delete"
    _incremental(admin, topic, ("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT),
                 ("min.cleanable.dirty.ratio", "0.1", AlterConfigOpType.SET)).result(10)
    cfg = _describe(admin, topic)
    assert cfg["cleanup.policy"].value == "compact" and cfg["min.cleanable.dirty.ratio"].value == "0.1"
    assert cfg["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    p = ck.Producer({"bootstrap.servers": admin_bootstrap(admin)})
    results = []
    p.produce(topic, value=b"keyless", on_delivery=lambda err, msg: results.append(err))
    assert p.flush(10) == 0
    p.produce(topic, key=b"k", value=b"keyed", on_delivery=lambda err, msg: results.append(err))
    assert p.flush(10) == 0
    assert results[0] is not None and results[1] is None  # compacted now: a record needs a key


@pytest.mark.parametrize("ops, code, words", [
    ([("no.such.config", "1", AlterConfigOpType.SET)], KafkaError.INVALID_CONFIG, "unknown topic config"),
    ([("retention.ms", "-2", AlterConfigOpType.SET)], KafkaError.INVALID_CONFIG, "retention.ms"),
    ([("segment.bytes", "100", AlterConfigOpType.SET)], KafkaError.INVALID_CONFIG, "segment.bytes"),
    ([("compression.type", "brotli", AlterConfigOpType.SET)], KafkaError.INVALID_CONFIG, "compression.type"),
    ([("cleanup.policy", "shred", AlterConfigOpType.APPEND)], KafkaError.INVALID_CONFIG, "cleanup.policy"),
    ([("min.cleanable.dirty.ratio", "2", AlterConfigOpType.SET)], KafkaError.INVALID_CONFIG, "dirty.ratio"),
    ([("retention.ms", "5", AlterConfigOpType.APPEND)], KafkaError.INVALID_CONFIG, "not a list"),
    ([("flush.messages", "1000", AlterConfigOpType.SET)], KafkaError.INVALID_CONFIG, "flush.messages"),
    ([("compression.type", "z" * 100_000, AlterConfigOpType.SET)], KafkaError.INVALID_CONFIG,
     "a value of 100000 characters"),  # (refused by its length: not echoed back)
])
@pytest.mark.parametrize("validate_only", [False, True])
def test_an_invalid_alteration_changes_nothing(admin, ops, code, words, validate_only):
    topic = _topic(admin, {"retention.ms": "60000"})
    # a valid change in the same resource is not applied either
    err = _error(_incremental(admin, topic, ("retention.bytes", "1000", AlterConfigOpType.SET), *ops,
                              validate_only=validate_only))
    assert err.code() == code, err
    assert words in err.str()
    cfg = _describe(admin, topic)
    assert cfg["retention.ms"].value == "60000" and cfg["retention.bytes"].value == "-1"


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_alter_configs_replaces_the_topics_own_configs(admin):
    topic = _topic(admin, {"retention.ms": "60000", "max.message.bytes": "4096"})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"retention.bytes": "65536"})
    admin.alter_configs([res])[res].result(10)
    cfg = _describe(admin, topic)
    assert cfg["retention.bytes"].value == "65536"
    assert cfg["retention.ms"].value == "-1"  # not named by AlterConfigs: back to the default
    assert cfg["max.message.bytes"].value == str(1 << 20)
    bad = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"min.insync.replicas": "2"})
    assert _error(admin.alter_configs([bad])[bad]).code() == KafkaError.INVALID_CONFIG
    missing = ConfigResource(ConfigResource.Type.TOPIC, _name("nope"), set_config={"retention.ms": "1"})
    assert _error(admin.alter_configs([missing])[missing]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_broker_configs_are_described_read_only_and_not_altered(admin):
    cfg = _describe(admin, "0", ConfigResource.Type.BROKER)
    assert cfg["broker.id"].value == "0" and cfg["broker.id"].is_read_only
    assert cfg["message.max.bytes"].value == str(1 << 20)
    assert cfg["log.retention.ms"].value == "-1"
    assert cfg["log.flush.interval.messages"].value == "1"  # the server runs --flush always
    res = ConfigResource(ConfigResource.Type.BROKER, "0", incremental_configs=[
        ConfigEntry("log.retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
    err = _error(admin.incremental_alter_configs([res])[res])
    assert err.code() == KafkaError.INVALID_REQUEST and "cannot be updated dynamically" in err.str()


def test_max_message_bytes_altered_over_kafka_is_the_limit_on_every_front(admin, kafka_server):
    topic = _topic(admin)
    p = ck.Producer({"bootstrap.servers": kafka_server.bootstrap, "message.max.bytes": 1 << 20})
    results = []
    p.produce(topic, value=b"x" * 3000, on_delivery=lambda err, msg: results.append(err))
    assert p.flush(10) == 0 and results == [None]
    _incremental(admin, topic, ("max.message.bytes", "2048", AlterConfigOpType.SET)).result(10)
    p.produce(topic, value=b"x" * 3000, on_delivery=lambda err, msg: results.append(err))
    assert p.flush(10) == 0 and results[1].code() == KafkaError.MSG_SIZE_TOO_LARGE
    with vqs.Client(kafka_server.url) as client:
        with pytest.raises(vqs.MessageTooLarge):
            client.producer().send(topic, b"x" * 3000)
        assert client.topic(topic).config["max_message_bytes"] == 2048


@pytest.mark.parametrize("incremental", [True, False])
def test_kafka_python_admin_alters_resets_and_describes(kafka_server, admin, incremental):
    pytest.importorskip("kafka")
    from kafka.admin import ConfigResource as KResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    topic = _topic(admin, {"max.message.bytes": "4096"})
    ka = KafkaAdminClient(bootstrap_servers=kafka_server.bootstrap)  # DescribeConfigs v4 and the
    try:                                                              # flexible alters
        res = ka.alter_configs([KResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "120000"})],
                               incremental=incremental)
        assert res == {"topic": {topic: "OK"}}
        got = ka.describe_configs([KResource(ConfigResourceType.TOPIC, topic)], include_synonyms=True)
        mine = got["topic"][topic]  # the modified ones: both kept (the legacy path re-sends the other)
        assert mine["retention.ms"]["value"] == "120000" and mine["max.message.bytes"]["value"] == "4096"
        assert [s["name"] for s in mine["retention.ms"]["synonyms"]] == ["retention.ms", "log.retention.ms"]
        assert mine["retention.ms"]["config_type"] == "LONG"
        ka.reset_configs([KResource(ConfigResourceType.TOPIC, topic, configs=["retention.ms"])],
                         incremental=incremental)
        assert set(ka.describe_configs([KResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]) == \
            {"max.message.bytes"}
        broker = ka.describe_configs([KResource(ConfigResourceType.BROKER, "0")], config_filter="all")
        assert broker["broker"]["0"]["num.partitions"]["value"] == "1"
        assert broker["broker"]["0"]["num.partitions"]["read_only"]
    finally:
        ka.close()
    assert _describe(admin, topic)["retention.ms"].value == "-1"


def test_an_altered_config_survives_a_restart_and_keeps_retention_in_force(tmp_path):
    server = KafkaServer(tmp_path / "data").start()
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        topic = _topic(admin)
        _incremental(admin, topic, ("retention.ms", "3600000", AlterConfigOpType.SET),
                     ("compression.type", "zstd", AlterConfigOpType.SET)).result(10)
        assert server.stop() == 0, server.log()
        server.start()
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        cfg = _describe(admin, topic)
        assert cfg["retention.ms"].value == "3600000" and cfg["compression.type"].value == "zstd"
        with vqs.Client(server.url) as client:
            assert client.topic(topic).config["retention_ms"] == 3600000
    finally:
        assert server.stop() == 0, server.log()


@pytest.mark.parametrize("v", [0, 1, 2, 3])
def test_describe_configs_raw_in_every_non_flexible_version(kafka_server, admin, v):
    topic = _topic(admin, {"retention.ms": "60000"})
    k = RawKafka(kafka_server.kafka_port)
    body = Writer().array(1).int8(2).string(topic).array(2).string("retention.ms").string("segment.bytes")
    if v >= 1:
        body.boolean(True)  # synonyms
    if v >= 3:
        body.boolean(True)  # documentation
    r = k.request(32, v, bytes(body.b))
    assert r.int32() == 0 and r.int32() == 1
    assert r.int16() == 0 and r.nullable_string() is None and r.int8() == 2 and r.string() == topic
    got = {}
    for _ in range(r.int32()):
        name, value, read_only = r.string(), r.nullable_string(), r.boolean()
        source = (5 if r.boolean() else 1) if v == 0 else r.int8()
        assert not r.boolean()  # sensitive
        synonyms = [(r.string(), r.nullable_string(), r.int8()) for _ in range(r.int32())] if v >= 1 else None
        ctype, doc = (r.int8(), r.nullable_string()) if v >= 3 else (None, None)
        got[name] = (value, read_only, source, synonyms, ctype, bool(doc))
    assert r.remaining == 0
    k.close()
    assert got["retention.ms"][:3] == ("60000", False, 1) and got["segment.bytes"][:3] == (str(128 << 20), False, 5)
    if v >= 1:
        assert got["retention.ms"][3] == [("retention.ms", "60000", 1), ("log.retention.ms", "-1", 5)]
    if v >= 3:
        assert got["retention.ms"][4:] == (5, True) and got["segment.bytes"][4] == 3  # LONG, INT; documented


def test_a_gzip_topic_keeps_its_batches_gzip_compressed(kafka_server, admin):
    """compression.type=gzip is a storage codec: whatever the producer sent (snappy here), the
    batches are kept gzip-compressed and read back whole by Kafka and by the stored-batch API."""
    topic = _topic(admin, {"compression.type": "gzip"})
    assert _describe(admin, topic)["compression.type"].value == "gzip"
    values = [b"gzip me %04d " % i * 20 for i in range(300)]
    p = ck.Producer({"bootstrap.servers": admin.bootstrap, "compression.type": "snappy", "linger.ms": 20})
    for v in values:
        p.produce(topic, v, key=b"k")
    assert p.flush(10) == 0
    c = ck.Consumer({"bootstrap.servers": admin.bootstrap, "group.id": _name("g"), "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = []
    try:
        while len(got) < len(values):
            m = c.poll(10)
            assert m is not None and m.error() is None
            got.append(m.value())
    finally:
        c.close()
    assert got == values
    with vqs.Client(kafka_server.url) as client:
        batches, nxt, _ = client.read_stored_batches(topic, 0, 0)
    assert nxt == len(values) and {b.codec for b in batches} == {3}  # docs/FORMAT.md: 3 is gzip
    assert sum(b.size_bytes for b in batches) < sum(map(len, values)) // 4
