"""The frame job (vqs.pipelines.frames) on a small run: frames from the edge through a
server, decoded and analysed in Structured Streaming (url mode), events against the
cameras' script, alerts exactly once. The url-mode job is checked on what ``make demo``
(at a small size) leaves behind, so the frames are rendered and the job runs once."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("PIL")

from vqs.pipelines import frames, scene
from vqs.pipelines.demo import LocalServer


def test_demo_end_to_end_small(spark, tmp_path, capsys):
    """`make demo` on a small input: server, edge with a SIGKILLed server mid-run, the frame
    job in url mode, the ground-truth table and the throughput, all printed. Then the frame
    job's own promises on the demo's outputs: frames from the edge through a server, decoded
    and analysed in Structured Streaming (url mode), events against the cameras' script,
    alerts exactly once, windows, and a run again from the checkpoints."""
    from vqs.pipelines import demo

    got = demo.run(["--dir", str(tmp_path / "demo"), "--cameras", "3", "--seconds", "11", "--resolution",
                    "320x180", "--fast", "--outage", "1", "--edge-memory-mb", "0.25",
                    "--max-offsets-per-trigger", "300"])
    printed = capsys.readouterr().out
    assert spark.range(3).count() == 3  # the suite's session was left running (Spark started in a thread)
    st, res = got["edge"], got["result"]
    assert got["ok"], printed
    assert got["check"] == {"records": st.frames, "missing": 0, "duplicates": 0, "out_of_order": 0}
    assert st.spilled > 0 and st.retries > 0  # the outage: frames went to disk, sends were retried
    assert res.frames == st.frames and res.events == res.alerts == len(got["detected"]) > 0
    assert got["score"]["missed"] == 0 and not got["score"]["false_alarms"]
    assert "scripted events found, 0 false alarms" in printed
    for stage in ("edge put", "Spark job", "end to end"):
        assert any(line.strip().startswith(stage) and line.rstrip().endswith("MB/s") for line in printed.splitlines())

    # The report: a section per camera with its curves, a line per event, a thumbnail per event.
    import re

    page = open(got["report"], encoding="utf-8").read()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    assert re.findall(r'<section data-camera="([^"]+)"', page) == ["cam-00", "cam-01", "cam-02"]
    assert page.count('<line class="event"') == 3 * res.events  # in each of the three curves
    assert page.count('<figure class="thumb"') == res.events
    assert page.count("data:image/jpeg;base64,") == res.events

    # The frame job itself, on what the demo left (its data dir, its outputs, its checkpoints):
    # every frame read once, the detectors' state across micro-batches, alerts equal to the
    # detections, the 1 s windows, and a run again from the checkpoints that adds nothing.
    assert res.frames == st.sent and res.bytes == st.sent_bytes
    assert res.batches >= 3  # maxOffsetsPerTrigger: the detectors' state crossed micro-batches
    # the demo's cameras (its seed, the default): their scripts name frames, not times (the demo
    # starts its cameras at the current time; got["score"] held its events against them above)
    cams = scene.cameras(3, seconds=11, resolution="320x180", fps=25)
    out = os.path.join(got["root"], "out")
    detected = frames.events_of(spark, out)
    assert sorted(detected, key=repr) == sorted(got["detected"], key=repr)
    server = LocalServer(os.path.join(got["root"], "data"), str(tmp_path / "server.log")).start()
    try:
        alerts = frames.alerts_of(spark, {"url": server.url}, res.alerts_topic)
        assert sorted((a["camera"], a["kind"], a["ts_ms"]) for a in alerts) == sorted(
            (d["camera"], d["kind"], d["ts_ms"]) for d in detected)

        # 1 s windows per camera: at most 25 frames each, fewer where frames were dropped; the
        # last seconds stay open (the watermark has not passed them).
        win = spark.read.parquet(os.path.join(out, "windows"))
        per = {(r.camera, r.window_start): r.frames for r in win.collect()}
        assert res.windows == len(per) and 3 * 7 <= len(per) <= 3 * 11
        assert max(per.values()) <= 25 and sum(per.values()) <= res.frames
        burst = next(s for c in cams for s in c.script if s.kind == "dropped")
        cam = next(c for c in cams if burst in c.script)
        lows = [n for (c, t), n in per.items() if c == cam.name and n < 20]
        assert lows, per  # the burst's window(s) received fewer frames

        again = frames.run(spark, url=server.url, out=out, alerts_topic=res.alerts_topic, max_offsets=300)
        assert again.batches == 0 and again.alerts == len(alerts) and again.events == len(detected)
        assert again.windows == res.windows
    finally:
        server.stop()


def test_frame_job_cli_in_path_mode(spark, tmp_path, capsys):
    """`vqs pipeline frames --path ...` on frames appended with the Broker (no server): the
    events, and a report without a ground-truth table (there is no script)."""
    from vqs import Broker
    from vqs.pipelines.edge import FRAME_HEADER

    data, out = str(tmp_path / "data"), str(tmp_path / "out")
    cams = scene.cameras(2, seconds=6, resolution="320x180", fps=25)
    with Broker(data) as b:
        b.create_topic("frames", partitions=2)
        prod = b.producer()
        for c in cams:
            frs = list(c.frames())
            prod.send_batch("frames", [f.jpeg for f in frs], keys=[c.name.encode()] * len(frs),
                            headers=[[(FRAME_HEADER, b"%d" % f.frame)] for f in frs],
                            timestamps_ms=[f.ts_ms for f in frs])
    assert frames.main(["--path", data, "--out", out, "--max-offsets-per-trigger", "200"]) == 0
    printed = capsys.readouterr().out
    sc = frames.ground_truth(cams, frames.events_of(spark, out))
    assert sc["truth"] >= 2 and sc["missed"] == 0 and not sc["false_alarms"]
    assert f"{sum(1 for c in cams for _ in c.frames()):,} frames" in printed
    page = open(os.path.join(out, "report.html"), encoding="utf-8").read()
    assert "Ground truth" not in page and page.count('<figure class="thumb"') == sc["found"]
