"""Failed authentications, on every front alike: REST (and ``/metrics``), SQS, the console,
the native protocol, gRPC and Kafka.

Each one is counted in ``vqs_authentication_failures_total{front}`` (exact) and logged at
warning as ``authentication failed: <front> <what> from <host:port>``: the client's address
and what failed (no credential, a wrong one, AWS's code, a SASL mechanism and user name),
never a credential. Lines are bounded per front and client address (log_throttle.py): the
first at once, then at most one a minute saying how many were left out, so a client that
guesses, or reconnects without credentials, cannot flood the log. Thread-safe: the fronts
run on threads of their own.
"""

from __future__ import annotations

import logging
import threading

from ..log_throttle import Throttle

logger = logging.getLogger("vqs.server")

#: the fronts, in the order /metrics lists them
FRONTS = ("rest", "sqs", "console", "native", "grpc", "kafka")


def peer_text(peer) -> str:
    """``host:port`` of a peer given as a socket address, or its text as given."""
    if isinstance(peer, (tuple, list)) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer) if peer else "unknown"


class AuthFailures:
    """The server's failed authentications: counted per front, logged (module docstring)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.counts = dict.fromkeys(FRONTS, 0)
        self._lines = Throttle(logger)

    def failed(self, front: str, peer, what: str) -> None:
        """A client at ``peer`` failed to authenticate on ``front``: ``what`` says how (never a
        credential's value)."""
        with self._lock:
            self.counts[front] = self.counts.get(front, 0) + 1
        addr = peer_text(peer)
        host = peer[0] if isinstance(peer, (tuple, list)) and peer else addr
        left_out = self._lines.due(f"{front} {host}")
        if left_out is None:
            return
        fields = {"front": front, "client": addr, "reason": what}
        text = f"authentication failed: {front} {what} from {addr}"
        if left_out:
            fields["left_out"] = left_out
            text += f" ({left_out} more like it from {host} since the last such line)"
        logger.warning("authentication failed", extra={"vqs": fields, "text": text})
