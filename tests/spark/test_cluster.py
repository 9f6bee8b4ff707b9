"""The frame job on a two-worker standalone cluster, one worker SIGKILLed mid-stream,
against a clean run of the same frames: ``make demo-cluster`` at a small size.

The cluster run's driver is a process of its own (``python -m
vqs.pipelines.frames --master spark://...``), as in the demo. The clean run,
which the demo runs in a local-mode driver process of the same kind, runs here in
the suite's one local session (tests/spark/conftest.py: same jar, same settings),
which saves a JVM start; the driver process's code is the cluster run's. Both
read the topic with the JVM reader where javac exists (url mode: through the server).
"""

from __future__ import annotations

import pytest

from vqs.pipelines import cluster

CAMERAS, SECONDS, FPS = 2, 6, 25  # one scripted event per camera; 300 frames
MAX_OFFSETS = 75                  # 4 micro-batches: a kill after the first leaves three to do


@pytest.mark.slow
def test_lost_worker_mid_stream_outputs_equal_a_clean_run(tmp_path, spark):
    got = cluster.run(["--dir", str(tmp_path / "demo"), "--cameras", str(CAMERAS), "--seconds", str(SECONDS),
                       "--fps", str(FPS), "--resolution", "320x180",
                       "--max-offsets-per-trigger", str(MAX_OFFSETS), "--timeout", "600"], clean_spark=spark)
    frames = CAMERAS * SECONDS * FPS
    assert got["check"] == {"records": got["edge"].frames, "missing": 0, "duplicates": 0, "out_of_order": 0}
    assert got["edge"].frames <= frames

    # The kill came mid-stream: batches committed after it, by the worker left.
    assert max(got["after"]) > max(got["before"]), (got["before"], got["after"])
    assert got["alive"] == 1 and got["lost_executors"], got  # the driver lost an executor it was using

    # Exactly once: every committed row and alert of the clean run, none twice, nothing else.
    cmp = got["compare"]
    for k in ("features", "events", "alerts"):
        assert cmp[k]["equal"] and cmp[k]["twice"] == 0, (k, cmp[k])
    assert cmp["events"]["cluster"] >= 1
    assert cmp["features"]["cluster"] == got["edge"].frames + cmp["events"]["cluster"]
    assert cmp["alerts"]["cluster"] == cmp["events"]["cluster"]
    assert cmp["ok"]
    assert spark.range(3).count() == 3  # the suite's session was left running
    assert got["score"]["found"] >= 1
