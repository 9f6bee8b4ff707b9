"""SASL/OAUTHBEARER (RFC 7628, Kafka's KIP-255 and KIP-768): a client logs in with a JSON
Web Token its identity provider signed, and the server checks it as Kafka's broker-side
validator does (OAuthBearerValidatorCallbackHandler): the signature against the provider's
public keys (a JWKS file, ``kafka_oauthbearer_jwks``), ``exp`` (and ``nbf``, ``iat``) within
30 s of skew, the audience and issuer when configured, and the subject claim
(``kafka_oauthbearer_sub_claim``, ``sub``) as the principal ``User:<subject>``, whom the
ACLs then govern (acls.py).

Invariants:

- Only asymmetric signatures are taken (RS, PS, ES and EdDSA): a token signed with ``none``
  or an HMAC is refused, so a public key can never serve as an HMAC secret (the "algorithm
  confusion" attack), and the key is the one the token's ``kid`` names in the key set.
- Bounded before any work: a client's message of at most ``MAX_MESSAGE`` bytes; the key
  file of at most ``MAX_JWKS_BYTES`` and ``MAX_KEYS`` keys, read again only when its size or
  modification time changes (keys rotate by replacing the file).
- A failure says why in the SaslAuthenticate answer (expired, bad signature, wrong
  audience, ...; never a server path) and closes the connection, as any failed login does
  (listener.py). A key file that stops loading (half-written while rotated) is logged and
  the keys loaded before keep serving.
- PyJWT (the ``oauth`` extra) is imported only by a server that configures a key set; one
  that cannot import it does not start (ConfigError naming the extra).
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading

from ... import errors as E

logger = logging.getLogger("vqs.server.kafka")

MAX_MESSAGE = 16 << 10
MAX_JWKS_BYTES = 1 << 20
MAX_KEYS = 100
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


class OAuthBearerValidator:
    """The server's validator, over its settings' key set, audience, issuer and subject claim."""

    def __init__(self, settings):
        try:
            import jwt
        except ImportError:
            raise E.ConfigError("kafka_oauthbearer_jwks needs PyJWT with its crypto backend: "
                                "pip install 'vqs[oauth]'") from None
        self._jwt = jwt
        self.path = settings.kafka_oauthbearer_jwks
        self.audience = settings.kafka_oauthbearer_audience or None
        self.issuer = settings.kafka_oauthbearer_issuer or None
        self.sub_claim = settings.kafka_oauthbearer_sub_claim
        self._lock = threading.Lock()
        self._stamp = None
        self._failed: str | None = None  # the last reload's error, logged once
        self._keys: dict[str | None, object] = {}
        self._load()  # a key set that does not load stops the server at start (ConfigError)

    def _load(self) -> None:
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
                doc = json.loads(f.read(MAX_JWKS_BYTES + 1))
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
        except (OSError, ValueError, KeyError, TypeError, self._jwt.PyJWTError) as e:
            raise E.ConfigError(f"kafka_oauthbearer_jwks: {self.path} is not a usable JWKS: {e}") from None
        self._keys, self._stamp = found, stamp

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
            try:
                self._load()  # (a rotated key file: read again)
            except E.ConfigError as e:  # (half-written while rotated, say): the keys in hand serve
                if self._failed != str(e):
                    logger.warning("kafka: %s; the key set loaded before serves until it is fixed", e)
                self._failed = str(e)
            else:
                self._failed = None
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
