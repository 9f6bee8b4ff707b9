"""The ASGI application: REST routes, the SQS endpoint, limits, auth and metrics.

One process owns the data directory: the app opens the Broker in its
lifespan and closes it (flushing every log) when the server stops.

``VQSMiddleware`` is the outermost layer: every request passes its limits,
auth, metrics and error logging; then the SQS endpoint, the lean dispatch of
the hot REST routes (lean.py: same answers, no framework per request) or the
FastAPI routes answer it.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import time

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import VQSError
from ..storage import Throttle
from .browser_guard import BrowserGuard
from .context import ServerContext
from .errors import APIError, rest_error
from .http_bounds import SQS_MAX_BODY_BYTES
from .lean import BodyTooLarge, LeanRoutes, capturing
from .settings import Settings

logger = logging.getLogger("vqs.server")

_SQS_PATH = re.compile(r"^/\d{12}/[^/]+/?$")
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


def _measure(raw_headers) -> tuple[int, int | None]:
    """(the headers' size as the limit counts it, the first Content-Length: None absent, -1 bad)."""
    size = 0
    clen = None
    for k, v in raw_headers:
        size += len(k) + len(v) + 4
        if k == b"content-length" and clen is None:
            try:
                clen = int(v)
            except ValueError:
                clen = -1
    return size, clen


#: ``VQSMiddleware.fast_hit``'s answer for a request to the SQS endpoint (the endpoint's
#: ``answer`` runs it; no name in the path is taken from here)
SQS_HIT = ("sqs", None)

_TooLarge = BodyTooLarge  # the body passed max_body_bytes (read here or by the lean routes)


_disk_full_lines = Throttle(logger)


def _log_request(method: str, path: str, status: int, seconds: float, error_body: list,
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
        logger.info("request", extra={"vqs": fields})
        return
    from .logs import error_summary

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
    logger.log(level, "rejected", extra={"vqs": fields, "text": text})


class VQSMiddleware:
    """The server's ASGI app, in front of FastAPI: header/body limits, bearer auth, SQS
    dispatch, the lean dispatch, metrics, access log; FastAPI answers the rest. (In front
    of, not inside, FastAPI's middleware stack: the SQS endpoint and the lean routes pay
    nothing of the framework.)"""

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
        m = ctx.metrics
        self._lat = m.latency
        self._req = m.requests
        self._err = m.errors
        self.access_log = s.access_log
        self._children: dict = {}
        self.lean = LeanRoutes(ctx, app) if s.lean_dispatch else None

    @staticmethod
    def is_sqs(method: str, path: str, headers: dict) -> bool:
        if path == "/":
            if method == "POST":
                return True
            return method == "GET"
        return _SQS_PATH.match(path) is not None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0 = time.perf_counter()
        path = scope["path"]
        method = scope["method"]
        raw_headers = scope["headers"]
        size, clen = _measure(raw_headers)
        lean = self.lean
        if lean is not None and size <= self.max_header and (clen is None or clen <= self.max_body) \
                and not self.ctx.stopping:
            hit = lean.match(method, path)  # a hot route whose checks all pass: no framework, no wrappers
            if hit is not None and (not self.rest_auth or self._check_bearer(raw_headers) is None) \
                    and self.guard.refused(method, path, raw_headers, False) is None:
                return await self._lean(hit, scope, receive, send, t0)
        status_box = [0]
        error_body: list = []

        async def send_wrapper(message):
            if message["type"] == "http.response.start":
                status_box[0] = message["status"]
            elif status_box[0] >= 400 and not error_body:  # an error answer: kept for its log line
                error_body.append(message.get("body", b"")[:4096])
            await send(message)

        if method == "GET" and path == "/" and not scope.get("query_string"):
            # No SQS request has neither a body nor a query (Action is required): a person or a
            # probe at the server's root is shown the way, a browser the console.
            return await self._landing(scope, receive, send, raw_headers, t0)
        sqs = self.is_sqs(method, path, raw_headers)
        api = "sqs" if sqs else "rest"
        limit, limit_name = ((self.max_sqs_body, "an SQS request's largest") if sqs and self.max_sqs_body < self.max_body
                             else (self.max_body, "max_body_bytes"))
        try:
            if size > self.max_header:
                self.ctx.metrics.rejected.labels("header_size").inc()
                await self._reject(send_wrapper, sqs, 431, "headers_too_large",
                                   f"request headers are {size} bytes; the limit is {self.max_header} (max_header_bytes)")
                return
            if clen is not None and clen > limit:
                self.ctx.metrics.rejected.labels("body_size").inc()
                await self._reject(send_wrapper, sqs, 413, "body_too_large",
                                   f"request body is {clen} bytes; the limit is {limit} ({limit_name})",
                                   field="body")
                return
            if self.ctx.stopping and path not in ("/health", "/health/live", "/health/ready"):
                await self._reject(send_wrapper, sqs, 503, "shutting_down", "the server is shutting down",
                                   headers={"Retry-After": "1", "Connection": "close"})
                return
            refused = self.guard.refused(method, path, raw_headers, sqs)
            if refused is not None:
                self.ctx.metrics.rejected.labels(refused[0]).inc()
                await self._reject(send_wrapper, sqs, 403, *refused)
                return
            receive = self._limited_receive(receive, limit)
            if sqs:
                if self.ctx.sqs is None:
                    await self._reject(send_wrapper, True, 503, "not_ready", "the server is starting")
                    return
                await self.ctx.sqs.asgi(scope, receive, send_wrapper)
                return
            if self.rest_auth and not path.startswith(_OPEN_PATHS):
                err = self._check_bearer(raw_headers)
                if err is not None:
                    await self._reject(send_wrapper, False, *err)
                    return
            await self.app(scope, receive, send_wrapper)
        except _TooLarge:
            self.ctx.metrics.rejected.labels("body_size").inc()
            if not status_box[0]:
                await self._reject(send_wrapper, sqs, 413, "body_too_large",
                                   f"request body exceeds {limit} bytes ({limit_name})", field="body")
        except Exception as exc:
            # This layer is in front of FastAPI's own error handling: what escapes both (a bug)
            # is answered as the app's handlers answer it, once, if nothing was sent yet.
            if status_box[0]:
                raise
            api_error = rest_error(exc, self.ctx.metrics, f"{method} {path}", self.ctx)
            await JSONResponse(api_error.body(), status_code=api_error.status,
                               headers=api_error.headers)(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            rpath = getattr(route, "path", None) or ("/" if sqs else "unmatched")
            status = status_box[0] or 500
            self._count(api, rpath, method, status, time.perf_counter() - t0)
            if self.access_log or status_box[0] >= 400:  # 0: no answer sent (the client left)
                _log_request(method, path, status, time.perf_counter() - t0, error_body, scope.get("client"),
                             "console" if path.startswith("/console") else api)

    async def _landing(self, scope, receive, send, raw_headers, t0) -> None:
        accept = next((v for k, v in raw_headers if k == b"accept"), b"")
        refused = self.guard.refused("GET", "/", raw_headers, False)
        if refused is not None:
            status = 403
            resp = JSONResponse({"error": {"code": refused[0], "message": refused[1]}}, status_code=403)
        elif b"text/html" in accept:
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

    def fast_hit(self, method: str, path: str, raw_headers):
        """For the HTTP-protocol fast path (fast_http.py): the lean hit of a request ``__call__``
        would hand to the lean routes (the same checks: header size, body size, not stopping, the
        token), or ``SQS_HIT`` for one it would hand to the SQS endpoint (header size, body size,
        not stopping, the endpoint started; its auth is the endpoint's own), with a Content-Length
        (a GET may have none) and no Transfer-Encoding; else None."""
        lean = self.lean
        if lean is None or self.ctx.stopping:
            return None
        size, clen = _measure(raw_headers)
        if (clen is None and method != "GET") or (clen is not None and not 0 <= clen <= self.max_body) \
                or size > self.max_header:
            return None
        if self.is_sqs(method, path, raw_headers):
            hit = SQS_HIT if self.ctx.sqs is not None and (clen is None or clen <= self.max_sqs_body) else None
        else:
            hit = lean.match(method, path)
            if hit is not None and self.rest_auth and self._check_bearer(raw_headers) is not None:
                return None
        if hit is not None and self.guard.refused(method, path, raw_headers, hit is SQS_HIT) is not None:
            return None
        if hit is None:
            return None
        for k, _ in raw_headers:
            if k == b"transfer-encoding":
                return None
        return hit

    async def _lean(self, hit, scope, receive, send, t0: float) -> None:
        """A hot route (lean.py) whose header, limit and token checks passed: the same 413, error
        answer, metrics and log line as ``__call__`` gives any request."""
        state = [0, b""]  # the status sent (0: none), an error answer's body
        try:
            await self.lean.handle(hit, scope, receive, send, state, self.max_body)
        except _TooLarge:
            self.ctx.metrics.rejected.labels("body_size").inc()
            if not state[0]:
                await self._reject(capturing(send, state), False, 413, "body_too_large",
                                   f"request body exceeds {self.max_body} bytes (max_body_bytes)", field="body")
        except Exception as exc:
            if state[0]:
                raise
            api_error = rest_error(exc, self.ctx.metrics, f"{scope['method']} {scope['path']}", self.ctx)
            await JSONResponse(api_error.body(), status_code=api_error.status,
                               headers=api_error.headers)(scope, receive, capturing(send, state))
        finally:
            route = scope.get("route")
            rpath = getattr(route, "path", None) or "unmatched"
            status = state[0] or 500
            self._count("rest", rpath, scope["method"], status, time.perf_counter() - t0)
            if self.access_log or state[0] >= 400:
                _log_request(scope["method"], scope["path"], status, time.perf_counter() - t0,
                             [state[1]] if state[1] else [])

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
        seen = [0]

        async def wrapped():
            message = await receive()
            if message["type"] == "http.request":
                seen[0] += len(message.get("body", b""))
                if seen[0] > limit:
                    raise _TooLarge()
            return message

        return wrapped

    def _check_bearer(self, raw_headers):
        if not self.tokens:
            return (401, "unauthorized", "this server has SigV4 keys (the SQS API) but no bearer token: REST, "
                    "/metrics and the console need one (start it with --token / VQS_TOKENS)",
                    None, {"WWW-Authenticate": 'Bearer realm="vqs"'})
        auth = None
        for k, v in raw_headers:
            if k == b"authorization":
                auth = v
                break
        if not auth:
            return (401, "unauthorized", "this server requires a bearer token (Authorization: Bearer <token>)",
                    None, {"WWW-Authenticate": 'Bearer realm="vqs"'})
        scheme, _, token = auth.partition(b" ")
        if scheme.lower() != b"bearer" or not token:
            return (401, "unauthorized", "the Authorization header must be 'Bearer <token>'",
                    None, {"WWW-Authenticate": 'Bearer realm="vqs", error="invalid_request"'})
        ok = False
        for t in self.tokens:
            ok |= hmac.compare_digest(t, token.strip())
        if not ok:
            return (403, "forbidden", "the bearer token is not valid for this server", None, None)
        return None

    async def _reject(self, send, sqs: bool, status: int, code: str, message: str, field=None, headers=None):
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
            await _send(send, status, hs, body)
            return
        body = {"error": {"code": code, "message": message}}
        if field:
            body["error"]["field"] = field
        await _send(send, *_json(status, body, headers))


def create_app(settings: Settings | None = None, *, broker=None) -> VQSMiddleware:
    """The ASGI app (its FastAPI app is ``.fastapi``). Opens a Broker on ``settings.data_dir``
    at startup unless one is given."""
    from contextlib import asynccontextmanager

    settings = settings or Settings()
    ctx = ServerContext(settings, broker)

    @asynccontextmanager
    async def lifespan(app):
        owns = ctx.broker is None
        if owns:
            from ..broker import Broker

            ctx.broker = Broker(settings.data_dir, flush=settings.flush,
                                flush_interval_ms=settings.flush_interval_ms,
                                min_free_bytes=settings.min_free_bytes, cleaner_interval_ms=settings.cleaner_interval_ms)
        from .sqs.service import SQSService

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
        from .rest.conventions import validation_error

        ctx.metrics.errors.labels("rest", "invalid_argument").inc()
        return JSONResponse({"error": validation_error(exc.errors())}, status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request, exc: StarletteHTTPException):
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        body = {"code": code, "message": str(exc.detail)}
        if exc.status_code == 400 and exc.detail == "There was an error parsing the body":
            # the framework's answer to a body json_loads refused (rest/conventions.py)
            body = {"code": "invalid_json", "message": "the body is not valid JSON (or nests too deep, or holds "
                    "a lone surrogate escape)", "field": "body"}
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
