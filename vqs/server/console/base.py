"""What every console page shares: the console's state, the route class that guards
and renders errors, form handling, and the server's recent errors.

Invariants: every console route runs behind ``ConsoleRoute``, so a request is
authenticated (security.Sessions) before its handler runs, a POST's CSRF token
is checked before its handler reads anything else of the form, and an error
becomes a page with the client's message (server/errors.client_message: never
a path or a traceback); an unexpected one becomes a fixed text, its details
going to the server log.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any
from urllib.parse import parse_qsl

from fastapi import Request
from fastapi.routing import APIRoute
from starlette.responses import Response

from ...errors import VQSError, shown
from ..errors import APIError, client_message
from .sampler import Sampler
from .security import Refused, Session, Sessions, add_headers
from .views import env, redirect, safe

logger = logging.getLogger("vqs.server.console")

RECENT_ERRORS = 50


class RecentErrors(logging.Handler):
    """The last warnings and errors of the server's loggers and the last refused requests, as console rows: time,
    level, what (a refused request's status, method and URL path as the client sent it,
    and the client message; for anything else the logger and the exception type) — never
    a server path."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.rows: deque = deque(maxlen=RECENT_ERRORS)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            fields = getattr(record, "vqs", None) or {}
            if record.levelno < logging.WARNING and record.getMessage() != "rejected":
                return
            if record.getMessage() == "rejected" and "status" in fields:
                # the request's own URL path, shown as sent (the client's words, not a file of
                # the server's), its control characters escaped and its length bounded
                path = str(fields.get("path"))[:200].encode("unicode_escape").decode("ascii")
                what = f"{fields.get('status')} {fields.get('method')} {path}"
                detail = fields.get("error", "")
            else:
                what = safe(record.name)
                exc = record.exc_info[1] if record.exc_info else None
                detail = (type(exc).__name__ + ": " if exc is not None else "") + record.getMessage()
            self.rows.appendleft({"t": record.created, "level": record.levelname.lower(), "what": what,
                                  "detail": safe(detail)[:300]})
        except Exception:  # a log handler must never raise
            pass


class ConsoleState:
    """The console of one app: sessions, the sampler, recent errors."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.sessions = Sessions(ctx.settings)
        self.sampler = Sampler(ctx)
        self.errors = RecentErrors()
        self.started = time.time()


def state(request: Request) -> ConsoleState:
    return request.app.state.console


def enter(request: Request) -> tuple[Session, bool]:
    """The request's session (and whether its cookie is new); raises Refused."""
    return state(request).sessions.session(request)


async def posted(request: Request) -> tuple[Session, bool, dict[str, str]]:
    """A POST's session and form, its CSRF token checked (raises Refused otherwise)."""
    session, new = enter(request)
    data = await read_form(request)
    state(request).sessions.check_csrf(session, data.get("csrf"))
    return session, new, data


#: The most of a form the console reads of a request not authenticated yet (the login form's
#: token, the logout form's CSRF token: a few hundred bytes): what a client without
#: credentials can make it hold, rather than max_body_bytes.
PREAUTH_FORM_BYTES = 16 << 10


async def read_form(request: Request, limit: int | None = None) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body (the only kind the console's forms
    send; the server's max_body_bytes bounds it, ``limit`` further: 413 past it, read no
    further), the last value of a repeated name."""
    ctype = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if ctype != "application/x-www-form-urlencoded":
        raise Refused(415, "the console's forms post application/x-www-form-urlencoded")
    if limit is None:
        body = await request.body()
    else:
        body = await _read_pre_auth(request, limit)
    try:
        return dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True))
    except UnicodeDecodeError:
        raise ValueError("the form is not UTF-8") from None


async def _read_pre_auth(request: Request, limit: int) -> bytes:
    """At most ``limit`` bytes of a form read before its credential is checked, held against the
    server's pre-authentication budget (``max_pre_auth_bytes``, shared with the other fronts:
    server/byte_budget.py) while they are read: past it 503, nothing read."""
    ctx = state(request).ctx
    budget = ctx.pre_auth if ctx.settings.auth_enabled else None  # without credentials: none is checked
    if budget is not None and not budget.take(limit):
        budget.refused("console", tuple(request.client) if request.client else None, limit)
        ctx.metrics.rejected.labels("pre_auth_bytes").inc()
        raise Refused(503, "the server holds its most bytes of requests not authenticated yet "
                           "(max_pre_auth_bytes): retry later")
    try:
        parts, seen = [], 0
        async for chunk in request.stream():
            seen += len(chunk)
            if seen > limit:
                raise Refused(413, f"this form may hold at most {limit} bytes")
            parts.append(chunk)
        return b"".join(parts)
    finally:
        if budget is not None:
            budget.give(limit)


def broker(request: Request):
    ctx = state(request).ctx
    b = ctx.broker
    if b is None or not ctx.ready:
        raise APIError(503, "not_ready", "the server is not ready")
    return b


def error_page(request: Request, status: int, message: str) -> Response:
    """The error as a page, or as the API's JSON error for the charts' data (/console/api)."""
    from fastapi.responses import HTMLResponse, JSONResponse

    if request.url.path.startswith("/console/api/"):
        code = {401: "unauthorized", 403: "forbidden", 404: "not_found"}.get(status, "invalid_request")
        r = JSONResponse({"error": {"code": code, "message": message}}, status_code=status)
        add_headers(r)
        return r

    html = env.get_template("error.html").render(request_path=request.url.path, status=status, message=message,
                                                 csrf="", flash=[], login_required=False)
    r = HTMLResponse(html, status_code=status)
    add_headers(r)
    return r


class ConsoleRoute(APIRoute):
    """Renders Refused, API and broker errors as console pages (see module doc)."""

    def get_route_handler(self):
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            try:
                return await handler(request)
            except Refused as e:
                if e.status == 401 and request.method == "GET" and not request.url.path.startswith("/console/api"):
                    return redirect(request, None, False, "/console/login")
                return error_page(request, e.status, e.message)
            except APIError as e:
                return error_page(request, e.status, e.message)
            except VQSError as e:
                return error_page(request, 400, client_message(e))
            except ValueError as e:
                return error_page(request, 400, safe(e))
            except Exception:
                logger.exception("console: %s %s", request.method, request.url.path)
                return error_page(request, 500, "the server could not show this page; the server log has the details")

        return guarded


def int_arg(value: Any, name: str, default: int | None = None, lo: int = 0, hi: int = (1 << 63) - 1) -> int | None:
    if value is None or value == "":
        return default
    try:
        v = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an integer, not {shown(value)}") from None
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be between {lo} and {hi}")
    return v
