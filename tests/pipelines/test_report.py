"""The frame job's page (vqs.pipelines.report): self-contained, a section per camera, a
line per event in each curve, a thumbnail per event that has one, escaped text."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("PIL")

from vqs.pipelines import scene
from vqs.pipelines.detect import score
from vqs.pipelines.report import thumbnail, write_report

T0 = 1_700_000_000_000


def test_page(tmp_path):
    cam = scene.Camera(0, width=320, height=180, seconds=2)
    jpeg = next(cam.frames()).jpeg
    curves = {c: [{"ts_ms": T0 + 40 * i, "motion": 0.01 * (i % 3), "brightness": 100.0, "sharpness": 200.0}
                  for i in range(50)] for c in ("cam-00", "cam-<1>")}
    events = [dict(camera="cam-00", kind="covered", frame=5, ts_ms=T0 + 200, partition=0, offset=5),
              dict(camera="cam-<1>", kind="late", frame=9, ts_ms=T0 + 360, partition=1, offset=11),
              dict(camera="cam-<1>", kind="frozen", frame=30, ts_ms=T0 + 1200, partition=1, offset=30)]
    truth = [dict(camera="cam-00", kind="covered", frame=5, ts_ms=T0 + 200),
             dict(camera="cam-00", kind="dropped", frame=40, ts_ms=T0 + 1600)]
    sc = score(truth, events)
    small = thumbnail(jpeg, 96)
    path = write_report(str(tmp_path / "r.html"), curves, events, sc, {(0, 5): small, (1, 30): small},
                        subtitle="a <b> & c")
    page = open(path, encoding="utf-8").read()
    assert "<script" not in page and "a &lt;b&gt; &amp; c" in page
    assert re.findall(r'<section data-camera="([^"]+)"', page) == ["cam-00", "cam-&lt;1&gt;"]
    assert page.count('<line class="event"') == 3 * len(events)
    assert page.count('<figure class="thumb"') == 2  # the late event's frame has none
    assert page.count('<path class="truth"') == 2
    assert "1/2 found, 2 false alarms" in page  # covered found; dropped missed; late and frozen unscripted
    assert small[:2] == b"\xff\xd8" and len(small) < len(jpeg)
