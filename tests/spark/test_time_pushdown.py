"""Timestamp ranges pushed into the JVM reader: the same rows, fewer batches read.

``timestamp >= / > / < / <= / =`` a timestamp literal (and so BETWEEN) is pushed
into the JVM scan, which steps over log batches and segment prefixes none of
whose records can pass (by the time indexes and batch headers, docs/FORMAT.md)
and leaves the filter to Spark too (it is inexact: skipping is by batch). The
data has several segments, out-of-order timestamps across and inside batches,
batches with and without a timestamps column; every predicate must give what
reading everything and filtering in Spark gives (the Python source pushes
nothing: Spark filters its rows), and the scan's own metrics show that fewer
batches and bytes were read.
"""

from __future__ import annotations

import datetime as dt

import pytest

from vqs.broker import Broker

T0 = 1_700_000_000_000  # ms


def _ts(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def _batch_times(k: int, n: int) -> list[int]:
    """Batch k's record timestamps (ms): mostly rising by batch, with some batches far
    back in time (out of order across batches), some per-record jitter (a timestamps
    column) and some batches all stamped alike (no column)."""
    if k % 7 == 5:
        return [T0 + 1000 * (k - 20) + i for i in range(n)]  # late arrivals: older than their neighbours
    if k % 3 == 0:
        return [T0 + 1000 * k] * n  # one timestamp: no timestamps column
    return [T0 + 1000 * k + (37 * i) % 900 for i in range(n)]  # shuffled inside the batch


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("timepush") / "data")
    with Broker(path, index_interval_bytes=512) as b:
        b.create_topic("tt", partitions=2, segment_bytes=16384)
        prod = b.producer()
        for k in range(60):
            n = 20
            for p in (0, 1):
                prod.send_batch("tt", [b"%d-%03d-%02d" % (p, k, i) + b"v" * 60 for i in range(n)],
                                partition=p, timestamps_ms=_batch_times(k + 7 * p, n))
            prod.flush()
    return path


def _read(spark, path, **opts):
    r = spark.read.format("vqs").option("path", path).option("topic", "tt")
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def _scan_metrics(df) -> dict[str, int]:
    """The JVM scan node's metrics after df ran (AQE's final plan if it wrapped one)."""
    plan = df._jdf.queryExecution().executedPlan()
    if plan.nodeName() == "AdaptiveSparkPlan":
        plan = plan.executedPlan()
    stack = [plan]
    while stack:
        node = stack.pop()
        if "BatchScan" in node.nodeName():
            m = node.metrics()
            return {k: m.get(k).get().value() for k in ("vqsBatchesDecoded", "vqsBatchesSkipped", "vqsBytesRead")}
        kids = node.children()
        stack += [kids.apply(i) for i in range(kids.size())]
    raise AssertionError("no BatchScan in " + plan.toString())


def _predicates():
    """(SQL, the same predicate in Python over (partition, offset, timestamp ms))."""
    lo, hi = T0 + 41_000, T0 + 47_500
    return [
        (f"timestamp > '{_ts(lo)}'", lambda p, o, t: t > lo),
        (f"timestamp <= '{_ts(T0 + 3_000)}'", lambda p, o, t: t <= T0 + 3_000),
        (f"timestamp between '{_ts(lo)}' and '{_ts(hi)}'", lambda p, o, t: lo <= t <= hi),
        (f"timestamp = '{_ts(T0 + 9_000)}'", lambda p, o, t: t == T0 + 9_000),
        (f"timestamp >= '{_ts(T0 + 10**9)}'", lambda p, o, t: False),
        (f"timestamp >= '{_ts(lo)}' and offset < 900 and partition = 1", lambda p, o, t: t >= lo and o < 900 and p == 1),
        (f"timestamp < '{_ts(T0 + 2_000)}' or offset < 5", lambda p, o, t: t < T0 + 2_000 or o < 5),  # OR: Spark's
    ]


def test_time_filters_equal_spark_filtering(spark, data, jvm):
    from pyspark.sql import functions as F

    every = [(r["partition"], r["offset"], round(r["timestamp"].timestamp() * 1000))
             for r in _read(spark, data).select("partition", "offset", "timestamp").collect()]
    assert len(every) == 2400
    assert any(every[i][2] > every[i + 1][2] for i in range(len(every) - 1))  # out of order
    preds = _predicates()
    # one job: a union of the filtered reads, each scan with its own pushed filters
    union = None
    for i, (pred, _keep) in enumerate(preds):
        df = _read(spark, data).where(pred).select(F.lit(i).alias("q"), "partition", "offset")
        union = df if union is None else union.unionByName(df)
    got = {i: [] for i in range(len(preds))}
    for r in union.collect():
        got[r["q"]].append((r["partition"], r["offset"]))
    for i, (pred, keep) in enumerate(preds):
        assert sorted(got[i]) == sorted((p, o) for p, o, t in every if keep(p, o, t)), pred
    plan = union._jdf.queryExecution().executedPlan().toString()
    assert plan.count("(skipping batches)") >= len(preds) - 1, plan
    # count() under an inexact filter is Spark's count of the rows read, not the offsets'
    pred, keep = preds[2]
    assert _read(spark, data).where(pred).count() == sum(1 for p, o, t in every if keep(p, o, t))


def test_time_filters_read_less(spark, data, jvm):
    full = _read(spark, data).select("offset")
    full.collect()
    m_all = _scan_metrics(full)
    assert m_all["vqsBatchesSkipped"] == 0 and m_all["vqsBatchesDecoded"] == 120
    late = _read(spark, data).where(f"timestamp >= '{_ts(T0 + 52_000)}'").select("offset")
    n = len(late.collect())
    m = _scan_metrics(late)
    assert n > 0
    # the time indexes skip the early segments unread; the headers skip most other batches
    assert m["vqsBatchesDecoded"] < m_all["vqsBatchesDecoded"] // 3, (m, m_all)
    assert m["vqsBytesRead"] < m_all["vqsBytesRead"] // 2, (m, m_all)
    assert m["vqsBatchesSkipped"] > 0
    # an upper bound skips batches by their headers (where no timestamps column hides the minimum)
    early = _read(spark, data).where(f"timestamp < '{_ts(T0 + 2_000)}'").select("offset")
    early.collect()
    assert _scan_metrics(early)["vqsBatchesSkipped"] > 0
