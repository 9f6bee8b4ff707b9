"""What an HTTP request's body holds of the server's byte budgets while it is in progress.

Every request with a body holds its ``Content-Length`` (a chunked one: its limit) against the
server's request budget (``max_request_bytes_in_flight``, byte_budget.py). An SQS body on a
server with credentials is read whole before its signature is checked, so it also holds the
same bytes against its client address's allowance (``SQS_BODY_BYTES_PER_CLIENT``) and the
pre-authentication budget (``max_pre_auth_bytes``). Both HTTP paths (fast_http.py and
``VQSMiddleware``) ask ``hold`` once a request's headers are admitted, before any of its body is
read, and ``release`` once it is over; a native request's frame holds its own bytes (native.py).

Invariant: a refused ``hold`` holds nothing (what it took of one budget it gives back), so a
request holds all of its bytes or none. Used on the HTTP loop only: the per-address counts
take no lock (the budgets have their own).
"""

from __future__ import annotations

from .byte_budget import ByteBudget
from .http_bounds import SQS_BODY_BYTES_PER_CLIENT

#: ``hold``'s refusals (``VQSMiddleware.admit``'s refusal tuples): the server's request budget,
#: the address's SQS bodies, the pre-authentication budget.
IN_FLIGHT_BUSY = ("request_bytes", 503, "busy", "the server holds its most bytes of requests in progress "
                  "(max_request_bytes_in_flight): retry later", None, {"Retry-After": "1"})
SQS_CLIENT_BUSY = ("sqs_client_bytes", 503, "busy", f"this client address has {SQS_BODY_BYTES_PER_CLIENT} bytes of "
                   "SQS requests in progress, the most for one address: retry later", None, {"Retry-After": "1"})
PRE_AUTH_BUSY = ("pre_auth_bytes", 503, "busy", "the server holds its most bytes of requests not authenticated "
                 "yet (max_pre_auth_bytes): retry later", None, {"Retry-After": "1"})


class BodyHolds:
    """The holds of one app's HTTP requests (module docstring); ``authenticating``: credentials
    are configured (else nothing is held before authentication: none is checked)."""

    __slots__ = ("in_flight", "pre_auth", "authenticating", "_sqs_held")

    def __init__(self, in_flight: ByteBudget, pre_auth: ByteBudget, authenticating: bool):
        self.in_flight = in_flight
        self.pre_auth = pre_auth
        self.authenticating = authenticating
        self._sqs_held: dict = {}  # client address -> bytes of SQS bodies held for it

    def hold(self, client, nbytes: int, sqs: bool):
        """Hold a body of ``nbytes`` for ``client`` (``sqs``: the SQS endpoint's): None, or the
        refusal (503, the body unread) of the first bound it would pass, logged, nothing held."""
        if not self.in_flight.take(nbytes):
            self.in_flight.refused("sqs" if sqs else "http", client, nbytes)
            return IN_FLIGHT_BUSY
        if not sqs or not self.authenticating:
            return None
        addr = client[0] if client else None
        held = self._sqs_held.get(addr, 0)
        refusal = None
        if held and held + nbytes > SQS_BODY_BYTES_PER_CLIENT:
            refusal = SQS_CLIENT_BUSY
        elif not self.pre_auth.take(nbytes):
            self.pre_auth.refused("sqs", client, nbytes)
            refusal = PRE_AUTH_BUSY
        if refusal is not None:
            self.in_flight.give(nbytes)
            return refusal
        self._sqs_held[addr] = held + nbytes
        return None

    def release(self, client, nbytes: int, sqs: bool) -> None:
        """What ``hold`` took for this request (the same arguments), given back."""
        self.in_flight.give(nbytes)
        if not sqs or not self.authenticating:
            return
        self.pre_auth.give(nbytes)
        addr = client[0] if client else None
        left = self._sqs_held.get(addr, 0) - nbytes
        if left > 0:
            self._sqs_held[addr] = left
        else:
            self._sqs_held.pop(addr, None)
