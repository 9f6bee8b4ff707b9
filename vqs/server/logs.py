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


#: Control characters (C0, DEL, C1): escaped in a text line (JSON escapes them itself), so
#: no text from a client (a path, a header, gRPC's debug text) adds a line or an escape code.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


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
