"""The camera pipeline on a small input (path mode): windows to Parquet, alerts to a topic."""

from __future__ import annotations

import json

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

