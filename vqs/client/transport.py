"""The HTTP transport of ``vqs.Client``: one keep-alive pool per Client, errors raised, never returned.

Guarantees:
- every request of a Client, and of everything made from it (topics, producers,
  consumers, queues), goes through this one object: one ``httpx.Client`` with a
  keep-alive pool, the bearer token on every request;
- a request answered with an unexpected status never returns: it raises the
  embedded API's exception for the server's error body (``error_map``);
- the produce/consume hot path (``hot``) goes straight to httpx's connection
  pool (httpcore) when the default transport is in use: the same keep-alive
  connections without httpx's per-request machinery (~0.5 ms a request).
  A caller-given transport (tests' ``httpx.MockTransport``, ASGI) is used as is;
- a request that does not complete (no connection, a connection broken before
  the answer, a timeout) raises ``vqs.errors.ServerUnreachable`` naming the
  server, with the transport's exception as its ``__cause__``: no ``httpx`` or
  ``httpcore`` exception reaches a caller;
- a request's path is made only of valid names (``vqs.broker.names``): a
  topic, queue or group name that is not one (``../x``, a lone surrogate from
  a non-UTF-8 command line) raises ``InvalidName`` before anything is sent,
  so no name can reach another route;
- sockets set TCP_NODELAY: a request is written as headers then body, and
  without it the body waits for the peer's delayed ACK;
- with the default transport on an ``http://`` URL, the hot path and the JSON
  requests (``json``) go through ``lean.LeanHTTP``: one persistent socket per
  thread, a request built as one bytes object, no lock shared between threads.
  A request's head (request line and headers) is made once per route and kept
  (``_heads``, at most ``_MAX_HEADS``; its path checked when made); one whose
  query varies (a fetch's offset) is made each time.
  Everything else (and any caller-given transport) goes through httpx.
"""

from __future__ import annotations

import json as _json
import logging
import re
import threading
from urllib.parse import urlencode, urlsplit

from .. import errors as E
from ..broker.names import validate_name
from ..native_wire import ACCEPT_BATCH, ACCEPT_JSON, CONTENT_TYPE_CODES, METHOD_CODES, NativeFrameError
from ..wire import BATCH_CONTENT_TYPE
from .error_map import from_response
from .lean import LeanHTTP, LeanProtocolError
from .native import NativeClient, NativeRefused, NativeUnavailable

DEFAULT_URL = "http://127.0.0.1:8642"
_SOCKET_OPTIONS = [(6, 1, 1)]  # (IPPROTO_TCP, TCP_NODELAY, 1)
_JSON_CT = b"content-type: application/json\r\n"
_PATH = re.compile(r"(?:/[A-Za-z0-9._-]{1,200})*")
SURROGATE = re.compile("[\ud800-\udfff]")  # what a non-UTF-8 command-line argument holds


_MAX_HEADS = 1024
#: a lean request's extra header lines -> (content type, accept) of its native request; None: HTTP only
_NATIVE_ROUTES: dict = {}


def _native_route(lines: bytes):
    """(content type, accept) a native request carries for these header lines (``lean``'s), or
    None when they say anything a native request cannot (the request goes over HTTP)."""
    route = _NATIVE_ROUTES.get(lines, _MISSING)
    if route is _MISSING:
        ctype, accept, route = None, ACCEPT_JSON, None
        for line in lines.split(b"\r\n"):
            if not line:
                continue
            name, _, value = line.partition(b":")
            name, value = name.strip().lower(), value.strip().decode("latin-1")
            if name == b"content-type" and value in CONTENT_TYPE_CODES:
                ctype = value
            elif name == b"accept" and value == BATCH_CONTENT_TYPE:
                accept = ACCEPT_BATCH
            else:
                break
        else:
            route = (ctype, accept)
        if len(_NATIVE_ROUTES) < _MAX_HEADS:
            _NATIVE_ROUTES[lines] = route
    return route


_MISSING = object()


