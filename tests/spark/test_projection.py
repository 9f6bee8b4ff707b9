"""A user-specified schema that is a subset of the source's columns (a projection)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)
from spark_helpers import append, make_topic

import vqs.spark.schema as vschema
from vqs.errors import ConfigError
from vqs.record import decode_batch, encode_batch
from vqs.spark.schema import HEADER_TYPE, ArrowConverter, projected_columns, source_schema

T0 = 1_700_000_000_000
FULL = ["key", "value", "topic", "partition", "offset", "timestamp"]


def _records(p, n):
    return [
        (
            f"p{p}-v{i}".encode() * (1 + i % 3),
            None if i % 4 == 0 else f"k{i % 5}".encode(),
            [("h", f"{p}.{i}".encode())] if i % 3 == 0 else None,
            T0 + 1000 * i + p,
        )
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("proj") / "data")
    make_topic(path, "events", partitions=2, records={0: _records(0, 300), 1: _records(1, 40)})
    append(path, "events", 1, [b"late-%d" % i for i in range(60)], timestamp_ms=T0 + 5_000_000)
    return path


def _read(spark, path, schema=None, **opts):
    r = spark.read.format("vqs").option("path", path).option("topic", "events")
    for k, v in opts.items():
        r = r.option(k, v)
    if schema is not None:
        r = r.schema(schema)
    return r.load()


def _tuples(df, cols):
    rows = [tuple(r[c] for c in cols) for r in df.collect()]
    return sorted(rows, key=lambda t: tuple((v is not None, v if v is not None else 0) for v in t))


# -- the check (no Spark session needed) ------------------------------------


def _st(*fields):
    return StructType([StructField(n, t, nullable) for n, t, nullable in fields])


def test_projected_columns_accepts_subsets_in_any_order():
    assert projected_columns(source_schema(False), False) is None
    assert projected_columns(source_schema(True), True) is None
    assert projected_columns(_st(("value", BinaryType(), True)), False) == ("value",)
    cols = projected_columns(_st(("offset", LongType(), True), ("key", BinaryType(), True)), False)
    assert cols == ("offset", "key")
    hdr = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
    assert projected_columns(_st(("headers", hdr, True)), True) == ("headers",)
    # the whole schema in another order is a projection too
    shuffled = StructType(list(reversed(source_schema(False).fields)))
    assert projected_columns(shuffled, False) == tuple(reversed(FULL))


@pytest.mark.parametrize(
    "schema, headers, needles",
    [
        (_st(("valu", BinaryType(), True)), False, ["column 'valu' is not a column of the vqs source"]),
        (_st(("Value", BinaryType(), True)), False, ["column 'Value'", "did you mean 'value'"]),
        (_st(("offset", IntegerType(), True)), False, ["column 'offset' must be bigint, not int"]),
        (_st(("value", StringType(), True)), False, ["column 'value' must be binary, not string"]),
        (_st(("value", BinaryType(), False)), False, ["column 'value' must be binary", "drop NOT NULL"]),
        (_st(("headers", ArrayType(HEADER_TYPE), True)), False, ["column 'headers'", "includeHeaders"]),
        (_st(("headers", ArrayType(HEADER_TYPE, containsNull=False), True)), True,
         ["column 'headers' must be array<struct<key:string,value:binary>>", "drop NOT NULL"]),
        (_st(("value", BinaryType(), True), ("value", BinaryType(), True)), False, ["'value' is named twice"]),
        (StructType([]), False, ["at least one column"]),
    ],
)
def test_projected_columns_refuses_what_the_source_lacks(schema, headers, needles):
    with pytest.raises(ConfigError) as e:
        projected_columns(schema, headers)
    msg = str(e.value)
    for needle in needles:
        assert needle in msg
    listing = "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp"
    assert "the source's columns: " + listing in msg
    assert ("headers array<struct<key:string,value:binary>>" in msg) == headers


def test_converter_builds_only_the_projected_columns(monkeypatch):
    raw = encode_batch(100, [b"v%d" % i for i in range(8)], headers=[[("h", b"x")]] * 8, timestamps=T0)
    b = decode_batch(raw)

    def boom(*a):
        raise AssertionError("headers decoded for a projection without them")

    monkeypatch.setattr(vschema, "decode_headers", boom)
    conv = ArrowConverter("t", 1, include_headers=True, columns=("offset", "value"))
    rb = conv.convert(b, 2, 6)
    assert rb.schema.names == ["offset", "value"]
    assert rb.column("offset").to_pylist() == [102, 103, 104, 105]
    assert rb.column("value").to_pylist() == [b"v2", b"v3", b"v4", b"v5"]
    assert conv._const == {}  # no topic, partition or null-key column was built
    # the batch is what Spark expects for that schema
    user = _st(("offset", LongType(), True), ("value", BinaryType(), True))
    assert rb.schema.equals(to_arrow_schema(user, timezone="UTC"))
    assert ArrowConverter("t", 1, False, ("value",)).convert(b, 0, 8).schema == pa.schema([("value", pa.binary())])


# -- through Spark ----------------------------------------------------------


@pytest.mark.usefixtures("reader")  # over both readers (conftest)
def test_projection_equals_the_full_read(spark, data):
    full = _read(spark, data)
    assert full.columns == FULL
    one = _read(spark, data, "value binary")
    assert one.columns == ["value"]
    assert _tuples(one, ["value"]) == _tuples(full, ["value"])
    several = _read(spark, data, "key binary, value binary, offset long")
    assert several.columns == ["key", "value", "offset"]
    assert _tuples(several, ["key", "value", "offset"]) == _tuples(full, ["key", "value", "offset"])
    got = one.selectExpr("count(*) c", "sum(length(value)) s").first()
    want = full.selectExpr("count(*) c", "sum(length(value)) s").first()
    assert (got.c, got.s) == (want.c, want.s) == (400, want.s)


@pytest.mark.usefixtures("reader")  # over both readers (conftest)
def test_reordered_columns(spark, data):
    df = _read(spark, data, "timestamp timestamp, offset bigint, partition int, topic string",
               minPartitions="3")
    assert df.columns == ["timestamp", "offset", "partition", "topic"]
    assert [f.dataType.simpleString() for f in df.schema] == ["timestamp", "bigint", "int", "string"]
    cols = ["timestamp", "offset", "partition", "topic"]
    assert _tuples(df, cols) == _tuples(_read(spark, data), cols)
    # a range that starts inside a log batch
    part = _read(spark, data, "offset long, value binary", startingOffsets='{"events": {"0": 7, "1": 35}}')
    assert _tuples(part, ["offset", "value"]) == _tuples(
        _read(spark, data).where("(partition = 0 and offset >= 7) or (partition = 1 and offset >= 35)"),
        ["offset", "value"])


@pytest.mark.usefixtures("reader")  # over both readers (conftest)
def test_headers_column(spark, data):
    cols = ["partition", "offset", "headers"]
    full = _read(spark, data, includeHeaders="true")
    df = _read(spark, data, "headers array<struct<key: string, value: binary>>, partition int, offset long",
               includeHeaders="true")
    assert df.columns == ["headers", "partition", "offset"]

    def norm(frame):
        return sorted((r["partition"], r["offset"], tuple((h["key"], bytes(h["value"])) for h in r["headers"]))
                      for r in frame.select(*cols).collect())

    got = norm(df)
    assert got == norm(full)
    assert len(got) == 400 and sum(1 for *_, h in got if h) == 100 + 14
    # without the headers column, includeHeaders costs nothing
    assert _read(spark, data, "value binary", includeHeaders="true").count() == 400


@pytest.mark.usefixtures("reader")  # over both readers (conftest)
@pytest.mark.parametrize(
    "schema, opts, needles",
    [
        ("valeu binary", {}, ["column 'valeu' is not a column of the vqs source"]),
        ("value string", {}, ["column 'value' must be binary, not string"]),
        ("offset int", {}, ["column 'offset' must be bigint, not int"]),
        ("value binary, headers array<struct<key: string, value: binary>>", {},
         ["column 'headers'", "includeHeaders"]),
    ],
)
def test_bad_schema_fails_at_planning(spark, data, schema, opts, needles):
    # Spark runs no Python at load() when the user gives the schema: the check
    # runs when the query is planned, before any task.
    df = _read(spark, data, schema, **opts)
    with pytest.raises(Exception) as e:
        df.collect()
    msg = str(e.value)
    for needle in needles + ["the source's columns: key binary, value binary, topic string"]:
        assert needle in msg


@pytest.mark.usefixtures("reader")  # over both readers (conftest)
def test_streaming_with_a_projected_schema(spark, data, tmp_path):
    q = (spark.readStream.format("vqs").option("path", data).option("topic", "events")
         .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "150")
         .schema("offset long, value binary").load()
         .writeStream.format("memory").queryName("vqs_projected")
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None
    assert [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]] == [150, 150, 100]
    got = spark.table("vqs_projected")
    assert got.columns == ["offset", "value"]
    assert _tuples(got, ["offset", "value"]) == _tuples(_read(spark, data), ["offset", "value"])


def test_streaming_with_a_bad_schema_fails_at_start(spark, data, tmp_path):
    q = (spark.readStream.format("vqs").option("path", data).option("topic", "events")
         .schema("offset string").load()
         .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ckpt")).start())
    with pytest.raises(Exception) as e:
        q.awaitTermination(60)
    assert "column 'offset' must be bigint, not string" in str(e.value)
    assert q.lastProgress is None
