"""HybridQueue(recovery=...) on a corrupted disk tier, with Log's meaning:
``fail`` refuses to open (CorruptRecordError naming the file), ``skip`` drops
exactly the damaged batch's items and serves the rest in order, ``truncate``
keeps the items before it. And ``HybridQueue.metrics`` as a Prometheus
collector registered in a real registry and scraped."""

from __future__ import annotations

import os
import queue

import pytest

from vqs.errors import ConfigError, CorruptRecordError
from vqs.hybrid import HybridQueue
from vqs.record import scan_batches
from vqs.storage.log_dir import CLEAN_MARKER

N = 40


def _damaged_queue(path) -> tuple[int, int]:
    """A closed queue of N items, one per log batch, whose batch 10 has a
    flipped byte; the clean-shutdown marker removed, as a crash leaves it.
    Returns the damaged batch's (first item, count)."""
    with HybridQueue(path, memory_items=0) as q:  # memory_items=0: every put is one batch on disk
        for i in range(N):
            q.put(i)
    logdir = os.path.join(path, "log")
    (seg,) = [f for f in os.listdir(logdir) if f.endswith(".log")]
    seg = os.path.join(logdir, seg)
    with open(seg, "rb") as f:
        bs = list(scan_batches(f.read()))
    pos, base, size = bs[10]
    with open(seg, "r+b") as f:
        f.seek(pos + size - 1)
        b = f.read(1)
        f.seek(pos + size - 1)
        f.write(bytes([b[0] ^ 0xFF]))
    os.unlink(os.path.join(logdir, CLEAN_MARKER))
    return base, bs[11][1] - base


def _drain(q) -> list:
    out = []
    while True:
        got = q.get_batch(100, block=False)
        if not got:
            return out
        out.extend(got)


def test_recovery_fail_refuses_and_releases(tmp_path):
    p = tmp_path / "q"
    _damaged_queue(p)
    with pytest.raises(CorruptRecordError) as ei:
        HybridQueue(p)
    assert ei.value.path and ei.value.path.startswith(str(p))
    with pytest.raises(CorruptRecordError):  # the lock was released
        HybridQueue(p, recovery="fail")


def test_recovery_skip_drops_exactly_the_damaged_items(tmp_path):
    p = tmp_path / "q"
    base, n = _damaged_queue(p)
    expect = [i for i in range(N) if not base <= i < base + n]
    with HybridQueue(p, recovery="skip") as q:
        assert q.qsize() == len(expect)
        head = [q.get_nowait() for _ in range(3)]
        q.put("new")
        assert head + _drain(q) == expect + ["new"]
        assert q.qsize() == 0 and q.metrics.gets == len(expect) + 1
    with HybridQueue(p) as q:  # reopens cleanly (the gap is recorded), nothing redelivered
        assert q.qsize() == 0


def test_recovery_skip_with_a_consumer_part_way(tmp_path):
    """Items got before the damage are not delivered again; the count stays exact."""
    p = tmp_path / "q"
    base, n = _damaged_queue(p)
    with HybridQueue(p, recovery="skip") as q:
        first = [q.get_nowait() for _ in range(5)]
        q.task_done()
        assert first == [0, 1, 2, 3, 4]
        assert q.qsize() == N - n - 5
        assert q.peek_batch(100)[:1] == [5]
    with HybridQueue(p, recovery="skip") as q:
        assert _drain(q) == [i for i in range(5, N) if not base <= i < base + n]


def test_recovery_truncate_keeps_the_prefix(tmp_path):
    p = tmp_path / "q"
    base, _ = _damaged_queue(p)
    with HybridQueue(p, recovery="truncate") as q:
        assert _drain(q) == list(range(base))
        q.put("new")
    with HybridQueue(p) as q:
        assert _drain(q) == ["new"]


def test_recovery_setting_is_checked(tmp_path):
    with pytest.raises(ConfigError, match="recovery="):
        HybridQueue(tmp_path / "q", recovery="ignore")


def test_metrics_as_a_registered_prometheus_collector(tmp_path):
    prom = pytest.importorskip("prometheus_client")
    reg = prom.CollectorRegistry()
    with HybridQueue(tmp_path / "q", memory_items=10, max_disk_bytes=4000, latency_histograms=True) as q:
        reg.register(q.metrics.labelled("jobs"))
        for _ in range(30):
            q.put(b"x" * 100)
        with pytest.raises(queue.Full):
            for _ in range(100):
                q.put_nowait(b"y" * 100)
        for _ in range(5):
            q.get()

        def v(name, **labels):
            return reg.get_sample_value(name, {"queue": "jobs", **labels})

        m = q.metrics
        assert v("vqs_hybrid_items") == q.qsize() == m.items
        assert v("vqs_hybrid_memory_items") == m.memory_items
        assert v("vqs_hybrid_disk_items") == m.disk_items > 0
        assert v("vqs_hybrid_disk_bytes") == m.disk_bytes > 0
        assert v("vqs_hybrid_log_bytes") == m.log_bytes > 0
        assert v("vqs_hybrid_log_segments") == m.log_segments >= 1
        assert v("vqs_hybrid_puts_total") == m.puts >= 30
        assert v("vqs_hybrid_gets_total") == 5
        assert v("vqs_hybrid_errors_total", kind="queue_full") == 1
        assert v("vqs_hybrid_errors_total", kind="disk_full") == 0
        assert v("vqs_hybrid_put_latency_seconds_count") == m.puts + 1  # the refused put is timed too
        assert v("vqs_hybrid_get_latency_seconds_count") == 5
        assert v("vqs_hybrid_get_latency_seconds_bucket", le="+Inf") == 5
        text = prom.generate_latest(reg).decode()
        assert 'vqs_hybrid_items{queue="jobs"}' in text
    # a closed queue reports nothing (and is not kept alive by the registry)
    assert reg.get_sample_value("vqs_hybrid_items", {"queue": "jobs"}) is None


def test_metrics_without_latency_histograms_and_default_label(tmp_path):
    prom = pytest.importorskip("prometheus_client")
    reg = prom.CollectorRegistry()
    with HybridQueue(tmp_path / "q") as q:
        q.metrics.register(reg)
        q.put(1)
        assert reg.get_sample_value("vqs_hybrid_items", {"queue": q.path}) == 1
        assert reg.get_sample_value("vqs_hybrid_put_latency_seconds_count", {"queue": q.path}) is None
