"""SASL/OAUTHBEARER (RFC 7628, Kafka's KIP-255 and KIP-768): a client logs in with a JSON
Web Token its identity provider signed, and the server checks it as Kafka's broker-side
validator does (OAuthBearerValidatorCallbackHandler): the signature against the provider's
public keys (``kafka_oauthbearer_jwks``: a JWKS file, or the provider's JWKS endpoint, Kafka's
``sasl.oauthbearer.jwks.endpoint.url``), ``exp`` (and ``nbf``, ``iat``) within
30 s of skew, the audience and issuer when configured, and the subject claim
(``kafka_oauthbearer_sub_claim``, ``sub``) as the principal ``User:<subject>``, whom the
ACLs then govern (acls.py).

Invariants:

- Only asymmetric signatures are taken (RS, PS, ES and EdDSA): a token signed with ``none``
  or an HMAC is refused, so a public key can never serve as an HMAC secret (the "algorithm
  confusion" attack), and the key is the one the token's ``kid`` names in the key set.
- Bounded before any work: a client's message of at most ``MAX_MESSAGE`` bytes; the key
  set of at most ``MAX_JWKS_BYTES`` and ``MAX_KEYS`` keys. A file is read again only when its
  size or modification time changes (keys rotate by replacing the file). An endpoint
  (``https://``; ``http://`` to a loopback address only) is fetched at start, then by a thread
  of its own every ``kafka_oauthbearer_jwks_refresh_ms`` (Kafka's
  ``sasl.oauthbearer.jwks.endpoint.refresh.ms``, an hour) and when a token names a ``kid`` the
  set lacks (a rotation), at most once per ``REFETCH_MIN_S``; a fetch has ``FETCH_TIMEOUT_S``
  and reads at most ``MAX_JWKS_BYTES + 1`` bytes, following no redirect. A login never waits
  for a fetch (it runs on the listener's loop): a token whose key is not in the set fails,
  and the client's next login, after its reconnect backoff, finds the fetched key.
- A failure says why in the SaslAuthenticate answer (expired, bad signature, wrong
  audience, ...; never a server path) and closes the connection, as any failed login does
  (listener.py). A key file that stops loading (half-written while rotated), or a fetch
  that fails, is logged (once until it works again) and the keys loaded before keep serving.
- PyJWT (the ``oauth`` extra) is imported only by a server that configures a key set; one
  that cannot import it does not start (ConfigError naming the extra).
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from urllib.parse import urlsplit

from ... import errors as E
from ..addresses import is_loopback

logger = logging.getLogger("vqs.server.kafka")

MAX_MESSAGE = 16 << 10
MAX_JWKS_BYTES = 1 << 20
MAX_KEYS = 100
FETCH_TIMEOUT_S = 10.0
REFETCH_MIN_S = 1.0  # a kid the key set lacks fetches the endpoint again at most this often
SKEW_S = 30  # Kafka's sasl.oauthbearer.clock.skew.seconds
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
MECHANISM = "OAUTHBEARER"
# RFC 7628 section 3.1: gs2-header, then key=value pairs each ended by ^A, then ^A
_INITIAL = re.compile(rb"n,(?:a=[^,]*)?,\x01((?:[A-Za-z]+=[\x21-\x7e \t\r\n]*\x01)*)\x01")


class OAuthFailed(Exception):
    """A login refused; the message says why (it goes to the client)."""


def bearer_token(message: bytes) -> str:
    """The token of a client's initial response (``auth=Bearer <token>``); OAuthFailed if
    the message is malformed or too long."""
    if len(message) > MAX_MESSAGE:
        raise OAuthFailed(f"OAUTHBEARER message of {len(message)} bytes (at most {MAX_MESSAGE})")
    m = _INITIAL.fullmatch(message)
    if m is None:
        raise OAuthFailed("malformed OAUTHBEARER initial response (RFC 7628 section 3.1)")
    pairs = dict(p.split(b"=", 1) for p in m.group(1).split(b"\x01") if p)
    auth = pairs.get(b"auth", b"")
    scheme, _, token = auth.partition(b" ")
    if scheme.lower() != b"bearer" or not token.strip():
        raise OAuthFailed("the OAUTHBEARER message carries no 'auth=Bearer <token>'")
    return token.strip().decode("ascii")


def is_endpoint(where: str) -> bool:
    """Whether ``kafka_oauthbearer_jwks`` names an endpoint (a URL) rather than a file."""
    return where.startswith(("https://", "http://"))


def _check_endpoint(url: str) -> None:
    parts = urlsplit(url)
    if not parts.hostname:
        raise E.ConfigError(f"kafka_oauthbearer_jwks: {url} names no host")
    if parts.scheme == "http":
        if not is_loopback(parts.hostname):
            raise E.ConfigError(f"kafka_oauthbearer_jwks: {url} is plain HTTP to a host that is not loopback "
                                "(the keys would travel unauthenticated): use https://")


class OAuthBearerValidator:
    """The server's validator, over its settings' key set, audience, issuer and subject claim.
    ``watch``: fetch an endpoint's key set again in a thread of its own (the listener's
    validator; the one ``Settings.check`` makes only loads the set once)."""

    def __init__(self, settings, watch: bool = True):
        try:
            import jwt
        except ImportError:
            raise E.ConfigError("kafka_oauthbearer_jwks needs PyJWT with its crypto backend: "
                                "pip install 'vqs[oauth]'") from None
        self._jwt = jwt
        self.path = settings.kafka_oauthbearer_jwks
        self.endpoint = is_endpoint(self.path)
        self.refresh_s = settings.kafka_oauthbearer_jwks_refresh_ms / 1000
        self.audience = settings.kafka_oauthbearer_audience or None
        self.issuer = settings.kafka_oauthbearer_issuer or None
        self.sub_claim = settings.kafka_oauthbearer_sub_claim
        self._lock = threading.Lock()
        self._stamp = None
        self._failed: str | None = None  # the last reload's error, logged once
        self._keys: dict[str | None, object] = {}
        self._wanted = threading.Event()  # a login met a kid the set lacks: fetch again
        self._fetched_at = 0.0
        if self.endpoint:
            _check_endpoint(self.path)
            self._keys = self._fetch()  # a key set that does not load stops the server at start
            self._fetched_at = time.monotonic()
            if watch:
                threading.Thread(target=self._refresh_loop, name="vqs-jwks", daemon=True).start()
        else:
            self._load()  # a key set that does not load stops the server at start (ConfigError)

    def _parse(self, raw: bytes) -> dict:
        """The keys of a JWKS document (kid -> PyJWK); ValueError (or PyJWT's) says what is wrong."""
        doc = json.loads(raw)
        keys = doc["keys"]
        if not isinstance(keys, list) or not 0 < len(keys) <= MAX_KEYS:
            raise ValueError(f"1 to {MAX_KEYS} keys are needed, not {len(keys)}")
        found = {}
        for k in keys:
            if not isinstance(k, dict) or k.get("kty") == "oct":
                raise ValueError(f"key {k.get('kid') if isinstance(k, dict) else k!r} is not a public key "
                                 "(a shared secret, kty oct, is not taken)")
            jwk = self._jwt.PyJWK.from_dict(k)
            if jwk.algorithm_name not in ALGORITHMS:
                raise ValueError(f"key {k.get('kid')!r}: algorithm {jwk.algorithm_name} is not taken "
                                 f"({', '.join(ALGORITHMS)})")
            found[k.get("kid")] = jwk
        return found

    def _load(self) -> None:
        """The key file, read again when it changed."""
        try:
            st = os.stat(self.path)
        except OSError as e:
            raise E.ConfigError(f"kafka_oauthbearer_jwks: cannot read {self.path}: {e.strerror}") from None
        stamp = (st.st_size, st.st_mtime_ns, st.st_ino)
        if stamp == self._stamp:
            return
        if st.st_size > MAX_JWKS_BYTES:
            raise E.ConfigError(f"kafka_oauthbearer_jwks: {self.path} holds {st.st_size} bytes "
                                f"(at most {MAX_JWKS_BYTES})")
        try:
            with open(self.path, "rb") as f:
                found = self._parse(f.read(MAX_JWKS_BYTES + 1))
        except (OSError, ValueError, KeyError, TypeError, self._jwt.PyJWTError) as e:
            raise E.ConfigError(f"kafka_oauthbearer_jwks: {self.path} is not a usable JWKS: {e}") from None
        self._keys, self._stamp = found, stamp

    def _fetch(self) -> dict:
        """The endpoint's key set (bounded: module doc); ConfigError naming the URL and why not."""
        import httpx

        try:
            with httpx.Client(timeout=FETCH_TIMEOUT_S, follow_redirects=False) as client, \
                    client.stream("GET", self.path, headers={"accept": "application/json"}) as r:
                if r.status_code != 200:
                    raise ValueError(f"HTTP {r.status_code}")
                raw = bytearray()
                for chunk in r.iter_bytes():
                    raw += chunk
                    if len(raw) > MAX_JWKS_BYTES:
                        raise ValueError(f"more than {MAX_JWKS_BYTES} bytes")
            return self._parse(bytes(raw))
        except (httpx.HTTPError, ValueError, KeyError, TypeError, self._jwt.PyJWTError) as e:
            raise E.ConfigError(f"kafka_oauthbearer_jwks: {self.path} gave no usable JWKS: {e}") from None

    def _refresh_loop(self) -> None:
        """Fetch the endpoint again every ``refresh_s``, or soon after a login missed a kid."""
        while True:
            missed = self._wanted.wait(self.refresh_s)
            if missed:
                time.sleep(max(0.0, self._fetched_at + REFETCH_MIN_S - time.monotonic()))
                self._wanted.clear()
            try:
                keys = self._fetch()
            except E.ConfigError as e:
                self._note_failure(e)
                continue
            finally:
                self._fetched_at = time.monotonic()
            with self._lock:
                self._keys = keys
            self._note_failure(None)

    def _note_failure(self, e: E.ConfigError | None) -> None:
        if e is not None and self._failed != str(e):
            logger.warning("kafka: %s; the key set loaded before serves until it is fixed", e)
        self._failed = None if e is None else str(e)

    def claimed_subject(self, token: str) -> str:
        """The subject a token claims, unverified (for a failed login's log line), or ""."""
        try:
            sub = self._jwt.decode(token, options={"verify_signature": False}).get(self.sub_claim)
        except (self._jwt.PyJWTError, AttributeError):
            return ""
        return sub[:64] if isinstance(sub, str) else ""

    def principal(self, token: str) -> str:
        """``User:<subject>`` of a valid token; OAuthFailed naming what is wrong."""
        return self.login(token)[0]

    def login(self, token: str) -> tuple[str, float]:
        """(``User:<subject>``, its ``exp`` in epoch seconds) of a valid token; OAuthFailed naming
        what is wrong."""
        jwt = self._jwt
        with self._lock:
            if not self.endpoint:
                try:
                    self._load()  # (a rotated key file: read again)
                except E.ConfigError as e:  # (half-written while rotated, say): the keys in hand serve
                    self._note_failure(e)
                else:
                    self._note_failure(None)
            keys = self._keys
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as e:
            raise OAuthFailed(f"malformed token: {e}") from None
        alg, kid = header.get("alg"), header.get("kid")
        if alg not in ALGORITHMS:
            raise OAuthFailed(f"token algorithm {alg!r} is not accepted (asymmetric signatures only)")
        key = keys.get(kid)
        if key is None and kid is None and len(keys) == 1:  # a token without kid, a set of one key
            key = next(iter(keys.values()))
        if key is None:
            if self.endpoint:
                self._wanted.set()  # a rotation, perhaps: the set is fetched again for the next login
            raise OAuthFailed(f"no key {kid!r} in the server's key set")
        try:
            claims = jwt.decode(token, key.key, algorithms=[alg], audience=self.audience, issuer=self.issuer,
                                leeway=SKEW_S, options={"require": ["exp"], "verify_aud": self.audience is not None})
        except jwt.PyJWTError as e:
            raise OAuthFailed(f"invalid token: {e}") from None
        sub = claims.get(self.sub_claim)
        if not isinstance(sub, str) or not sub:
            raise OAuthFailed(f"the token has no {self.sub_claim!r} claim")
        return "User:" + sub, float(claims["exp"])
