"""Peek: the pending messages of a queue, read without receiving them.

SQS has no such action (a console there receives with a visibility timeout of
0, which still counts a delivery); operators want to look at a queue without
changing it, so this reads the message log at the offsets the queue still
holds and reports each message's delivery state.

Invariants: a peek changes nothing a consumer can observe: no lease, no
receive count, no receipt handle, no state-log record (the only effect is
that buffered sends are handed to the message log, as any read does). It
returns pending messages only (not deleted, purged or moved out), oldest
(lowest offset) first, from ``from_offset`` on; the states are those of the
moment of the call (``visible``, ``in_flight``, ``delayed``, ``moving``).
A message past its retention that maintenance has not dropped yet may still
show: the listing is approximate, as SQS's counts are.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import NamedTuple

from ...errors import OffsetOutOfRange
from .leases import AVAILABLE, DELAYED, INFLIGHT, MOVING
from .message import Message

MAX_PEEK = 100
_STATES = {DELAYED: "delayed", INFLIGHT: "in_flight", AVAILABLE: "visible", MOVING: "moving"}


class PeekedMessage(NamedTuple):
    """A pending message as it stands: ``message`` has no receipt handle (``""``);
    ``receive_count`` is how often it was received so far (0: never);
    ``visible_at_ms`` is when an in-flight or delayed message turns visible."""

    message: Message
    state: str
    receive_count: int
    visible_at_ms: int | None


def read_pending(log, live: dict, offsets: Iterable[int], id_key: tuple, fifo: bool) -> list[PeekedMessage]:
    """The messages at ``offsets`` (pending ones, ascending: the queue type's
    ``_pending_offsets_locked``) as they stand in the lease table ``live``; read
    from the message ``log`` under the queue lock, buffered sends handed to it
    first. Offsets gone from the log (a gap left by recovery="skip") are skipped."""
    out = []
    for o in offsets:
        try:
            recs = log.read(o, max_records=1)
        except OffsetOutOfRange:
            continue
        if not recs or recs[0].offset != o:
            continue  # a gap (recovery="skip"): nothing to show
        r = recs[0]
        e = live.get(o)
        count = e.count if e is not None else 0
        m = Message._from_record(id_key, fifo, o, r.value, r.timestamp_ms,
                                 r.headers or (), "", count, e.first if e is not None else 0)
        state = _STATES.get(e.state, "visible") if e is not None else "visible"
        until = e.until if e is not None and e.state in (INFLIGHT, DELAYED) else None
        out.append(PeekedMessage(m, state, count, until))
    return out


def check_peek(max_messages) -> None:
    if not isinstance(max_messages, int) or not (1 <= max_messages <= MAX_PEEK):
        raise ValueError(f"max_messages must be 1-{MAX_PEEK}, not {max_messages!r}")


def smallest(offsets, start: int, n: int) -> list[int]:
    """The ``n`` smallest of ``offsets`` at or above ``start``, sorted."""
    return heapq.nsmallest(n, (o for o in offsets if o >= start))
