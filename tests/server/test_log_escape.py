"""The text log format escapes control characters (JSON escapes them itself): no text a
client sent (a name, gRPC's debug text) starts a log line or drives the terminal."""

from __future__ import annotations

import json
import logging

from vqs.server.logs import JSONFormatter, TextFormatter


def _record(msg: str, **fields) -> logging.LogRecord:
    r = logging.LogRecord("vqs.server", logging.WARNING, __file__, 1, msg, None, None)
    r.vqs = fields
    return r


def test_text_lines_escape_newlines_and_escape_codes():
    line = TextFormatter().format(_record("rejected a\nb", path='/x\n{"level":"error"}\x1b[31m'))
    assert "\n" not in line and "\x1b" not in line
    assert "a\\nb" in line and "\\x1b[31m" in line


def test_json_lines_stay_one_line():
    line = JSONFormatter().format(_record("a\nb\x1b", path="\r\n"))
    assert "\n" not in line and "\x1b" not in line and json.loads(line)["msg"] == "a\nb\x1b"


def test_text_lines_escape_unicode_line_separators_and_bidi_controls():
    """A viewer may break a line at U+2028/U+2029 or show a line reordered by a bidi control
    (U+202E): a client's text carries neither into a text line."""
    line = TextFormatter().format(_record("authentication failed", path="/topics/x\u2028forged\u202eevil\u2066"))
    assert "\u2028" not in line and "\u202e" not in line and "\u2066" not in line
    assert "\\u2028forged\\u202eevil\\u2066" in line
