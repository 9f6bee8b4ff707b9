"""Batch writes, read back through the source and through the Broker."""

from __future__ import annotations

import datetime as dt
import os

import pytest
from pyspark.sql import functions as F
from spark_helpers import log_contents, make_topic

from vqs.broker import Broker, partition_for_key


def _write(df, path, mode="append", **opts):
    w = df.write.format("vqs").mode(mode).option("path", path)
    for k, v in opts.items():
        w = w.option(k, v)
    w.save()


def test_write_then_read_back_all_columns(spark, tmp_path):
    path = str(tmp_path / "data")
    make_topic(path, "out", partitions=3)
    ts0 = dt.datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=dt.UTC)
    rows = [
        (f"value-{i}", None if i % 3 == 0 else f"k{i % 5}".encode(), i % 3 if i % 4 == 0 else None,
         [("a", b"1"), ("b", f"{i}".encode())] if i % 2 else [], ts0 + dt.timedelta(milliseconds=i))
        for i in range(200)
    ]
    df = spark.createDataFrame(
        rows, "value string, key binary, partition int, headers array<struct<key:string,value:binary>>, timestamp timestamp"
    ).repartition(2)
    _write(df, path, topic="out")

    got = log_contents(path, "out")
    assert len(got) == 200
    by_value = {r[5]: r for r in got}
    for v, k, p, h, ts in rows:
        rec = by_value[v.encode()]
        assert rec[4] == k
        assert rec[6] == tuple(h)
        assert rec[3] == int(ts.timestamp() * 1000)
        if p is not None:
            assert rec[1] == p
        elif k is not None:
            assert rec[1] == partition_for_key(k, 3)  # the Broker's (Kafka's) partitioner

    back = spark.read.format("vqs").option("path", path).option("topic", "out").option("includeHeaders", "true").load()
    assert back.count() == 200
    r = back.where("value = cast('value-1' as binary)").first()
    assert bytes(r.key) == b"k1" and [(h.key, bytes(h.value)) for h in r.headers] == [("a", b"1"), ("b", b"1")]
    assert r.timestamp.replace(tzinfo=dt.UTC) == ts0 + dt.timedelta(milliseconds=1)


def test_write_creates_topic_and_copies_a_topic(spark, tmp_path):
    path = str(tmp_path / "data")
    os.mkdir(path)  # an empty directory: a data directory with no topics yet
    df = spark.range(1000).select(F.format_string("rec-%05d", "id").alias("value"))
    _write(df.repartition(2), path, topic="fresh", topicPartitions="2")
    with Broker(path) as b:
        assert b.topic("fresh").partitions == 2
    src = spark.read.format("vqs").option("path", path).option("topic", "fresh").load()
    # a DataFrame read from vqs writes back as it is (offset etc. are ignored, timestamps kept;
    # the 'topic' option overrides its 'topic' column, as Spark's Kafka sink)
    _write(src, path, topic="copy", topicPartitions="2")
    a = sorted((r[1], r[2], r[5], r[3]) for r in log_contents(path, "fresh"))
    b = sorted((r[1], r[2], r[5], r[3]) for r in log_contents(path, "copy"))
    assert a == b  # same partition, offset, value and timestamp
    assert len(log_contents(path, "fresh")) == 1000  # nothing went back to the source


def test_topic_column_routes_records(spark, tmp_path):
    path = str(tmp_path / "data")
    make_topic(path, "t1", partitions=1)
    make_topic(path, "t2", partitions=2)
    df = spark.createDataFrame([(f"v{i}", "t1" if i % 2 else "t2") for i in range(40)], "value string, topic string")
    _write(df, path)
    assert sorted(r[5] for r in log_contents(path, "t1")) == sorted(f"v{i}".encode() for i in range(1, 40, 2))
    assert len(log_contents(path, "t2")) == 20


def test_write_refused_while_a_broker_owns_the_directory(spark, tmp_path):
    path = str(tmp_path / "data")
    make_topic(path, "owned", partitions=1)
    df = spark.createDataFrame([("x",)], "value string")
    with Broker(path):
        with pytest.raises(Exception) as e:
            _write(df, path, topic="owned")
    msg = str(e.value)
    assert "owned by pid" in msg and "url" in msg


