"""Recovery at open: the lease table from the state snapshot + state log,
checked against the message log.

The state store (vqs.broker.lease_state) replays its snapshot and log into a
``RecoveredState``; this turns it into the queue's ``LeaseTable``, with each
lease's state decided by the clock now (a lease or delay that ended while the
queue was closed is AVAILABLE). The queue type finishes the job
(``_recovered``: the standard queue's visible-again heap, the FIFO groups and
deduplication window, read back from the message log).

Crash reasoning: under a relaxed flush policy the state log may have reached
disk while the messages it names did not (a crash loses the message log's
last interval). Offsets at or past the log's end, or below its start, were
lost: their state is forgotten and the caller compacts at once (``dirty``), so
the state log can never apply it to the new messages that will reuse them.
"""

from __future__ import annotations

import heapq

from ..lease_state import RecoveredState
from .leases import AVAILABLE, DELAYED, INFLIGHT, LeaseTable, make_lease


def recover_leases(st: RecoveredState, leases: LeaseTable, start: int, end: int,
                   now: int) -> tuple[int, int, set[int], bool]:
    """Fill ``leases`` from ``st`` for a message log spanning [start, end).
    Returns (low, cursor, deleted ahead of the cursor, dirty)."""
    dirty = False
    for o in [o for o in st.live if o >= end or o < start]:
        del st.live[o]
        dirty = True
    ahead = {o for o in st.deleted_ahead if start <= o < end}
    if len(ahead) != len(st.deleted_ahead):
        dirty = True
    low = min(max(st.low, start), end)
    cursor = min(max(st.cursor, low), end)
    live = leases.live
    timers = leases.timers
    for o, (nonce, until, count, received, first) in st.live.items():
        if o < low:
            continue
        if count == 0:
            state = DELAYED if until > now else AVAILABLE
        else:
            state = INFLIGHT if until > now else AVAILABLE
        live[o] = make_lease(nonce, until, count, received, first, state)
        if state == AVAILABLE:
            leases.n_available += 1
        else:
            if state == DELAYED:
                leases.n_delayed += 1
            else:
                leases.n_inflight += 1
            timers.append((until, o, nonce))
    heapq.heapify(timers)
    return low, cursor, ahead, dirty
