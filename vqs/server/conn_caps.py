"""Connections open at once on one listener, in total and per client address, counted at accept.

The Kafka listener and the gRPC port (grpc/relay.py) count their connections
here; HTTP's are counted in its protocol (http_bounds.py), where an idle
connection can give way to a new one. ``admit(addr)`` is asked when a
connection is accepted, before anything of it is read: over
``max_connections`` (``total``) or ``max_connections_per_client``
(``per_client``) it is refused, and the caller closes it at once. Refusals
are logged at most once a minute, with the count since the last line, so
a client hammering the port cannot flood the log.

Invariants: an admitted connection is counted until ``release(addr)``, called
exactly once when it closes; one address's count never passes
``per_client``, the total never passes ``total``; all calls come from one
event loop's thread (no lock).
"""

from __future__ import annotations

import logging
import time

#: the shortest interval between two log lines about refused connections (seconds)
LOG_EVERY_S = 60.0


class ConnectionCaps:
    """The connection caps of one listener (module docstring)."""

    __slots__ = ("total", "per_client", "front", "logger", "open", "_per", "_refused", "_logged")

    def __init__(self, total: int, per_client: int, front: str, logger: logging.Logger):
        self.total = total
        self.per_client = per_client
        self.front = front  # names the listener in the log line ("kafka", "grpc")
        self.logger = logger
        self.open = 0
        self._per: dict = {}  # client address -> its open connections
        self._refused = 0  # refused since the last line logged
        self._logged = -LOG_EVERY_S

    def admit(self, addr) -> bool:
        """Count a new connection from ``addr``, or False (counted nowhere) when it is over a cap."""
        n = self._per.get(addr, 0)
        if self.open >= self.total:
            self._refuse(addr, "max_connections")
            return False
        if n >= self.per_client:
            self._refuse(addr, "max_connections_per_client")
            return False
        self._per[addr] = n + 1
        self.open += 1
        return True

    def release(self, addr) -> None:
        """An admitted connection from ``addr`` closed."""
        self.open -= 1
        left = self._per.get(addr, 1) - 1
        if left > 0:
            self._per[addr] = left
        else:
            self._per.pop(addr, None)

    def _refuse(self, addr, setting: str) -> None:
        self._refused += 1
        now = time.monotonic()
        if now - self._logged >= LOG_EVERY_S:
            self.logger.warning("%s: refused %d connection(s) over %s (the latest from %s)", self.front,
                                self._refused, setting, addr)
            self._refused, self._logged = 0, now
