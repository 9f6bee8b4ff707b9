"""Url mode: the same source and sink through a VQS server process."""

from __future__ import annotations

import datetime as dt
import json

import pytest

pytest.importorskip("httpx")

from spark_helpers import Server

from vqs.client import Client
from vqs.spark import remote as R
from vqs.spark.options import parse_write_options

T0 = 1_700_000_000_000


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("url") / "data").start()
    yield s
    assert s.stop() == 0


@pytest.fixture
def client(server):
    with Client(server.url) as c:
        yield c


def _contents(client, topic):
    out = []
    t = client.topic(topic)
    for p in range(t.partitions):
        off = 0
        end = client.offsets(topic)[p]["end_offset"]
        while off < end:
            recs = client.read(topic, p, off, max_records=10_000)
            out += [(topic, p, r.offset, r.timestamp_ms, r.key, r.value, tuple(r.headers)) for r in recs]
            off = recs[-1].offset + 1
    return out


def test_batch_read_through_server(spark, server, client, reader):  # over both readers (conftest)
    fresh = "u_events" not in client.topics()  # the first run writes, both read
    if fresh:
        client.create_topic("u_events", partitions=2)
    prod = client.producer()
    for p in range(2 if fresh else 0):
        prod.send_batch("u_events", [b"v%d-%d" % (p, i) for i in range(300)],
                        keys=[None if i % 2 else b"k%d" % i for i in range(300)],
                        headers=[[("h", b"%d" % i)] if i % 3 == 0 else None for i in range(300)],
                        partition=p, timestamps_ms=[T0 + i for i in range(300)])
    df = (spark.read.format("vqs").option("url", server.url).option("topic", "u_events")
          .option("includeHeaders", "true").option("startingOffsets", json.dumps({"u_events": {"1": 100}})).load())
    got = sorted(
        (r.topic, r.partition, r.offset, int(r.timestamp.replace(tzinfo=dt.UTC).timestamp() * 1000),
         None if r.key is None else bytes(r.key), bytes(r.value), tuple((h.key, bytes(h.value)) for h in r.headers))
        for r in df.collect()
    )
    want = sorted(r for r in _contents(client, "u_events") if r[1] == 0 or r[2] >= 100)
    assert got == want and len(got) == 500


@pytest.mark.parametrize("max_bytes", [None, "1"])
def test_range_inside_stored_batches(spark, server, client, reader, max_bytes):
    """The server sends whole stored batches (stored=1): a range that begins and ends inside
    them gets exactly its records, also fetched one batch at a time (maxBytesPerRead=1)."""
    if "u_mid" not in client.topics():
        client.create_topic("u_mid")
        prod = client.producer()
        for b in range(4):
            prod.send_batch("u_mid", [b"m%d" % (b * 100 + i) for i in range(100)], partition=0)
    r = (spark.read.format("vqs").option("url", server.url).option("topic", "u_mid")
         .option("startingOffsets", json.dumps({"u_mid": {"0": 150}}))
         .option("endingOffsets", json.dumps({"u_mid": {"0": 250}})))
    if max_bytes:
        r = r.option("maxBytesPerRead", max_bytes)
    got = sorted((x.offset, bytes(x.value)) for x in r.load().collect())
    assert got == [(i, b"m%d" % i) for i in range(150, 250)]


def test_batch_write_through_server(spark, server, client):
    df = spark.createDataFrame([(f"w{i}", f"k{i % 3}") for i in range(100)], "value string, key string")
    df.write.format("vqs").mode("append").option("url", server.url).option("topic", "u_out") \
        .option("topicPartitions", "3").save()
    got = _contents(client, "u_out")
    assert sorted(r[5] for r in got) == sorted(f"w{i}".encode() for i in range(100))
    from vqs.broker import partition_for_key

    assert all(r[1] == partition_for_key(r[4], 3) for r in got)


