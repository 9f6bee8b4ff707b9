"""The server-wide budget of bytes held for requests whose credentials are not checked yet.

Each front bounds what one connection may make the server hold before its
credential is checked (a Kafka frame before SASL, an SQS body before its
signature, a console login form before its token), and the connection caps
bound how many connections may do so; this budget bounds their sum across
every front and every client address (``max_pre_auth_bytes``), so no number
of unauthenticated clients can make the server hold more than it plus each
connection's fixed part (its read buffers and request head, docs/security.md).

A front ``take``s the bytes it is about to hold (from a size it was told: a
frame's size prefix, a Content-Length) before reading them and ``give``s them
back once they are no longer held or their credential was checked; a refused
``take`` holds nothing, and the front refuses the request: HTTP 503 with
``Retry-After``, a Kafka connection closed. ``refused`` logs it: the first
refusal at once, then at most a line a minute with the count left out (an
attacker keeping the budget spent cannot flood the log).

Only requests that carry no checked credential yet come here: with no
credential configured nothing is authenticated and nothing is taken, and an
authenticated Kafka connection takes nothing. Thread-safe (the HTTP, Kafka and
gRPC loops run on their own threads): one lock around an add.
"""

from __future__ import annotations

import logging
import threading

from ..log_throttle import Throttle

logger = logging.getLogger("vqs.server")
_lines = Throttle(logger)


class PreAuthBudget:
    """``limit`` bytes held at once for requests not authenticated yet (module docstring)."""

    __slots__ = ("limit", "held", "_lock")

    def __init__(self, limit: int):
        self.limit = limit
        self.held = 0
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> bool:
        """Hold ``nbytes`` more, or False (nothing held) when that would pass the limit."""
        with self._lock:
            held = self.held + nbytes
            if held > self.limit:
                return False
            self.held = held
            return True

    def give(self, nbytes: int) -> None:
        """``nbytes`` taken earlier are no longer held."""
        with self._lock:
            self.held -= nbytes

    def refused(self, front: str, client, nbytes: int) -> None:
        """A ``take`` of ``nbytes`` for ``client`` of ``front`` was refused: logged, rate-bounded."""
        _lines.warn("pre_auth_bytes",
                    "pre-authentication budget spent: refused %d bytes of a %s request from %s (the server holds "
                    "%d bytes for requests not authenticated yet; max_pre_auth_bytes %d)",
                    nbytes, front, client, self.held, self.limit)
