"""The camera pipeline's picture (vqs.pipelines.chart): a self-contained HTML page."""

from __future__ import annotations

import datetime as dt
import re
import xml.etree.ElementTree as ET

from vqs.pipelines.chart import write_report

T0 = 1_764_000_000_000


def windows(cameras=3, n=6):
    return [{"camera": f"cam-{c:02d}", "window_start": T0 + k * 10_000, "window_end": T0 + (k + 1) * 10_000,
             "fps": 25.0 - c - (k % 2), "dropped": (40 if (c, k) == (2, 3) else k)}
            for c in range(cameras) for k in range(n)]


def test_page_has_a_line_per_camera_and_a_band_per_alert(tmp_path):
    alerts = [  # as the alert topic's JSON has them: ISO-8601 strings
        {"camera": "cam-02", "window_start": "2025-11-24T16:00:30.000Z", "window_end": "2025-11-24T16:00:40.000Z",
         "fps": 23.0, "dropped": 40, "frames": 230, "reason": "dropped_frames"},
        {"camera": "cam-<1>", "window_start": dt.datetime.fromtimestamp(T0 / 1000 + 10, dt.UTC),
         "window_end": T0 + 20_000, "fps": 10.0, "dropped": 0, "reason": "low_fps"},
    ]
    path = write_report(str(tmp_path / "c.html"), windows(), alerts, title="t & <b>", subtitle="s")
    page = open(path, encoding="utf-8").read()
    assert "<script" not in page and "t &amp; &lt;b&gt;" in page and "cam-&lt;1&gt;" in page
    svgs = re.findall(r"<svg.*?</svg>", page, re.S)
    assert len(svgs) == 2
    for svg in svgs:
        root = ET.fromstring(svg)  # well-formed XML
        ns = "{http://www.w3.org/2000/svg}"
        lines = [e.get("data-camera") for e in root.iter(ns + "polyline")]
        assert lines == ["cam-00", "cam-01", "cam-02"]
        assert all(len(e.get("points").split()) == 6 for e in root.iter(ns + "polyline"))
        bands = [(e.get("data-camera"), e.get("data-reason")) for e in root.iter(ns + "rect")
                 if e.get("class") == "alert"]
        assert bands == [("cam-02", "dropped_frames"), ("cam-<1>", "low_fps")]  # latest first
    # the alert table lists them latest first, with their windows in UTC
    assert page.index("16:00:30-16:00:40") < page.index("cam-&lt;1&gt;</td>")
    # same input, same bytes
    again = write_report(str(tmp_path / "d.html"), windows(), alerts, title="t & <b>", subtitle="s")
    assert open(again, encoding="utf-8").read() == page


def test_no_windows_still_makes_a_page(tmp_path):
    page = open(write_report(str(tmp_path / "e.html"), [], []), encoding="utf-8").read()
    assert "Alerts (0, latest first)" in page and page.count("<svg") == 2
