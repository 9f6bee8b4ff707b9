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
