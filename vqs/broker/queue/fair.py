"""Fair queues: a standard queue's tenants (message group ids) and the noisy-tenant rule.

Amazon SQS "fair queues" (2025): a standard queue whose messages carry a
``MessageGroupId`` delivers the messages of quiet tenants before those of a
noisy one. The rules, as AWS documents them (the concurrency-share measure):

* a tenant is a message group id; a message without one is a tenant of its own;
* a tenant is *noisy* while it has at least ``NOISY_MIN`` (30) messages in flight
  and more than ``NOISY_PERCENT`` (10 %) of all the queue's messages in flight;
* while a tenant is noisy, a receive delivers the visible messages of quiet
  tenants first (oldest first, as a standard queue does); a noisy tenant's
  messages are delivered only when no quiet tenant's message is visible, the
  noisy tenant with the fewest messages in flight first. Nothing is dropped or
  throttled, and a tenant that is no longer noisy is served in order again.
  (AWS's second measure, a tenant's share of processing time, is not kept.)

Standard-queue semantics are otherwise unchanged: no order or deduplication
per group.

``FairShare`` (under the queue lock) holds:

* ``group_of``: offset -> group, for each message in flight that has a group;
  ``inflight``: group -> how many of them (absent: none); ``near``: the groups
  with at least ``NEAR`` (20) in flight, the only ones a receive of at most 10
  messages can make noisy;
* ``parked``: group -> heap of offsets, and ``parked_of``: offset -> group: the
  visible messages of a tenant that was noisy when a receive met them, set
  aside (their lease is AVAILABLE and counted in ``n_available``; they were
  taken off the ``_avail`` heap, where a stale copy is checked like any other
  entry). A ``parked`` entry is stale unless ``parked_of`` maps it to that
  group and its lease is AVAILABLE. While anything is parked, every receive
  takes the fair path, which merges parked and other visible messages by offset. Fresh messages met past the cursor are
  parked as AVAILABLE leases with count 0 (what a delayed message whose delay
  ended is); at most ``MAX_PARKED`` are parked, so a receive looks at most that
  far ahead for a quiet tenant's message.

A queue becomes fair (``StandardQueue._fair`` is a ``FairShare``; ``queue.json``
``"fair": true``, docs/FORMAT.md) before the first message with a group id is
appended; a queue that never saw one keeps ``_fair`` None, and its receive and
delete paths do nothing of this module's. Crash reasoning: the marker is
written (atomically, fsynced) before that message, so a queue holding group ids
is always opened fair; nothing else here is stored. At open, the in-flight
counts are rebuilt from the lease table (its INFLIGHT leases) and the group
ids in their message records; parking is only an order of delivery, forgotten
at a restart (parked messages are AVAILABLE leases in the state snapshot, or
fresh again when the state log is replayed).
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections import deque

from ...errors import OffsetOutOfRange
from .leases import AVAILABLE, INFLIGHT, MOVING, make_lease
from .message import group_id, receive_state, sent_ms

NOISY_MIN = 30  # in flight: a tenant with fewer is never noisy
NOISY_PERCENT = 10  # a noisy tenant has more than this share of all in flight
NEAR = NOISY_MIN - 10  # a receive takes at most 10: below this, no tenant turns noisy in one
MAX_PARKED = 100_000  # fresh messages parked at most (how far a receive looks ahead)
_READ_AHEAD = 256  # fresh records read per log read on the fair path
_GAP = 64  # rebuilding: in-flight offsets closer than this are read in one run


class FairShare:
    """Per-tenant in-flight counts and the parked messages (see module doc)."""

    __slots__ = ("group_of", "inflight", "near", "parked", "parked_of")

    def __init__(self):
        self.group_of: dict[int, str] = {}
        self.inflight: dict[str, int] = {}
        self.near: set[str] = set()
        self.parked: dict[str, list] = {}
        self.parked_of: dict[int, str] = {}

    def leased(self, o: int, g: str) -> None:
        """Message ``o`` of group ``g`` went in flight."""
        if o in self.group_of:
            return
        self.group_of[o] = g
        c = self.inflight.get(g, 0) + 1
        self.inflight[g] = c
        if c == NEAR:
            self.near.add(g)
        if self.parked_of:
            self.parked_of.pop(o, None)

    def released(self, offsets) -> None:
        """These messages are no longer in flight (lease ended, deleted); none
        of them is parked any more either."""
        gof = self.group_of
        po = self.parked_of
        inflight = self.inflight
        for o in offsets:
            if po:
                po.pop(o, None)
            g = gof.pop(o, None)
            if g is None:
                continue
            c = inflight[g] - 1
            if c:
                inflight[g] = c
                if c == NEAR - 1:
                    self.near.discard(g)
            else:
                del inflight[g]

    def noisy(self, total: int) -> set[str]:
        """The noisy tenants when ``total`` messages are in flight."""
        if not self.near:
            return set()
        inflight = self.inflight
        return {g for g in self.near
                if inflight[g] >= NOISY_MIN and inflight[g] * 100 > total * NOISY_PERCENT}

    def park(self, o: int, g: str) -> None:
        h = self.parked.get(g)
        if h is None:
            h = self.parked[g] = []
        heapq.heappush(h, o)
        self.parked_of[o] = g

    def _head(self, g: str, live: dict) -> int | None:
        """The oldest parked message of ``g`` still parked (stale entries dropped)."""
        h = self.parked[g]
        po = self.parked_of
        while h:
            o = h[0]
            if po.get(o) == g:
                e = live.get(o)
                if e is not None and e.state == AVAILABLE:
                    return o
                del po[o]
            heapq.heappop(h)
        del self.parked[g]
        return None

    def oldest_quiet(self, live: dict, noisy: set) -> tuple[int, str] | None:
        """(offset, group) of the oldest parked message of a tenant not noisy."""
        best = None
        for g in list(self.parked):
            if g in noisy:
                continue
            o = self._head(g, live)
            if o is not None and (best is None or o < best[0]):
                best = (o, g)
        return best

    def least_busy(self, live: dict) -> tuple[int, str] | None:
        """(offset, group) of the oldest parked message of the tenant with the
        fewest messages in flight (noisy tenants: AWS serves the least busy first)."""
        best = None
        for g in list(self.parked):
            o = self._head(g, live)
            if o is None:
                continue
            k = (self.inflight.get(g, 0), o)
            if best is None or k < best[0]:
                best = (k, (o, g))
        return None if best is None else best[1]

    def unpark(self, g: str, o: int) -> None:
        """Take parked message ``o`` (the head of ``g``) out of its heap."""
        heapq.heappop(self.parked[g])
        del self.parked_of[o]

    def unpark_all(self, avail: list) -> None:
        """Every parked message back onto the standard queue's ``_avail`` heap."""
        for o in self.parked_of:
            heapq.heappush(avail, o)
        self.parked.clear()
        self.parked_of.clear()

    def purged(self) -> None:
        """Every message was deleted (PurgeQueue deletes all sent before it)."""
        self.group_of.clear()
        self.inflight.clear()
        self.near.clear()
        self.parked.clear()
        self.parked_of.clear()


