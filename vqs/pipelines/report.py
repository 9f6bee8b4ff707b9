"""The frame job's report: one self-contained HTML page (inline SVG and JPEG, no script).

Per camera: its feature curves over capture time (motion, brightness,
sharpness), each detected event a vertical line in its colour, each scripted
event (the truth) a triangle on top; then a thumbnail of the frame at each
event (the frame that confirmed it, as the topic holds it, scaled down). At
the end, the ground-truth table.

Invariants: the page depends only on its arguments; text is HTML-escaped;
each camera has one ``<section data-camera>``, each event one
``<line class="event">`` and at most one ``<figure class="thumb">``; inputs are
bounded by the caller (:func:`vqs.pipelines.frames.curves_of` buckets the
curves to at most ``MAX_POINTS`` per camera; thumbnails are capped at
``MAX_THUMBS``).
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
import os

MAX_POINTS = 1500
MAX_THUMBS = 200
THUMB_WIDTH = 192
KIND_COLOURS = {"object_enter": "#009E73", "object_leave": "#56B4E9", "covered": "#000000",
                "frozen": "#CC79A7", "dropped": "#D55E00", "late": "#E69F00"}
_W, _H, _L, _R, _T, _B = 960, 96, 70, 12, 14, 18
SERIES = (("motion", "motion", "{:.3f}"), ("brightness", "brightness", "{:.0f}"), ("sharpness", "sharpness", "{:.0f}"))


def _clock(ms: int) -> str:
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.UTC).strftime("%H:%M:%S.%f")[:-4]


def thumbnail(jpeg: bytes, width: int = THUMB_WIDTH) -> bytes:
    """The frame scaled to ``width`` pixels wide, as JPEG."""
    from PIL import Image

    im = Image.open(io.BytesIO(jpeg))
    im.draft("RGB", (width, 1))
    im = im.convert("RGB")
    im.thumbnail((width, width * 4))
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=75)
    return buf.getvalue()


def _chart(points: list[dict], field: str, label: str, fmt: str, events, truth, t0: int, t1: int,
           with_truth: bool) -> str:
    vals = [p[field] for p in points if p.get(field) is not None]
    top = max(vals, default=1.0) * 1.1 or 1.0
    pw, ph = _W - _L - _R, _H - _T - _B
    span = max(1, t1 - t0)

    def x(ms):
        return _L + (ms - t0) / span * pw

    def y(v):
        return _T + ph - v / top * ph

    out = [f'<svg class="curve" data-field="{field}" viewBox="0 0 {_W} {_H}" width="{_W}" height="{_H}" '
           f'xmlns="http://www.w3.org/2000/svg" font-family="sans-serif" font-size="10">',
           f'<rect x="{_L}" y="{_T}" width="{pw}" height="{ph}" fill="none" stroke="#bbb"/>',
           f'<text x="{_L - 6}" y="{_T + ph / 2 + 3:.0f}" text-anchor="end">{html.escape(label)}</text>',
           f'<text x="{_L - 6}" y="{_T + 8}" text-anchor="end" fill="#888">{fmt.format(top)}</text>']
    for e in events:
        ex = x(e["ts_ms"])
        out.append(f'<line class="event" data-kind="{html.escape(e["kind"])}" x1="{ex:.1f}" x2="{ex:.1f}" '
                   f'y1="{_T}" y2="{_T + ph}" stroke="{KIND_COLOURS.get(e["kind"], "#d62728")}" stroke-width="1.5">'
                   f'<title>{html.escape(e["kind"])} {_clock(e["ts_ms"])} (frame {e["frame"]})</title></line>')
    if with_truth:
        for t in truth:
            tx = x(t["ts_ms"])
            out.append(f'<path class="truth" d="M{tx - 4:.1f},{_T - 10} L{tx + 4:.1f},{_T - 10} L{tx:.1f},{_T - 2} Z" '
                       f'fill="{KIND_COLOURS.get(t["kind"], "#d62728")}"><title>scripted {html.escape(t["kind"])} '
                       f'{_clock(t["ts_ms"])}</title></path>')
    pts = " ".join(f'{x(p["ts_ms"]):.1f},{y(p[field]):.1f}' for p in points if p.get(field) is not None)
    out.append(f'<polyline points="{pts}" fill="none" stroke="#0072B2" stroke-width="1.2"/>')
    if field == SERIES[-1][0]:
        for i in range(7):
            ms = t0 + span * i // 6
            anchor = "start" if i == 0 else "end" if i == 6 else "middle"
            out.append(f'<text x="{x(ms):.1f}" y="{_H - 4}" text-anchor="{anchor}" fill="#555">{_clock(ms)[:8]}</text>')
    out.append("</svg>")
    return "\n".join(out)


def write_report(path: str, curves: dict[str, list[dict]], events: list[dict], score: dict | None,
                 thumbs: dict[tuple, bytes], *, title: str = "VQS frame pipeline", subtitle: str = "") -> str:
    """Write the page to ``path`` (a temp file renamed) and return ``path``.

    ``curves``: camera -> points (``ts_ms``, ``motion``, ``brightness``, ``sharpness``);
    ``events``: detected (camera, kind, frame, ts_ms, partition, offset); ``score``:
    :func:`vqs.pipelines.detect.score`'s, or None where there is no script (no truth marks, no
    ground-truth table); ``thumbs``: (partition, offset) -> JPEG bytes.
    """
    truth_by: dict[str, list[dict]] = {}
    for r in (score or {"rows": []})["rows"]:
        truth_by.setdefault(r["camera"], []).append(r)
    cams = sorted(set(curves) | {e["camera"] for e in events} | set(truth_by))
    times = [p["ts_ms"] for pts in curves.values() for p in pts] + [e["ts_ms"] for e in events]
    t0, t1 = (min(times), max(times)) if times else (0, 1)
    sections = []
    for cam in cams:
        evs = [e for e in events if e["camera"] == cam]
        charts = "\n".join(_chart(curves.get(cam, []), f, label, fmt, evs, truth_by.get(cam, []), t0, t1, i == 0)
                           for i, (f, label, fmt) in enumerate(SERIES))
        figs = []
        for e in evs:
            jpeg = thumbs.get((e.get("partition"), e.get("offset")))
            if jpeg is None:
                continue
            src = "data:image/jpeg;base64," + base64.b64encode(jpeg).decode()
            figs.append(f'<figure class="thumb" data-kind="{html.escape(e["kind"])}"><img src="{src}" alt="">'
                        f'<figcaption><b style="color:{KIND_COLOURS.get(e["kind"], "#d62728")}">'
                        f'{html.escape(e["kind"])}</b> {_clock(e["ts_ms"])}<br>frame {e["frame"]}</figcaption></figure>')
        sections.append(f'<section data-camera="{html.escape(cam)}"><h2>{html.escape(cam)}</h2>\n{charts}\n'
                        f'<div class="thumbs">{"".join(figs)}</div></section>')
    legend = " ".join(f'<span><i style="background:{c}"></i>{html.escape(k)}</span>' for k, c in KIND_COLOURS.items())
    rows = []
    for r in (score or {"rows": []})["rows"]:
        err = "-" if r["error_ms"] is None else f'{r["error_ms"]:+d} ms'
        rows.append(f'<tr class="{"ok" if r["found"] else "missed"}"><td>{html.escape(r["camera"])}</td>'
                    f'<td>{html.escape(r["kind"])}</td><td>{r["frame"]}</td><td>{_clock(r["ts_ms"])}</td>'
                    f'<td>{"yes" if r["found"] else "NO"}</td><td>{err}</td></tr>')
    for f in (score or {"false_alarms": []})["false_alarms"]:
        rows.append(f'<tr class="false"><td>{html.escape(f["camera"])}</td><td>{html.escape(f["kind"])}</td>'
                    f'<td>{f["frame"]}</td><td>{_clock(f["ts_ms"])}</td><td>false alarm</td><td></td></tr>')
    truth_table = "" if score is None else (
        f'<h2>Ground truth ({score["found"]}/{score["truth"]} found, {len(score["false_alarms"])} false alarms)</h2>\n'
        '<table><tr><th>camera</th><th>event</th><th>frame</th><th>scripted at</th><th>found</th>'
        f'<th>time error</th></tr>\n{"".join(rows)}\n</table>')
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 24px; color: #222; }}
.legend span {{ margin-right: 14px; white-space: nowrap; }} .legend i {{ display: inline-block; width: 12px;
  height: 12px; vertical-align: middle; margin-right: 4px; }}
.thumbs {{ display: flex; flex-wrap: wrap; gap: 8px; margin: 6px 0 18px {_L}px; }}
figure {{ margin: 0; font-size: 11px; }} figure img {{ display: block; width: {THUMB_WIDTH}px; }}
table {{ border-collapse: collapse; }} td, th {{ padding: 2px 10px; text-align: left; }}
tr.missed, tr.false {{ background: #fdd; }} tr:nth-child(even) {{ background: #f4f4f4; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p>{html.escape(subtitle)}</p>
<p class="legend">{legend} &nbsp; lines: detected events{"" if score is None else "; triangles: scripted (ground truth)"}; times UTC</p>
{"".join(sections)}
{truth_table}
</body></html>
"""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(page)
    os.replace(tmp, path)
    return path
