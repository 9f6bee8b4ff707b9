"""Path mode's view of a data directory (no Spark session needed)."""

from __future__ import annotations

from vqs.broker import Broker
from vqs.spark.datadir import log_config, partition_dir, read_topic_meta
from vqs.storage import Log


def test_a_topic_with_unlimited_retention_opens_for_a_path_mode_writer(tmp_path):
    data = str(tmp_path / "data")
    with Broker(data) as b:
        b.create_topic("changelog", retention_ms=-1, retention_bytes=-1, segment_bytes=8192)
    cfg = log_config(read_topic_meta(data, "changelog"))
    assert cfg == {"retention_ms": None, "retention_bytes": None, "segment_bytes": 8192}
    log = Log.open(partition_dir(data, "changelog", 0), **cfg)  # -1 would be refused by the Log
    try:
        assert log.retention_ms is None and log.segment_bytes == 8192
    finally:
        log.close()