def _header_lines(headers: tuple) -> bytes:
    """(name, value) byte pairs as header lines (a hot request's few: kept once made)."""
    lines = _LINES.get(headers)
    if lines is None:
        lines = b"".join(b"%s: %s\r\n" % kv for kv in headers)
        if len(_LINES) < _MAX_HEADS:
            _LINES[headers] = lines
    return lines


_LINES: dict = {}


def _check_path(path: str) -> None:
    """Raise InvalidName unless every part of ``path`` (before its query) is a valid name (one
    regex on the common path)."""
    path = path.partition("?")[0]
    if _PATH.fullmatch(path) and "/./" not in path + "/" and "/../" not in path + "/":
        return
    for part in path.split("/")[1:]:
        validate_name(part)
    raise E.InvalidName(f"invalid request path {path!r}")


def base_url(url: str) -> str:
    """``url`` as the Client's base (``http://`` added to ``host:port``, as curl does); ConfigError
    naming it unless it is an http(s) URL with a host and a valid port, so a malformed URL is
    refused where it is given, never as a ValueError or an httpx error of a later request."""
    if not isinstance(url, str):
        raise E.ConfigError(f"url must be a string such as {DEFAULT_URL!r}, not {type(url).__name__}")
    if SURROGATE.search(url):
        raise E.ConfigError(f"url {url!r} is not valid text (bytes that are not UTF-8?)")
    if "://" not in url:
        url = "http://" + url
    url = url.rstrip("/")
    try:
        u = urlsplit(url)
        u.port  # noqa: B018 (raises ValueError for a port out of range or not a number)
    except ValueError as e:
        raise E.ConfigError(f"url {url!r} is not a valid URL: {e}") from e
    if u.scheme not in ("http", "https"):
        raise E.ConfigError(f"url {url!r}: the scheme must be http or https, not {u.scheme!r}")
    if not u.hostname:
        raise E.ConfigError(f"url {url!r} names no host (e.g. {DEFAULT_URL!r})")
    if u.query or u.fragment:
        raise E.ConfigError(f"url {url!r}: a server URL has no query or fragment")
    return url


def _loopback(host: str | None) -> bool:
    """``host`` names this machine's loopback (localhost, 127.0.0.0/8, ::1)."""
    import ipaddress

    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_token(token: str | None) -> None:
    """ConfigError unless ``token`` can be sent as a bearer token: printable ASCII (a header
    cannot carry a line break, NUL or text that is not ASCII; a non-UTF-8 argument holds
    surrogates)."""
    if token is not None and not (isinstance(token, str) and token.isascii() and token.isprintable()):
        raise E.ConfigError("the token must be printable ASCII (no line breaks, NUL or other characters)")


def _transport_errors() -> tuple:
    import httpcore
    import httpx

    # httpx.RequestError covers the httpx API (transport failures, an answer that cannot be
    # decoded, too many redirects); the pooled hot path raises httpcore's own.
    return (httpx.RequestError, httpcore.NetworkError, httpcore.TimeoutException,
            httpcore.ProtocolError, httpcore.UnsupportedProtocol)


