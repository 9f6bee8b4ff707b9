"""Log.reconfigure: an open log takes new segment size, retention and compression for what it
writes next; what is written stays as written and reads the same; bad values change nothing."""

from __future__ import annotations

import os

import pytest

from vqs.errors import ConfigError
from vqs.record import CODEC_NONE, CODEC_ZSTD
from vqs.storage import Log


def test_new_batches_take_the_new_settings_and_old_ones_stay(tmp_path):
    with Log.open(tmp_path / "log", flush="always", segment_bytes=1 << 20) as lg:
        lg.append_batch([b"x" * 100] * 10)
        lg.reconfigure(segment_bytes=1024, compression="zstd")
        last = b""
        for _ in range(20):
            last = os.urandom(300)  # (incompressible: each batch is over a third of a segment)
            lg.append_batch([os.urandom(300), last])
        assert lg.segment_count > 5  # rolled at the new, smaller size
        codecs = [b.codec for b in lg.read_batches(0, max_bytes=1 << 30)]
        assert codecs[0] == CODEC_NONE and codecs[-1] == CODEC_ZSTD
        assert [r.value for r in lg.read(0, max_records=10)] == [b"x" * 100] * 10  # as written
        lg.reconfigure(segment_bytes=1024, compression="zstd", retention_bytes=4096)
        assert lg.apply_retention() > 0 and lg.start_offset > 0  # the new size limit
        assert [r.value for r in lg.read(lg.end_offset - 1)] == [last]
        with pytest.raises(ConfigError):
            lg.reconfigure(segment_bytes=100)
        with pytest.raises(ConfigError):
            lg.reconfigure(compression="brotli")
        with pytest.raises(ConfigError):
            lg.reconfigure(retention_ms=-1)
        assert (lg.segment_bytes, lg.compression, lg.retention_bytes) == (1024, "zstd", 4096)
        lg.reconfigure()  # every setting back to open's defaults
        assert (lg.segment_bytes, lg.compression, lg.retention_bytes, lg.retention_ms) == (128 << 20, None, None, None)
