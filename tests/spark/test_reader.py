"""The Python source's read of one offset range, outside Spark (vqs/spark/reader.py)."""

from __future__ import annotations

from spark_helpers import append, log_contents, make_topic

from vqs.spark.datadir import PathSource
from vqs.spark.options import parse_read_options
from vqs.spark.reader import plan_ranges, read_range


class CountingSource(PathSource):
    """A PathSource over the real data dir that records the bytes each log read asks for."""

    def __init__(self, data_dir):
        super().__init__(data_dir)
        self.asked: list[int] = []

    def read_batches(self, topic, partition, offset, max_bytes):
        self.asked.append(max_bytes)
        return super().read_batches(topic, partition, offset, max_bytes)


def _read_values(data_dir, **options):
    opts = parse_read_options({"path": str(data_dir), "topic": "t", **options}, streaming=False)
    src = CountingSource(str(data_dir))
    try:
        values = [v for r in plan_ranges(src, opts) for b in read_range(src, r, opts, ("value",))
                  for v in b.column(0).to_pylist()]
    finally:
        src.close()
    return values, src.asked


def test_read_size_is_the_option_else_the_mapped_default(tmp_path):
    make_topic(tmp_path, "t", partitions=1)
    for i in range(5):  # five log batches of about 10 kB
        append(tmp_path, "t", 0, [b"%d-%d-" % (i, j) + bytes(100) for j in range(100)])
    want = [rec[5] for rec in log_contents(tmp_path, "t")]

    values, asked = _read_values(tmp_path)
    assert values == want
    assert set(asked) == {PathSource.read_bytes_default} == {16 << 20}
    # A read smaller than a batch still returns the whole batch: one read per batch.
    values, asked = _read_values(tmp_path, maxBytesPerRead="1")
    assert values == want
    assert asked == [1] * 5
