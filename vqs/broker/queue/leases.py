"""The lease table: per-message delivery state of a queue, and its timers.

A message is *tracked* (has a ``Lease`` in ``live``) once it was received, or
when it was sent with a delay; fresh messages of a standard queue are not (the
queue's cursor says which are fresh). States::

    DELAYED    not visible before ``until`` (per-queue or per-message delay); count 0
    INFLIGHT   received, leased until ``until`` (visibility timeout)
    AVAILABLE  received before, lease expired or released: visible again
    MOVING     being moved to the dead-letter queue or redriven out of it

Invariants (all under the queue lock):
* ``n_delayed``, ``n_inflight``, ``n_available`` count the entries of ``live``
  in those states (MOVING entries are in none of them);
* every DELAYED or INFLIGHT lease has a timer ``(until, offset, nonce)`` in the
  ``timers`` heap, or is covered by a run timer ``(until, offset, nonce, k)``
  (offsets ``offset..offset+k-1`` leased with nonces ``nonce..nonce+k-1``). A
  timer whose lease changed since (other nonce or until), or whose message was
  deleted, is stale and ignored; stale timers are dropped once they are most of
  the heap (``tidy``), so it holds fewer than 2 x (DELAYED + INFLIGHT) + 4096;
* a delivery is identified by ``(offset, nonce)``; ``nonce`` only grows, also
  across restarts: a process starts at ``2**63 + (now_ms << 20)`` (above the
  random starts of VQS before 2026-11-24, below 2**64 until the year 2248), or
  past the largest nonce it recovered or an epoch began with, if higher;
* receipt epochs: ``epochs`` is a list of (first offset, first nonce), both
  increasing; an entry is made when the queue opens after a crash, at the
  message log's end then and the nonce the process starts from. A crash may
  lose messages that were already received (sends not yet written or fsynced);
  their offsets are then reused by new messages, and a handle of a lost message
  must not act on the new one. A message at offset o was written by a process
  that started at or after the last entry with first offset <= o, so each of
  its deliveries has a nonce >= that entry's first nonce: a handle with a
  smaller nonce is of a lost message (``decode`` answers offset -1, which no
  message has). The list is durable before a handle is issued (the queue
  writes a snapshot at such an open, vqs.broker.queue.lease_state);
* ``issued`` maps receipt handles this process issued to ``(offset, nonce)``: a
  handle found there is authentic without recomputing its MAC. It is a cache:
  clearing it only costs MAC checks.
"""

from __future__ import annotations

import heapq
import time
from bisect import bisect_right
from itertools import repeat

from .receipt import ReceiptCodec

DELAYED, INFLIGHT, AVAILABLE, MOVING = 0, 1, 2, 3
MAX_INFLIGHT = 120_000  # SQS's in-flight limit per queue (standard and FIFO)
NONCE_BASE = 1 << 63  # a process's first nonce: NONCE_BASE + (now_ms << NONCE_SHIFT)
NONCE_SHIFT = 20  # 2**20 deliveries per ms before a later process could start below
GONE = -1  # the offset decode answers for a handle of a message lost in a crash


class Lease:
    """One tracked message's current delivery (see module doc). Field names are
    those of the state log's lease entries (vqs.broker.queue.lease_state). Made by
    ``make_lease`` (``Lease()`` then six stores where that is inlined: a class
    without ``__init__`` is the cheapest to instantiate, and the standard
    queue's receive makes one per message)."""

    __slots__ = ("nonce", "until", "count", "received", "first", "state")

    def __repr__(self) -> str:
        return (f"Lease(nonce={self.nonce}, until={self.until}, count={self.count}, "
                f"received={self.received}, first={self.first}, state={self.state})")


def make_lease(nonce: int, until: int, count: int, received: int, first: int, state: int) -> Lease:
    """A Lease: ``until`` is the lease end (INFLIGHT) or when it becomes visible
    (DELAYED), ``count`` the receive count (0: never received), ``received`` and
    ``first`` the ms of the latest and of the first receive (0: never)."""
    e = Lease()
    e.nonce = nonce
    e.until = until
    e.count = count
    e.received = received
    e.first = first
    e.state = state
    return e


