"""Structured Streaming: AvailableNow, admission control, and a restart from a
checkpoint after a failed sink write (exactly once)."""

from __future__ import annotations

import json
import os

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType
from spark_helpers import append, log_contents, make_topic


def _stream(spark, path, **opts):
    r = spark.readStream.format("vqs").option("path", path)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def _batch_sizes(q):
    return [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]


@pytest.mark.usefixtures("reader")  # over both readers (conftest)
def test_available_now_with_per_trigger_limit(spark, tmp_path):
    path = str(tmp_path / "data")
    make_topic(path, "in", partitions=3, records={
        0: [(b"a%d" % i, None, None, 1000 + i) for i in range(100)],
        1: [(b"b%d" % i, None, None, 1000 + i) for i in range(50)],
    })
    make_topic(path, "copy", partitions=1)
    ckpt = str(tmp_path / "ckpt")

    def run():
        q = (_stream(spark, path, topic="in", startingOffsets="earliest", maxOffsetsPerTrigger="40")
             .select("value").writeStream.format("vqs").option("path", path).option("topic", "copy")
             .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
        q.awaitTermination(120)
        assert q.exception() is None
        return q

    q = run()
    # 150 records, at most 40 per micro-batch, split across partitions in proportion
    assert _batch_sizes(q) == [40, 40, 40, 30]
    progress = q.recentProgress[0]["sources"][0]
    assert json.loads(progress["endOffset"]) == {"in": {"0": 27, "1": 13, "2": 0}}
    got = [r[5] for r in log_contents(path, "copy")]
    assert sorted(got) == sorted([b"a%d" % i for i in range(100)] + [b"b%d" % i for i in range(50)])

    # New records, and the query restarted from its checkpoint: only the new ones.
    append(path, "in", 2, [b"c%d" % i for i in range(25)])
    q = run()
    assert _batch_sizes(q) == [25]
    got = [r[5] for r in log_contents(path, "copy")]
    assert len(got) == 175 and got[150:] == [b"c%d" % i for i in range(25)]


def _pipeline(spark, path, out_topic, ckpt, flag=None):
    """in -> (value uppercased, key = partition) -> out, 100 records per trigger."""
    src = _stream(spark, path, topic="in", startingOffsets="earliest", maxOffsetsPerTrigger="100")

    @F.udf(BinaryType())
    def transform(v):
        if flag and v == b"rec-00150" and not os.path.exists(flag):
            open(flag, "w").close()
            raise RuntimeError("injected failure in the sink's write task")
        return v.upper()

    out = src.select(transform("value").alias("value"), F.col("partition").cast("string").alias("key"),
                     "timestamp")
    return (out.writeStream.format("vqs").option("path", path).option("topic", out_topic)
            .option("checkpointLocation", ckpt).trigger(availableNow=True).start())


def test_restart_from_checkpoint_after_failed_sink_write_is_exactly_once(spark, tmp_path):
    path = str(tmp_path / "data")
    # 351 records: partition 0 holds rec-00000..00150 (the last one fails once), partition 1 200 more
    recs = {p: [(b"rec-%05d" % (p * 1000 + i), None, None, 5000 + i) for i in range(151 + 49 * p)] for p in range(2)}
    make_topic(path, "in", partitions=2, records=recs)
    make_topic(path, "out", partitions=2)
    make_topic(path, "ref", partitions=2)

    # The reference: an uninterrupted run.
    q = _pipeline(spark, path, "ref", str(tmp_path / "ckpt-ref"))
    q.awaitTermination(180)
    assert q.exception() is None

    flag = str(tmp_path / "failed-once")
    ckpt = str(tmp_path / "ckpt")
    q = _pipeline(spark, path, "out", ckpt, flag)
    with pytest.raises(Exception):
        q.awaitTermination(180)
    assert os.path.exists(flag)
    assert q.exception() is not None and "injected failure" in str(q.exception())
    partial = log_contents(path, "out")
    assert 0 < len(partial) < 351  # stopped mid-way

    q = _pipeline(spark, path, "out", ckpt, flag)  # restart from the checkpoint
    q.awaitTermination(180)
    assert q.exception() is None

    def norm(rows):
        return [(p, off, ts, k, v) for (_, p, off, ts, k, v, _h) in rows]

    out, ref = norm(log_contents(path, "out")), norm(log_contents(path, "ref"))
    assert len(ref) == 351
    assert out == ref  # identical to the uninterrupted run: same records, partitions, offsets, order
    assert sorted(r[4] for r in out) == sorted(v.upper() for recs_p in recs.values() for v, *_ in recs_p)


@pytest.mark.usefixtures("reader")  # over both readers (conftest)
def test_data_loss(spark, tmp_path):
    from vqs.broker import Broker

    path = str(tmp_path / "data")
    make_topic(path, "gone", partitions=1, segment_bytes=4096,
               records={0: [(b"x" * 100, None, None, 1000 + i) for i in range(200)]})
    with Broker(path) as b:
        lg = b.topic("gone").log(0)
        lg.delete_before(150)
        start = lg.start_offset
    assert start > 0
    base = spark.read.format("vqs").option("path", path).option("topic", "gone").option(
        "startingOffsets", '{"gone": {"0": 0}}')
    with pytest.raises(Exception) as e:
        base.load().count()
    assert "failOnDataLoss" in str(e.value)
    assert base.option("failOnDataLoss", "false").load().count() == 200 - start