def test_streaming_through_server(spark, server, client, tmp_path):
    client.create_topic("u_in", partitions=2)
    prod = client.producer()
    for p in range(2):
        prod.send_batch("u_in", [b"s%d-%03d" % (p, i) for i in range(120)], partition=p)
    client.create_topic("u_sink", partitions=1)
    q = (spark.readStream.format("vqs").option("url", server.url).option("topic", "u_in")
         .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "100").load()
         .select("value", "key").writeStream.format("vqs").option("url", server.url).option("topic", "u_sink")
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    q.awaitTermination(180)
    assert q.exception() is None
    assert [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]] == [100, 100, 40]
    got = sorted(r[5] for r in _contents(client, "u_sink"))
    assert got == sorted(b"s%d-%03d" % (p, i) for p in range(2) for i in range(120))


QUERY = "0c4a7f33-aaaa-bbbb-cccc-000011112222"


def test_url_sink_replay_and_interrupted_commit(monkeypatch, server, client):
    import pyarrow as pa

    client.create_topic("u_once", partitions=2)
    opts = parse_write_options({"url": server.url, "topic": "u_once"})

    def batches(lo, hi):
        yield pa.record_batch([pa.array([b"x%03d" % i for i in range(lo, hi)], pa.binary())], names=["value"])

    def run(batch_id, tasks):
        msgs = []
        for t, (lo, hi) in enumerate(tasks):
            monkeypatch.setattr(R, "task_info", lambda t=t: {"partition": t, "attempt": 0, "query": QUERY,
                                                            "batch": batch_id})
            msgs.append(R.UrlStreamWriter(opts).write(batches(lo, hi)))
        return msgs

    def values():
        return sorted(r[5] for r in _contents(client, "u_once"))

    R.UrlStreamWriter(opts).commit(run(0, [(0, 30), (30, 50)]), 0)
    assert values() == [b"x%03d" % i for i in range(50)]
    R.UrlStreamWriter(opts).commit(run(0, [(0, 30), (30, 50)]), 0)  # replayed
    assert values() == [b"x%03d" % i for i in range(50)]

    # Interrupted after the first group reached the server, before the state said so;
    # meanwhile another producer writes to the same partitions.
    msgs = run(1, [(50, 80), (80, 100)])
    real = R.save_url_state
    calls = {"n": 0}

    def dying_save(c, q, state):
        calls["n"] += 1
        if state.get("published"):
            raise KeyboardInterrupt("driver killed")
        return real(c, q, state)

    monkeypatch.setattr(R, "save_url_state", dying_save)
    with pytest.raises(KeyboardInterrupt):
        R.UrlStreamWriter(opts).commit(msgs, 1)
    monkeypatch.setattr(R, "save_url_state", real)
    client.producer().send_batch("u_once", [b"other-0", b"other-1"], partition=0)
    client.producer().send_batch("u_once", [b"other-2"], partition=1)
    R.UrlStreamWriter(opts).commit(run(1, [(50, 80), (80, 100)]), 1)  # the replay
    assert values() == sorted([b"x%03d" % i for i in range(100)] + [b"other-0", b"other-1", b"other-2"])
    # the sink's own topics are looked up, not asked for: no 404 for them on the server (two tasks
    # creating the stage topic at once may still meet a 409, an answer of the race, not a probe)
    with open(server.log_path) as f:
        refused = [ln for ln in f if "__spark_" in ln and " 404 " in ln]
    assert not refused, refused


@pytest.mark.usefixtures("reader")  # over both readers (conftest)
def test_unreachable_server_fails_at_planning(spark):
    with pytest.raises(Exception) as e:
        spark.read.format("vqs").option("url", "http://127.0.0.1:9").option("topic", "t").load().collect()
    assert "option 'url'" in str(e.value)


