"""``startingTimestamp`` seeks by the time index in both readers (docs/FORMAT.md, "Time index").

A log of several segments with rising timestamps; ``startingTimestamp`` falls in
the middle of a later segment. Both readers must return the same rows: every
record from the first one stamped at or after it. And neither may scan the
earlier segments to find it: the first batch of every earlier segment is
damaged on disk (its CRC fails), which a scan from the log start meets and
reports (``CorruptBatchException``, failOnDataLoss or not), while a seek
reads only an earlier segment's index files and the batch its time index names
(the segment's last). Before the seek, the JVM reader scanned from the start.
"""

from __future__ import annotations

import glob
import os

import pytest
from batch_damage import flip_batch_byte

from vqs.broker import Broker
from vqs.record import scan_batches

T0 = 1_700_000_000_000  # ms
BATCHES, PER_BATCH = 40, 25


@pytest.fixture(scope="module")
def seek_log(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("timeseek") / "data")
    with Broker(path, index_interval_bytes=256) as b:
        b.create_topic("ts", partitions=1, segment_bytes=8192)
        prod = b.producer()
        for k in range(BATCHES):  # batch k: records stamped T0 + 1000 k + i
            prod.send_batch("ts", [b"%02d-%02d" % (k, i) + b"x" * 60 for i in range(PER_BATCH)],
                            partition=0, timestamps_ms=[T0 + 1000 * k + i for i in range(PER_BATCH)])
            prod.flush()
    segs = sorted(glob.glob(os.path.join(path, "topics", "ts", "0", "*.log")))
    assert len(segs) >= 4, segs
    return path, segs


def _rows(spark, path, reader, ts):
    df = (spark.read.format("vqs").option("path", path).option("topic", "ts").option("reader", reader)
          .option("startingTimestamp", str(ts)).load())
    return [(r.offset, bytes(r.value)) for r in df.select("offset", "value").orderBy("offset").collect()]


def test_starting_timestamp_seeks_past_damaged_earlier_segments(spark, seek_log):
    import vqs.spark

    if not vqs.spark.jvm_reader_loaded(spark):
        pytest.skip("the JVM reader is not built here (javac missing)")
    path, segs = seek_log
    # a timestamp inside a batch of the second-to-last segment, past its first batch
    with open(segs[-2], "rb") as f:
        batches = list(scan_batches(f.read()))
    assert len(batches) >= 3
    k = batches[2][1] // PER_BATCH  # the third batch of that segment: batch k of the writes
    ts = T0 + 1000 * k + 7
    want = [(o, b"%02d-%02d" % (o // PER_BATCH, o % PER_BATCH) + b"x" * 60)
            for o in range(k * PER_BATCH + 7, BATCHES * PER_BATCH)]
    for seg in segs[:-2]:
        flip_batch_byte(seg, 0)  # a scan from the log start stops here
    assert _rows(spark, path, "jvm", ts) == want
    assert _rows(spark, path, "python", ts) == want
    # the damage is real: a read that has to pass it is refused
    with pytest.raises(Exception, match=r"(?i)corrupt|invalid|crc"):
        _rows(spark, path, "jvm", T0)
