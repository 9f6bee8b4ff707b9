"""Log.reconfigure: an open log takes new segment size, retention and compression for what it
writes next; what is written stays as written and reads the same; bad values change nothing.
A new ``flush`` keeps what the old one promised and holds from then on."""

from __future__ import annotations

import os
import threading

import pytest

from vqs.disk import fs
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


class _Fsyncs:
    """Counts fsyncs (storage's seam and os.fsync); ``event`` is set at each."""

    def __init__(self, monkeypatch):
        self.n = 0
        self.event = threading.Event()
        real = os.fsync

        def spy(fd):
            self.n += 1
            self.event.set()
            return real(fd)

        monkeypatch.setattr(os, "fsync", spy)
        monkeypatch.setattr(fs, "fsync", spy)


def test_a_flush_change_keeps_what_was_promised_and_holds_from_then(tmp_path, monkeypatch):
    fsyncs = _Fsyncs(monkeypatch)
    with Log.open(tmp_path / "log", flush="interval", flush_interval_ms=3_600_000) as lg:
        lg.append(b"a")
        lg.append(b"b")  # buffered: an hour's interval
        before = fsyncs.n
        lg.reconfigure(flush="always")
        assert fsyncs.n > before  # what interval had taken is on disk at the change
        assert lg._sync.durable_end == lg.end_offset == 2
        for i in range(3):  # always: each append returns fsynced
            n = fsyncs.n
            lg.append(b"c%d" % i)
            assert fsyncs.n > n and lg._sync.durable_end == lg.end_offset
        lg.reconfigure(flush="interval", flush_interval_ms=5)  # the hour is gone: 5 ms from now
        fsyncs.event.clear()
        n = fsyncs.n
        lg.append(b"d")
        assert fsyncs.n == n  # returned without an fsync
        assert fsyncs.event.wait(10)  # the flusher's, at the new interval
        lg.reconfigure(flush="never")
        assert lg._sync.flush_job is None  # off the flusher (its last job retired)
        assert lg.flush_policy == "never" and lg.flush_interval_ms == 100  # (open's default)
        with pytest.raises(ConfigError):
            lg.reconfigure(flush="sometimes")
        with pytest.raises(ConfigError):
            lg.reconfigure(flush="interval", flush_interval_ms=0)
        assert lg.flush_policy == "never"  # a refused change changes nothing
        assert [r.value for r in lg.read(0, max_records=10)] == [b"a", b"b", b"c0", b"c1", b"c2", b"d"]


def test_appends_go_on_across_flush_changes(tmp_path):
    """Appenders of both kinds while the policy flips: every append returns (an ``always``
    appender waits for the group it joined, whatever the policy is by then), each record once."""
    with Log.open(tmp_path / "log", flush="always", flush_interval_ms=1) as lg:
        stop = threading.Event()
        errors: list = []

        def append(k: int) -> None:
            try:
                for i in range(300):
                    if i % 3:
                        lg.append(b"%d-%d" % (k, i))
                    else:
                        lg.append_batch([b"%d-%d" % (k, i)])
            except BaseException as e:  # surfaced below
                errors.append(e)

        threads = [threading.Thread(target=append, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        policies = ("interval", "always", "never", "always")
        i = 0
        while any(t.is_alive() for t in threads) and not stop.is_set():
            lg.reconfigure(flush=policies[i % 4], flush_interval_ms=1 + i % 3)
            i += 1
        for t in threads:
            t.join(60)
            assert not t.is_alive(), "an appender never returned"
        assert not errors and i > 0
        lg.reconfigure(flush="always")
        got = [r.value for r in lg.read(0, max_records=10_000, max_bytes=1 << 30)]
        assert sorted(got) == sorted(b"%d-%d" % (k, i) for k in range(4) for i in range(300))
        for k in range(4):  # each appender's records in its order
            mine = [v for v in got if v.startswith(b"%d-" % k)]
            assert mine == [b"%d-%d" % (k, i) for i in range(300)]
