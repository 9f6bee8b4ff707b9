"""Where a new stream starts: ``startingOffsets`` / ``startingTimestamp`` through Spark, both readers.

The JVM reader's ``VqsMicroBatchStream.initialOffset`` resolves the start with
``Planner.offsetFor`` (Java), the Python source's ``VQSStreamReader.initialOffset``
with ``reader._offset_for``: two implementations of one rule (docs/spark.md,
"Options"). Each case runs a streaming query with ``Trigger.AvailableNow`` and
no checkpoint yet over the same log, once per reader, and checks the records it
reads against the log itself: ``earliest``, ``latest`` (kept by the
checkpoint), offsets JSON (an offset, -2, -1, a partition left out), offsets
below the log start (retention deleted them: ``failOnDataLoss``), past the
end (refused), and timestamps (before, inside, after the log; over
``startingOffsets``).

The log: topic ``s``, two partitions of 10-record batches stamped
``T0 + 1000 k + i``; partition 0's first segments deleted by retention, so its
log start is above 0 and ``earliest`` is not offset 0.
"""

from __future__ import annotations

import itertools
import json
import os

import pytest
from spark_helpers import append, log_contents, make_topic

from vqs.broker import Broker

T0 = 1_700_000_000_000
PER_BATCH = 10
BATCHES = {0: 9, 1: 6}
_names = itertools.count()


@pytest.fixture(scope="module")
def start_log(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("streamstart") / "data")
    make_topic(path, "s", partitions=2, segment_bytes=2048)
    with Broker(path) as b:
        prod = b.producer()
        for p, n in BATCHES.items():
            for k in range(n):
                prod.send_batch("s", [b"%d-%02d-%d" % (p, k, i) + b"v" * 80 for i in range(PER_BATCH)],
                                partition=p, timestamps_ms=[T0 + 1000 * k + i for i in range(PER_BATCH)])
                prod.flush()
        lg = b.topic("s").log(0)
        lg.delete_before(35)
        lo = lg.start_offset
    assert 0 < lo <= 35
    recs = [(p, off, ts) for _t, p, off, ts, _k, _v, _h in log_contents(path, "s")]
    return path, lo, recs


@pytest.fixture(params=["jvm", "python"])
def which(request, spark):
    import vqs.spark

    if request.param == "jvm" and not vqs.spark.jvm_reader_loaded(spark):
        pytest.skip("the JVM reader is not built here (javac missing)")
    return request.param


def _stream_rows(spark, path, reader, **opts):
    """Records a new AvailableNow query reads (memory sink), as sorted (partition, offset)."""
    name = f"start_{reader}_{next(_names)}"
    r = spark.readStream.format("vqs").option("path", path).option("topic", "s").option("reader", reader)
    for k, v in opts.items():
        r = r.option(k, v)
    q = (r.load().select("partition", "offset").writeStream.format("memory").queryName(name)
         .trigger(availableNow=True).start())
    try:
        assert q.awaitTermination(600), "the AvailableNow query did not end"
        if q.exception() is not None:
            raise q.exception()
        return sorted((row.partition, row.offset) for row in spark.table(name).collect())
    finally:
        q.stop()
        spark.catalog.dropTempView(name)


def _from(recs, p0, p1):
    """The log's records at or after offset p0 in partition 0 and p1 in partition 1."""
    start = {0: p0, 1: p1}
    return [(p, off) for p, off, _ts in recs if off >= start[p]]


def _since(recs, ts):
    return [(p, off) for p, off, t in recs if t >= ts]


END = {p: n * PER_BATCH for p, n in BATCHES.items()}
MID = T0 + 1000 * 4 + 5  # inside batch 4 of each partition


@pytest.mark.parametrize("opts, want", [
    ({"startingOffsets": "earliest"}, lambda lo, recs: _from(recs, lo, 0)),
    # an offset, and -2 (earliest)
    ({"startingOffsets": json.dumps({"s": {"0": 52, "1": -2}})}, lambda lo, recs: _from(recs, 52, 0)),
    # -1 (latest), and a partition left out of the JSON: its earliest offset
    ({"startingOffsets": json.dumps({"s": {"0": -1}})}, lambda lo, recs: _from(recs, END[0], 0)),
    # inside the log; and startingTimestamp takes precedence over startingOffsets
    ({"startingTimestamp": str(MID), "startingOffsets": "latest"}, lambda lo, recs: _since(recs, MID)),
    # before every record: each partition from its log start (partition 0's is above 0)
    ({"startingTimestamp": str(T0 - 5000)}, lambda lo, recs: _from(recs, lo, 0)),
    # after every record: the end offsets
    ({"startingTimestamp": str(T0 + 10**6)}, lambda lo, recs: []),
    # an offset retention deleted: failOnDataLoss false reads from the log start
    ({"startingOffsets": json.dumps({"s": {"0": 0, "1": 58}}), "failOnDataLoss": "false"},
     lambda lo, recs: _from(recs, lo, 58)),
], ids=["earliest", "json", "json-latest-missing", "ts-over-offsets", "ts-before", "ts-after",
        "below-start-no-fail"])
def test_a_new_stream_starts_where_the_options_say(spark, start_log, which, opts, want):
    path, lo, recs = start_log
    expect = want(lo, recs)
    assert _stream_rows(spark, path, which, **opts) == expect


def test_an_offset_below_the_log_start_is_data_loss(spark, start_log, which):
    path, lo, _ = start_log
    with pytest.raises(Exception) as e:
        _stream_rows(spark, path, which, startingOffsets=json.dumps({"s": {"0": 0}}))
    assert "failOnDataLoss" in str(e.value) and f"log start offset {lo}" in str(e.value)


def test_an_offset_past_the_end_is_refused(spark, start_log, which):
    path, _, _ = start_log
    with pytest.raises(Exception) as e:
        _stream_rows(spark, path, which, startingOffsets=json.dumps({"s": {"1": END[1] + 1}}))
    assert f"offset {END[1] + 1} of s/1 is past its end offset {END[1]}" in str(e.value)


def test_latest_is_kept_by_the_checkpoint(spark, tmp_path, which):
    """A query started at ``latest`` reads nothing now; records appended before
    it is run again from its checkpoint are read then (the start it resolved
    was checkpointed; ``latest`` is not resolved again)."""
    path = str(tmp_path / "data")
    make_topic(path, "s", partitions=2, records={p: [(b"old", None, None, T0)] * 5 for p in (0, 1)})
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")

    def run():
        q = (spark.readStream.format("vqs").option("path", path).option("topic", "s").option("reader", which)
             .option("startingOffsets", "latest").load().select("partition", "offset", "value")
             .writeStream.format("parquet").option("path", out).option("checkpointLocation", ckpt)
             .trigger(availableNow=True).start())
        assert q.awaitTermination(600), "the AvailableNow query did not end"
        assert q.exception() is None
        if not os.path.isdir(out):
            return []
        df = spark.read.schema("partition int, offset bigint, value binary").parquet(out)
        return sorted((r.partition, r.offset, bytes(r.value)) for r in df.collect())

    assert run() == []
    append(path, "s", 1, [b"new0", b"new1"])
    assert run() == [(1, 5, b"new0"), (1, 6, b"new1")]
