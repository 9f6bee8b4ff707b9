"""The Python source's read of one offset range, outside Spark (vqs/spark/reader.py)."""

from __future__ import annotations

import os

from spark_helpers import append, log_contents, make_topic

from vqs.spark.datadir import PathSource
from vqs.spark.options import parse_read_options
from vqs.spark.reader import plan_ranges, read_range


class CountingSource(PathSource):
    """A PathSource over the real data dir that records how it reads: the bytes
    each ``read_batches`` asks for, the ``scan_batches`` calls, and the bytes
    its segments read with ``pread`` (lookups; a scan maps instead)."""

    def __init__(self, data_dir):
        super().__init__(data_dir)
        self.asked: list[int] = []
        self.scans: list[tuple[int, int]] = []
        self.batches = 0

    def read_batches(self, topic, partition, offset, max_bytes):
        self.asked.append(max_bytes)
        return super().read_batches(topic, partition, offset, max_bytes)

    def scan_batches(self, topic, partition, offset, end):
        self.scans.append((offset, end))
        for b in super().scan_batches(topic, partition, offset, end):
            self.batches += 1
            yield b


def _read_values(data_dir, **options):
    opts = parse_read_options({"path": str(data_dir), "topic": "t", **options}, streaming=False)
    src = CountingSource(str(data_dir))
    try:
        values = [v for r in plan_ranges(src, opts) for b in read_range(src, r, opts, ("value",))
                  for v in b.column(0).to_pylist()]
    finally:
        src.close()
    return values, src


def test_a_path_mode_read_is_one_lazy_scan_whatever_maxbytesperread_says(tmp_path):
    make_topic(tmp_path, "t", partitions=1)
    for i in range(5):  # five log batches of about 10 kB
        append(tmp_path, "t", 0, [b"%d-%d-" % (i, j) + bytes(100) for j in range(100)])
    want = [rec[5] for rec in log_contents(tmp_path, "t")]
    for options in ({}, {"maxBytesPerRead": "1"}):
        values, src = _read_values(tmp_path, **options)
        assert values == want
        assert src.asked == [] and src.scans == [(0, 500)] and src.batches == 5


def test_starting_timestamp_reads_from_the_time_index_lookup_not_the_log_start(tmp_path):
    """startingTimestamp in path mode: the range starts at the first offset whose
    timestamp is >= the option (Log.offset_for_time: the segments' time indexes),
    so the records are those of a full read from that offset on, and only the
    batches from there are read."""
    t0 = 1_700_000_000_000
    make_topic(tmp_path, "t", partitions=1, segment_bytes=16384)
    for k in range(60):  # 60 batches of 20 records, about 2.4 kB each: some 10 segments
        append(tmp_path, "t", 0, [b"%03d-%02d" % (k, i) + b"v" * 100 for i in range(20)], timestamp_ms=t0 + 1000 * k)
    recs = log_contents(tmp_path, "t")
    ts = t0 + 1000 * 45 + 1  # inside no batch: the first record at or after it is batch 46's first
    first = next(r[2] for r in recs if r[3] >= ts)
    assert first == 46 * 20
    want = [r[5] for r in recs if r[2] >= first]

    opts = parse_read_options({"path": str(tmp_path), "topic": "t", "startingTimestamp": str(ts)}, streaming=False)
    src = CountingSource(str(tmp_path))
    pread = {"bytes": 0}
    from vqs.storage.segment import Segment

    real = Segment.pread

    def counting_pread(seg, position, n):
        pread["bytes"] += n
        return real(seg, position, n)

    Segment.pread = counting_pread
    try:
        ranges = plan_ranges(src, opts)
        lookup_bytes = pread["bytes"]
        values = [v for r in ranges for b in read_range(src, r, opts, ("value",)) for v in b.column(0).to_pylist()]
    finally:
        Segment.pread = real
        src.close()
    assert [(r.start, r.end) for r in ranges] == [(first, 1200)]
    assert values == want
    assert src.scans == [(first, 1200)] and src.batches == 60 - 46  # not the 60 of the log
    log_bytes = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(tmp_path) for f in fs
                    if f.endswith(".log"))
    # The lookup reads the segments' time indexes, and from each earlier segment
    # only its last batch (the index's sanity check), then the target segment
    # from its index entry: a scan from the log start would read all of it.
    assert lookup_bytes < log_bytes / 2, (lookup_bytes, log_bytes)


def test_a_corrupt_batch_read_ahead_fails_the_read_after_every_record_before_it(tmp_path):
    """Path-mode scans verify batches on a read-ahead thread (read_ahead.py),
    several batches before the reader converts them. A batch whose CRC fails
    still fails the read where it sits: every record before it is returned
    first, none from it or after it, and the error names the file and position
    (the same error as without read-ahead: the regular read reports it)."""
    import threading

    import pytest
    from batch_damage import flip_batch_byte

    from vqs.errors import CorruptRecordError

    make_topic(tmp_path, "t", partitions=1)
    for i in range(12):  # 12 log batches of 4096 records: each is its own Arrow batch
        append(tmp_path, "t", 0, [b"%02d-%04d" % (i, j) for j in range(4096)])
    seg = os.path.join(str(tmp_path), "topics", "t", "0", "00000000000000000000.log")
    pos, base, _size, _ = flip_batch_byte(seg, 7)
    assert base == 7 * 4096
    opts = parse_read_options({"path": str(tmp_path), "topic": "t"}, streaming=False)
    src = PathSource(str(tmp_path))
    got = []
    try:
        (r,) = plan_ranges(src, opts)
        with pytest.raises(CorruptRecordError) as e:
            for b in read_range(src, r, opts, ("offset", "value")):
                got.extend(b.column(0).to_pylist())
    finally:
        src.close()
    assert got == list(range(base))
    assert "00000000000000000000.log" in str(e.value) and f"position {pos}" in str(e.value)
    assert not [t for t in threading.enumerate() if t.name == "vqs-read-ahead"]
