"""vqs.spark.pyworker.settle: gc.freeze once, only in reused Spark workers."""

from __future__ import annotations

import gc

import pytest

import vqs.spark.pyworker as pyworker


@pytest.fixture
def fresh(monkeypatch):
    calls = []
    monkeypatch.setattr(pyworker, "_settled", False)
    monkeypatch.setattr(gc, "freeze", lambda: calls.append(1))
    monkeypatch.delenv("VQS_SPARK_GC_FREEZE", raising=False)
    return calls


def test_freezes_once_in_a_reused_worker(fresh, monkeypatch):
    monkeypatch.setenv("SPARK_REUSE_WORKER", "1")
    assert pyworker.settle() is True
    assert pyworker.settle() is False
    assert fresh == [1]


def test_not_outside_a_reused_worker(fresh, monkeypatch):
    monkeypatch.delenv("SPARK_REUSE_WORKER", raising=False)
    assert pyworker.settle() is False
    assert fresh == []


@pytest.mark.parametrize("off", ["0", "false", "No"])
def test_turned_off_by_the_environment(fresh, monkeypatch, off):
    monkeypatch.setenv("SPARK_REUSE_WORKER", "1")
    monkeypatch.setenv("VQS_SPARK_GC_FREEZE", off)
    assert pyworker.settle() is False
    assert fresh == []


def test_in_spark_workers(spark, tmp_path):
    """Spark's Python workers carry SPARK_REUSE_WORKER (the condition settle()
    checks), and a worker that served a vqs read has frozen objects."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
    from spark_helpers import make_topic

    class ProbeReader(DataSourceReader):
        def partitions(self):
            return [InputPartition(i) for i in range(2)]

        def read(self, partition):
            import gc as g
            import os
            import sys

            mod = sys.modules.get("vqs.spark.pyworker")
            settled = bool(mod and mod._settled)
            yield (os.environ.get("SPARK_REUSE_WORKER"), settled, g.get_freeze_count() > 0)

    class Probe(DataSource):
        @classmethod
        def name(cls):
            return "vqs_gc_probe"

        def schema(self):
            return "reuse string, settled boolean, frozen boolean"

        def reader(self, schema):
            return ProbeReader()

    spark.dataSource.register(Probe)
    path = str(tmp_path / "data")
    make_topic(path, "gc", partitions=2, records={0: [(b"a", None, None, 1)], 1: [(b"b", None, None, 2)]})
    assert spark.read.format("vqs").option("path", path).option("topic", "gc").load().count() == 2
    rows = spark.read.format("vqs_gc_probe").load().collect()
    assert [r.reuse for r in rows] == ["1", "1"]
    assert all(r.frozen for r in rows if r.settled), rows
