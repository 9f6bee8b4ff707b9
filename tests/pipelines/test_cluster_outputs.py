"""How the cluster demo reads a Spark Parquet sink's output: through its log only."""

from __future__ import annotations

import json
import os

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from vqs.pipelines import cluster  # noqa: E402


def _sink(root, committed: dict[str, list[int]], stray: dict[str, list[int]]) -> str:
    d = os.path.join(root, "sink")
    os.makedirs(os.path.join(d, "_spark_metadata"))
    for name, vals in {**committed, **stray}.items():
        pq.write_table(pa.table({"n": vals}), os.path.join(d, name))
    # Two batches, the way Spark's file sink log writes them: a version line, then one entry a line.
    names = sorted(committed)
    for batch, part in enumerate((names[:1], names[1:])):
        with open(os.path.join(d, "_spark_metadata", str(batch)), "w") as f:
            f.write("v1\n" + "\n".join(json.dumps({"path": "file://" + os.path.join(d, n).replace(" ", "%20"),
                                                    "size": 1, "isDir": False, "modificationTime": 0,
                                                    "blockReplication": 1, "blockSize": 1, "action": "add"})
                                        for n in part))
    return d


def test_only_files_named_by_the_log_are_read(tmp_path):
    d = _sink(str(tmp_path / "a dir"), {"part-0.parquet": [1, 2], "part-1.parquet": [3]},
              {"part-1-killed.parquet": [3]})  # a file a killed task left: same rows again
    assert [os.path.basename(p) for p in cluster.committed_files(d)] == ["part-0.parquet", "part-1.parquet"]
    assert sorted(cluster.sink_rows(d, ["n"])) == [(1,), (2,), (3,)]
    assert cluster.stray_files(d) == 1


def test_a_missing_sink_has_no_rows(tmp_path):
    assert cluster.committed_files(str(tmp_path / "nothing")) == []
    assert cluster.sink_rows(str(tmp_path / "nothing"), ["n"]) == []


def test_rows_twice_are_counted_and_unequal():
    assert cluster._same([(1,), (2,)], [(1,), (2,), (2,)]) == {"clean": 2, "cluster": 3, "twice": 1, "equal": False}
    assert cluster._same([(float("nan"),)], [(float("nan"),)])["equal"] is False  # why sink_rows normalises NaN
    assert cluster._same([(cluster._norm(float("nan")),)], [(cluster._norm(float("nan")),)])["equal"] is True
