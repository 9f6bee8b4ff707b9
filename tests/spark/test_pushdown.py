"""What a batch read answers without reading records: count() and filters on offset and partition.

The JVM reader answers ``count()`` from the offsets alone (no task, no batch
read: docs/FORMAT.md says where offsets may be missing) and plans narrower
offset ranges for filters on ``offset`` and ``partition`` instead of reading
and filtering. Both must give what reading everything and filtering gives;
each test runs over both readers (the ``reader`` fixture), and the JVM
reader's plans show that the work was pushed.
"""

from __future__ import annotations

import json
import os

import pytest
from spark_helpers import log_contents, make_topic

from vqs.broker import Broker
from vqs.record import scan_batches
from vqs.storage import Log

pytestmark = pytest.mark.usefixtures("reader")


def _read(spark, path, topic, **opts):
    r = spark.read.format("vqs").option("path", path).option("topic", topic)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("pushdown") / "data")
    recs = {p: [(b"p%d-%d" % (p, i), None, None, 1000 + i) for i in range(n)] for p, n in enumerate([300, 50, 0, 7])}
    make_topic(path, "t", partitions=4, records=recs)
    return path


def _offsets(df):
    return sorted((r["partition"], r["offset"]) for r in df.select("partition", "offset").collect())


def test_count_from_offsets(spark, data, reader):
    df = _read(spark, data, "t")
    assert df.count() == 357
    if reader == "jvm":  # no task: the driver answers from the offsets
        assert "LocalTableScan" in _plan(df.groupBy().count())
    # with offsets options too (the same ranges a read would plan)
    assert _read(spark, data, "t", startingOffsets=json.dumps({"t": {"0": 290, "3": 5}})).count() == 10 + 50 + 2
    assert _read(spark, data, "t", endingOffsets=json.dumps({"t": {"0": 3, "1": 0, "3": 1}})).count() == 4


# (SQL, the same predicate in Python over (partition, offset, value))
PREDICATES = [
    ("offset >= 40 and offset < 45", lambda p, o, v: 40 <= o < 45),
    ("offset > 297 or offset = 6", lambda p, o, v: o > 297 or o == 6),  # OR is Spark's
    ("offset <= 1 and partition in (0, 3, 9)", lambda p, o, v: o <= 1 and p in (0, 3, 9)),
    ("offset < 0", lambda p, o, v: o < 0),
    ("partition > 0 and partition <= 3 and offset >= 49", lambda p, o, v: 0 < p <= 3 and o >= 49),
    ("partition != 0 and offset < 2", lambda p, o, v: p != 0 and o < 2),  # != is Spark's, offset is pushed
    ("offset >= 10 and value like 'p0-1%'", lambda p, o, v: o >= 10 and v.startswith(b"p0-1")),  # value is Spark's
]


def test_filters_equal_an_unpushed_filter(spark, data, reader):
    every = [(r["partition"], r["offset"], bytes(r["value"])) for r in _read(spark, data, "t").collect()]
    for pred, keep in PREDICATES:
        want = sorted((p, o) for p, o, v in every if keep(p, o, v))
        df = _read(spark, data, "t").where(pred)
        assert _offsets(df) == want, pred
        if reader == "jvm":
            assert df.count() == len(want), pred
            if " or " not in pred:  # the scan narrowed its ranges itself
                assert "where offset" in _plan(df), (pred, _plan(df))


def _several_segments(path, topic, batches=12, per_batch=10):
    make_topic(path, topic, partitions=1, segment_bytes=2048)
    with Broker(path) as b:
        prod = b.producer()
        for k in range(batches):
            prod.send_batch(topic, [b"%03d-%02d-" % (k, i) + b"x" * 40 for i in range(per_batch)], partition=0)
            prod.flush()


def _corrupt_and_recover(path, topic, which):
    """Flip a byte of batch `which(batches)` of the first segment, then recover with
    recovery="skip" after an unclean shutdown: the batch goes to quarantine/."""
    d = os.path.join(path, "topics", topic, "0")
    seg = os.path.join(d, sorted(f for f in os.listdir(d) if f.endswith(".log"))[0])
    with open(seg, "rb") as f:
        batches = list(scan_batches(f.read()))
    pos, base, size = which(batches)
    with open(seg, "r+b") as f:
        f.seek(pos + 64 + 3)
        f.write(b"\xff")
    os.unlink(os.path.join(d, ".clean-shutdown"))
    os.unlink(os.path.join(d, "log.checkpoint"))  # no checkpoint: damage in a sealed segment is corruption
    Log.open(d, recovery="skip").close()
    return os.listdir(os.path.join(d, "quarantine"))


@pytest.mark.parametrize("where", ["middle", "tail"])
def test_count_across_quarantine_gaps(spark, tmp_path, where):
    path = str(tmp_path / "data")
    _several_segments(path, "gap")
    names = _corrupt_and_recover(path, "gap", (lambda b: b[1]) if where == "middle" else (lambda b: b[-1]))
    assert len(names) == 1 and names[0].endswith("-end.bad") == (where == "tail")
    offsets = sorted(r[2] for r in log_contents(path, "gap"))
    assert len(offsets) == 110
    df = _read(spark, path, "gap")
    assert df.count() == 110
    assert sorted(r["offset"] for r in df.select("offset").collect()) == offsets
    assert df.where("offset >= 15 and offset < 45").count() == len([o for o in offsets if 15 <= o < 45])
