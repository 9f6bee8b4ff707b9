"""What a SASL exchange that succeeds does to a Kafka connection: its principal, whether it is a
super user, and its session (KIP-368, Kafka's ``connections.max.reauth.ms``).

The first login begins the connection's session; with ``kafka_connections_max_reauth_ms`` it lasts
that long, or to the credential's end if sooner (an OAUTHBEARER token's ``exp``): ``session_ms``,
told to the client in SaslAuthenticate v1+, which logs in again on the same connection before it
ends. A later login renews the session only with the mechanism and principal of the first, as
Kafka requires; else it fails (``failed_user``: answered, then the connection closes). After the
end, any request but SaslHandshake and SaslAuthenticate closes the connection
(``Connection.serve``). A connection authenticated by its client certificate (tls.py) has no
session.
"""

from __future__ import annotations

import asyncio
import hmac
import time

#: why a login that changes a connection's mechanism or principal fails
REAUTH_CHANGED = "a new login on a connection must keep its first login's SASL mechanism and principal"


def plain(conn, auth: bytes) -> str | None:
    """SASL/PLAIN: ``authzid NUL user NUL password``: with ``kafka_users``, a configured user and
    its password; else any user with a configured token as password (a super user: the
    operator). None once logged in (``login``), else why not; a failure is remembered
    (``failed_user``): the connection closes after its answer."""
    parts = auth.split(b"\x00")
    ok = False
    if len(parts) == 3:
        users = conn.ctx.users
        if users:  # user and password must match one configured pair
            want = users.get(parts[1].decode("utf-8", "replace"))
            ok = want is not None and hmac.compare_digest(parts[2], want.encode())
        else:
            for t in conn.ctx.tokens:
                ok |= hmac.compare_digest(parts[2], t.encode())
    if not ok:
        user = parts[1] if len(parts) == 3 else b""
        conn.failed_user = user[:64].decode("utf-8", "replace")
        conn.authenticated = False
        return ("authentication failed: unknown user or wrong password" if conn.ctx.users
                else "authentication failed: the password must be a token")
    if (why := login(conn, "User:" + parts[1].decode("utf-8", "replace"))) is not None:
        return why
    conn.super_user = not conn.ctx.users  # a token holder: the operator
    return None


def login(conn, principal: str, expires_at: float | None = None) -> str | None:
    """A SASL exchange proved ``principal`` (with ``conn.mechanism``); ``expires_at``: when its
    credential ends (epoch seconds: an OAUTHBEARER token's ``exp``). Begins or renews the
    connection's session (module doc). None when the login stands, else why not (the
    connection closes after its answer)."""
    if conn.session is not None and conn.session != (conn.mechanism, principal):
        conn.failed_user = principal.removeprefix("User:")[:64]
        conn.authenticated = False
        return REAUTH_CHANGED
    conn.session = (conn.mechanism, principal)
    conn.principal = principal
    conn.authenticated = True
    max_ms = conn.ctx.settings.kafka_connections_max_reauth_ms
    if max_ms:
        life_s = max_ms / 1000
        if expires_at is not None:
            life_s = min(life_s, expires_at - time.time())
        conn.session_ms = max(1, int(life_s * 1000))
        conn.session_end = asyncio.get_running_loop().time() + conn.session_ms / 1000
    return None
