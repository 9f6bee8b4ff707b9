"""The frame job (vqs.pipelines.frames) on a small run: frames from the edge through a
server, decoded and analysed in Structured Streaming (url mode), events against the
cameras' script, alerts exactly once."""

from __future__ import annotations

import pytest

pytest.importorskip("PIL")

from vqs.pipelines import frames, scene
from vqs.pipelines.demo import LocalServer
from vqs.pipelines.edge import Edge


def test_frame_job_finds_the_scripted_events_exactly_once(spark, tmp_path):
    server = LocalServer(str(tmp_path / "data"), str(tmp_path / "server.log")).start()
    try:
        cams = scene.cameras(3, seconds=11, resolution="320x180", fps=25)
        edge = Edge(cams, server.url, str(tmp_path / "edge"), partitions=2, realtime=False)
        try:
            st = edge.start().wait(timeout=120)
        finally:
            edge.close()
        out = str(tmp_path / "out")
        res = frames.run(spark, url=server.url, out=out, max_offsets=300)
        assert res.frames == st.sent and res.bytes == st.sent_bytes
        assert res.batches >= 3  # maxOffsetsPerTrigger: the detectors' state crossed micro-batches

        detected = frames.events_of(spark, out)
        sc = frames.ground_truth(cams, detected)
        assert sc["missed"] == 0 and sc["false_alarms"] == [], "\n".join(frames.format_truth(sc))
        alerts = frames.alerts_of(spark, {"url": server.url}, "alerts")
        assert sorted((a["camera"], a["kind"], a["ts_ms"]) for a in alerts) == sorted(
            (d["camera"], d["kind"], d["ts_ms"]) for d in detected)

        again = frames.run(spark, url=server.url, out=out, max_offsets=300)  # from the checkpoints
        assert again.batches == 0 and again.alerts == len(alerts) and again.events == len(detected)
    finally:
        server.stop()
