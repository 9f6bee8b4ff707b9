"""Batch reads return exactly what the log holds."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from spark_helpers import append, log_contents, make_topic

from vqs.broker import Broker

T0 = 1_700_000_000_000
pytestmark = pytest.mark.usefixtures("reader")  # every test over both readers (conftest)


def _records(p, n):
    return [
        (
            f"p{p}-value-{i}".encode() * (1 + i % 3),
            None if i % 4 == 0 else f"key-{i % 7}".encode(),
            [("trace", f"{p}.{i}".encode()), ("empty", b"")] if i % 5 == 0 else None,
            T0 + 1000 * i + p,
        )
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def events(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("read") / "data")
    make_topic(path, "events", partitions=3, records={0: _records(0, 500), 1: _records(1, 20), 2: []})
    # a second append to partition 0 makes several log batches, one with a constant timestamp
    append(path, "events", 0, [b"late-%d" % i for i in range(100)], timestamp_ms=T0 + 999_000)
    make_topic(path, "other", partitions=1, records={0: _records(9, 10)})
    return path


def _rows(df):
    out = []
    for r in df.collect():
        ts = r["timestamp"]
        ms = None if ts is None else int(ts.replace(tzinfo=dt.UTC).timestamp() * 1000)
        hdrs = tuple((h["key"], bytes(h["value"])) for h in r["headers"]) if "headers" in r else ()
        out.append((r["topic"], r["partition"], r["offset"], ms,
                    None if r["key"] is None else bytes(r["key"]), bytes(r["value"]), hdrs))
    return sorted(out)


def _read(spark, path, **opts):
    reader = spark.read.format("vqs").option("path", path)
    for k, v in opts.items():
        reader = reader.option(k, v)
    return reader.load()


def test_read_equals_log_contents(spark, events):
    df = _read(spark, events, topic="events", includeHeaders="true")
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "headers"]
    assert _rows(df) == sorted(log_contents(events, "events"))
    assert df.count() == 620


def test_schema_without_headers(spark, events):
    df = _read(spark, events, topic="events")
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp"]
    assert [f.dataType.simpleString() for f in df.schema] == [
        "binary", "binary", "string", "int", "bigint", "timestamp"]
    want = sorted(r[:6] + ((),) for r in log_contents(events, "events"))
    assert _rows(df) == want


def test_aggregates_and_min_partitions(spark, events):
    df = _read(spark, events, topic="events", minPartitions="5")
    assert df.rdd.getNumPartitions() == 5
    got = df.selectExpr("count(*) c", "sum(length(value)) s").first()
    recs = log_contents(events, "events")
    assert (got.c, got.s) == (len(recs), sum(len(r[5]) for r in recs))


def test_offset_ranges(spark, events):
    df = _read(
        spark, events, topic="events",
        startingOffsets=json.dumps({"events": {"0": 10, "1": -2}}),
        endingOffsets=json.dumps({"events": {"0": 510, "1": 5}}),
    )
    rows = _rows(df)
    by_p = {}
    for r in rows:
        by_p.setdefault(r[1], []).append(r[2])
    assert by_p[0] == list(range(10, 510))  # crosses the batch boundary at 500
    assert by_p[1] == list(range(5))
    assert 2 not in by_p  # empty partition
    want = [r[:6] + ((),) for r in log_contents(events, "events")
            if (r[1] == 0 and 10 <= r[2] < 510) or (r[1] == 1 and r[2] < 5)]
    assert rows == sorted(want)


def test_timestamps(spark, events):
    df = _read(spark, events, topic="events", startingTimestamp=str(T0 + 495_000),
               endingTimestamp=str(T0 + 1_000_000))
    rows = _rows(df)
    # partition 0: offsets 495..499 (ts T0+1000*i), then the 100 late records (T0+999000)
    assert [r[2] for r in rows if r[1] == 0] == list(range(495, 600))
    assert [r[2] for r in rows if r[1] == 1] == []
    assert all(T0 + 495_000 <= r[3] < T0 + 1_000_000 for r in rows)
    first = df.where("partition = 0 and offset = 495").select("timestamp").first()[0]
    assert first.replace(tzinfo=dt.UTC) == dt.datetime.fromtimestamp((T0 + 495_000) / 1000, dt.UTC)


def test_several_topics(spark, events):
    df = _read(spark, events, topics="events, other")
    got = {r["topic"]: r["count"] for r in df.groupBy("topic").count().collect()}
    assert got == {"events": 620, "other": 10}


def test_read_while_owner_appends(spark, tmp_path):
    path = str(tmp_path / "data")
    make_topic(path, "live", partitions=2)
    with Broker(path) as b:
        prod = b.producer()
        prod.send_batch("live", [b"a%d" % i for i in range(50)], partition=0)
        prod.flush()
        # The Broker owns the directory and keeps it open; Spark reads without a lock.
        assert _read(spark, path, topic="live").count() == 50
        prod.send_batch("live", [b"b%d" % i for i in range(30)], partition=1)
        prod.flush()
        assert _read(spark, path, topic="live").count() == 80
