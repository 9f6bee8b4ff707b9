"""The ASGI application: REST routes, the SQS endpoint, limits, auth and metrics.

One process owns the data directory: the app opens the Broker in its
lifespan and closes it (flushing every log) when the server stops.

``VQSMiddleware`` is the outermost layer: every request passes its admission (``admit``: header
and body bounds, the browser checks, auth), metrics and error logging; then the SQS endpoint or the
FastAPI routes answer it. The hot routes' plain requests never get here: the HTTP protocol answers
them (fast_http.py) after the same ``admit``, with the same answers and bookkeeping (``account``).
"""

from __future__ import annotations

import json
import logging
import re
import time

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import VQSError
from . import bearer
from .body_holds import BodyHolds
from .browser_guard import BrowserGuard
from .context import ServerContext, configure_groups
from .errors import APIError, rest_error
from .http_bounds import SQS_MAX_BODY_BYTES
from .lean import LeanRoutes
from .logs import log_request
from .settings import Settings

logger = logging.getLogger("vqs.server")

_SQS_PATH = re.compile(r"^/\d{12}/[^/]+/?$")
#: The most headers a request may have (Apache's LimitRequestFields; a browser sends ~20,
#: boto3 ~10): each is walked by every check of the admission, so their count is bounded
#: as well as their bytes.
MAX_HEADER_COUNT = 100
#: the codes of ``check_bearer``'s refusals (no token, a malformed one: unauthorized; a wrong one: forbidden)
_BEARER_CODES = ("unauthorized", "forbidden")
_OPEN_PATHS = ("/health", "/health/live", "/health/ready", "/docs", "/openapi.json", "/redoc",
               "/docs/oauth2-redirect",
               "/console")  # the console checks the same tokens itself (login form, session cookie)


def _json(status: int, body: dict, headers: dict | None = None) -> tuple[int, list, bytes]:
    data = json.dumps(body, separators=(",", ":")).encode()
    hs = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    for k, v in (headers or {}).items():
        hs.append((k.lower().encode(), str(v).encode()))
    return status, hs, data


