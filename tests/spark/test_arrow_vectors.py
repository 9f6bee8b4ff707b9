"""``.option("vectors", "arrow")``: the JVM reader's batches as Arrow vectors.

With it the scan's ColumnarBatches are Spark ArrowColumnVectors over
arrow-vector vectors, which Spark 4.3 hands to a pandas/Arrow scalar UDF
without row conversion (ArrowEvalPythonExec in columnar mode). The rows must
equal the default (LogVectors) read's, in a plain query and through a
pandas_udf whose plan runs columnar, across many batches; every Arrow buffer
is freed when the tasks end (Spark's Arrow root allocator is back to 0 and has
no child allocator of ours left).
"""

from __future__ import annotations

import pytest

from vqs.broker import Broker

pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("arrowvec") / "data")
    recs = {
        p: [
            (b"v%d-%04d" % (p, i) * (1 + i % 5), None if i % 3 == 0 else b"k%d" % i,
             [("h", b"%d" % i)] if i % 4 == 0 else None, 1_700_000_000_000 + 37 * i)
            for i in range(n)
        ]
        for p, n in enumerate([2500, 700])
    }
    with Broker(path, batch_max_records=20) as b:  # many small log batches
        b.create_topic("av", partitions=2)
        prod = b.producer()
        for p, rs in recs.items():
            prod.send_batch("av", [r[0] for r in rs], keys=[r[1] for r in rs], headers=[r[2] for r in rs],
                            partition=p, timestamps_ms=[r[3] for r in rs])
    return path


def _read(spark, path, vectors, **opts):
    r = spark.read.format("vqs").option("path", path).option("topic", "av").option("vectors", vectors)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def _root(spark):
    return spark._jvm.org.apache.spark.sql.util.ArrowUtils.rootAllocator()


def _our_children(spark) -> list[str]:
    kids = _root(spark).getChildAllocators()
    return [c.getName() for c in kids.toArray() if c.getName().startswith("vqs ")]


def test_arrow_vectors_equal_direct(spark, data, jvm):
    cols = ["topic", "partition", "offset", "timestamp", "key", "value", "headers"]
    direct = _read(spark, data, "direct", includeHeaders="true").select(*cols).collect()
    arrow = _read(spark, data, "arrow", includeHeaders="true").select(*cols).collect()
    assert len(direct) == 3200
    assert sorted(map(tuple, arrow)) == sorted(map(tuple, direct))
    # a slice starting mid-batch (offsets rebased, key validity shifted)
    part = _read(spark, data, "arrow", startingOffsets='{"av": {"0": 7, "1": 13}}').select("offset", "key", "value")
    want = _read(spark, data, "direct", startingOffsets='{"av": {"0": 7, "1": 13}}').select("offset", "key", "value")
    assert sorted(map(tuple, part.collect())) == sorted(map(tuple, want.collect()))
    assert _read(spark, data, "arrow").selectExpr("sum(length(value))").first()[0] == sum(
        len(r["value"]) for r in direct)
    assert _root(spark).getAllocatedMemory() == 0 and _our_children(spark) == []


def test_pandas_udf_takes_arrow_batches(spark, data, jvm):
    from pyspark.sql.functions import pandas_udf

    @pandas_udf("long")
    def vlen(v: pd.Series) -> pd.Series:
        return v.map(len)

    df = _read(spark, data, "arrow").select("offset", "value", vlen("value").alias("n"))
    plan = df._jdf.queryExecution().executedPlan().toString()
    # columnar all the way from the scan into the UDF: no ColumnarToRow below ArrowEvalPython
    assert "ArrowEvalPython" in plan
    below = plan[plan.index("ArrowEvalPython"):]
    assert "ColumnarToRow" not in below, plan
    rows = df.collect()
    assert len(rows) == 3200
    assert all(r["n"] == len(r["value"]) for r in rows)
    assert _root(spark).getAllocatedMemory() == 0 and _our_children(spark) == []


def test_bad_vectors_option(spark, data, jvm):
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    with pytest.raises((Py4JJavaError, PySparkException), match="option 'vectors' must be 'direct' or 'arrow'"):
        _read(spark, data, "columnar").collect()
