"""The streaming sink's commit protocol, driven directly (no SparkSession):
a replayed micro-batch is published once, and a commit interrupted half-way
is completed, not repeated, by the replay."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest
from spark_helpers import log_contents, make_topic

from vqs.spark import writer as W
from vqs.spark.options import parse_write_options
from vqs.spark.rows import Rows

QUERY = "6f1c8b2e-1111-2222-3333-444455556666"


def _batches(lo, hi, step=10):
    for a in range(lo, hi, step):
        vals = [b"v%04d" % i for i in range(a, min(hi, a + step))]
        keys = [b"k%d" % (i % 4) for i in range(a, min(hi, a + step))]
        yield pa.record_batch([pa.array(vals, pa.binary()), pa.array(keys, pa.binary())], names=["value", "key"])


def _run_batch(monkeypatch, writer, batch_id, tasks):
    """Run the write tasks of micro-batch ``batch_id`` then commit; returns the messages."""
    msgs = []
    for task, (lo, hi) in enumerate(tasks):
        monkeypatch.setattr(W, "task_info", lambda t=task: {
            "partition": t, "attempt": 0, "query": QUERY, "batch": batch_id})
        msgs.append(writer.write(_batches(lo, hi)))
    return msgs


@pytest.fixture
def sink(tmp_path):
    path = str(tmp_path / "data")
    make_topic(path, "out", partitions=3)
    opts = parse_write_options({"path": path, "topic": "out"})
    return path, opts


def _values(path):
    return sorted(r[5] for r in log_contents(path, "out"))


def test_replayed_batch_is_published_once(monkeypatch, sink):
    path, opts = sink
    w = W.VQSStreamWriter(opts)
    msgs = _run_batch(monkeypatch, w, 0, [(0, 50), (50, 100)])
    W.VQSStreamWriter(opts).commit(msgs, 0)  # commit() runs on a fresh writer
    assert _values(path) == [b"v%04d" % i for i in range(100)]
    # Spark replays batch 0 (e.g. the driver died before recording the commit)
    msgs = _run_batch(monkeypatch, w, 0, [(0, 50), (50, 100)])
    assert all(m.file is None for m in msgs)  # tasks see the batch is published
    W.VQSStreamWriter(opts).commit(msgs, 0)
    assert _values(path) == [b"v%04d" % i for i in range(100)]
    msgs = _run_batch(monkeypatch, w, 1, [(100, 130)])
    W.VQSStreamWriter(opts).commit(msgs, 1)
    assert _values(path) == [b"v%04d" % i for i in range(130)]
    sink_dir = os.path.join(path, "spark", "sinks", QUERY)
    assert os.listdir(sink_dir) == ["state.json"]  # staged files are gone


def test_commit_interrupted_half_way_is_completed_by_the_replay(monkeypatch, sink):
    path, opts = sink
    w = W.VQSStreamWriter(opts)
    msgs = _run_batch(monkeypatch, w, 0, [(0, 60), (60, 120)])
    calls = {"n": 0}
    real = Rows.append_to

    def dying_append(self, log):
        calls["n"] += 1
        if calls["n"] == 2:  # the driver dies after the first partition was appended
            half = Rows(self.values[: len(self) // 2], self.keys[: len(self) // 2], None, None)
            real(half, log)
            raise KeyboardInterrupt("driver killed")
        return real(self, log)

    monkeypatch.setattr(Rows, "append_to", dying_append)
    with pytest.raises(KeyboardInterrupt):
        W.VQSStreamWriter(opts).commit(msgs, 0)
    monkeypatch.setattr(Rows, "append_to", real)
    partial = _values(path)
    assert 0 < len(partial) < 120

    # The replay stages the batch again (different files); the pending state wins.
    msgs = _run_batch(monkeypatch, w, 0, [(0, 60), (60, 120)])
    W.VQSStreamWriter(opts).commit(msgs, 0)
    assert _values(path) == [b"v%04d" % i for i in range(120)]
    # keyed records went to murmur2 partitions, each key to one partition
    parts = {}
    for _, p, _, _, k, _, _ in log_contents(path, "out"):
        parts.setdefault(k, set()).add(p)
    assert all(len(s) == 1 for s in parts.values())


def test_abort_removes_staged_files(monkeypatch, sink):
    path, opts = sink
    w = W.VQSStreamWriter(opts)
    msgs = _run_batch(monkeypatch, w, 3, [(0, 10)])
    staged = os.path.join(path, "spark", "sinks", QUERY, msgs[0].file)
    assert os.path.exists(staged)
    W.VQSStreamWriter(opts).abort(msgs, 3)
    assert not os.path.exists(staged)
    assert _values(path) == []