def test_null_and_empty_values_are_written_back_as_they_are(spark, server, client, tmp_path):
    """Url mode, batch and streaming: a NULL value (a tombstone) is written as a null value,
    an empty one as empty (keys likewise), as the binary produce body carries them."""
    pairs = [(b"a", b"k1"), (None, b"k1"), (b"", b"k2"), (b"", None), (None, None), (b"b", b"")]

    def ordered(ps):
        return sorted(ps, key=lambda vk: [(x is not None, x or b"") for x in vk])

    client.create_topic("u_nulls", partitions=2)
    client.producer().send_batch("u_nulls", [v for v, _ in pairs], keys=[k for _, k in pairs], partition=0)
    src = spark.read.format("vqs").option("url", server.url).option("topic", "u_nulls").load()
    src.write.format("vqs").mode("append").option("url", server.url).option("topic", "u_nulls_copy") \
        .option("topicPartitions", "2").save()
    assert ordered((r[5], r[4]) for r in _contents(client, "u_nulls_copy")) == ordered(pairs)
    q = (spark.readStream.format("vqs").option("url", server.url).option("topic", "u_nulls")
         .option("startingOffsets", "earliest").load()
         .writeStream.format("vqs").option("url", server.url).option("topic", "u_nulls_stream")
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None
    assert ordered((r[5], r[4]) for r in _contents(client, "u_nulls_stream")) == ordered(pairs)


def test_keyless_rows_for_a_compacted_topic_are_refused_at_planning(spark, server, client):
    client.create_topic("u_compact", partitions=2, cleanup_policy="compact")
    df = spark.range(100).selectExpr("cast(id as string) as value").repartition(2)
    with pytest.raises(Exception) as e:
        df.write.format("vqs").mode("append").option("url", server.url).option("topic", "u_compact").save()
    assert "option 'topic': topic 'u_compact' is compacted (cleanup_policy=compact)" in str(e.value)
    assert _contents(client, "u_compact") == []


@pytest.fixture(scope="module")
def token_server(tmp_path_factory):
    """A server that takes one bearer token, "s3cret"."""
    import os

    old = os.environ.get("VQS_TOKENS")
    os.environ["VQS_TOKENS"] = "s3cret"
    try:
        s = Server(tmp_path_factory.mktemp("tok") / "data").start()
    finally:
        if old is None:
            del os.environ["VQS_TOKENS"]
        else:
            os.environ["VQS_TOKENS"] = old
    with Client(s.url, token="s3cret") as c:
        c.create_topic("t", partitions=1)
        c.producer().send_batch("t", [b"x", b"y"])
    yield s
    assert s.stop() == 0


@pytest.mark.usefixtures("reader")  # over both readers (conftest)
@pytest.mark.parametrize("token, needle", [
    (None, "option 'token': the VQS server at {url} requires a bearer token; give it as option 'token'"),
    ("wrong", "option 'token': the token is not valid for the VQS server at {url}"),
])
def test_credentials_are_checked_at_planning(spark, token_server, tmp_path, token, needle):
    """A missing or wrong token fails the query when it is planned, naming option 'token'
    (not a task's 'answered 403' stack): batch and stream reads, and writes."""
    needle = needle.format(url=token_server.url)
    opts = {"url": token_server.url, "topic": "t", **({"token": token} if token else {})}
    with pytest.raises(Exception) as e:
        spark.read.format("vqs").options(**opts).load().collect()
    assert needle in str(e.value).splitlines()[0]
    q = (spark.readStream.format("vqs").options(**opts).option("startingOffsets", "earliest").load()
         .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck")).start())
    with pytest.raises(Exception) as e:
        q.awaitTermination(60)
    assert needle in str(e.value) and q.lastProgress is None
    with pytest.raises(Exception) as e:
        spark.createDataFrame([("v",)], "value string").write.format("vqs").mode("append").options(**opts).save()
    assert needle in str(e.value)
    good = {**opts, "token": "s3cret"}
    assert spark.read.format("vqs").options(**good).load().count() == 2


def test_python_source_names_option_token(token_server):
    """The Python source's own check (a session without the JVM reader's jar)."""
    from vqs.errors import ConfigError

    for token, needle in [(None, "requires a bearer token"), ("wrong", "the token is not valid")]:
        with pytest.raises(ConfigError, match=f"option 'token': .*{needle}"):
            R.UrlSource(token_server.url, token=token).partition_count("t")
        with pytest.raises(ConfigError, match=f"option 'token': .*{needle}"):
            R.prepare_url_write(parse_write_options({"url": token_server.url, "topic": "t",
                                                     **({"token": token} if token else {})}))
