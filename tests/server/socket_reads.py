"""Reading exact byte counts from a raw socket, for tests that speak a framed protocol themselves
(the native protocol, Kafka's): one helper rather than one loop per test file."""

from __future__ import annotations

import socket


def recv_exact(sock: socket.socket, n: int) -> bytes | None:
    """``n`` bytes from ``sock``, or None when the peer closes first."""
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf
