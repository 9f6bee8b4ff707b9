"""The camera pipeline's picture: one self-contained HTML page with inline SVG charts.

``write_report(path, windows, alerts)`` charts, per camera and over event
time, the frames per second and the dropped frames of each window, and marks
every alert window (a shaded band across both charts, and a ringed point on
the camera's line), followed by the alert list (latest first). Standard
library only: no plotting package, no script, no network; any browser opens
it from disk.

Invariants: the page depends only on its arguments (the same windows and
alerts give the same bytes); every camera of ``windows`` has a line and a
legend entry (``data-camera``); every alert has a band (``class="alert"``,
``data-camera``, ``data-reason``); text is HTML-escaped.
"""

from __future__ import annotations

import datetime as _dt
import html
import os
from collections.abc import Iterable

# Colour-blind-friendly palette (Okabe-Ito), then repeated.
_COLOURS = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
_W, _H = 960, 260                     # one chart's size
_L, _R, _T, _B = 56, 16, 28, 36       # margins: left (y labels), right, top (title), bottom (x labels)


def _ms(t) -> int:
    """Epoch milliseconds of an int/float (ms), a datetime or an ISO-8601 string (naive = UTC)."""
    if isinstance(t, int | float):
        return int(t)
    if isinstance(t, str):
        t = _dt.datetime.fromisoformat(t)
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.UTC)
    return int(t.timestamp() * 1000)


def _clock(ms: int) -> str:
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.UTC).strftime("%H:%M:%S")


def _nice_top(v: float) -> float:
    """A round number >= v for the top of a y axis."""
    if v <= 0:
        return 1.0
    step = 10 ** len(str(int(v))) / 10 if v >= 1 else 0.1
    for m in (1, 2, 2.5, 5, 10):
        if step * m >= v:
            return step * m
    return v


def _chart(title: str, field: str, unit: str, series: dict, alerts: list, t0: int, t1: int) -> str:
    top = _nice_top(max((p[field] for pts in series.values() for p in pts), default=0) * 1.1)
    pw, ph = _W - _L - _R, _H - _T - _B
    span = max(1, t1 - t0)

    def x(ms):
        return _L + (ms - t0) / span * pw

    def y(v):
        return _T + ph - v / top * ph

    out = [f'<svg class="chart" data-field="{field}" viewBox="0 0 {_W} {_H}" width="{_W}" height="{_H}" '
           f'xmlns="http://www.w3.org/2000/svg" font-family="sans-serif" font-size="11">',
           f'<text x="{_L}" y="16" font-size="13" font-weight="bold">{html.escape(title)}</text>']
    stacked: dict[int, int] = {}
    for a in alerts:  # bands first: lines are drawn over them; each labelled with its camera
        x0, x1 = x(a["start_ms"]), x(a["end_ms"])
        row = stacked[a["start_ms"]] = stacked.get(a["start_ms"], -1) + 1
        out.append(f'<text x="{x0 + 3:.1f}" y="{_T + 11 + 11 * row}" fill="#a01010" font-size="10">'
                   f'{html.escape(a["camera"])}</text>')
        tip = (f'{a["camera"]}: {a["reason"]} {_clock(a["start_ms"])}-{_clock(a["end_ms"])} UTC, '
               f'fps {a["fps"]:.1f}, dropped {a["dropped"]}')
        out.append(f'<rect class="alert" data-camera="{html.escape(a["camera"])}" '
                   f'data-reason="{html.escape(a["reason"])}" x="{x0:.1f}" y="{_T}" width="{max(1.0, x1 - x0):.1f}" '
                   f'height="{ph}" fill="#d62728" fill-opacity="0.12"><title>{html.escape(tip)}</title></rect>')
    for i in range(5):  # y grid and labels
        v = top * i / 4
        out.append(f'<line x1="{_L}" x2="{_L + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>'
                   f'<text x="{_L - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    out.append(f'<text x="12" y="{_T + ph / 2:.0f}" transform="rotate(-90 12 {_T + ph / 2:.0f})" '
               f'text-anchor="middle">{html.escape(unit)}</text>')
    ticks = 6
    for i in range(ticks + 1):  # x labels: event time, UTC
        ms = t0 + span * i // ticks
        out.append(f'<text x="{x(ms):.1f}" y="{_T + ph + 16}" text-anchor="middle">{_clock(ms)}</text>')
    out.append(f'<text x="{_L + pw}" y="{_H - 4}" text-anchor="end">event time (UTC)</text>')
    out.append(f'<rect x="{_L}" y="{_T}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>')
    alerted = {(a["camera"], a["start_ms"]) for a in alerts}
    for i, (cam, pts) in enumerate(sorted(series.items())):
        colour = _COLOURS[i % len(_COLOURS)]
        coords = " ".join(f'{x((p["start_ms"] + p["end_ms"]) / 2):.1f},{y(p[field]):.1f}' for p in pts)
        out.append(f'<polyline data-camera="{html.escape(cam)}" points="{coords}" fill="none" '
                   f'stroke="{colour}" stroke-width="1.6"/>')
        for p in pts:
            cx, cy = x((p["start_ms"] + p["end_ms"]) / 2), y(p[field])
            ring = (cam, p["start_ms"]) in alerted
            out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{4.5 if ring else 2.2}" fill="{colour}"'
                       + (' stroke="#d62728" stroke-width="2"' if ring else "")
                       + f'><title>{html.escape(cam)} {_clock(p["start_ms"])}: {p[field]:g} {html.escape(unit)}'
                       f'</title></circle>')
    out.append("</svg>")
    return "\n".join(out)


