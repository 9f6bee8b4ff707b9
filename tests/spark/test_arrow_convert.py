"""ArrowConverter: log batches -> Arrow batches of the source schema (no Spark needed)."""

from __future__ import annotations

import pyarrow as pa

from vqs.record import decode_batch, encode_batch
from vqs.spark.schema import ArrowConverter, arrow_schema


def _batch(base, n, keys=None, ts=1_700_000_000_000):
    return decode_batch(encode_batch(base, [b"v%d" % i for i in range(n)], keys=keys, timestamps=ts))


def test_keyless_batches_share_the_constant_columns_and_grow_them():
    conv = ArrowConverter("t", 3, include_headers=False)
    small = conv.convert(_batch(0, 10), 2, 7)
    # larger than the columns built so far: they are rebuilt, earlier batches keep theirs
    big = conv.convert(_batch(10, 20_000), 0, 20_000)
    again = conv.convert(_batch(20_010, 5), 0, 5)
    for rb, n, first in ((small, 5, 2), (big, 20_000, 10), (again, 5, 20_010)):
        assert rb.schema.equals(arrow_schema(False))
        assert rb.num_rows == n
        assert rb.column("key").null_count == n
        assert rb.column("key").equals(pa.nulls(n, pa.binary()))
        assert rb.column("topic").to_pylist() == ["t"] * n
        assert rb.column("partition").to_pylist() == [3] * n
        assert rb.column("offset").to_pylist() == list(range(first, first + n))
    assert small.column("value").to_pylist() == [b"v%d" % i for i in range(2, 7)]
    # the batches survive an IPC round trip (how Spark receives them) unchanged
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, arrow_schema(False)) as w:
        for rb in (small, big, again):
            w.write_batch(rb)
    back = list(pa.ipc.open_stream(sink.getvalue()))
    assert [b.equals(rb) for b, rb in zip(back, (small, big, again))] == [True, True, True]


def test_keyed_batch_after_keyless_ones():
    conv = ArrowConverter("t", 0, include_headers=False)
    conv.convert(_batch(0, 4), 0, 4)
    keys = [None if i % 2 else b"k%d" % i for i in range(6)]
    rb = conv.convert(_batch(4, 6, keys=keys), 1, 6)
    assert rb.column("key").to_pylist() == keys[1:6]
