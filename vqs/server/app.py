"""The ASGI application: REST routes, the SQS endpoint, limits, auth and metrics.

One process owns the data directory: the app opens the Broker in its
lifespan and closes it (flushing every log) when the server stops.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import time
from urllib.parse import parse_qsl

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import VQSError
from .context import ServerContext
from .errors import APIError, from_vqs_error
from .settings import Settings

logger = logging.getLogger("vqs.server")

_SQS_PATH = re.compile(r"^/\d{12}/[^/]+/?$")
_MESSAGES_PATH = re.compile(r"^/topics/([A-Za-z0-9._-]{1,200})/messages$")
_BATCH = b"application/vnd.vqs.batch"
_CONSUME_PARAMS = {"partition", "offset", "limit", "max_bytes", "wait_ms", "group", "encoding"}


class _Route:
    def __init__(self, path):
        self.path = path


_FAST_PRODUCE = _Route("/topics/{topic}/messages")
_FAST_CONSUME = _FAST_PRODUCE
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


class _TooLarge(Exception):
    pass


def _log_request(method: str, path: str, status: int, seconds: float, error_body: list) -> None:
    """One line per request (``access_log``) or per refused one (any 4xx/5xx): the method,
    path (never the query string, which may carry SQS parameters), status and, for an
    error, its code and message. 401/403/5xx at warning, other refusals at info."""
    fields = {"method": method, "path": path, "status": status, "ms": round(seconds * 1000, 3)}
    if status < 400:
        logger.info("request", extra={"vqs": fields})
        return
    from .logs import error_summary

    summary = error_summary(error_body[0]) if error_body else ""
    if summary:
        fields["error"] = summary
    level = logging.WARNING if status in (401, 403) or status >= 500 else logging.INFO
    logger.log(level, "rejected", extra={"vqs": fields,
                                         "text": f"rejected {status} {method} {path}" + (f" {summary}" if summary else "")})


class VQSMiddleware:
    """Outermost layer: header/body limits, bearer auth, SQS dispatch, metrics, access log."""

    def __init__(self, app, ctx: ServerContext):
        self.app = app
        self.ctx = ctx
        s = ctx.settings
        self.tokens = [t.encode() for t in s.tokens]
        self.max_body = s.max_body_bytes
        self.max_header = s.max_header_bytes
        m = ctx.metrics
        self._lat = m.latency
        self._req = m.requests
        self._err = m.errors
        self.access_log = s.access_log

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
        size = 0
        for k, v in raw_headers:
            size += len(k) + len(v) + 4
        status_box = [0]
        error_body: list = []

        async def send_wrapper(message):
            if message["type"] == "http.response.start":
                status_box[0] = message["status"]
            elif status_box[0] >= 400 and not error_body:  # an error answer: kept for its log line
                error_body.append(message.get("body", b"")[:4096])
            await send(message)

        sqs = self.is_sqs(method, path, raw_headers)
        api = "sqs" if sqs else "rest"
        try:
            if size > self.max_header:
                self.ctx.metrics.rejected.labels("header_size").inc()
                await self._reject(send_wrapper, sqs, 431, "headers_too_large",
                                   f"request headers are {size} bytes; the limit is {self.max_header} (max_header_bytes)")
                return
            clen = None
            for k, v in raw_headers:
                if k == b"content-length":
                    try:
                        clen = int(v)
                    except ValueError:
                        clen = -1
                    break
            if clen is not None and clen > self.max_body:
                self.ctx.metrics.rejected.labels("body_size").inc()
                await self._reject(send_wrapper, sqs, 413, "body_too_large",
                                   f"request body is {clen} bytes; the limit is {self.max_body} (max_body_bytes)",
                                   field="body")
                return
            if self.ctx.stopping and path not in ("/health", "/health/live", "/health/ready"):
                await self._reject(send_wrapper, sqs, 503, "shutting_down", "the server is shutting down",
                                   headers={"Retry-After": "1", "Connection": "close"})
                return
            receive = self._limited_receive(receive)
            if sqs:
                if self.ctx.sqs is None:
                    await self._reject(send_wrapper, True, 503, "not_ready", "the server is starting")
                    return
                await self.ctx.sqs.asgi(scope, receive, send_wrapper)
                return
            if self.tokens and not path.startswith(_OPEN_PATHS):
                err = self._check_bearer(raw_headers)
                if err is not None:
                    await self._reject(send_wrapper, False, *err)
                    return
            m = _MESSAGES_PATH.match(path)
            if m is not None and await self._fast(scope, receive, send_wrapper, method, m.group(1), raw_headers):
                return
            await self.app(scope, receive, send_wrapper)
        except _TooLarge:
            self.ctx.metrics.rejected.labels("body_size").inc()
            if not status_box[0]:
                await self._reject(send_wrapper, sqs, 413, "body_too_large",
                                   f"request body exceeds {self.max_body} bytes (max_body_bytes)", field="body")
        finally:
            route = scope.get("route")
            rpath = getattr(route, "path", None) or ("/" if sqs else "unmatched")
            status = status_box[0] or 500
            self._req.labels(api, rpath, method, str(status)).inc()
            self._lat.labels(api, rpath).observe(time.perf_counter() - t0)
            if self.access_log or status_box[0] >= 400:  # 0: no answer sent (the client left)
                _log_request(method, path, status, time.perf_counter() - t0, error_body)

    async def _fast(self, scope, receive, send, method: str, topic: str, raw_headers) -> bool:
        """The binary produce/consume routes without the framework's routing (they carry the
        throughput). Returns False to let the FastAPI route (same behaviour, JSON) handle it."""
        from .rest import consume_batches, produce_batches

        ctype = accept = b""
        for k, v in raw_headers:
            if k == b"content-type":
                ctype = v
            elif k == b"accept":
                accept = v
        qs = scope.get("query_string", b"")
        try:
            if method == "POST" and ctype.split(b";", 1)[0].strip().lower() == _BATCH:
                chunks = []
                while True:
                    msg = await receive()
                    if msg["type"] != "http.request":
                        return True
                    chunks.append(msg.get("body", b""))
                    if not msg.get("more_body"):
                        break
                q = dict(parse_qsl(qs.decode("latin-1"))) if qs else {}
                out = await produce_batches(self.ctx, topic, q.get("partition"), b"".join(chunks))
                scope["route"] = _FAST_PRODUCE
                await _send(send, *_json(200, out))
                return True
            if method == "GET" and _BATCH in accept:
                q = dict(parse_qsl(qs.decode("latin-1"))) if qs else {}
                extra = set(q) - _CONSUME_PARAMS
                if extra:
                    return False  # let the framework report the unknown parameter
                data, headers = await consume_batches(self.ctx, topic, q)
                scope["route"] = _FAST_CONSUME
                hs = [(b"content-type", _BATCH), (b"content-length", str(len(data)).encode())]
                hs += [(k.encode(), v.encode()) for k, v in headers.items()]
                await _send(send, 200, hs, data)
                return True
        except APIError as e:
            self._err.labels("rest", e.code).inc()
            await _send(send, *_json(e.status, e.body(), e.headers))
            return True
        except VQSError as e:
            api = from_vqs_error(e)
            self._err.labels("rest", api.code).inc()
            await _send(send, *_json(api.status, api.body(), api.headers))
            return True
        return False

    def _limited_receive(self, receive):
        limit = self.max_body
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

            name = {413: "RequestEntityTooLarge", 431: "InvalidParameterValue", 503: "ServiceUnavailable"}.get(
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


def create_app(settings: Settings | None = None, *, broker=None) -> FastAPI:
    """The ASGI app. Opens a Broker on ``settings.data_dir`` at startup unless one is given."""
    from contextlib import asynccontextmanager

    settings = settings or Settings()
    ctx = ServerContext(settings, broker)

    @asynccontextmanager
    async def lifespan(app):
        owns = ctx.broker is None
        if owns:
            from ..broker import Broker

            ctx.broker = Broker(settings.data_dir, flush=settings.flush,
                                flush_interval_ms=settings.flush_interval_ms)
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

    @app.exception_handler(APIError)
    async def _api_error(request, exc: APIError):
        ctx.metrics.errors.labels("rest", exc.code).inc()
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(request, exc: RequestValidationError):
        errs = exc.errors()
        first = errs[0] if errs else {}
        loc = [str(x) for x in first.get("loc", ()) if x not in ("body", "query", "path")]
        field = ".".join(loc) or None
        msg = first.get("msg", "invalid request")
        ctx.metrics.errors.labels("rest", "invalid_argument").inc()
        return JSONResponse(
            {"error": {"code": "invalid_argument", "message": f"{field or 'request'}: {msg}", "field": field}},
            status_code=400,
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request, exc: StarletteHTTPException):
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return JSONResponse({"error": {"code": code, "message": str(exc.detail)}}, status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(VQSError)
    async def _vqs(request, exc: VQSError):
        api = from_vqs_error(exc)
        ctx.metrics.errors.labels("rest", api.code).inc()
        return JSONResponse(api.body(), status_code=api.status, headers=api.headers)

    @app.exception_handler(Exception)
    async def _other(request, exc: Exception):
        if isinstance(exc, VQSError):  # raised outside the routes (the VQSError handler's reach)
            api = from_vqs_error(exc)
            ctx.metrics.errors.labels("rest", api.code).inc()
            return JSONResponse(api.body(), status_code=api.status, headers=api.headers)
        logger.exception("unhandled error on %s %s", request.method, request.url.path)
        ctx.metrics.errors.labels("rest", "internal").inc()
        # the exception's text may name server files: it goes to the log, not to the client
        return JSONResponse({"error": {"code": "internal", "message": "internal error; the server log has the details"}},
                            status_code=500)

    from .rest import build_router

    app.include_router(build_router(ctx))
    from .console import mount_console

    mount_console(app, ctx)
    app.add_middleware(VQSMiddleware, ctx=ctx)
    return app


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vqs")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0"