@pytest.mark.parametrize(
    "df_sql, opts, needle",
    [
        ("select 1 as id", {"topic": "t"}, "'value' column"),
        ("select 1 as value", {"topic": "t"}, "column 'value' has type int"),
        ("select 'x' as value", {}, "option 'topic' is required"),
        ("select 'x' as value", {"topic": "bad/name"}, "option 'topic'"),
        ("select 'x' as value", {"topic": "t", "topicPartition": "3"}, "did you mean 'topicPartitions'"),
    ],
)
def test_bad_write_options(spark, tmp_path, df_sql, opts, needle):
    with pytest.raises(Exception) as e:
        _write(spark.sql(df_sql), str(tmp_path / "data"), **opts)
    assert needle in str(e.value)


def test_overwrite_is_refused(spark, tmp_path):
    with pytest.raises(Exception) as e:
        _write(spark.sql("select 'x' as value"), str(tmp_path / "data"), mode="overwrite", topic="t")
    assert "append-only" in str(e.value)



# (value, key) as a topic holds them: a tombstone (null value) is not an empty value
NULLS = [(b"a", b"k1"), (None, b"k1"), (b"", b"k2"), (b"", None), (None, None), (b"b", b"")]


def _sorted(pairs):
    """(value, key) pairs in an order that tells None from b''."""
    return sorted(pairs, key=lambda vk: [(x is not None, x or b"") for x in vk])


def _pairs(rows):
    return _sorted((None if r.value is None else bytes(r.value), None if r.key is None else bytes(r.key))
                   for r in rows)


@pytest.mark.usefixtures("reader")  # over both readers (conftest)
def test_null_and_empty_values_are_written_back_as_they_are(spark, tmp_path):
    """A DataFrame read from vqs (NULL values: tombstones) writes back as is, batch and
    streaming: a NULL value stays null, an empty one empty, and so do keys."""
    path = str(tmp_path / "data")
    make_topic(path, "src", partitions=2, records={0: [(v, k, None, 1) for v, k in NULLS]})
    src = spark.read.format("vqs").option("path", path).option("topic", "src").load()
    assert _pairs(src.collect()) == _sorted(NULLS)
    _write(src, path, topic="copy", topicPartitions="2")
    assert _sorted((r[5], r[4]) for r in log_contents(path, "copy")) == _sorted(NULLS)
    back = spark.read.format("vqs").option("path", path).option("topic", "copy").load()
    assert _pairs(back.collect()) == _sorted(NULLS)

    q = (spark.readStream.format("vqs").option("path", path).option("topic", "src")
         .option("startingOffsets", "earliest").load()
         .writeStream.format("vqs").option("path", path).option("topic", "scopy")
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None
    assert _sorted((r[5], r[4]) for r in log_contents(path, "scopy")) == _sorted(NULLS)


def test_keyless_rows_for_a_compacted_topic_are_refused_at_planning(spark, tmp_path):
    """What planning can know fails there, before any task appends: a compacted topic
    takes keyed records only, and a DataFrame without a 'key' column has none."""
    path = str(tmp_path / "data")
    make_topic(path, "c", partitions=2, cleanup_policy="compact")
    df = spark.range(100).selectExpr("cast(id as string) as value").repartition(2)
    with pytest.raises(Exception) as e:
        _write(df, path, topic="c")
    assert "option 'topic': topic 'c' is compacted (cleanup_policy=compact)" in str(e.value)
    assert "no 'key' column" in str(e.value)
    assert log_contents(path, "c") == []


def test_a_missing_data_directory_is_refused_not_made(spark, tmp_path):
    """As a read refuses it: a mistyped 'path' fails the write at planning, naming the
    option, and makes no directory (batch and streaming)."""
    path = str(tmp_path / "no-such-dir")
    df = spark.createDataFrame([("x",)], "value string")
    with pytest.raises(Exception) as e:
        _write(df, path, topic="t")
    assert f"option 'path': {path!r} is not a directory (a VQS data directory)" in str(e.value)
    q = (spark.readStream.format("rate").load().selectExpr("cast(value as string) as value")
         .writeStream.format("vqs").option("path", path).option("topic", "t")
         .option("checkpointLocation", str(tmp_path / "c")).trigger(availableNow=True))
    with pytest.raises(Exception) as e:
        q.start().awaitTermination(60)
    assert f"option 'path': {path!r} is not a directory" in str(e.value)
    assert not os.path.exists(path)
