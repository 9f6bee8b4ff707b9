"""confluent-kafka, kafka-python and kcat against a real ``vqs serve --kafka-port``."""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid

import httpx
import pytest
from kafka_clients import one_batch_producer

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec  # noqa: E402


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create(server, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    futs = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    futs[name].result(10)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_idempotent_acks_all_each_codec_then_consume(kafka_server, codec):
    topic = _name(f"codec-{codec}")
    _create(kafka_server, topic, 2)
    p = ck.Producer({"bootstrap.servers": kafka_server.bootstrap, "acks": "all", "enable.idempotence": True,
                     "compression.type": codec, "linger.ms": 5})
    sent = {}
    for i in range(200):
        key = f"k{i % 7}".encode()
        p.produce(topic, value=f"v{i}".encode() * 3, key=key, headers=[("h", f"{i}".encode())],
                  timestamp=1_700_000_000_000 + i)
        sent[f"v{i}".encode() * 3] = (key, i)
    assert p.flush(15) == 0
    c = ck.Consumer({"bootstrap.servers": kafka_server.bootstrap, "group.id": _name("g"),
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got = {}
    deadline = time.monotonic() + 20
    while len(got) < 200 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        got[m.value()] = (m.key(), m.headers(), m.timestamp()[1], m.partition(), m.offset())
    c.close()
    assert len(got) == 200
    for value, (key, i) in sent.items():
        gkey, headers, ts, _, _ = got[value]
        assert gkey == key and headers == [("h", f"{i}".encode())] and ts == 1_700_000_000_000 + i


def test_kafka_records_visible_over_rest_and_back(kafka_server):
    topic = _name("rest")
    _create(kafka_server, topic, 1)
    p = ck.Producer({"bootstrap.servers": kafka_server.bootstrap})
    p.produce(topic, value=b"from-kafka", key=b"k1", headers=[("a", b"1")], timestamp=1_600_000_000_123)
    assert p.flush(10) == 0
    import vqs

    with vqs.Client(kafka_server.url) as client:
        rec = client.read(topic, 0, 0)[0]
        assert (rec.key, rec.value, rec.headers, rec.timestamp_ms) == (
            b"k1", b"from-kafka", (("a", b"1"),), 1_600_000_000_123)
        client.producer().send(topic, b"from-rest", key=b"k2", headers={"b": b"2"})
    c = ck.Consumer({"bootstrap.servers": kafka_server.bootstrap, "group.id": _name("g"),
                     "auto.offset.reset": "earliest"})
    c.assign([ck.TopicPartition(topic, 0, 0)])
    seen = []
    deadline = time.monotonic() + 10
    while len(seen) < 2 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen.append((m.key(), m.value(), m.headers()))
    c.close()
    assert seen == [(b"k1", b"from-kafka", [("a", b"1")]), (b"k2", b"from-rest", [("b", b"2")])]


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_null_values_and_keys_are_not_empty_ones(kafka_server, codec):
    """librdkafka's 0070_null_empty: a null value (a tombstone) and a null key come back null,
    an empty one empty, over Kafka and over REST."""
    topic = _name(f"null-{codec}")
    _create(kafka_server, topic, 1)
    p = ck.Producer({"bootstrap.servers": kafka_server.bootstrap, "compression.type": codec, "linger.ms": 5})
    sent = [(b"k", None), (None, b""), (b"", b"v"), (None, None), (b"k2", b"")]
    for key, value in sent:
        p.produce(topic, value=value, key=key)
    assert p.flush(10) == 0
    c = ck.Consumer({"bootstrap.servers": kafka_server.bootstrap, "group.id": _name("g"),
                     "auto.offset.reset": "earliest"})
    c.assign([ck.TopicPartition(topic, 0, 0)])
    seen = []
    deadline = time.monotonic() + 10
    while len(seen) < len(sent) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen.append((m.key(), m.value()))
    c.close()
    assert seen == sent
    import vqs

    with vqs.Client(kafka_server.url) as client:
        assert [(r.key, r.value) for r in client.read(topic, 0, 0)] == sent


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_null_header_values_are_not_empty_ones(kafka_server, codec):
    """librdkafka's 0073_headers: a header whose value is null (length -1) comes back null, an
    empty one empty, over Kafka (confluent-kafka and kafka-python), the client and REST."""
    kafka = pytest.importorskip("kafka")
    import vqs

    topic = _name(f"nullh-{codec}")
    _create(kafka_server, topic, 1)
    p = ck.Producer({"bootstrap.servers": kafka_server.bootstrap, "compression.type": codec, "linger.ms": 5})
    sent = [[("n", None), ("e", b""), ("v", b"x")], [("only", None)]]
    for hs in sent:
        p.produce(topic, value=b"v", headers=hs)
    assert p.flush(10) == 0
    with vqs.Client(kafka_server.url) as client:
        assert [list(r.headers) for r in client.read(topic, 0, 0)] == sent
        client.producer().send(topic, b"from-client", headers=[("c", None), ("d", b"")])
    sent.append([("c", None), ("d", b"")])
    c = ck.Consumer({"bootstrap.servers": kafka_server.bootstrap, "group.id": _name("g"),
                     "auto.offset.reset": "earliest"})
    c.assign([ck.TopicPartition(topic, 0, 0)])
    seen = []
    deadline = time.monotonic() + 10
    while len(seen) < len(sent) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen.append(m.headers())
    c.close()
    assert seen == sent
    kc = kafka.KafkaConsumer(bootstrap_servers=kafka_server.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000)
    kc.assign([kafka.TopicPartition(topic, 0)])
    got = [list(m.headers) for _, m in zip(range(len(sent)), kc)]
    kc.close()
    assert got == sent
    r = httpx.get(f"{kafka_server.url}/topics/{topic}/messages", params={"offset": 0}).json()
    assert [m["headers"] for m in r["messages"]] == [[[n, None if v is None else v.decode()] for n, v in hs]
                                                     for hs in sent]


def test_commit_seek_offsets_for_times_and_group_offsets_shared(kafka_server):
    topic = _name("seek")
    _create(kafka_server, topic, 1)
    p = ck.Producer({"bootstrap.servers": kafka_server.bootstrap})
    for i in range(10):
        p.produce(topic, value=b"%d" % i, timestamp=1_000_000 + i * 1000)
    assert p.flush(10) == 0
    group = _name("grp")
    c = ck.Consumer({"bootstrap.servers": kafka_server.bootstrap, "group.id": group,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    found = c.offsets_for_times([ck.TopicPartition(topic, 0, 1_004_500)], timeout=10)
    assert found[0].offset == 5
    lo, hi = c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=10)
    assert (lo, hi) == (0, 10)
    c.assign([ck.TopicPartition(topic, 0, 7)])
    m = None
    deadline = time.monotonic() + 10
    while m is None and time.monotonic() < deadline:
        m = c.poll(0.5)
    assert m is not None and m.value() == b"7"
    c.commit(offsets=[ck.TopicPartition(topic, 0, 8)], asynchronous=False)
    assert c.committed([ck.TopicPartition(topic, 0)], timeout=10)[0].offset == 8
    c.close()
    import vqs

    with vqs.Client(kafka_server.url) as client:  # the same offsets `vqs group` and REST show
        assert client.group_offsets(group) == {(topic, 0): 8}


def test_list_offsets_for_every_spec(kafka_server):
    """ListOffsets (AdminClient.list_offsets, v7+): earliest, latest, the largest timestamp (the
    first record holding it, not the last of its batch: KAFKA-16310) and by time, over records
    stamped out of order in one batch."""
    topic = _name("lo")
    _create(kafka_server, topic, 1)
    p = one_batch_producer(kafka_server.bootstrap, topic)
    base = 10_000_000
    for ts in (base + 100, base + 400, base + 250, base + 400):
        p.produce(topic, value=b"m", timestamp=ts)
    assert p.flush(10) == 0
    admin = AdminClient({"bootstrap.servers": kafka_server.bootstrap})
    tp = ck.TopicPartition(topic, 0)
    got = {}
    for name, spec in (("earliest", OffsetSpec.earliest()), ("latest", OffsetSpec.latest()),
                       ("max", OffsetSpec.max_timestamp()), ("t50", OffsetSpec.for_timestamp(base + 50)),
                       ("t300", OffsetSpec.for_timestamp(base + 300)),
                       ("t150", OffsetSpec.for_timestamp(base + 150)),
                       ("t500", OffsetSpec.for_timestamp(base + 500))):
        r = admin.list_offsets({tp: spec})[tp].result(10)
        got[name] = (r.offset, r.timestamp)
    assert got == {"earliest": (0, -1), "latest": (4, -1), "max": (1, base + 400), "t50": (0, base + 100),
                   "t300": (1, base + 400), "t150": (1, base + 400), "t500": (-1, -1)}
    empty = _name("lo-empty")
    _create(kafka_server, empty, 1)
    etp = ck.TopicPartition(empty, 0)
    assert admin.list_offsets({etp: OffsetSpec.max_timestamp()})[etp].result(10).offset == -1


def test_admin_create_and_delete_topic(kafka_server):
    name = _name("adm")
    admin = AdminClient({"bootstrap.servers": kafka_server.bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=1)])[name].result(10)
    md = admin.list_topics(timeout=10)
    assert len(md.topics[name].partitions) == 3
    again = admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=1)])[name]
    with pytest.raises(ck.KafkaException) as e:
        again.result(10)
    assert e.value.args[0].code() == ck.KafkaError.TOPIC_ALREADY_EXISTS
    admin.delete_topics([name])[name].result(10)
    import vqs

    with vqs.Client(kafka_server.url) as client:
        assert name not in client.topics()


