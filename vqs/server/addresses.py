"""Whether a host name or address is this machine's loopback: the server's bind address (a
non-loopback one needs credentials, settings.py) and a JWKS endpoint taken over plain HTTP
(kafka/oauthbearer.py) ask the same question, the same way."""

from __future__ import annotations

import ipaddress
import socket


def is_loopback(host: str) -> bool:
    """``localhost``, a loopback address (``[::1]`` too), or a name every address of which is one."""
    if host in ("localhost", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        addrs = {ai[4][0] for ai in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    return bool(addrs) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addrs)
