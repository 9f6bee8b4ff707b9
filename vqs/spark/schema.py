"""Schema of the ``vqs`` source, and log batches -> Arrow without a per-record loop.

A log :class:`~vqs.record.RecordBatch` is columnar: its
``value_offsets`` (uint32, count+1, first 0) and ``value_data`` are exactly
the offsets and data buffers of an Arrow ``BinaryArray``; keys add an LSB
validity bitmap, as Arrow does. So a log batch becomes Arrow columns with
``pa.Array.from_buffers`` over memoryviews (no copy), sliced to the requested
offset range; offsets, timestamps, topic and partition are built with numpy.
The only per-record Python work is decoding headers, and only when
``includeHeaders`` is set and a batch has headers.

A user-specified schema (``spark.read.format("vqs").schema("value binary")``)
may name a subset of the columns, in any order (:func:`projected_columns`
checks it); the converter then builds only those columns. Spark 4.x prunes no
columns of a Python source by itself, and turning every column of every
record into rows is most of a read's cost in the JVM.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ..errors import ConfigError
from ..record import decode_headers

HEADER_TYPE = StructType([StructField("key", StringType()), StructField("value", BinaryType())])


def source_schema(include_headers: bool = False) -> StructType:
    """``key binary, value binary, topic string, partition int, offset long,
    timestamp timestamp`` (+ ``headers array<struct<key string, value binary>>``)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
    ]
    if include_headers:
        fields.append(StructField("headers", ArrayType(HEADER_TYPE)))
    return StructType(fields)


def _fits(user: DataType, src: DataType) -> bool:
    """``user`` is ``src`` with the same or looser nullability, at every level."""
    if isinstance(src, StructType):
        return (
            isinstance(user, StructType)
            and [f.name for f in user.fields] == [f.name for f in src.fields]
            and all(
                (u.nullable or not s.nullable) and _fits(u.dataType, s.dataType)
                for u, s in zip(user.fields, src.fields)
            )
        )
    if isinstance(src, ArrayType):
        return (
            isinstance(user, ArrayType)
            and (user.containsNull or not src.containsNull)
            and _fits(user.elementType, src.elementType)
        )
    if isinstance(src, MapType):
        return (
            isinstance(user, MapType)
            and (user.valueContainsNull or not src.valueContainsNull)
            and _fits(user.keyType, src.keyType)
            and _fits(user.valueType, src.valueType)
        )
    return user == src


def projected_columns(schema, include_headers: bool) -> tuple[str, ...] | None:
    """Check the schema Spark hands the reader (the user's, if one was given
    with ``.schema(...)``, else :func:`source_schema`) and return the source
    columns it selects, in its order; ``None`` when it is the whole source
    schema (the converter's full path).

    Every field must name a column of ``source_schema(include_headers)`` with
    the same type; nullability may be looser (a nullable field for a
    non-nullable column), not stricter. Raises :class:`ConfigError` naming the
    column, the expected type and the source's columns."""
    src = source_schema(include_headers)
    if schema is None or schema == src:
        return None
    by_name = {f.name: f for f in src.fields}
    listing = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in src.fields)
    if not isinstance(schema, StructType) or not schema.fields:
        raise ConfigError(f"schema: a vqs read needs at least one column; the source's columns: {listing}")
    seen = set()
    for f in schema.fields:
        s = by_name.get(f.name)
        if s is None:
            hint = ""
            if f.name == "headers":
                hint = " (set option 'includeHeaders' to true for the headers column)"
            else:
                alike = [n for n in by_name if n.lower() == f.name.lower()]
                if alike:
                    hint = f" (did you mean '{alike[0]}'? column names are case-sensitive here)"
            raise ConfigError(
                f"schema: column '{f.name}' is not a column of the vqs source{hint}; "
                f"the source's columns: {listing}"
            )
        if f.name in seen:
            raise ConfigError(f"schema: column '{f.name}' is named twice; the source's columns: {listing}")
        seen.add(f.name)
        if not ((f.nullable or not s.nullable) and _fits(f.dataType, s.dataType)):
            want = s.dataType.simpleString()
            if f.dataType.simpleString() == want:  # the same type, but NOT NULL somewhere
                problem = f"must be {want}, nullable as the source's column is (drop NOT NULL)"
            else:
                problem = f"must be {want}, not {f.dataType.simpleString()}"
            raise ConfigError(f"schema: column '{f.name}' {problem}; the source's columns: {listing}")
    return tuple(f.name for f in schema.fields)


TS_TYPE = pa.timestamp("us", tz="UTC")
HEADERS_ARROW = pa.list_(
    pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
)


def arrow_schema(include_headers: bool = False) -> pa.Schema:
    """Exactly ``to_arrow_schema(source_schema(...), timezone="UTC")``, which
    Spark checks every batch ``read()`` yields against."""
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", TS_TYPE),
    ]
    if include_headers:
        fields.append(pa.field("headers", HEADERS_ARROW))
    return pa.schema(fields)


