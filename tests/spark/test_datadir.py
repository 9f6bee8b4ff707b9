"""Path mode's view of a data directory (no Spark session needed)."""

from __future__ import annotations

import pytest

from vqs.broker import Broker
from vqs.errors import InvalidRecord
from vqs.spark.appenders import PathAppender
from vqs.spark.datadir import log_config, partition_dir, read_topic_meta
from vqs.spark.rows import Rows
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


def test_a_compacted_topic_in_path_mode(tmp_path):
    """The path-mode writer opens a compacted topic's partitions as the broker does (no
    retention for cleanup_policy=compact) and refuses keyless rows, as every front does."""
    data = str(tmp_path / "data")
    with Broker(data) as b:
        b.create_topic("table", cleanup_policy="compact", retention_ms=1000)
    assert log_config(read_topic_meta(data, "table"))["retention_ms"] is None
    with PathAppender(data, 5.0, own=True) as app:
        with pytest.raises(InvalidRecord, match="compacted"):
            app.append("table", 0, Rows([b"v1", b"v2"], [b"k", None], None, None))
        app.append("table", 0, Rows([b"v1", b"v2"], [b"k", b"j"], None, None))
    with Broker(data) as b:
        assert [r.key for r in b.topic("table").read(0, 0)] == [b"k", b"j"]


def test_a_null_header_value_is_written_as_a_null_value():
    """The sink's Arrow rows: a NULL header value stays null (as the readers give it), an empty
    one empty, so a DataFrame read from vqs is written back as it was."""
    import pyarrow as pa

    from vqs.spark.rows import Router
    from vqs.spark.schema import HEADERS_ARROW

    hs = pa.array([[{"key": "n", "value": None}, {"key": "e", "value": b""}], None], HEADERS_ARROW)
    rb = pa.RecordBatch.from_arrays([pa.array([b"a", b"b"]), hs], ["value", "headers"])
    [(topic, _p, rows)] = Router(lambda t: 1, "t", 0).route(rb)
    assert topic == "t" and rows.headers == [(("n", None), ("e", b"")), None]
