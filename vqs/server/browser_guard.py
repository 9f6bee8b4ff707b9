"""What keeps a web page out: the Host check and the cross-site check of HTTP requests.

A browser on the server's machine reaches 127.0.0.1 like any program. Without
credentials the server must tell a web page's requests from a program's, with
what a page cannot forge:

* **The Host header.** A DNS-rebound page (a name of the attacker's resolved to
  127.0.0.1) names the attacker's domain: only ``localhost``, IP addresses (an
  address cannot be rebound: a page can name this server's address only from
  another origin, whose reads the browser blocks) and ``allowed_hosts`` are
  answered.
* **A preflight.** A page may send another site only ``GET``/``HEAD`` and a
  ``POST`` with a form, multipart or ``text/plain`` body and no custom header
  without a CORS preflight, which this server never grants. A REST ``POST``
  must carry something else (``_preflighted``); the SQS endpoint makes the same
  check per action (sqs/service.py); a ``PUT``/``DELETE``/``PATCH`` always needs
  a preflight, and no ``GET`` changes anything.

With credentials configured a page has none to send, so only an explicit
``allowed_hosts`` turns the Host check on.
"""

from __future__ import annotations

import ipaddress

from .settings import Settings

#: Host names always answered (any port): a DNS-rebound page names the attacker's domain,
#: never these.
_LOOPBACK_HOSTS = frozenset((b"localhost", b"127.0.0.1", b"[::1]"))
#: The content types a web page can POST cross-site without a CORS preflight (the
#: Fetch standard's CORS-safelisted ones); any other needs the server's consent.
_SIMPLE_TYPES = frozenset((b"application/x-www-form-urlencoded", b"multipart/form-data", b"text/plain"))


def _host_name(raw_headers) -> bytes | None:
    """The Host header's name, lower-cased, without its port or a trailing dot (None: no Host)."""
    for k, v in raw_headers:
        if k == b"host":
            v = v.strip().lower()
            if v.startswith(b"["):
                return v[:v.find(b"]") + 1]
            return v.rpartition(b":")[0].rstrip(b".") if b":" in v else v.rstrip(b".")
    return None


def _host_key(name: str) -> bytes:
    """A configured Host name as ``_host_name`` reads one from a request (a port given with
    it is dropped; a non-ASCII name in its IDNA form, as browsers send it)."""
    name = name.strip().lower()
    if ":" in name and not name.startswith("["):
        name = name.rpartition(":")[0]
    name = name.rstrip(".")
    try:
        return name.encode("idna")
    except UnicodeError:
        return name.encode("utf-8")


def _preflighted(raw_headers) -> bool:
    """Whether a request carries what a web page cannot send to another site without a CORS
    preflight (which this server never grants): a content type other than the form and
    text ones (JSON, the binary batch type), an ``Authorization`` header, or an
    ``X-VQS-*`` / ``X-Requested-With`` header; or a browser's own word that the page is
    this server's (``Sec-Fetch-Site: same-origin``, which no page can set: the docs'
    "Try it out")."""
    for k, v in raw_headers:
        if k == b"content-type":
            if v.split(b";", 1)[0].strip().lower() not in _SIMPLE_TYPES:
                return True
        elif k == b"authorization" or k.startswith(b"x-vqs-") or k == b"x-requested-with" or (
                k == b"sec-fetch-site" and v.strip().lower() == b"same-origin"):
            return True
    return False


def _ip_literal(host: str) -> bool:
    """Whether ``host`` is an IP address (``[...]`` for IPv6)."""
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


_IP_MEMO = 64


class BrowserGuard:
    """The checks of one server's settings; ``refused`` runs per request (VQSMiddleware)."""

    def __init__(self, s: Settings):
        self.open_mode = not s.auth_enabled
        self.host_check = (self.open_mode or bool(s.allowed_hosts)) and "*" not in s.allowed_hosts
        allowed = set(_LOOPBACK_HOSTS)
        allowed.update(_host_key(h) for h in s.allowed_hosts)
        self.allowed_hosts = frozenset(allowed)
        #: Host names found to be IP literals (parsing one costs more than the rest of the
        #: check): at most ``_IP_MEMO`` of them, so a client sending many names bounds it
        self._ips: set[bytes] = set()

    def _ip_name(self, name: bytes) -> bool:
        if name in self._ips:
            return True
        if not _ip_literal(name.decode("latin-1")):
            return False
        if len(self._ips) < _IP_MEMO:
            self._ips.add(name)
        return True

    def refused(self, method: str, path: str, raw_headers, sqs: bool) -> tuple[str, str] | None:
        """(code, message) of a request refused for where it comes from, else None:

        * a Host name other than ``localhost``, an IP address and ``allowed_hosts``
          (without credentials, or with ``allowed_hosts`` given): a page on a DNS-rebound
          name must not read or change anything;
        * without credentials, a REST ``POST`` a web page could send cross-site (no
          preflight): the console's POSTs carry its own CSRF token, and the SQS endpoint
          makes its own check (service.py: it knows the action).

        A ``PUT``/``DELETE``/``PATCH`` always needs a preflight, and a GET changes nothing."""
        if self.host_check:
            name = _host_name(raw_headers)
            if name is not None and name not in self.allowed_hosts and not self._ip_name(name):
                shown = name.decode("latin-1")[:100]
                return ("host_not_allowed",
                        f"this server answers the Host names localhost, IP addresses and those of "
                        f"--allowed-host (VQS_ALLOWED_HOSTS), not {shown!r}")
        if self.open_mode and method == "POST" and not sqs and not path.startswith("/console") \
                and not _preflighted(raw_headers):
            return ("cross_site",
                    "a POST to this server (no credentials configured) needs a JSON content type "
                    "(Content-Type: application/json, or the binary batch type) or an X-VQS-Client "
                    "header, which a web page cannot send to another site")
        return None