class LeaseTable:
    """``live`` (offset -> Lease), the timer heap, the state counts, the nonce
    counter and the receipt codec of one queue (see module doc)."""

    __slots__ = ("live", "timers", "n_delayed", "n_inflight", "n_available", "nonce", "codec",
                 "issued", "_ep_offsets", "_ep_nonces")

    def __init__(self, codec: ReceiptCodec):
        self.live: dict[int, Lease] = {}
        self.timers: list = []
        self.n_delayed = self.n_inflight = self.n_available = 0
        # past every nonce of an earlier process (module doc; start() may raise it)
        self.nonce = NONCE_BASE + (time.time_ns() // 1_000_000 << NONCE_SHIFT)
        self.codec = codec
        self.issued: dict[str, tuple[int, int]] = {}
        self._ep_offsets: list[int] = []
        self._ep_nonces: list[int] = []

    def start(self, max_recovered_nonce: int, epochs: list) -> None:
        """After recovery: nonces go on past every recovered one and every epoch's
        first nonce (even if the clock went back); ``epochs`` (module doc)."""
        self.nonce = max(self.nonce, max_recovered_nonce + 1, *(n + 1 for _, n in epochs))
        self._ep_offsets = [o for o, _ in epochs]
        self._ep_nonces = [n for _, n in epochs]

    def decode(self, handle) -> tuple[int, int]:
        """A receipt handle's (offset, nonce); offset ``GONE`` for a handle of a
        message lost in a crash (module doc); raises ReceiptHandleIsInvalid."""
        p = self.issued.get(handle) if handle.__class__ is str else None
        return p if p is not None else self.decode_mac(handle)

    def decode_mac(self, handle) -> tuple[int, int]:
        """``decode`` for a handle not in ``issued``: its MAC is checked."""
        o, nonce = self.codec.decode(handle)
        eo = self._ep_offsets
        if eo:
            i = bisect_right(eo, o) - 1
            if i >= 0 and nonce < self._ep_nonces[i]:
                return GONE, nonce
        return o, nonce

    def delay(self, o: int, visible_at: int) -> None:
        """Track message ``o`` as DELAYED until ``visible_at``."""
        self.live[o] = make_lease(0, visible_at, 0, 0, 0, DELAYED)
        self.n_delayed += 1
        heapq.heappush(self.timers, (visible_at, o, 0))
        self.tidy()

    def lease_again(self, o: int, e: Lease, nonce: int, until: int, now: int, flat: list) -> str:
        """Lease tracked message ``o`` (received before, or delayed) under ``nonce``
        until ``until``; append its lease record to ``flat`` (the caller writes
        them) and return the receipt handle. The caller counts it out of its
        previous state."""
        count = e.count + 1
        first = e.first or now
        e.nonce = nonce
        e.until = until
        e.count = count
        e.received = now
        e.first = first
        e.state = INFLIGHT
        self.n_inflight += 1
        heapq.heappush(self.timers, (until, o, nonce))
        flat += (o, nonce, until, now, first, count)
        handle = self.codec.encode(o, nonce)
        self.issued[handle] = (o, nonce)
        return handle

    def forget(self, o: int, e: Lease) -> None:
        """Drop the lease of message ``o`` (deleted), counting it out of its state."""
        del self.live[o]
        st = e.state
        if st == INFLIGHT:
            self.n_inflight -= 1
        elif st == AVAILABLE:
            self.n_available -= 1
        elif st == DELAYED:
            self.n_delayed -= 1

    def fire_due(self, now: int) -> list:
        """End the leases and delays due by ``now``: those messages become
        AVAILABLE. Returns [(offset, previous state)] of each, for the caller to
        make them visible."""
        timers = self.timers
        live = self.live
        pop = heapq.heappop
        due: list = []
        while timers and timers[0][0] <= now:
            t = pop(timers)
            if len(t) == 3:
                due.append(t)
            else:  # a run timer (until, o, nonce, k)
                until, o, nonce, k = t
                due += zip(repeat(until, k), range(o, o + k), range(nonce, nonce + k))
        out = []
        for until, o, nonce in due:
            e = live.get(o)
            if e is None or e.nonce != nonce or e.until != until:
                continue
            st = e.state
            if st == INFLIGHT:
                self.n_inflight -= 1
            elif st == DELAYED:
                self.n_delayed -= 1
            else:
                continue
            e.state = AVAILABLE
            self.n_available += 1
            out.append((o, st))
        self.tidy()
        return out

    def tidy(self) -> None:
        """Drop the stale timers (of deleted or re-leased messages) once they are
        most of the heap: without this a deleted message's timer stays until its
        lease would have ended (a 300 s visibility timeout at 10 k receives a
        second: millions of entries). Rebuilt from ``live`` (one entry per
        DELAYED or INFLIGHT lease), so the heap stays under twice the tracked
        messages plus 4096, at an amortized O(1) per timer pushed. Call after
        pushing timers (receive, change_visibility, delay) and in ``fire_due``."""
        if len(self.timers) > 2 * (self.n_inflight + self.n_delayed) + 4096:
            self.timers = [(e.until, o, e.nonce) for o, e in self.live.items()
                           if e.state == INFLIGHT or e.state == DELAYED]
            heapq.heapify(self.timers)

    def moving_count(self) -> int:
        return sum(1 for e in self.live.values() if e.state == MOVING)