def _buf(mv) -> pa.Buffer:
    return pa.py_buffer(mv)


class ArrowConverter:
    """Turns slices of log RecordBatches of one topic partition into Arrow
    RecordBatches of :func:`arrow_schema`, or of the ``columns`` of it given
    (a projection checked by :func:`projected_columns`): only those columns
    are built."""

    def __init__(self, topic: str, partition: int, include_headers: bool, columns=None):
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        full = arrow_schema(include_headers)
        if columns is None:
            self.columns = tuple(full.names)
            self.schema = full
        else:
            self.columns = tuple(columns)
            self.schema = pa.schema([full.field(c) for c in self.columns])
        self._builders = [getattr(self, "_col_" + c) for c in self.columns]
        self._const: dict[str, pa.Array] = {}

    def _constant(self, name: str, n: int) -> pa.Array:
        """Columns that are the same for every record of the partition (topic,
        partition, and the key of keyless records), built once per reader, the
        first time a batch needs them, and sliced: a slice is a view, so a
        batch costs no allocation for them."""
        col = self._const.get(name)
        if col is None or len(col) < n:
            size = max(n, 16384)
            if name == "topic":
                col = pa.repeat(pa.scalar(self.topic, pa.string()), size)
            elif name == "partition":
                col = pa.array(np.full(size, self.partition, dtype=np.int32))
            else:
                col = pa.nulls(size, pa.binary())
            self._const[name] = col
        return col.slice(0, n)

    def convert(self, b, start: int, stop: int) -> pa.RecordBatch:
        """Records ``[start, stop)`` (indexes within log batch ``b``)."""
        return pa.RecordBatch.from_arrays([f(b, start, stop) for f in self._builders], schema=self.schema)

    def _col_key(self, b, start: int, stop: int) -> pa.Array:
        n = stop - start
        if b.key_validity is None:
            return self._constant("null_keys", n)
        return pa.Array.from_buffers(
            pa.binary(), b.count,
            [_buf(b.key_validity), _buf(b.key_offsets), _buf(b.key_data)],
            null_count=-1,
        ).slice(start, n)

    def _col_value(self, b, start: int, stop: int) -> pa.Array:
        n_all = b.count
        vv = b.value_validity  # None: no value of the batch is null
        values = pa.Array.from_buffers(pa.binary(), n_all, [None if vv is None else _buf(vv), _buf(b.value_offsets),
                                                            _buf(b.value_data)], null_count=0 if vv is None else -1)
        if start or stop != n_all:
            values = values.slice(start, stop - start)
        return values

    def _col_topic(self, b, start: int, stop: int) -> pa.Array:
        return self._constant("topic", stop - start)

    def _col_partition(self, b, start: int, stop: int) -> pa.Array:
        return self._constant("partition", stop - start)

    def _col_offset(self, b, start: int, stop: int) -> pa.Array:
        base = b.base_offset + start
        return pa.array(np.arange(base, base + stop - start, dtype=np.int64))

    def _col_timestamp(self, b, start: int, stop: int) -> pa.Array:
        n = stop - start
        if b.timestamps is None:
            ts = np.full(n, b.first_timestamp_ms * 1000, dtype=np.int64)
        else:
            ts = np.frombuffer(b.timestamps, dtype=np.int64, count=n, offset=8 * start) * 1000
        return pa.Array.from_buffers(TS_TYPE, n, [None, pa.py_buffer(ts)])

    def _col_headers(self, b, start: int, stop: int) -> pa.Array:
        return self._headers(b, start, stop)

    def _headers(self, b, start: int, stop: int) -> pa.Array:
        n = stop - start
        if b.header_offsets is None:
            offs = np.zeros(n + 1, dtype=np.int32)
            return pa.ListArray.from_arrays(
                pa.array(offs), pa.array([], HEADERS_ARROW.value_type), type=HEADERS_ARROW
            )
        ho = b.header_offsets
        data = b.header_data
        keys: list = []
        vals: list = []
        offs = [0]
        for i in range(start, stop):
            a, z = ho[i], ho[i + 1]
            if z > a:
                for k, v in decode_headers(data[a:z]):
                    keys.append(k)
                    vals.append(v)
            offs.append(len(keys))
        items = pa.StructArray.from_arrays(
            [pa.array(keys, pa.string()), pa.array(vals, pa.binary())],
            fields=list(HEADERS_ARROW.value_type),
        )
        return pa.ListArray.from_arrays(pa.array(offs, pa.int32()), items, type=HEADERS_ARROW)


def concat(pieces: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(pieces) == 1:
        return pieces[0]
    return pa.concat_batches(pieces)
