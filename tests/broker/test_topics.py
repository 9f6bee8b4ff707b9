"""Topics: CRUD, names, persistence, crash leftovers, partitioning, producer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from vqs.broker import Broker, RecordMetadata, murmur2, partition_for_key
from vqs.errors import (
    ConfigError,
    CorruptRecordError,
    InvalidName,
    TopicAlreadyExists,
    TopicDoesNotExist,
    VQSError,
)

PYTHON = sys.executable

BAD_NAMES = ["../etc", ".", "..", "a" * 201, "", "a/b", "a\\b", "t\x00", "tópico", "a b", None, 7]


def test_crud(broker, data_dir):
    assert broker.topics() == []
    t = broker.create_topic("orders", partitions=3, retention_ms=1000, compression="lz4")
    assert (t.name, t.partitions) == ("orders", 3)
    assert t.config["retention_ms"] == 1000 and t.config["compression"] == "lz4"
    assert t.start_offsets() == [0, 0, 0] and t.end_offsets() == [0, 0, 0]
    broker.create_topic("a")
    assert broker.topics() == ["a", "orders"]
    assert broker.topic("orders") is t
    with open(os.path.join(data_dir, "topics", "orders", "topic.json")) as f:
        assert json.load(f) == {
            "name": "orders",
            "id": t.topic_id.hex(),
            "partitions": 3,
            "config": {"compression": "lz4", "retention_ms": 1000},
        }
    assert sorted(os.listdir(os.path.join(data_dir, "topics", "orders"))) == ["0", "1", "2", "topic.json"]
    with pytest.raises(TopicAlreadyExists, match="orders"):
        broker.create_topic("orders")
    broker.delete_topic("orders")
    assert broker.topics() == ["a"]
    assert not os.path.exists(os.path.join(data_dir, "topics", "orders"))
    with pytest.raises(TopicDoesNotExist, match="orders"):
        broker.topic("orders")
    with pytest.raises(TopicDoesNotExist):
        broker.delete_topic("orders")
    with pytest.raises(VQSError):  # the deleted Topic object is closed
        t.end_offsets()
    # The name can be used again, and the new topic starts empty.
    t2 = broker.create_topic("orders", partitions=1)
    assert t2.partitions == 1 and t2.end_offsets() == [0]


def test_a_topic_keeps_its_id_and_one_made_again_under_its_name_has_another(data_dir):
    """Kafka's topic ids: drawn at creation, kept by restarts and by every rewrite of
    topic.json (new partitions, new settings); a topic.json from before ids had them gets the
    UUID-5 of its name, the id such a topic always had, on every open."""
    with Broker(data_dir) as b:
        first = b.create_topic("orders").topic_id
        other = b.create_topic("other").topic_id
        assert len(first) == 16 and first not in (bytes(16), other)
        b.create_partitions("orders", 3)
        b.alter_topic("orders", {"retention_ms": 5000})
    with Broker(data_dir) as b:
        assert b.topic("orders").topic_id == first
        b.delete_topic("orders")
        again = b.create_topic("orders").topic_id
        assert again not in (first, bytes(16))
    path = os.path.join(data_dir, "topics", "other", "topic.json")
    with open(path) as f:
        meta = json.load(f)
    del meta["id"]
    with open(path, "w") as f:
        json.dump(meta, f)
    with Broker(data_dir) as b:
        legacy = b.topic("other").topic_id
    with Broker(data_dir) as b:
        assert b.topic("other").topic_id == legacy == uuid.uuid5(
            uuid.UUID("6f3b1c2e-5d0a-4f4e-9a51-7c2d8e9b0a14"), "other").bytes
    meta["id"] = "not hex"
    with open(path, "w") as f:
        json.dump(meta, f)
    with pytest.raises(CorruptRecordError, match=r"topic\.json"):
        Broker(data_dir).close()


def test_describe(broker):
    broker.create_topic("t", partitions=2)
    broker.producer().send("t", b"x", partition=1)
    d = broker.topic("t").describe()
    assert d["name"] == "t" and d["partitions"] == 2
    assert [p["end_offset"] for p in d["partition_info"]] == [0, 1]
    json.dumps(d)


@pytest.mark.parametrize("name", BAD_NAMES)
def test_invalid_names(broker, data_dir, name):
    with pytest.raises(InvalidName):
        broker.create_topic(name)
    with pytest.raises(InvalidName):
        broker.topic(name)
    with pytest.raises(InvalidName):
        broker.delete_topic(name)
    if name is not None:
        with pytest.raises((InvalidName, TypeError)):
            broker.consumer(group=name)
    assert sorted(os.listdir(data_dir)) == [".lock", "groups", "topics"]
    assert os.listdir(os.path.join(data_dir, "topics")) == []


def test_valid_edge_names(broker):
    for name in ("a" * 200, ".hidden", "a..b", "A-Z_0.9", "-"):
        broker.create_topic(name)
    assert len(broker.topics()) == 5


@pytest.mark.parametrize(
    "kwargs",
    [
        {"partitions": 0},
        {"partitions": -1},
        {"partitions": "3"},
        {"partitions": True},
        {"partitions": 10_001},
        {"retention_ms": -5},
        {"retention_bytes": 1.5},
        {"segment_bytes": 0},
        {"compression": "snappy"},
        {"retention_ms": -2},
        {"max_message_bytes": 0},
        {"max_message_bytes": (1 << 30) + 1},
    ],
)
def test_bad_topic_settings(broker, kwargs):
    with pytest.raises(ConfigError):
        broker.create_topic("t", **kwargs)
    assert broker.topics() == []


def test_topics_persist_and_crash_leftovers_are_removed(data_dir):
    with Broker(data_dir) as b:
        b.create_topic("keep", partitions=2, segment_bytes=4096)
        b.producer().send_batch("keep", [b"a", b"b"], partition=1)
    topics = os.path.join(data_dir, "topics")
    # A create and a delete interrupted by a crash leave these behind.
    os.makedirs(os.path.join(topics, "half~new", "0"))
    os.makedirs(os.path.join(topics, "gone~deleted", "0"))
    with Broker(data_dir) as b:
        assert b.topics() == ["keep"]
        t = b.topic("keep")
        assert t.partitions == 2 and t.config["segment_bytes"] == 4096
        assert t.end_offsets() == [0, 2]
    assert sorted(os.listdir(topics)) == ["keep"]


def test_delete_topic_forgets_group_offsets(broker):
    broker.create_topic("t")
    broker.create_topic("u")
    broker.producer().send("t", b"x")
    broker.producer().send("u", b"x")
    c = broker.consumer(["t", "u"], group="g")
    assert len(c.poll()) == 2
    c.commit()
    c.close()
    broker.delete_topic("t")
    assert broker.group_offsets("g") == {("u", 0): 1}
    broker.create_topic("t")
    c2 = broker.consumer("t", group="g")
    assert c2.committed(("t", 0)) is None
    assert c2.position(("t", 0)) == 0


# -- partitioning ------------------------------------------------------------------------


def _signed(x: int) -> int:
    return x - (1 << 32) if x >= 1 << 31 else x


def test_murmur2_matches_kafka():
    # Vectors from Kafka's UtilsTest.testMurmur2.
    cases = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        b"abc": 479470107,
    }
    for data, expected in cases.items():
        assert _signed(murmur2(data)) == expected


def test_key_partition_stable_across_processes(data_dir, child_env):
    keys = [f"user-{i}".encode() for i in range(200)] + [b"", b"\xff\x00", "ключ".encode()]
    here = [partition_for_key(k, 7) for k in keys]
    assert len(set(here)) == 7  # spread over all partitions
    code = (
        "import sys\n"
        "from vqs.broker import Broker\n"
        f"keys = {keys!r}\n"
        f"with Broker({data_dir!r}) as b:\n"
        "    b.create_topic('t', partitions=7)\n"
        "    p = b.producer()\n"
        "    print([p.send('t', b'v', key=k).partition for k in keys])\n"
        "    p.send_batch('t', [b'w'] * len(keys), keys=keys)\n"
    )
    for seed in ("1", "12345"):  # Python's hash() differs per seed; our choice must not
        env = dict(child_env)
        env["PYTHONHASHSEED"] = seed
        if seed == "12345":
            code = code.replace("b.create_topic('t', partitions=7)", "pass")
        out = subprocess.run([PYTHON, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert eval(out.stdout) == here
    # And the data landed where this process computes it would.
    with Broker(data_dir) as b:
        c = b.consumer("t")
        seen = {}
        while recs := c.poll(max_records=1000):
            for r in recs:
                seen.setdefault(r.key, set()).add(r.partition)
        assert {k: {p} for k, p in zip(keys, here)} == seen


def test_keyless_round_robin(broker):
    broker.create_topic("t", partitions=4)
    p = broker.producer()
    parts = [p.send("t", b"x").partition for _ in range(8)]
    assert sorted(parts) == [0, 0, 1, 1, 2, 2, 3, 3]
    # A keyless batch stays together in one partition; the next batch moves on.
    b1 = {m.partition for m in p.send_batch("t", [b"a"] * 10)}
    b2 = {m.partition for m in p.send_batch("t", [b"b"] * 10)}
    assert len(b1) == 1 and len(b2) == 1 and b1 != b2


def test_send_and_send_batch_metadata(broker):
    broker.create_topic("t", partitions=3)
    p = broker.producer()
    m = p.send("t", "text", key="k", headers={"h": "v"}, timestamp_ms=123)
    assert isinstance(m, RecordMetadata) and m.topic == "t" and m.offset == 0
    assert m.partition == partition_for_key(b"k", 3)
    keys = [b"a", None, b"b", b"a", None, b"c"]
    values = [f"v{i}".encode() for i in range(6)]
    headers = [None, [("x", b"1")], None, {"y": "2"}, None, None]
    metas = p.send_batch("t", values, keys=keys, headers=headers, timestamps_ms=list(range(6)))
    assert next(mm.partition for mm in metas) == metas[3].partition == partition_for_key(b"a", 3)
    assert metas[1].partition == metas[4].partition  # keyless ones of a call stay together
    c = broker.consumer("t")
    got = {}
    while recs := c.poll():
        for r in recs:
            got[(r.partition, r.offset)] = r
    first = got[(m.partition, 0)]
    assert (first.value, first.key, first.headers, first.timestamp_ms) == (b"text", b"k", (("h", b"v"),), 123)
    for i, mm in enumerate(metas):
        r = got[(mm.partition, mm.offset)]
        assert r.value == values[i] and r.key == keys[i] and r.timestamp_ms == i
        want_headers = {1: (("x", b"1"),), 3: (("y", b"2"),)}.get(i, ())
        assert tuple(r.headers) == want_headers
    # An explicit partition wins over the key.
    assert p.send("t", b"x", key=b"a", partition=2).partition == 2
    assert {mm.partition for mm in p.send_batch("t", [b"1", b"2"], keys=[b"a", b"b"], partition=0)} == {0}
    assert p.send_batch("t", []) == []


def test_producer_errors(broker):
    broker.create_topic("t", partitions=2)
    p = broker.producer()
    with pytest.raises(TopicDoesNotExist):
        p.send("nope", b"x")
    with pytest.raises(ConfigError, match="partition"):
        p.send("t", b"x", partition=2)
    with pytest.raises(ConfigError, match="partition"):
        p.send_batch("t", [b"x"], partition=-1)
    with pytest.raises(TypeError):
        p.send("t", 42)
    with pytest.raises(ConfigError, match="keys"):
        p.send_batch("t", [b"x", b"y"], keys=[b"k"])
    assert broker.topic("t").end_offsets() == [0, 0]


def test_empty_values_and_keys_round_trip(tmp_path, child_env):
    """Empty values and keys are legal (Kafka allows both). Run in a child with a
    timeout: a storage writer that cannot finish must fail this test, not hang it."""
    code = (
        "from vqs.broker import Broker\n"
        f"with Broker({str(tmp_path / 'd')!r}, flush='never') as b:\n"
        "    b.create_topic('t')\n"
        "    p = b.producer()\n"
        "    p.send('t', b'')\n"
        "    p.send('t', b'v', key=b'')\n"
        "    p.send_batch('t', [b'a', b''], keys=[b'', b''])\n"
        f"with Broker({str(tmp_path / 'd')!r}) as b:\n"
        "    recs = b.consumer('t').poll()\n"
        "    print([(r.key, r.value) for r in recs])\n"
    )
    try:
        out = subprocess.run([PYTHON, "-c", code], env=child_env, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("writing an empty value or key hung (storage write_all on a zero-length trailing buffer)")
    assert out.returncode == 0, out.stderr
    assert eval(out.stdout) == [(None, b""), (b"", b"v"), (b"", b"a"), (b"", b"")]


def test_minus_one_retention_is_unlimited_over_a_broker_default_and_kept(data_dir):
    with Broker(data_dir, retention_ms=1000, retention_bytes=4096) as b:
        t = b.create_topic("changelog", retention_ms=-1, retention_bytes=-1, max_message_bytes=2048)
        assert t.config["retention_ms"] is None and t.config["retention_bytes"] is None  # no limit
        assert t.log(0).retention_ms is None and t.log(0).retention_bytes is None
        assert t.message_limit(1 << 20) == 2048
        plain = b.create_topic("plain")
        assert plain.config["retention_ms"] == 1000 and plain.message_limit(1 << 20) == 1 << 20
    with Broker(data_dir, retention_ms=1000, retention_bytes=4096) as b:  # reopened: the same
        t = b.topic("changelog")
        assert t.log(0).retention_ms is None and t.log(0).retention_bytes is None
        assert t.overrides == {"retention_ms": -1, "retention_bytes": -1, "max_message_bytes": 2048}
        assert t.message_limit(1 << 20) == 2048


def test_a_topics_max_message_bytes_binds_the_library_producer_too(broker):
    from vqs.errors import MessageTooLarge

    broker.create_topic("small", max_message_bytes=8)
    producer = broker.producer()
    producer.send("small", b"12345678")
    with pytest.raises(MessageTooLarge, match="max_message_bytes"):
        producer.send("small", b"123456789")
    with pytest.raises(MessageTooLarge):
        producer.send_batch("small", [b"ok", b"123456789"])
    assert broker.topic("small").end_offset(0) == 1  # nothing of the refused batch appended
    broker.create_topic("free")
    producer.send("free", b"x" * 10_000)  # no limit of its own: the library sets none