async def _send(send, status: int, headers: list, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _measure(raw_headers) -> tuple[int, int | None, bool]:
    """(the headers' size as the limit counts it, the first Content-Length: None absent, -1 bad,
    whether a Transfer-Encoding is given)."""
    size = 0
    clen = None
    chunked = False
    for k, v in raw_headers:
        size += len(k) + len(v) + 4
        if k == b"content-length" and clen is None:
            try:
                clen = int(v)
            except ValueError:
                clen = -1
        elif k == b"transfer-encoding":
            chunked = True
    return size, clen, chunked


#: ``VQSMiddleware.admit``'s refusal of an SQS request on a server with credentials but no SigV4
#: key: answered by the endpoint (its error, in the request's protocol) without the body.
SQS_CLOSED = (None, 403, "InvalidClientTokenId", "", None, None)
class _TooLarge(BaseException):
    """The body passed its limit, read through ``_limited_receive``: the request unwinds, past
    the framework's handlers of ``Exception`` (which would answer 500, or 400 for a body a
    model parses), to ``VQSMiddleware.__call__``, which answers 413."""


class _ClientLeft(BaseException):
    """The client left before its request's body was all read: the request unwinds, past the
    framework's handlers of ``Exception`` (there is no one to answer, and nothing failed: no
    500 page, no traceback in the log), to ``VQSMiddleware.__call__``, which counts it as a
    request with no answer, as the HTTP fast path does."""


class VQSMiddleware:
    """The server's ASGI app, in front of FastAPI: the admission of every request (``admit``:
    bounds, the browser checks, bearer auth; the HTTP fast path, fast_http.py, asks the same),
    SQS dispatch, metrics, access log; FastAPI answers the rest. (In front of, not inside,
    FastAPI's middleware stack: the SQS endpoint pays nothing of the framework.)"""

    def __init__(self, app, ctx: ServerContext):
        self.app = app
        self.fastapi = app
        self.state = app.state  # vqs.server.run reads state.ctx
        self.ctx = ctx
        s = ctx.settings
        self.tokens = [t.encode() for t in s.tokens]
        # Any credential configured: REST needs a bearer token (SigV4 keys grant SQS only).
        self.rest_auth = s.auth_enabled
        self.guard = BrowserGuard(s)  # the Host and cross-site checks (browser_guard.py)
        self.max_body = s.max_body_bytes
        self.max_sqs_body = min(s.max_body_bytes, SQS_MAX_BODY_BYTES)
        self.max_header = s.max_header_bytes
        # credentials but no SigV4 key: every SQS request is refused, on its headers alone
        self.sqs_closed = s.auth_enabled and not s.sigv4_keys
        m = ctx.metrics
        self._lat = m.latency
        self._req = m.requests
        self._err = m.errors
        self.access_log = s.access_log
        self._children: dict = {}
        self.holds = BodyHolds(ctx.in_flight, ctx.pre_auth, self.rest_auth)  # what request bodies hold
        self.lean = LeanRoutes(ctx)  # the hot REST routes' handlers, for the fast path (fast_http.py)

    @staticmethod
    def is_sqs(method: str, path: str) -> bool:
        if path == "/":
            return method == "POST" or method == "GET"
        return _SQS_PATH.match(path) is not None

    def admit(self, method: str, path: str, raw_headers, landing: bool = False, target: int = 0) -> tuple:
        """Every request's admission, decided from its request line and headers before any of its
        body is read, in this order: the headers' size and count, the Content-Length against the body's
        limit (the SQS endpoint's is lower: its signature is checked only once the body is read),
        the server stopping, the browser checks (Host, cross-site), the SQS endpoint started and
        open (credentials but no SigV4 key: ``SQS_CLOSED``, every SQS request refused before its
        body is read), the bearer token (REST, but for the open paths). ``(sqs, limit, limit_name, chunked, clen,
        refusal)``: ``refusal`` is None, or ``(reason for vqs_rejected_requests_total or None,
        status, code, message, field, headers)``; ``landing``: the root page (``GET /``, no query: open,
        not SQS); ``target``: the request target's length, counted in the head with the headers. Both HTTP
        paths ask this, so every request meets the same bounds once, however its head arrived."""
        size, clen, chunked = _measure(raw_headers)
        size += len(method) + target + 12  # "METHOD TARGET HTTP/1.1\r\n"
        sqs = not landing and self.is_sqs(method, path)
        limit, limit_name = ((self.max_sqs_body, "an SQS request's largest") if sqs and self.max_sqs_body < self.max_body
                             else (self.max_body, "max_body_bytes"))
        refusal = None
        if size > self.max_header:
            refusal = ("header_size", 431, "headers_too_large", f"the request's line and headers are {size} "
                       f"bytes; the limit is {self.max_header} (max_header_bytes)", None, None)
        elif len(raw_headers) > MAX_HEADER_COUNT:
            refusal = ("header_count", 431, "headers_too_large",
                       f"the request has {len(raw_headers)} headers; the limit is {MAX_HEADER_COUNT}", None, None)
        elif clen is not None and clen > limit:
            refusal = ("body_size", 413, "body_too_large", f"request body is {clen} bytes; the limit is {limit} "
                       f"({limit_name})", "body", None)
        elif self.ctx.stopping and path not in ("/health", "/health/live", "/health/ready"):
            refusal = (None, 503, "shutting_down", "the server is shutting down", None,
                       {"Retry-After": "1", "Connection": "close"})
        else:
            refused = self.guard.refused(method, path, raw_headers, sqs)
            if refused is not None:
                refusal = (refused[0], 403, *refused, None, None)
            elif sqs:
                if self.ctx.sqs is None:
                    refusal = (None, 503, "not_ready", "the server is starting", None, None)
                elif self.sqs_closed:
                    refusal = SQS_CLOSED
            elif self.rest_auth and not landing and not path.startswith(_OPEN_PATHS):
                err = self.check_bearer(raw_headers)
                if err is not None:
                    refusal = (None, *err)
        return sqs, limit, limit_name, chunked, clen, refusal

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0 = time.perf_counter()
        path = scope["path"]
        method = scope["method"]
        raw_headers = scope["headers"]
        # no SQS request has neither a body nor a query: the root page (admitted as any request)
        qs = scope.get("query_string")
        landing = method == "GET" and path == "/" and not qs
        target = len(scope.get("raw_path") or path) + (len(qs) + 1 if qs else 0)
        sqs, limit, limit_name, chunked, clen, refusal = self.admit(method, path, raw_headers, landing, target)
        if landing and refusal is None:
            return await self._landing(scope, receive, send, raw_headers, t0)
        held = 0
        if refusal is None and scope.get("vqs_api") != "native":  # (a native frame holds its own: native.py)
            held = clen if clen is not None and clen >= 0 else (limit if chunked else 0)
            if held:
                refusal = self.holds.hold(scope.get("client"), held, sqs)
                if refusal is not None:
                    held = 0
        status_box = [0]
        error_body: list = []

        async def send_wrapper(message):
            if message["type"] == "http.response.start":
                status_box[0] = message["status"]
            elif status_box[0] >= 400 and not error_body:  # an error answer: kept for its log line
                error_body.append(message.get("body", b"")[:4096])
            await send(message)

        api = "sqs" if sqs else scope.get("vqs_api", "rest")  # (the native protocol's requests: "native")
        try:
            if refusal is SQS_CLOSED:  # the endpoint's own refusal, which reads nothing of the body
                await _send(send_wrapper, *await self.ctx.sqs.answer(scope, b"", t0))
                return
            if refusal is not None:
                if refusal[0] is not None:
                    self.ctx.metrics.rejected.labels(refusal[0]).inc()
                elif refusal[2] in _BEARER_CODES:  # check_bearer's: a failed authentication
                    self.ctx.auth_failures.failed(api, scope.get("client"), f"{refusal[2]} ({method} {path})")
                await _send(send_wrapper, *self.refusal_answer(sqs, *refusal[1:]))
                return
            receive = self._limited_receive(receive, limit)
            if sqs:
                await self.ctx.sqs.asgi(scope, receive, send_wrapper)
                return
            await self.app(scope, receive, send_wrapper)
        except _ClientLeft:
            pass  # nothing sent, nothing to send: counted below with no status
        except _TooLarge:
            self.ctx.metrics.rejected.labels("body_size").inc()
            if not status_box[0]:
                await _send(send_wrapper, *self.refusal_answer(sqs, 413, "body_too_large",
                                                               f"request body exceeds {limit} bytes ({limit_name})",
                                                               "body"))
        except Exception as exc:
            # This layer is in front of FastAPI's own error handling: what escapes both (a bug)
            # is answered as the app's handlers answer it, once, if nothing was sent yet.
            if status_box[0]:
                raise
            await _send(send_wrapper, *self.error_answer(exc, method, path))
        finally:
            if held:
                self.holds.release(scope.get("client"), held, sqs)
            route = scope.get("route")
            self.account(api, method, path, getattr(route, "path", None) or ("/" if sqs or landing else "unmatched"),
                         status_box[0], t0, error_body[0] if error_body else b"", scope.get("client"))

    async def _landing(self, scope, receive, send, raw_headers, t0) -> None:
        """``GET /`` without a query, admitted (``admit``): the console for a browser, else the links."""
        accept = next((v for k, v in raw_headers if k == b"accept"), b"")
        if b"text/html" in accept:
            status = 303
            resp = Response(status_code=303, headers={"Location": "/console"})
        else:
            status = 200
            resp = JSONResponse({"service": "vqs", "version": self.app.version, "links": {
                "console": "/console", "docs": "/docs", "openapi": "/openapi.json", "health": "/health",
                "metrics": "/metrics", "topics": "/topics", "queues": "/queues",
                "sqs": "POST / (AWS JSON 1.0 or query protocol)"}})
        await resp(scope, receive, send)
        self._count("rest", "/", "GET", status, time.perf_counter() - t0)

    def error_answer(self, exc: Exception, method: str, path: str) -> tuple[int, list, bytes]:
        """(status, headers, body) of a REST request's error, as the app's exception handlers
        answer it (``errors.rest_error``: never a server path or a traceback)."""
        api = rest_error(exc, self.ctx.metrics, f"{method} {path}", self.ctx)
        r = JSONResponse(api.body(), status_code=api.status, headers=api.headers)
        return r.status_code, r.raw_headers, r.body

    def account(self, api: str, method: str, path: str, rpath: str, status: int, t0: float,
                log_body: bytes = b"", client=None) -> None:
        """A request is over (``status`` 0: no answer was sent, e.g. the client left): counted
        (as 500 when nothing was sent) and logged when ``access_log`` or an error was sent."""
        seconds = time.perf_counter() - t0
        self._count(api, rpath, method, status or 500, seconds)
        if self.access_log or status >= 400:
            log_request(method, path, status or 500, seconds, [log_body] if log_body else [], client,
                        "console" if path.startswith("/console") else api)

    def _count(self, api: str, rpath: str, method: str, status: int, seconds: float) -> None:
        """vqs_http_requests and the latency histogram; their labelled children are kept
        (``labels()`` costs more than the increment)."""
        key = (api, rpath, method, status)
        pair = self._children.get(key)
        if pair is None:
            pair = (self._req.labels(api, rpath, method, str(status)), self._lat.labels(api, rpath))
            if len(self._children) < 10_000:  # the label values come from clients (method)
                self._children[key] = pair
        pair[0].inc()
        pair[1].observe(seconds)

    def _limited_receive(self, receive, limit: int):
        """``receive`` holding the body to ``limit`` bytes (``_TooLarge``), and raising
        ``_ClientLeft`` when the client leaves before the body is whole."""
        seen = [0, False]  # bytes read, the body whole

        async def wrapped():
            message = await receive()
            kind = message["type"]
            if kind == "http.request":
                seen[0] += len(message.get("body", b""))
                if seen[0] > limit:
                    raise _TooLarge()
                if not message.get("more_body"):
                    seen[1] = True
            elif kind == "http.disconnect" and not seen[1]:
                raise _ClientLeft()
            return message

        return wrapped

    def check_bearer(self, raw_headers):
        """None, or the refusal (status, code, message, field, headers) of a request without one
        of the server's bearer tokens (bearer.py)."""
        if not self.tokens:
            return (401, "unauthorized", "this server has SigV4 keys (the SQS API) but no bearer token: REST, "
                    "/metrics and the console need one (start it with --token / VQS_TOKENS)",
                    None, {"WWW-Authenticate": 'Bearer realm="vqs"'})
        auth = None
        for k, v in raw_headers:
            if k == b"authorization":
                auth = v
                break
        why = bearer.check(self.tokens, auth)
        if why is None:
            return None
        if why == bearer.MISSING:
            return (401, "unauthorized", "this server requires a bearer token (Authorization: Bearer <token>)",
                    None, {"WWW-Authenticate": 'Bearer realm="vqs"'})
        if why == bearer.MALFORMED:
            return (401, "unauthorized", "the Authorization header must be 'Bearer <token>'",
                    None, {"WWW-Authenticate": 'Bearer realm="vqs", error="invalid_request"'})
        return (403, "forbidden", "the bearer token is not valid for this server", None, None)

    def refusal_answer(self, sqs: bool, status: int, code: str, message: str, field=None,
                       headers=None) -> tuple[int, list, bytes]:
        """(status, headers, body) of a request refused by its admission, in its front's error
        format (REST's ``{"error": ...}``, the SQS endpoint's AWS JSON error), counted in
        ``vqs_errors_total``."""
        self._err.labels("sqs" if sqs else "rest", code).inc()
        if sqs:
            from .sqs.errors import SQSError
            from .sqs.protocol import render_json_error

            name = {413: "RequestEntityTooLarge", 431: "InvalidParameterValue", 503: "ServiceUnavailable",
                    403: "AccessDenied"}.get(
                status, "InvalidParameterValue")
            err = SQSError(name, message, status=status)
            body = render_json_error(err)
            hs = [(b"content-type", b"application/x-amz-json-1.0"), (b"content-length", str(len(body)).encode()),
                  (b"x-amzn-query-error", err.query_error_header.encode())]
            for k, v in (headers or {}).items():
                hs.append((k.lower().encode(), str(v).encode()))
            return status, hs, body
        doc = {"error": {"code": code, "message": message}}
        if field:
            doc["error"]["field"] = field
        return _json(status, doc, headers)


def create_app(settings: Settings | None = None, *, broker=None, pre_auth=None, in_flight=None,
               auth_failures=None) -> VQSMiddleware:
    """The ASGI app (its FastAPI app is ``.fastapi``). Opens a Broker on ``settings.data_dir``
    at startup unless one is given. ``pre_auth``, ``in_flight``: the server's byte budgets, and
    ``auth_failures`` its failed authentications, when other fronts share them (byte_budget.py,
    auth_failures.py; else the app's own)."""
    from contextlib import asynccontextmanager

    settings = settings or Settings()
    ctx = ServerContext(settings, broker, pre_auth, in_flight, auth_failures)

    @asynccontextmanager
    async def lifespan(app):
        owns = ctx.broker is None
        if owns:
            from ..broker import Broker

            ctx.broker = Broker(settings.data_dir, flush=settings.flush, flush_interval_ms=settings.flush_interval_ms,
                                min_free_bytes=settings.min_free_bytes, cleaner_interval_ms=settings.cleaner_interval_ms,
                                cleaner_io_max_bytes_per_second=settings.cleaner_io_max_bytes_per_second)
        from .sqs.service import SQSService
        configure_groups(ctx.broker, settings)  # (every front's group members: the same settings)
        ctx.sqs = SQSService(ctx)
        ctx.ready = True
        # `vqs serve` says "ready" once its socket listens; this is the app's own start
        logger.debug("application started", extra={"vqs": {"data_dir": settings.data_dir, "flush": settings.flush}})
        try:
            yield
        finally:
            ctx.ready = False
            ctx.stopping = True
            try:
                ctx.sqs.close()
            except Exception:
                logger.exception("closing the SQS service")
            if owns:
                ctx.broker.close()
                logger.info("closed", extra={"vqs": {"data_dir": settings.data_dir}})

    app = FastAPI(
        title="VQS",
        version=_version(),
        description=(
            "VQS server: topics (produce, consume by offset, consumer groups), SQS-style queues, "
            "and an SQS-compatible API (AWS JSON 1.0 and query protocol) on `POST /`. "
            "Errors are JSON `{\"error\": {\"code\", \"message\", \"field\"}}`."
        ),
        lifespan=lifespan,
        docs_url=None,  # /docs: the console's, with Swagger UI served from the wheel (offline)
        redoc_url=None,
    )
    app.state.ctx = ctx

    def _answer(request, exc: Exception) -> JSONResponse:
        api = rest_error(exc, ctx.metrics, f"{request.method} {request.url.path}", ctx)
        return JSONResponse(api.body(), status_code=api.status, headers=api.headers)

    @app.exception_handler(APIError)
    async def _api_error(request, exc: APIError):
        return _answer(request, exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(request, exc: RequestValidationError):
        from .rest.conventions import invalid_json, validation_error

        errors = exc.errors()
        if errors and errors[0].get("type") == "json_invalid":  # the framework's parse of the body
            loc = errors[0].get("loc") or ()
            api = invalid_json((errors[0].get("ctx") or {}).get("error") or "it does not parse",
                               loc[1] if len(loc) > 1 else None)
            ctx.metrics.errors.labels("rest", api.code).inc()
            return JSONResponse(api.body(), status_code=400)
        ctx.metrics.errors.labels("rest", "invalid_argument").inc()
        return JSONResponse({"error": validation_error(errors)}, status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request, exc: StarletteHTTPException):
        from .rest.conventions import BodyNotJSON

        if isinstance(exc, BodyNotJSON):
            ctx.metrics.errors.labels("rest", exc.api.code).inc()
            return JSONResponse(exc.api.body(), status_code=exc.api.status)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        body = {"code": code, "message": str(exc.detail)}
        if exc.status_code == 400 and exc.detail == "There was an error parsing the body":
            # the framework's answer to a body json_loads refused (rest/conventions.py)
            body = {"code": "invalid_json", "message": "the body is not valid JSON: it is not UTF-8 text, nests "
                    "too deep, or holds a lone surrogate escape", "field": "body"}
        return JSONResponse({"error": body}, status_code=exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(VQSError)
    async def _vqs(request, exc: VQSError):
        return _answer(request, exc)

    @app.exception_handler(UnicodeEncodeError)
    async def _unencodable(request, exc: UnicodeEncodeError):
        # a lone surrogate of a request's JSON: a 400 (rest_error), handled here so that the
        # framework does not log it as a failure as it does what only the Exception handler catches
        return _answer(request, exc)

    @app.exception_handler(Exception)
    async def _other(request, exc: Exception):
        # a VQSError raised outside the routes (the VQSError handler's reach) is mapped as in
        # them; anything else is a 500 whose text (it may name server files) goes to the log
        return _answer(request, exc)

    from .rest import build_router

    app.include_router(build_router(ctx))
    from .console import mount_console

    mount_console(app, ctx)
    front = VQSMiddleware(app, ctx)
    app.state.front = front  # vqs.server.run gives it to the HTTP protocol's fast path (fast_http.py)
    return front


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vqs")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0"
