"""The bearer token check, one for every front that takes the server's tokens.

REST and ``/metrics`` (app.py, on the request's headers), the console
(console/security.py: an ``Authorization`` header, or the login form's token)
and gRPC (grpc/auth.py, the ``authorization`` metadata) ask ``check`` or
``token_ok``; each answers the reason in its own protocol's words.

Invariant: a token is compared in constant time against every configured one
(no early exit: the time taken does not say which, or how much, matched).
"""

from __future__ import annotations

import hmac

MISSING = "missing"
MALFORMED = "malformed"
INVALID = "invalid"


def token_ok(tokens: list[bytes], token: bytes) -> bool:
    """Whether ``token`` (surrounding spaces ignored, never empty) is one of ``tokens``."""
    token = token.strip()
    ok = False
    for t in tokens:
        ok |= hmac.compare_digest(t, token)
    return ok and bool(token)


def check(tokens: list[bytes], header: bytes | str | None) -> str | None:
    """None when ``header`` (an ``Authorization`` value) is ``Bearer <token>`` with one of
    ``tokens``; else why not: ``MISSING``, ``MALFORMED`` (not ``Bearer <token>``), ``INVALID``."""
    if not header:
        return MISSING
    if isinstance(header, str):
        header = header.encode("latin-1", "replace")  # a header's text, byte for byte
    scheme, _, token = header.partition(b" ")
    if scheme.lower() != b"bearer" or not token.strip():
        return MALFORMED
    return None if token_ok(tokens, token) else INVALID
