"""The console's safety: sessions, login, CSRF tokens and the response headers.

Invariants:

* The console takes the API's credentials. With bearer tokens configured
  (``--token``), a page needs a session made by the login form (the token is
  compared in constant time, as the API compares it) or an ``Authorization:
  Bearer`` header; with SigV4 keys but no token it is closed (as REST is: SigV4
  keys grant the SQS API only); without credentials the console is as open as the API, which the
  server allows only on a loopback address or with ``--insecure``
  (Settings.check), and a request from a peer off loopback is refused unless
  ``--insecure`` was given (defence in depth).
* The session cookie is ``HttpOnly``, ``SameSite=Strict``, ``Path=/console``,
  ``Secure`` on https; its value is 256 random bits naming a server-side
  session (nothing is derived from the token). Sessions live in memory: a
  restart logs everyone out. A session ends after ``SESSION_TTL_S`` or at logout.
* Every mutating request is a POST whose form carries the session's CSRF
  token (compared in constant time); any other is refused with 403 before
  anything changes. A bearer-authenticated request (a script, no cookie) may
  read pages but gets a session for that request only, whose CSRF token it
  never sees, so a POST never acts on ambient credentials.
* Every console response carries a Content-Security-Policy without
  ``unsafe-inline`` or ``unsafe-eval`` (scripts and styles from the console's
  own static files only), ``X-Content-Type-Options: nosniff``, no framing, no
  referrer, and ``Cache-Control: no-store`` for pages.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
import threading
import time
from dataclasses import dataclass, field

from fastapi import Request

from .. import bearer
from ..settings import Settings

COOKIE = "vqs_console"
SESSION_TTL_S = 12 * 3600
MAX_SESSIONS = 10_000

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; font-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class Refused(Exception):
    """A console request refused: ``status`` 401 (log in), 403 (CSRF, off loopback)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Session:
    sid: str
    csrf: str
    expires: float
    authenticated: bool
    flash: list = field(default_factory=list)  # (kind, text) shown once on the next page


class Sessions:
    """The console's sessions and the login check (see module doc)."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._tokens = [t.encode() for t in settings.tokens]
        self._by_id: dict[str, Session] = {}
        self._lock = threading.Lock()

    @property
    def login_required(self) -> bool:
        return bool(self._tokens)

    def token_ok(self, token: str) -> bool:
        return bearer.token_ok(self._tokens, token.encode())

    def new(self, authenticated: bool) -> Session:
        s = Session(secrets.token_urlsafe(32), secrets.token_urlsafe(32), time.time() + SESSION_TTL_S, authenticated)
        with self._lock:
            if len(self._by_id) >= MAX_SESSIONS:
                self._expire_locked(force=True)
            self._by_id[s.sid] = s
        return s

    def get(self, sid: str | None) -> Session | None:
        if not sid:
            return None
        with self._lock:
            s = self._by_id.get(sid)
            if s is not None and s.expires < time.time():
                del self._by_id[sid]
                return None
            return s

    def end(self, sid: str | None) -> None:
        with self._lock:
            self._by_id.pop(sid or "", None)

    def _expire_locked(self, force: bool) -> None:
        now = time.time()
        for sid in [k for k, s in self._by_id.items() if s.expires < now]:
            del self._by_id[sid]
        if force and len(self._by_id) >= MAX_SESSIONS:  # drop the oldest half
            for sid in sorted(self._by_id, key=lambda k: self._by_id[k].expires)[: MAX_SESSIONS // 2]:
                del self._by_id[sid]

    # ------------------------------------------------------------------ checks
    def _bearer_ok(self, request: Request) -> bool:
        return bearer.check(self._tokens, request.headers.get("authorization")) is None

    def _peer_allowed(self, request: Request) -> bool:
        if self._tokens or self.settings.insecure:
            return True
        host = request.client.host if request.client else ""
        try:
            return ipaddress.ip_address(host.split("%")[0]).is_loopback
        except ValueError:
            return host == "localhost"

    def session(self, request: Request) -> tuple[Session | None, bool]:
        """(the request's session or None, whether a new cookie must be set).
        Raises Refused when the request may not see the console."""
        if not self._peer_allowed(request):
            raise Refused(403, "the console answers only on loopback without credentials (configure --token)")
        if not self._tokens and self.settings.sigv4_keys:  # SigV4 keys grant the SQS API only
            raise Refused(403, "this server has SigV4 keys (the SQS API) but no bearer token: the console "
                               "needs one (start it with --token)")
        s = self.get(request.cookies.get(COOKIE))
        if s is not None and (s.authenticated or not self._tokens):
            return s, False
        if not self._tokens:
            return self.new(authenticated=False), True
        if self._bearer_ok(request):  # a script: a session for this request only (no cookie, so no POST)
            return Session(secrets.token_urlsafe(32), secrets.token_urlsafe(32), time.time(), True), False
        raise Refused(401, "log in with an API token")

    def check_csrf(self, session: Session | None, given: str | None) -> None:
        if session is None or not given or not hmac.compare_digest(session.csrf.encode(), given.encode()):
            raise Refused(403, "the form's CSRF token is missing or not this session's: reload the page and retry")


def set_cookie(response, request: Request, session: Session) -> None:
    response.set_cookie(COOKIE, session.sid, max_age=SESSION_TTL_S, path="/console", httponly=True,
                        samesite="strict", secure=request.url.scheme == "https")


def add_headers(response) -> None:
    for k, v in HEADERS.items():
        response.headers[k] = v
