"""The camera pipeline on a small input (path mode): windows to Parquet, alerts to a topic."""

from __future__ import annotations

import json
import os

from spark_helpers import log_contents

from vqs.pipelines import camera


def test_camera_pipeline_small(spark, tmp_path):
    data = str(tmp_path / "data")
    out = str(tmp_path / "out")
    st = camera.feed(path=data, cameras=3, seconds=30, partitions=2, start_ms=1_700_000_000_000)
    assert st.frames_sent > 2000 and st.frames_dropped > 0 and st.frames_late > 0

    res = camera.run(spark, path=data, out=out, max_offsets=1000)
    assert res.frames_read == st.frames_sent + 3  # + one end-of-stream marker per camera
    assert res.batches >= 3  # maxOffsetsPerTrigger made several micro-batches
    stats = spark.read.parquet(res.stats_path)
    assert stats.count() == res.windows == 3 * 3  # 3 cameras x three 10 s windows, all closed
    fps = {r.camera: r.fps for r in stats.groupBy("camera").avg("fps").withColumnRenamed("avg(fps)", "fps").collect()}
    assert 27 < fps["cam-00"] <= 30 and 22 < fps["cam-01"] <= 25

    alerts = [json.loads(r[5]) for r in log_contents(data, "camera-alerts")]
    assert alerts and {a["camera"] for a in alerts} == {"cam-02"}  # its burst of lost frames
    assert all(a["reason"] == "dropped_frames" for a in alerts)

    # Run again from the checkpoints: nothing new, nothing published twice.
    again = camera.run(spark, path=data, out=out, max_offsets=1000)
    assert again.frames_read == 0 and again.alerts == len(alerts)
    summary = camera.summarize(spark, again, path=data)
    assert [c["camera"] for c in summary["cameras"]] == ["cam-00", "cam-01", "cam-02"]


def test_demo_end_to_end_small(spark, tmp_path, capsys):
    """`make demo` on a small input: server, feed over HTTP, pipeline in url mode, summary,
    and the chart: a self-contained HTML page next to the Parquet output."""
    import re

    from vqs.pipelines import demo

    got = demo.run(["--dir", str(tmp_path / "demo"), "--cameras", "3", "--seconds", "20",
                     "--max-offsets-per-trigger", "600"])
    printed = capsys.readouterr().out
    assert got["frames_read"] == got["frames_fed"] + 3
    assert got["windows"] == 3 * 2  # 20 s of video, 10 s windows, all closed
    assert [c["camera"] for c in got["summary"]["cameras"]] == ["cam-00", "cam-01", "cam-02"]
    assert got["alerts"] >= 1 and all(a["camera"] == "cam-02" for a in got["summary"]["alerts"])

    # Latest window first, then by camera.
    keys = [(a["window_start"], a["camera"]) for a in got["summary"]["all_alerts"]]
    assert keys == sorted(sorted(keys, key=lambda k: k[1]), key=lambda k: k[0], reverse=True)
    assert len(keys) == got["alerts"]

    # The chart sits next to the Parquet windows; its path is printed on one line.
    chart = got["chart"]
    assert os.path.dirname(chart) == os.path.dirname(os.path.join(got["root"], "out", "stats"))
    assert any(line.strip().endswith(chart) and line.startswith("  chart") for line in printed.splitlines())
    page = open(chart, encoding="utf-8").read()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page and "http://" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    for cam in ("cam-00", "cam-01", "cam-02"):  # a line in each chart, and a legend entry
        assert page.count(f'<polyline data-camera="{cam}"') == 2
        assert f'<span class="cam" data-camera="{cam}">' in page
    bands = re.findall(r'<rect class="alert" data-camera="([^"]+)" data-reason="([^"]+)"', page)
    assert len(bands) == 2 * got["alerts"]  # one band per alert in each of the two charts
    assert {c for c, _ in bands} == {"cam-02"} and {r for _, r in bands} == {"dropped_frames"}
    assert f"Alerts ({got['alerts']}, latest first)" in page