class Transport:
    """Requests to one VQS server (base ``url``), with its token and timeout."""

    def __init__(self, url: str, token: str | None, timeout: float, transport=None, native: bool | None = None):
        import httpx

        self.url = base_url(url)
        check_token(token)
        # x-vqs-client: a header no web page can send to another site without a CORS preflight,
        # which a server without credentials asks of every POST (docs/security.md)
        headers = {"user-agent": "vqs-client", "x-vqs-client": "python"}
        if token:
            headers["authorization"] = f"Bearer {token}"
        self.timeout = timeout
        self._headers = headers
        self._given = transport
        self._http = None  # made on first use: with the lean path, most Clients never need it
        self._failures = _transport_errors()
        self._pool = None
        self._raw_headers = [(k.encode(), v.encode()) for k, v in headers.items()]
        self._lean = None
        self._heads: dict = {}  # (method, path, extra header lines) -> the lean request's head
        u = urlsplit(self.url)
        if transport is None and u.scheme == "http" and u.hostname and not u.path:
            base = "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode("latin-1")
            self._lean = LeanHTTP(u.hostname, u.port or 80, base)
            self._failures = self._failures + (OSError, LeanProtocolError)
        elif transport is None or isinstance(transport, httpx.HTTPTransport):
            import httpcore

            self._pool = httpcore.ConnectionPool(max_connections=64, max_keepalive_connections=32,
                                                 socket_options=_SOCKET_OPTIONS)
        # the native protocol (native.py): asked of the server's /health at the first lean
        # request (None: not yet; False: none, or not for this Client)
        if native is None:
            native = _loopback(u.hostname)
        self._native = None if native and self._lean is not None else False
        self._native_lock = threading.Lock()
        self._token = (token or "").encode()
        self._checked: set = set()  # paths checked (_check_path) for native requests

    @property
    def http(self):
        """The ``httpx.Client`` of the requests not on the lean path (made on first use)."""
        if self._http is None:
            import httpx

            transport = self._given or httpx.HTTPTransport(socket_options=_SOCKET_OPTIONS)
            self._http = httpx.Client(base_url=self.url, headers=self._headers, timeout=self.timeout,
                                      transport=transport,
                                      limits=httpx.Limits(max_keepalive_connections=32, max_connections=64))
        return self._http

    def request(self, method: str, path: str, *, expect=(200, 201, 204), **kw):
        """The ``httpx.Response``; raises the mapped error unless its status is in ``expect``."""
        _check_path(path)
        try:
            r = self.http.request(method, path, **kw)
        except self._failures as e:
            raise self._unreachable(method, path, e) from e
        if r.status_code not in expect:
            raise from_response(r)
        return r

    def json(self, method: str, path: str, *, expect=(200, 201, 204), json=None, params=None,
             timeout: float | None = None, data: bytes | None = None):
        """The decoded JSON answer (None for an empty body); raises like ``request``. ``data``:
        the body as JSON text already encoded (instead of ``json``)."""
        if self._lean is None:
            kw: dict = {} if timeout is None else {"timeout": timeout}
            if data is not None:
                kw.update(content=data, headers={"content-type": "application/json"})
            r = self.request(method, path, expect=expect, json=json, params=params, **kw)
        else:
            body = data if json is None else _json.dumps(json).encode()
            r = self.lean(method, path, urlencode(params, doseq=True) if params else "",
                          b"" if body is None else _JSON_CT, body, timeout)
            if r.status_code not in expect:
                raise from_response(r)
        try:
            return _json.loads(r.content) if r.content else None
        except ValueError:
            raise E.RemoteError(f"{method} {path}: the answer is not JSON", status=r.status_code,
                                code="bad_answer") from None

    def lean(self, method: str, path: str, query: str, headers: bytes, body: bytes | None,
             timeout: float | None = None, keep: bool = False):
        """The lean path's answer (any status) to ``method path?query`` (``query`` encoded, or
        empty) with ``headers`` (extra CRLF-ended lines) and ``body``. The head of a request
        without a query, or whose query is one of few (``keep``: e.g. a partition), is made
        once and kept (``_heads``; its path checked then): a one-message request builds
        nothing but its body."""
        if self._native is not False:
            native = self._native or self._discover()
            route = _native_route(headers) if native else None
            if route is not None:
                r = self._native_request(native, route, method, path, query, body, timeout)
                if r is not None:
                    return r
        lean = self._lean
        keep = keep or not query  # a query's values vary (offsets): not kept unless told
        key = (method, path, query, headers)
        head = self._heads.get(key) if keep else None
        if head is None:
            _check_path(path)
            head = lean.head(method, f"{path}?{query}" if query else path, headers)
            if keep:
                if len(self._heads) >= _MAX_HEADS:  # the paths come from the caller: bounded
                    self._heads.clear()
                self._heads[key] = head
        try:
            return lean.send(head, body, timeout or self.timeout)
        except self._failures as e:
            raise self._unreachable(method, path, e) from e

    def _discover(self):
        """The server's native port, asked of GET /health once (under a lock: once per Client); the
        NativeClient, or False (none: every request over HTTP)."""
        with self._native_lock:
            if self._native is None:
                found = False
                try:
                    r = self._lean.request("GET", "/health", b"", None, self.timeout)
                except (OSError, LeanProtocolError):
                    r = None  # not reached: asked again (the request that follows says why)
                    found = None
                try:
                    doc = _json.loads(r.content) if r is not None and r.status_code in (200, 503) else {}
                    port = doc.get("native_port") if isinstance(doc, dict) else None
                except ValueError:
                    port = None  # an answer that is not VQS's: HTTP only
                if isinstance(port, int) and 0 < port < 65536:
                    found = NativeClient(self._lean.host, port, self._token)
                self._native = found
            return self._native

    def _native_request(self, native: NativeClient, route, method: str, path: str, query: str, body,
                        timeout: float | None):
        """The answer of the request over the native protocol, or None when it was not sent (then
        HTTP sends it: no native port reachable, or a body past its frames)."""
        if method not in METHOD_CODES:  # (a method the frames do not name: HTTP's)
            return None
        if path not in self._checked:
            _check_path(path)
            if len(self._checked) < _MAX_HEADS:
                self._checked.add(path)
        try:
            return native.request(method, f"{path}?{query}" if query else path, route[0], route[1], body,
                                  timeout or self.timeout)
        except NativeFrameError:  # a target longer than a frame holds: nothing was sent
            return None
        except NativeUnavailable as e:
            if e.lasting:  # the port cannot be reached (a server restarted without it): HTTP from now on
                logging.getLogger("vqs.client").info("native protocol unavailable (%s); using HTTP", e)
                self._native = False
                native.close()
            return None
        except NativeRefused as e:
            raise from_response(e.response) from None
        except self._failures as e:
            raise self._unreachable(method, path, e) from e

    def hot(self, method: str, path: str, params: dict, headers: tuple, content: bytes | None = None,
            timeout: float | None = None) -> tuple[dict, bytes]:
        """(lower-cased headers, body) of a 200 answer on the hot path; any other status raises.
        ``headers`` are (bytes, bytes) pairs."""
        if self._lean is not None:
            r = self.lean(method, path, urlencode(params) if params else "", _header_lines(headers), content,
                          timeout)
            if r.status_code != 200:
                raise from_response(r)
            return r.headers, r.content
        _check_path(path)
        url = f"{self.url}{path}?{urlencode(params)}" if params else f"{self.url}{path}"
        t = timeout or self.timeout
        try:
            return self._hot(method, url, headers, content, t)
        except self._failures as e:
            raise self._unreachable(method, path, e) from e

    def _hot(self, method: str, url: str, headers: tuple, content: bytes | None, t: float) -> tuple[dict, bytes]:
        if self._pool is None:
            r = self.http.request(method, url, content=content, headers={k.decode(): v.decode() for k, v in headers},
                                  timeout=t)
            if r.status_code != 200:
                raise from_response(r)
            return r.headers, r.content
        r = self._pool.request(method, url, headers=self._raw_headers + list(headers), content=content,
                               extensions={"timeout": {"connect": t, "read": t, "write": t, "pool": t}})
        if r.status != 200:
            import httpx

            raise from_response(httpx.Response(r.status, content=r.content))
        return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in r.headers}, r.content

    def _unreachable(self, method: str, path: str, e: BaseException) -> E.ServerUnreachable:
        what = "timed out" if "Timeout" in type(e).__name__ else str(e) or type(e).__name__
        return E.ServerUnreachable(f"{method} {path} on {self.url}: {what}", url=self.url)

    def close(self) -> None:
        if self._native:
            self._native.close()
        if self._http is not None:
            self._http.close()
        if self._lean is not None:
            self._lean.close()
        if self._pool is not None:
            self._pool.close()
