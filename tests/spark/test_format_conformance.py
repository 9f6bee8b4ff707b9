"""Format conformance: the JVM reader and the Python source read the same bytes the same way.

Two independent readers of docs/FORMAT.md (vqs/storage in Python,
spark-connector/ in Java) keep the spec honest: each test writes a log with the
Broker, damages or shapes it as the spec describes (a corrupt batch, a torn
tail, compressed bodies, a gap left by quarantine, empty values), and runs over
both readers (the ``reader`` fixture), which must agree with the log itself.
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


def _rows(df):
    return sorted((r["partition"], r["offset"], None if r["key"] is None else bytes(r["key"]), bytes(r["value"]))
                  for r in df.collect())


def _log_rows(path, topic):
    return sorted((p, off, key, value) for _t, p, off, _ts, key, value, _h in log_contents(path, topic))


def _segments(path, topic, partition=0):
    d = os.path.join(path, "topics", topic, str(partition))
    return d, sorted(f for f in os.listdir(d) if f.endswith(".log"))


def _batches(seg_path):
    with open(seg_path, "rb") as f:
        data = f.read()
    return list(scan_batches(data))  # (position, base offset, size)


def _several_segments(path, topic, batches=12, per_batch=10):
    make_topic(path, topic, partitions=1, segment_bytes=2048)
    with Broker(path) as b:
        prod = b.producer()
        for k in range(batches):
            prod.send_batch(topic, [b"%03d-%02d-" % (k, i) + b"x" * 40 for i in range(per_batch)], partition=0)
            prod.flush()


@pytest.fixture(scope="module")
def compressed(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("codec") / "data")
    for codec in ("zstd", "lz4", "gzip"):
        recs = [(b"v%d-" % i + b"abc" * (i % 50), None if i % 3 else b"k%d" % i, None, 1000 + i) for i in range(700)]
        make_topic(path, codec, partitions=1, compression=codec, records={0: recs})
    return path


@pytest.mark.parametrize("codec", ["zstd", "lz4", "gzip"])
def test_compressed_batches(spark, compressed, codec):
    d, segs = _segments(compressed, codec)
    with open(os.path.join(d, segs[0]), "rb") as f:
        assert f.read(18)[17] == {"zstd": 1, "lz4": 2, "gzip": 3}[codec]  # the codec byte of the first batch
    assert _rows(_read(spark, compressed, codec)) == _log_rows(compressed, codec)


def test_empty_values_and_keys(spark, tmp_path):
    path = str(tmp_path / "data")
    recs = [(b"", b"" if i % 2 else None, None, 5) for i in range(9)] + [(b"x", None, None, 6)]
    make_topic(path, "empty", partitions=1, records={0: recs})
    rows = _rows(_read(spark, path, "empty"))
    assert rows == _log_rows(path, "empty")
    assert [r[2:] for r in rows[:3]] == [(None, b""), (b"", b""), (None, b"")]  # empty key is not a null key


def test_torn_tail_is_not_read(spark, tmp_path):
    path = str(tmp_path / "data")
    _several_segments(path, "torn", batches=3)
    d, segs = _segments(path, "torn")
    last = os.path.join(d, segs[-1])
    pos, base, size = _batches(last)[-1]
    with open(last, "r+b") as f:  # the last append was interrupted half way
        f.truncate(pos + size // 2)
    rows = _rows(_read(spark, path, "torn"))
    assert [r[1] for r in rows] == list(range(base))


def test_corrupt_batch_fails_the_read_naming_file_and_position(spark, tmp_path):
    path = str(tmp_path / "data")
    _several_segments(path, "bad")
    d, segs = _segments(path, "bad")
    assert len(segs) >= 3
    first = os.path.join(d, segs[0])
    pos, base, size = _batches(first)[1]
    with open(first, "r+b") as f:  # one flipped bit in the body: the CRC no longer matches
        f.seek(pos + 64 + 5)
        b = f.read(1)
        f.seek(pos + 64 + 5)
        f.write(bytes([b[0] ^ 0x10]))
    with pytest.raises(Exception) as e:
        _read(spark, path, "bad").selectExpr("sum(length(value))").first()  # count() reads headers only
    msg = str(e.value)
    assert segs[0] in msg and f"position {pos}" in msg
    # a read that starts past the damage steps over it, as the spec says
    after = base + 10
    rows = _rows(_read(spark, path, "bad", startingOffsets=json.dumps({"bad": {"0": after}})))
    assert [r[1] for r in rows] == list(range(after, 120))


def test_gap_left_by_quarantine(spark, tmp_path):
    path = str(tmp_path / "data")
    _several_segments(path, "gap")
    d, segs = _segments(path, "gap")
    seg = os.path.join(d, segs[0])
    pos, base, size = _batches(seg)[1]
    with open(seg, "r+b") as f:
        f.seek(pos + 64 + 3)
        f.write(b"\xff")
    # an unclean shutdown (no marker, recovery from 0): recovery="skip" quarantines the batch
    os.unlink(os.path.join(d, ".clean-shutdown"))
    with open(os.path.join(d, "log.checkpoint"), "w") as f:
        json.dump({"version": 1, "recovery_point": 0, "log_start_offset": 0}, f)
    Log.open(d, recovery="skip").close()
    assert os.listdir(os.path.join(d, "quarantine"))
    rows = _rows(_read(spark, path, "gap"))
    offsets = [r[1] for r in rows]
    assert offsets == [o for o in range(120) if not base <= o < base + 10]
    assert rows == _log_rows(path, "gap")


@pytest.mark.parametrize("which", [1, -1])
def test_gap_left_by_a_quarantine_at_read_time(spark, tmp_path, which):
    """Damage below the recovery point (a clean close checkpointed the end, so
    recovery never scans it) quarantined by the owner's read under
    recovery="skip" (vqs/storage/log_repair.py): a batch inside a sealed
    segment, and a sealed segment's last batch (its gap runs to the next
    segment's base). Both readers see the same gap as the log."""
    path = str(tmp_path / "data")
    _several_segments(path, "rgap")
    d, segs = _segments(path, "rgap")
    assert len(segs) > 2
    seg = os.path.join(d, segs[0])
    pos, base, size = _batches(seg)[which]
    with open(seg, "r+b") as f:
        f.seek(pos + 64 + 3)
        f.write(b"\xff")
    with Log.open(d, recovery="skip") as log:
        offs, off = [], 0
        while recs := log.read(off, max_records=1000):
            offs += [r.offset for r in recs]
            off = recs[-1].offset + 1
    assert len(os.listdir(os.path.join(d, "quarantine"))) == 1
    assert offs == [o for o in range(120) if not base <= o < base + 10]
    rows = _rows(_read(spark, path, "rgap"))
    assert [r[1] for r in rows] == offs
    assert rows == _log_rows(path, "rgap")


