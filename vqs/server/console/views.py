"""Rendering: the Jinja2 environment, page responses, and the formatting every page shares.

Invariants: templates are autoescaped (every value, message content above
all, is text, never markup); nothing rendered names a server path (``safe``
scrubs absolute paths out of any text that came from an exception or a log
record); a value is shown at most ``MAX_VALUE_BYTES`` long, marked truncated.
"""

from __future__ import annotations

import json
import os
import re
import time
from datetime import UTC, datetime
from urllib.parse import quote, urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

from .security import Session, add_headers, set_cookie

HERE = os.path.dirname(os.path.abspath(__file__))
MAX_VALUE_BYTES = 64 << 10
_PATH = re.compile(r"(?<![\w.:])/(?:[\w.~+-]+/)*[\w.~+-]+")

env = Environment(loader=FileSystemLoader(os.path.join(HERE, "templates")),
                  autoescape=select_autoescape(default=True, default_for_string=True), trim_blocks=True,
                  lstrip_blocks=True)


def safe(text: object) -> str:
    """``text`` with anything shaped like an absolute filesystem path replaced by ``<path>``."""
    return _PATH.sub("<path>", str(text))


def nbytes(n: float | int | None) -> str:
    if n is None:
        return "-"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def iso_ms(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def ms_setting(ms) -> str:
    if ms is None or ms == -1:
        return "forever"
    return duration(ms / 1000)


def rate(x: float) -> str:
    if x == 0:
        return "0"
    return f"{x:.1f}" if x < 100 else f"{x:.0f}"


def sparkline(points: list[float], width: int = 120, height: int = 24) -> str:
    """An SVG polyline's ``points`` attribute for ``points`` (empty: a flat line)."""
    if len(points) < 2:
        points = [0.0, 0.0]
    hi = max(points) or 1.0
    step = width / (len(points) - 1)
    return " ".join(f"{i * step:.1f},{height - 1 - (v / hi) * (height - 2):.1f}" for i, v in enumerate(points))


def show_value(b: bytes | None, fmt: str) -> dict:
    """A value for display: ``{"text", "kind", "truncated", "size"}``; ``kind`` says what
    ``text`` is (text, json, hex, or hex because the bytes are not UTF-8)."""
    if b is None:
        return {"text": "", "kind": "null", "truncated": False, "size": 0}
    size = len(b)
    truncated = size > MAX_VALUE_BYTES
    b = b[:MAX_VALUE_BYTES]
    if fmt != "hex":
        try:
            text = b.decode("utf-8")
        except UnicodeDecodeError:
            text = None
            if truncated:
                text = b.decode("utf-8", errors="ignore")
        if text is not None:
            if fmt == "json":
                try:
                    return {"text": json.dumps(json.loads(text), indent=2, ensure_ascii=False), "kind": "json",
                            "truncated": truncated, "size": size}
                except ValueError:
                    return {"text": text, "kind": "text (not JSON)", "truncated": truncated, "size": size}
            return {"text": text, "kind": "text", "truncated": truncated, "size": size}
    return {"text": hexdump(b), "kind": "hex" if fmt == "hex" else "hex (not UTF-8)", "truncated": truncated,
            "size": size}


def hexdump(b: bytes) -> str:
    lines = []
    for i in range(0, len(b), 16):
        chunk = b[i:i + 16]
        hx = " ".join(f"{c:02x}" for c in chunk)
        asc = "".join(chr(c) if 32 <= c < 127 else "." for c in chunk)
        lines.append(f"{i:08x}  {hx:<47}  {asc}")
    return "\n".join(lines)


env.filters.update(nbytes=nbytes, duration=duration, iso_ms=iso_ms, ms_setting=ms_setting, rate=rate,
                   safe_text=safe, pathseg=lambda s: quote(str(s), safe=""))  # a name as one URL path segment
env.globals.update(sparkline=sparkline, now=time.time,
                   qs=lambda **kw: urlencode({k: v for k, v in kw.items() if v not in (None, "")}))


def page(request: Request, session: Session | None, new_cookie: bool, template: str, status: int = 200,
         **values) -> HTMLResponse:
    """Render ``template`` (a full page, or its ``content`` block alone for an htmx request)."""
    flash = []
    if session is not None and session.flash:
        flash, session.flash = session.flash, []
    html = env.get_template(template).render(
        request_path=request.url.path, csrf=session.csrf if session else "", flash=flash,
        login_required=request.app.state.console.sessions.login_required, **values)
    r = HTMLResponse(html, status_code=status)
    add_headers(r)
    if new_cookie and session is not None:
        set_cookie(r, request, session)
    return r


def redirect(request: Request, session: Session | None, new_cookie: bool, to: str,
             flash: tuple[str, str] | None = None) -> RedirectResponse:
    if flash is not None and session is not None:
        session.flash.append(flash)
    r = RedirectResponse(to, status_code=303)
    add_headers(r)
    if new_cookie and session is not None:
        set_cookie(r, request, session)
    return r
