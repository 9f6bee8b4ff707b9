"""Recovery at open: the lease table from the state snapshot + state log,
checked against the message log.

The state store (vqs.broker.queue.lease_state) replays its snapshot and log into a
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
Received messages can be lost the same way, and their receipt handles must
not act on those new messages: an open after a crash begins a receipt epoch
(``start_nonces``; vqs.broker.queue.leases), written by that same compaction
before the queue issues a handle. On a full disk that snapshot cannot be
written: the epoch goes to the state log as an "E" record instead
(``write_epoch_record``), which also forgets, at replay, the state of the
offsets the crash lost, as the snapshot would have. Where not even that
fits, the queue opens with the epoch in memory only (a warning names the
file) and refuses sends until it is durable (core.py ``_epoch_due``): handles
of messages below the log's end are safe without it; a message that reuses a
lost offset is not, so none is written before the epoch is.
"""

from __future__ import annotations

import heapq
import os

from ...storage import CLEAN_MARKER
from .lease_state import LeaseStateStore, RecoveredState
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


def was_closed_cleanly(messages_dir: str) -> bool:
    """The message log was closed cleanly, or is new: no message that was ever
    received can have been lost (call before opening the log)."""
    return (not os.path.isdir(messages_dir)
            or os.path.exists(os.path.join(messages_dir, CLEAN_MARKER)))


def start_nonces(st: RecoveredState, store: LeaseStateStore, leases: LeaseTable, end: int,
                 low: int, clean: bool) -> bool:
    """Set the nonce this process starts from and the receipt epochs (leases.py);
    after a crash (not ``clean``) begin a new epoch at the log's ``end``: True
    then, and the caller must write a snapshot before it issues a handle."""
    leases.start(st.max_nonce, store.epochs)
    if clean:
        return False
    eps = [e for e in store.epochs if e[0] < end]  # an entry at or past end is superseded
    while len(eps) > 1 and eps[1][0] <= low:
        del eps[0]  # no message left below the next entry's first offset
    eps.append((end, leases.nonce))
    store.epochs = eps
    leases.start(st.max_nonce, eps)
    return True


def write_epoch_record(store: LeaseStateStore, leases: LeaseTable, end: int, max_nonce: int) -> None:
    """The open's snapshot found the disk full: make its receipt epoch durable as
    an "E" record of the state log (vqs.broker.queue.lease_state), which also drops at
    replay every state at offsets >= ``end``. A clean open whose state was dirty
    (no epoch of its own) begins one at ``end`` here: harmless, no handle of an
    offset >= ``end`` was issued by a live message."""
    eps = store.epochs
    if not eps or eps[-1][0] != end:
        eps = [e for e in eps if e[0] < end] + [(end, leases.nonce)]
        store.epochs = eps
        leases.start(max_nonce, eps)
    store.write_epoch(*eps[-1])