def test_null_values_are_sql_nulls_beside_empty_ones(spark, tmp_path):
    path = str(tmp_path / "data")
    recs = [(None if i % 3 == 0 else b"" if i % 3 == 1 else b"v%d" % i, None, None, 5) for i in range(30)]
    make_topic(path, "tomb", partitions=1, records={0: recs})
    got = sorted((r["offset"], None if r["value"] is None else bytes(r["value"]))
                 for r in _read(spark, path, "tomb").collect())
    assert got == [(i, v) for i, (v, _k, _h, _t) in enumerate(recs)]
    assert got[:3] == [(0, None), (1, b""), (2, b"v2")]  # a null value is not an empty one
    # a filter on nulls is kept (the JVM reader once told Spark a value is never null, and
    # Spark dropped `value is not null` from the plan)
    df = _read(spark, path, "tomb")
    assert sorted(r["offset"] for r in df.where("value is not null").collect()) == [i for i in range(30) if i % 3]
    assert df.where("value is not null").count() == 20
    assert df.where("value is null").count() == 10


def test_null_header_values_are_sql_nulls_beside_empty_ones(spark, tmp_path):
    path = str(tmp_path / "data")
    recs = [(b"v%d" % i, None, [("n", None), ("e", b""), ("v", b"%d" % i)] if i % 2 else None, 5)
            for i in range(20)]
    make_topic(path, "hnull", partitions=1, records={0: recs})
    got = sorted((r["offset"], [(h["key"], None if h["value"] is None else bytes(h["value"])) for h in r["headers"]])
                 for r in _read(spark, path, "hnull", includeHeaders="true").collect())
    assert got == [(i, h or []) for i, (_v, _k, h, _t) in enumerate(recs)]
    assert got[1] == (1, [("n", None), ("e", b""), ("v", b"1")])  # a null header value is not an empty one
