"""The server's logs, on stderr: human lines on a terminal, one JSON object per line otherwise.

``log_format``: ``text`` (local time, level, message, then ``key=value``
fields), ``json`` (``ts`` in UTC, ``level``, ``logger``, ``msg`` and the
fields) or ``auto`` (the default: ``text`` when stderr is a terminal, else
``json``, what a log collector wants). A record's fields ride in
``extra={"vqs": {...}}``; a record may carry a human sentence for the text
form in ``extra={"text": ...}`` (the start-up line).

uvicorn's own info lines (process started, waiting for start-up, ...) are
left out below ``debug``: the server says what matters itself (``ready``
with its URLs, ``stopping``, ``closed``, one line per rejected request).
"""

from __future__ import annotations

import json
import logging
import logging.config
import re
import sys
import time

from ..log_throttle import Throttle

FORMATS = ("auto", "json", "text")


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        d = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        extra = getattr(record, "vqs", None)
        if isinstance(extra, dict):
            d.update(extra)
        if record.exc_info:
            d["exc"] = self.formatException(record.exc_info)
        return json.dumps(d, default=str)


#: Control characters (C0, DEL, C1) and the Unicode line and paragraph separators and
#: bidirectional controls (a viewer may break a line at the former, show text reordered by the
#: latter): escaped in a text line, so no text from a client (a path, a header, gRPC's debug
#: text) adds a line, an escape code or a reordering. (JSON escapes what it must itself.)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match) -> str:
    return repr(m.group())[1:-1]  # \n, \t, \x1b


class TextFormatter(logging.Formatter):
    """``2026-11-24 05:02:22 INFO    message key=value ...`` in local time."""

    def format(self, record: logging.LogRecord) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.created))
        text = getattr(record, "text", None)
        if not isinstance(text, str):
            text = record.getMessage()
            extra = getattr(record, "vqs", None)
            if isinstance(extra, dict) and extra:
                text += " " + " ".join(f"{k}={v}" for k, v in extra.items())
        if _CONTROL.search(text):  # a client's text never starts a line or drives the terminal
            text = _CONTROL.sub(_escape, text)
        line = f"{when} {record.levelname:<7} {text}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def resolve_format(fmt: str, stream=None) -> str:
    """``json`` or ``text`` for a ``log_format`` setting (``auto``: text on a terminal)."""
    if fmt != "auto":
        return fmt
    stream = sys.stderr if stream is None else stream
    try:
        return "text" if stream.isatty() else "json"
    except (AttributeError, ValueError):
        return "json"


def log_config(level: str, fmt: str) -> dict:
    """The ``logging.config.dictConfig`` of the server (``fmt``: json or text)."""
    formatter = {"()": "vqs.server.logs.JSONFormatter" if fmt == "json" else "vqs.server.logs.TextFormatter"}
    lvl = level.upper()
    uvicorn_lvl = lvl if lvl == "DEBUG" else max(lvl, "WARNING", key=logging.getLevelName)
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": formatter},
        "handlers": {"default": {"class": "logging.StreamHandler", "formatter": "default",
                                 "stream": "ext://sys.stderr"}},
        "loggers": {
            "vqs": {"handlers": ["default"], "level": lvl, "propagate": False},
            "uvicorn": {"handlers": ["default"], "level": uvicorn_lvl, "propagate": False},
            "uvicorn.error": {"handlers": ["default"], "level": uvicorn_lvl, "propagate": False},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
        },
    }


def configure(level: str = "info", fmt: str = "auto") -> str:
    """Set up the server's loggers; returns the format used (json or text)."""
    fmt = resolve_format(fmt)
    logging.config.dictConfig(log_config(level, fmt))
    return fmt


_XML_CODE = re.compile(rb"<Code>([^<]{1,200})</Code>")
_XML_MESSAGE = re.compile(rb"<Message>([^<]{0,500})</Message>")


def error_summary(body: bytes) -> str:
    """``code: message`` of an error answer's body (REST JSON, SQS JSON or SQS XML), or ''."""
    body = body.lstrip()
    if body.startswith(b"{"):
        try:
            doc = json.loads(body)
        except ValueError:
            return ""
        err = doc.get("error") if isinstance(doc, dict) else None
        if isinstance(err, dict):
            return f"{err.get('code', '')}: {err.get('message', '')}"
        if isinstance(doc, dict) and "__type" in doc:
            return f"{str(doc['__type']).rpartition('#')[2]}: {doc.get('message', doc.get('Message', ''))}"
        return ""
    code = _XML_CODE.search(body)
    if code is None:
        return ""
    msg = _XML_MESSAGE.search(body)
    return f"{code.group(1).decode(errors='replace')}: {msg.group(1).decode(errors='replace') if msg else ''}"


_requests = logging.getLogger("vqs.server")  # the request lines: the server's own logger
_disk_full_lines = Throttle(_requests)


def log_request(method: str, path: str, status: int, seconds: float, error_body: list,
                client=None, front: str | None = None) -> None:
    """One line per request (``access_log``) or per refused one (any 4xx/5xx): the method,
    path (never the query string, which may carry SQS parameters), status and, for an
    error, its code and message; the client's address and the front (rest, sqs) when
    known (the ASGI path: every failed bearer check and console login passes there).
    Never a header's value (no token, no signature). 401/403/5xx at warning, other
    refusals at info. A refusal for a full disk is logged once per path a minute
    (``left_out``: how many were not)."""
    fields = {"method": method, "path": path, "status": status, "ms": round(seconds * 1000, 3)}
    if client:
        fields["client"] = f"{client[0]}:{client[1]}" if isinstance(client, (tuple, list)) else str(client)
    if front:
        fields["front"] = front
    if status < 400:
        _requests.info("request", extra={"vqs": fields})
        return
    summary = error_summary(error_body[0]) if error_body else ""
    if status == 507 or (status == 503 and "disk is full" in summary):
        # A full disk lasts while clients retry: a line per path a minute, with the count.
        left_out = _disk_full_lines.due(path)
        if left_out is None:
            return
        if left_out:
            fields["left_out"] = left_out
    if summary:
        fields["error"] = summary
    level = logging.WARNING if status in (401, 403) or status >= 500 else logging.INFO
    text = f"rejected {status} {method} {path}" + (f" {summary}" if summary else "")
    if "client" in fields:
        text += f" (client {fields['client']}, {front})"
    if "left_out" in fields:
        text += f" ({fields['left_out']} more like it since the last such line)"
    _requests.log(level, "rejected", extra={"vqs": fields, "text": text})