def write_report(path: str, windows: Iterable[dict], alerts: Iterable[dict], *, title: str = "VQS camera pipeline",
                 subtitle: str = "") -> str:
    """Write the page to ``path`` (atomically: a temp file renamed) and return ``path``.

    ``windows``: dicts with ``camera``, ``window_start``, ``window_end`` (epoch ms,
    datetime or ISO-8601), ``fps``, ``dropped``. ``alerts``: dicts with ``camera``,
    ``window_start``, ``window_end``, ``reason``, ``fps``, ``dropped`` (the alert
    topic's JSON).
    """
    series: dict[str, list[dict]] = {}
    for w in windows:
        series.setdefault(w["camera"], []).append({"start_ms": _ms(w["window_start"]), "end_ms": _ms(w["window_end"]),
                                                   "fps": float(w["fps"]), "dropped": int(w["dropped"])})
    for pts in series.values():
        pts.sort(key=lambda p: p["start_ms"])
    marks = sorted(({"camera": a["camera"], "reason": a["reason"], "fps": float(a["fps"]), "dropped": int(a["dropped"]),
                     "start_ms": _ms(a["window_start"]), "end_ms": _ms(a["window_end"])} for a in alerts),
                   key=lambda a: (-a["start_ms"], a["camera"]))
    times = [p["start_ms"] for pts in series.values() for p in pts] + [a["start_ms"] for a in marks]
    ends = [p["end_ms"] for pts in series.values() for p in pts] + [a["end_ms"] for a in marks]
    t0, t1 = (min(times), max(ends)) if times else (0, 1)
    legend = " ".join(f'<span class="cam" data-camera="{html.escape(c)}"><i style="background:'
                      f'{_COLOURS[i % len(_COLOURS)]}"></i>{html.escape(c)}</span>' for i, c in enumerate(sorted(series)))
    rows = "\n".join(f'<tr><td>{html.escape(a["camera"])}</td><td>{_clock(a["start_ms"])}-{_clock(a["end_ms"])}</td>'
                     f'<td>{html.escape(a["reason"])}</td><td>{a["fps"]:.1f}</td><td>{a["dropped"]}</td></tr>'
                     for a in marks)
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 24px; color: #222; }}
.cam {{ margin-right: 14px; white-space: nowrap; }} .cam i {{ display: inline-block; width: 14px; height: 3px;
  vertical-align: middle; margin-right: 4px; }}
.band {{ display: inline-block; width: 14px; height: 10px; background: #d62728; opacity: .25; vertical-align: middle; }}
table {{ border-collapse: collapse; margin-top: 8px; }} td, th {{ padding: 2px 10px; text-align: left; }}
tr:nth-child(even) {{ background: #f4f4f4; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p>{html.escape(subtitle)}</p>
<p>{legend} <span class="band"></span> alert window (hover for details; ringed points are the alerting camera's)</p>
{_chart("Frames per second, per window", "fps", "fps", series, marks, t0, t1)}
{_chart("Dropped frames, per window", "dropped", "frames", series, marks, t0, t1)}
<h2>Alerts ({len(marks)}, latest first)</h2>
<table><tr><th>camera</th><th>window (UTC)</th><th>reason</th><th>fps</th><th>dropped</th></tr>
{rows}
</table>
</body></html>
"""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(page)
    os.replace(tmp, path)
    return path
