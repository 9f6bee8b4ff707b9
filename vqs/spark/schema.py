"""Schema of the ``vqs`` source, and log batches -> Arrow without a per-record loop.

A log :class:`~vqs.storage.record_batch.RecordBatch` is columnar: its
``value_offsets`` (uint32, count+1, first 0) and ``value_data`` are exactly
the offsets and data buffers of an Arrow ``BinaryArray``; keys add an LSB
validity bitmap, as Arrow does. So a log batch becomes Arrow columns with
``pa.Array.from_buffers`` over memoryviews (no copy), sliced to the requested
offset range; offsets, timestamps, topic and partition are built with numpy.
The only per-record Python work is decoding headers, and only when
``includeHeaders`` is set and a batch has headers.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ..storage.record_batch import decode_headers

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
    RecordBatches of :func:`arrow_schema`."""

    def __init__(self, topic: str, partition: int, include_headers: bool):
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self.schema = arrow_schema(include_headers)
        self._const_n = 0
        self._topic_col: pa.Array | None = None
        self._part_col: pa.Array | None = None
        self._null_keys: pa.Array | None = None

    def _constants(self, n: int) -> tuple[pa.Array, pa.Array, pa.Array]:
        """Columns that are the same for every record of the partition (topic,
        partition, and the key of keyless records), built once per reader and
        sliced: a slice is a view, so a batch costs no allocation for them."""
        if n > self._const_n:
            size = max(n, 16384)
            self._topic_col = pa.repeat(pa.scalar(self.topic, pa.string()), size)
            self._part_col = pa.array(np.full(size, self.partition, dtype=np.int32))
            self._null_keys = pa.nulls(size, pa.binary())
            self._const_n = size
        return self._topic_col.slice(0, n), self._part_col.slice(0, n), self._null_keys.slice(0, n)

    def convert(self, b, start: int, stop: int) -> pa.RecordBatch:
        """Records ``[start, stop)`` (indexes within log batch ``b``)."""
        n_all = b.count
        n = stop - start
        values = pa.Array.from_buffers(
            pa.binary(), n_all, [None, _buf(b.value_offsets), _buf(b.value_data)]
        )
        topic, part, null_keys = self._constants(n)
        if b.key_validity is None:
            keys = null_keys
        else:
            keys = pa.Array.from_buffers(
                pa.binary(), n_all,
                [_buf(b.key_validity), _buf(b.key_offsets), _buf(b.key_data)],
                null_count=-1,
            ).slice(start, n)
        if start or n != n_all:
            values = values.slice(start, n)
        base = b.base_offset + start
        offsets = pa.array(np.arange(base, base + n, dtype=np.int64))
        if b.timestamps is None:
            ts = np.full(n, b.first_timestamp_ms * 1000, dtype=np.int64)
        else:
            ts = np.frombuffer(b.timestamps, dtype=np.int64, count=n, offset=8 * start) * 1000
        timestamps = pa.Array.from_buffers(TS_TYPE, n, [None, pa.py_buffer(ts)])
        cols = [keys, values, topic, part, offsets, timestamps]
        if self.include_headers:
            cols.append(self._headers(b, start, stop))
        return pa.RecordBatch.from_arrays(cols, schema=self.schema)

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