def read_groups(log, offsets: list) -> dict[int, str]:
    """The group ids of the messages at ``offsets`` (sorted) that have one, read
    from the message log in runs of nearby offsets."""
    out: dict[int, str] = {}
    want = set(offsets)
    i = 0
    n = len(offsets)
    while i < n:
        o = offsets[i]
        j = i
        while j + 1 < n and offsets[j + 1] - offsets[j] <= _GAP and offsets[j + 1] - o < 4096:
            j += 1
        try:
            recs = log.read(o, max_records=offsets[j] - o + 1)
        except OffsetOutOfRange:
            recs = []
        for r in recs:
            if r.offset in want and r.headers:
                g = group_id(r.headers)
                if g is not None:
                    out[r.offset] = g
        i = bisect_right(offsets, recs[-1].offset if recs else o, i + 1)
    return out


def rebuild_fair(q) -> None:
    """Count the messages in flight per tenant (at open, or when the queue
    turns fair): their group ids are read from the message log."""
    if q._sends.values:
        q._push_locked()
    fair = q._fair
    live = q._leases.live
    offs = sorted(o for o, e in live.items() if e.state == INFLIGHT)
    for o, g in read_groups(q._log, offs).items():
        fair.leased(o, g)


def turn_fair(q) -> None:
    """Make queue ``q`` fair, durably, before a message with a group id is
    appended (module doc, crash reasoning)."""
    fair = FairShare()
    q._fair = fair
    try:
        rebuild_fair(q)
        q._save_files()
    except BaseException:
        q._fair = None
        raise