def test_kafka_python_produce_and_group_consume(kafka_server):
    kp = pytest.importorskip("kafka")
    topic = _name("kpy")
    _create(kafka_server, topic, 2)
    prod = kp.KafkaProducer(bootstrap_servers=kafka_server.bootstrap, acks="all")
    for i in range(20):
        prod.send(topic, key=b"k%d" % i, value=b"v%d" % i, headers=[("x", b"y")])
    prod.flush(10)
    prod.close()
    cons = kp.KafkaConsumer(topic, bootstrap_servers=kafka_server.bootstrap, group_id=_name("g"),
                            auto_offset_reset="earliest", consumer_timeout_ms=8000)
    got = set()
    for m in cons:
        got.add(m.value)
        assert m.headers == [("x", b"y")]
        if len(got) == 20:
            break
    cons.commit()
    cons.close()
    assert got == {b"v%d" % i for i in range(20)}


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (apt-get install kcat)")
def test_kcat_metadata_and_consume(kafka_server):
    topic = _name("kcat")
    _create(kafka_server, topic, 1)
    p = ck.Producer({"bootstrap.servers": kafka_server.bootstrap})
    for i in range(3):
        p.produce(topic, value=b"m%d" % i, key=b"k")
    assert p.flush(10) == 0
    out = subprocess.run(["kcat", "-b", kafka_server.bootstrap, "-L", "-t", topic], capture_output=True,
                         text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    assert f'topic "{topic}" with 1 partitions' in out.stdout
    out = subprocess.run(["kcat", "-b", kafka_server.bootstrap, "-C", "-t", topic, "-e", "-f", "%k=%s\\n"],
                         capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["k=m0", "k=m1", "k=m2"]


def test_describe_configs_of_a_topic(kafka_server):
    from confluent_kafka.admin import ConfigResource

    topic = _name("cfg")
    admin = AdminClient({"bootstrap.servers": kafka_server.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1,
                                  config={"retention.ms": "60000"})])[topic].result(10)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([res])[res].result(10)
    assert configs["retention.ms"].value == "60000" and configs["retention.bytes"].value == "-1"
    assert configs["cleanup.policy"].value == "delete"


def test_vqs_internal_topics_are_kafka_internal_topics(kafka_server):
    kp = pytest.importorskip("kafka")
    plain, internal = _name("plain"), "__spark_state." + uuid.uuid4().hex[:8]
    _create(kafka_server, plain, 1)
    _create(kafka_server, internal, 1)
    cons = kp.KafkaConsumer(bootstrap_servers=kafka_server.bootstrap)
    try:
        topics = cons.topics()  # kafka-python leaves internal topics out, as exclude.internal.topics
    finally:
        cons.close()
    assert plain in topics and internal not in topics
    # clients that list every topic the metadata names (confluent-kafka, kcat -L) do not see them
    # either; asked for by name, an internal topic is described as any other
    admin = AdminClient({"bootstrap.servers": kafka_server.bootstrap})
    listed = admin.list_topics(timeout=10).topics
    assert plain in listed and internal not in listed
    named = admin.list_topics(topic=internal, timeout=10).topics
    assert internal in named and not named[internal].error and len(named[internal].partitions) == 1