def take_fair(q, n: int, vis: int, now: int, dlq) -> tuple[list, list]:
    """The fair receive of a ``StandardQueue`` (its structures: standard.py's
    module doc): ``_take`` while a tenant is noisy or may turn noisy in this receive,
    or messages are parked: one message at a time, the noisy set
    recomputed after each delivery (module doc)."""
    fair = q._fair
    lt = q._leases
    live = lt.live
    avail = q._avail
    out: list = []
    moves: list = []
    flat: list = []
    dels: list = []
    until = now + vis * 1000
    expire_before = now - q._ret_ms
    mrc = q.config.max_receive_count if dlq is not None else None
    codec = lt.codec
    issued = lt.issued
    log = q._log
    ahead = q._ahead
    cursor = q._cursor
    if q._sends.values:
        q._push_locked()
    end = log.end_offset
    buf: deque = deque()
    pop = heapq.heappop
    noisy = fair.noisy(lt.n_inflight)

    def again(o: int, r, e, g) -> None:
        """Deliver tracked message ``o`` (visible again, or parked): counted out of
        ``n_available`` by the caller."""
        if r is None or sent_ms(r) <= expire_before:
            del live[o]
            dels.append(o)
            return
        if mrc is not None and e.count >= mrc:
            e.state = MOVING
            moves.append((o, r, e))
            return
        lt.nonce += 1
        handle = lt.lease_again(o, e, lt.nonce, until, now, flat)
        out.append(q._message(o, r.value, r.timestamp_ms, r.headers or (), handle,
                                 e.count, e.first))
        if g is not None:
            fair.leased(o, g)

    while len(out) < n:
        got = len(out)
        # the stream's next offset: visible again below the cursor, then fresh
        while avail and avail[0] < cursor:
            e = live.get(avail[0])
            if e is not None and e.state == AVAILABLE:
                break
            pop(avail)
        if avail and avail[0] < cursor:
            h = avail[0]
        elif cursor < end and (not noisy or len(fair.parked_of) < MAX_PARKED):
            h = cursor
        else:
            h = None
        quiet = fair.oldest_quiet(live, noisy) if fair.parked else None
        if quiet is None and h is None and fair.parked:
            quiet = fair.least_busy(live)  # only noisy tenants' messages are visible
        if quiet is not None and (h is None or quiet[0] < h):
            o, g = quiet
            fair.unpark(g, o)
            lt.n_available -= 1
            again(o, q._read_one(o), live[o], g)
        elif h is None:
            break
        elif h < cursor:
            pop(avail)
            e = live[h]
            lt.n_available -= 1
            r = q._read_one(h)
            g = group_id(r.headers) if r is not None and r.headers else None
            if (g is not None and g in noisy and (mrc is None or e.count < mrc)
                    and sent_ms(r) > expire_before):
                fair.park(h, g)  # (past max_receive_count: moved by ``again``)
                lt.n_available += 1
                continue
            again(h, r, e, g)
        else:
            if not buf:
                buf.extend(log.read(cursor, max_records=_READ_AHEAD))
                if not buf:
                    end = cursor
                    continue
            r = buf.popleft()
            o = r.offset
            cursor = o + 1
            hd = r.headers
            e = live.get(o)
            if e is not None:
                # delayed at send, or leased before a restart (standard._take)
                if e.state != AVAILABLE:
                    continue
                lt.n_available -= 1
                g = group_id(hd) if hd else None
                if (g is not None and g in noisy and (mrc is None or e.count < mrc)
                        and sent_ms(r) > expire_before):
                    fair.park(o, g)
                    lt.n_available += 1
                    continue
                again(o, r, e, g)
            elif ahead and o in ahead:
                ahead.discard(o)
                continue
            else:
                st = receive_state(r.timestamp_ms, hd, now, expire_before)
                if st:
                    if st > 0:
                        lt.delay(o, st)
                    else:
                        dels.append(o)
                    continue
                g = group_id(hd) if hd else None
                if g is not None and g in noisy:
                    live[o] = make_lease(0, 0, 0, 0, 0, AVAILABLE)
                    lt.n_available += 1
                    fair.park(o, g)
                    continue
                lt.nonce += 1
                nonce = lt.nonce
                live[o] = make_lease(nonce, until, 1, now, now, INFLIGHT)
                lt.n_inflight += 1
                heapq.heappush(lt.timers, (until, o, nonce))
                flat += (o, nonce, until, now, now, 1)
                handle = codec.encode(o, nonce)
                issued[handle] = (o, nonce)
                out.append(q._message(o, r.value, r.timestamp_ms, hd or (), handle, 1, now))
                if g is not None:
                    fair.leased(o, g)
        if len(out) != got:
            noisy = fair.noisy(lt.n_inflight)
    q._cursor = cursor
    if flat or dels:
        q._log_ops(flat, dels, now)
    return out, moves

