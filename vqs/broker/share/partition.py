"""One share partition: a share group's delivery state of one topic partition.

A share group reads a topic with queue semantics: each record is *acquired*
by one member under a lock (``lock_ms``), then acknowledged: ACCEPT and
REJECT settle it (REJECT archives it), RELEASE makes it available again, and
a lock that ends unacknowledged makes it available again too. A record
delivered ``delivery_limit`` times and then released or expired is archived.

Why the queue lease engine: this is the state a VQS queue keeps per message,
so it is kept by the same parts: the in-memory ``LeaseTable`` (a ``Lease``
per tracked record: INFLIGHT while acquired until ``until``, AVAILABLE once
released or expired, its delivery count in ``count``; the timer heap ends
the locks) and the durable ``LeaseStateStore`` (an append-only state log of
lease, run and delete records plus a snapshot; vqs.broker.queue.lease_state).
Its notions map one to one: the snapshot's ``low`` is Kafka's share-partition
start offset (SPSO), ``cursor`` the first offset never acquired; an offset in
``[low, cursor)`` with no lease was settled (accepted or archived). A fresh
acquisition of the run ``[cursor, cursor + n)`` is one "R" record, a
redelivery an "L" record (its delivery count), a settlement a "D" record.
Only receipt handles are not used (a Kafka client names a record by offset;
the acquiring member is checked instead).

Invariants (under ``lock``):
* ``low <= cursor <= the topic log's end``; every offset in ``[low, cursor)``
  has a lease (INFLIGHT or AVAILABLE) or is settled, and every lease is of an
  offset in ``[low, cursor)``; ``low`` is never an offset with no lease below
  ``cursor`` (it moves past settled offsets): it is the lowest leased offset,
  or ``cursor`` when none is;
* ``owner[o]`` is the member an INFLIGHT record ``o`` was acquired by, and
  only that member may acknowledge it; only INFLIGHT records have an owner
  (so a record owned by a member is one it holds: the check acknowledge makes);
* ``count`` (delivery count) only grows; a record is acquired only while its
  count is below ``delivery_limit``, so no record is delivered more often.

Crash safety: every acquisition, renewal and settlement (an archive at the
delivery limit too) is in the state log before the call returns (``_write``:
under ``flush="always"`` fsynced, group committed; otherwise handed to the
operating system at once, so a killed process keeps it, and fsynced by the
log's flusher). A release or an ended lock that leaves a record available is
not logged: at open every lease is AVAILABLE, whatever its lock said (the
members that held them are gone), with its delivery count kept; one at the
delivery limit is archived by the next acquisition that meets it.
So after a SIGKILL an accepted record is never delivered again, an
unacknowledged one is delivered again (at-least-once), and an archived one
never. The share partition's first ``low`` (the log's end for
``auto_offset_reset="latest"``) is a snapshot written before the first
acquisition, so a restart cannot move it. Records the topic loses (retention,
DeleteRecords, or a crash losing its tail under a relaxed flush policy) are
dropped from the state at open and whenever ``acquire`` finds them gone.
"""

from __future__ import annotations

import heapq
import os
import threading
from collections import deque

from ...errors import ConfigError, InvalidRecordState, VQSError
from ..queue.lease_records import encode_deletes, encode_leases, encode_runs
from ..queue.lease_state import SNAPSHOT, LeaseStateStore
from ..queue.leases import AVAILABLE, INFLIGHT, Lease, LeaseTable, make_lease
from .dead_letter import EXCEEDED, REJECTED

ACCEPT, RELEASE, REJECT, RENEW = 1, 2, 3, 4
GAP = 0
#: snapshot (compact the state log) once this many records were appended since the last
COMPACT_RECORDS = 20_000


class SharePartition:
    """The delivery state of one (share group, topic, partition); see module doc."""

    def __init__(self, path: str, log, *, flush: str, flush_interval_ms: int, auto_offset_reset: str,
                 min_free_bytes: int | None = None, dead_letter=None):
        self.log = log
        self.dead_letter = dead_letter  # DeadLetters (dead_letter.py) or None  # the topic partition's Log (read for its start and end)
        self.lock = threading.Lock()
        initialized = os.path.exists(os.path.join(path, SNAPSHOT))
        self.store = LeaseStateStore(path, flush=flush, flush_interval_ms=flush_interval_ms,
                                     buffered=flush != "always", min_free_bytes=min_free_bytes)
        self.leases = LeaseTable(None)  # no receipt handles: see module doc
        self.owner: dict[int, str] = {}
        start, end = log.start_offset, log.end_offset
        try:
            if not initialized:
                self.low = self.cursor = end if auto_offset_reset == "latest" else start
                self._snapshot()
            else:
                self._recover(start, end)
        except BaseException:
            self.store.close()
            raise

    def _recover(self, start: int, end: int) -> None:
        st = self.store.recover()
        live = st.live
        cursor = st.cursor
        if live:
            cursor = max(cursor, max(live) + 1)
        if st.deleted_ahead:
            cursor = max(cursor, max(st.deleted_ahead) + 1)
        self.low = min(max(st.low, start), end)
        self.cursor = min(max(cursor, self.low), end)
        table = self.leases
        for o, (nonce, _until, count, received, first) in live.items():
            if self.low <= o < self.cursor:  # else the topic lost the record
                table.live[o] = make_lease(nonce, 0, count, received, first, AVAILABLE)
                table.n_available += 1
        table.start(st.max_nonce, [])
        if self.dead_letter is not None:  # copied to the dead-letter topic, then killed before settled
            done = sorted(o for o in self.dead_letter.copied() if o in table.live)
            if done:
                self._settle(done, [])
        self._advance_low()
        if len(table.live) != len(live) or self.low != st.low or self.cursor != cursor:
            self._snapshot()

    # ------------------------------------------------------------------ state log

    def _write(self, records: list) -> None:
        """Records of one operation, written before it returns (module doc)."""
        store = self.store
        store.append_many(records)
        store.push()
        if store.log.end_offset - store.snapshot_offset >= COMPACT_RECORDS:
            self._snapshot()

    def _snapshot(self) -> None:
        self.store.write_snapshot(low=self.low, cursor=self.cursor, live=self.leases.live,
                                  deleted_ahead=(), now_ms=0)
        if self.dead_letter is not None:
            self.dead_letter.marked()

    def _advance_low(self) -> None:
        """``low`` to the lowest leased offset, or ``cursor`` (the invariant): a few steps
        (one record settled at a time), else a min() over the leases (a run settled)."""
        live = self.leases.live
        low, cursor = self.low, self.cursor
        if low >= cursor or low in live:
            return
        stop = min(cursor, low + 64)
        low += 1
        while low < stop and low not in live:
            low += 1
        if low == stop < cursor:  # none leased below stop: the lowest is at stop or later
            low = min(cursor, min(live, default=cursor))
        self.low = low

    # ------------------------------------------------------------------ operations

    def _settle(self, offsets: list, out: list) -> None:
        """Accept or archive ``offsets`` (leased): their "D" record goes to ``out``."""
        leases = self.leases
        live = leases.live
        for o in offsets:
            leases.forget(o, live[o])
            self.owner.pop(o, None)
        out.append(encode_deletes(offsets))

    def _settle_held(self, offsets, out: list) -> None:
        """``_settle`` of INFLIGHT ``offsets`` (with an owner), without a call per record."""
        deque(map(self.leases.live.__delitem__, offsets), 0)
        deque(map(self.owner.__delitem__, offsets), 0)
        self.leases.n_inflight -= len(offsets)
        out.append(encode_deletes(offsets))

    def _archive(self, offsets: list, message: str, out: list) -> None:
        """Archive ``offsets`` (leased): copied to the dead-letter topic first, if the group has
        one (dead_letter.py: the copy precedes the settlement), then settled."""
        if offsets and self.dead_letter is not None:
            live = self.leases.live
            self.dead_letter.send(self.log, [(o, live[o].count, message) for o in offsets])
        self._settle(offsets, out)

    def _make_available(self, o: int, e, limit: int, archive: list) -> None:
        """An INFLIGHT lease released or expired (counted out of INFLIGHT by the caller):
        available again, or archived at the delivery limit."""
        self.owner.pop(o, None)
        if e.count >= limit:
            archive.append(o)
            e.state = AVAILABLE  # counted in, so that _settle's forget counts it out
        else:
            e.state = AVAILABLE
            e.until = 0
        self.leases.n_available += 1

    def expire(self, now: int, limit: int) -> None:
        """End the locks due by ``now`` (module doc)."""
        with self.lock:
            self._expire(now, limit)

    def _expire(self, now: int, limit: int) -> None:
        leases = self.leases
        if not leases.timers or leases.timers[0][0] > now:
            return
        archive: list = []
        for o, _prev in leases.fire_due(now):  # each counted AVAILABLE already
            self.owner.pop(o, None)
            if leases.live[o].count >= limit:
                archive.append(o)
        if archive:
            recs: list = []
            self._archive(archive, EXCEEDED, recs)
            self._advance_low()
            self._write(recs)

    def next_expiry(self) -> int | None:
        """When the earliest lock may end (ms), or None."""
        t = self.leases.timers
        return t[0][0] if t else None

    def acquire(self, member: str, max_records: int, now: int, lock_ms: int, limit: int,
                max_locks: int = 2000, whole_batches: int = 0, max_bytes: int | None = None) -> list:
        """Acquire up to ``max_records`` records for ``member`` until ``now + lock_ms``:
        available ones first (lowest offsets), then fresh ones from ``cursor``; none once
        ``max_locks`` are acquired (Kafka's ``group.share.partition.max.record.locks``).
        Returns [(first offset, last offset, delivery count)], in offset order.

        ``whole_batches`` (a record count, 0: off) aligns the acquisition to the topic's stored
        batches: once ``max_records`` available records are acquired, so are the other available
        ones of the stored batch holding the last (to ``whole_batches`` in all); a fresh run is
        extended toward the end of the batch holding its last record (to ``whole_batches``
        records in the run). Kafka's acquisition is batch-aligned the same way (its MaxRecords
        is a soft limit): a fetch answers whole batches, so the rest of the last one would
        reach the client only to be dropped. ``max_records`` and ``max_locks`` may then be
        passed by less than ``whole_batches``.

        ``max_bytes`` bounds what is acquired to the stored batches that hold it within that
        many bytes, available records first, then the fresh run (at least one batch in all: a
        soft limit, as a fetch's)."""
        with self.lock:
            self._expire(now, limit)
            max_records = min(max_records, max_locks - self.leases.n_inflight)
            start, end = self.log.start_offset, self.log.end_offset
            recs: list = []
            if start > self.low:
                self._drop_below(start, recs)
            if self.cursor > end:  # the topic lost its tail (a crash): those records are gone
                self._drop_from(end, recs)
            leases = self.leases
            live = leases.live
            until = now + lock_ms
            got: list = []  # (offset, count) of available records, in offset order
            archive: list = []
            used = 0  # bytes of the stored batches holding the available records taken (max_bytes)
            if leases.n_available and max_records > 0:
                flat: list = []
                k = 0
                stop = None  # the end of the stored batch holding the max_records-th (whole_batches)
                held = -1  # the end of the stored batch holding the last one taken (max_bytes)
                for o in sorted(o for o, e in live.items() if e.state == AVAILABLE):
                    if max_bytes is not None and o >= held:
                        size, held = self._batch_at(o)
                        if used and used + size > max_bytes:
                            break
                        used += size
                    if len(got) >= max_records:
                        if not whole_batches or len(got) >= whole_batches:
                            break
                        if stop is None:
                            stop = self._batch_end(got[-1][0])
                        if o >= stop:
                            break
                    e = live[o]
                    if e.count >= limit:
                        archive.append(o)
                        continue
                    nonce = leases.nonce
                    leases.nonce = nonce + 1
                    e.nonce, e.until, e.count, e.received, e.state = nonce, until, e.count + 1, now, INFLIGHT
                    e.first = e.first or now
                    leases.n_available -= 1
                    leases.n_inflight += 1
                    heapq.heappush(leases.timers, (until, o, nonce))
                    self.owner[o] = member
                    flat += (o, nonce, until, now, e.first, e.count)
                    k += 1
                    got.append((o, e.count))
                if k:
                    recs.append(encode_leases(flat, k))
                if archive:
                    self._archive(archive, EXCEEDED, recs)
            ranges = _ranges(got)
            n = min(max_records - len(got), end - self.cursor)
            if max_bytes is not None and used:
                n = n if used < max_bytes else 0  # what is left of the budget, not another batch
            if n > 0 and (whole_batches or max_bytes is not None):
                n = self._run_length(self.cursor, n, end, whole_batches,
                                     None if max_bytes is None else max_bytes - used, taken=used > 0)
            if n > 0:
                o0 = self.cursor
                nonce = leases.nonce
                leases.nonce = nonce + n
                for i in range(n):  # make_lease, inlined (a call per record costs as much again)
                    e = Lease()
                    e.nonce = nonce + i
                    e.until = until
                    e.count = 1
                    e.received = e.first = now
                    e.state = INFLIGHT
                    live[o0 + i] = e
                self.owner.update(dict.fromkeys(range(o0, o0 + n), member))
                ranges.append((o0, o0 + n - 1, 1))
                leases.n_inflight += n
                heapq.heappush(leases.timers, (until, o0, nonce, n))
                self.cursor = o0 + n
                recs.append(encode_runs([o0, nonce, n, until, now], 1))
            leases.tidy()
            self._advance_low()
            if recs:
                self._write(recs)
            return ranges

    def _run_length(self, o: int, n: int, end: int, whole: int, max_bytes: int | None,
                    taken: bool = False) -> int:
        """How many fresh records from ``o`` (``n`` asked) ``acquire`` takes: with ``whole``, to
        the end of the stored batch holding the n-th (at most ``max(n, whole)``); with
        ``max_bytes``, only those of the batches within it (at least one batch, unless some were
        ``taken`` already). The batches
        are read a few at a time, sized from those read before; ``n`` if the log cannot be
        read here (the fetch that answers the records reports why)."""
        want = o + n
        cap = min(end, max(want, o + whole) if whole else want)
        budget = (1 << 62) if max_bytes is None else max_bytes
        pos, used = o, 0
        chunk = 1  # bytes to read next: one batch, then what the records still wanted take
        while pos < want:
            try:
                batches = self.log.read_batches(pos, max_bytes=max(1, min(chunk, budget - used, 1 << 20)))
            except (VQSError, OSError):
                batches = None
            if not batches:
                return n if pos == o else pos - o
            for b in batches:
                if (used or taken) and used + b.size_bytes > budget:
                    return pos - o  # (a batch past the budget is not taken)
                used += b.size_bytes
                pos = b.next_offset
                if pos >= want:  # the batch holding the n-th record
                    return min(pos if whole else want, cap) - o
            chunk = used * (want - pos) // (pos - o) + 1
        return min(pos, cap) - o

    def _batch_at(self, o: int) -> tuple[int, int]:
        """(size in bytes, the offset after it) of the stored batch holding record ``o``;
        (0, ``o + 1``) if it cannot be read now (the fetch that answers it reports why)."""
        try:
            found = self.log.read_batches(o, max_bytes=1)
        except (VQSError, OSError):
            return 0, o + 1
        return (found[0].size_bytes, found[0].next_offset) if found else (0, o + 1)

    def _batch_end(self, o: int) -> int:
        """The offset after the stored batch holding record ``o``, or ``o + 1`` if that batch
        cannot be read now (the fetch that answers it reports why)."""
        try:
            found = self.log.read_batches(o, max_bytes=1)
        except (VQSError, OSError):
            return o + 1
        return found[0].next_offset if found else o + 1

    def _drop_below(self, start: int, recs: list) -> None:
        """The topic's start moved past ``low``: records below it are gone (settled)."""
        gone = [o for o in self.leases.live if o < start]
        if gone:
            self._settle(gone, recs)
        self.low = start
        self.cursor = max(self.cursor, start)
        self._advance_low()

    def _drop_from(self, end: int, recs: list) -> None:
        gone = [o for o in self.leases.live if o >= end]
        if gone:
            self._settle(gone, recs)
        self.cursor = end
        self.low = min(self.low, end)
        self._snapshot()  # the cursor moved back: replay must not raise it again

    def acknowledge(self, member: str, first: int, last: int, types: list, now: int, lock_ms: int,
                    limit: int) -> None:
        """Acknowledge records ``first..last`` acquired by ``member``: ``types`` holds one
        type for the whole range, or one per offset (0 gap, 1 accept, 2 release, 3 reject,
        4 renew). All or nothing: InvalidRecordState if any record in the range is not
        acquired by ``member`` (offsets below ``low`` are settled already and ignored);
        ConfigError for a malformed range or type."""
        if last < first or (len(types) != 1 and len(types) != last - first + 1) or last - first >= 1 << 24:
            raise ConfigError(f"acknowledgement of {first}..{last} with {len(types)} types")
        if any(t not in (GAP, ACCEPT, RELEASE, REJECT, RENEW) for t in types):
            raise ConfigError(f"unknown acknowledge type in {sorted(set(types))}")
        with self.lock:
            self._expire(now, limit)
            live = self.leases.live
            owner = self.owner
            lo = max(first, self.low)
            span = range(lo, last + 1)
            if span and set(map(owner.get, span)) != {member}:  # owned: INFLIGHT (invariants)
                o = next(o for o in span if owner.get(o) != member)
                raise InvalidRecordState(f"record {o} is not acquired by this member")
            settle: list | range = []
            rejected: list = []
            archive: list = []
            renewed: list = []
            leases = self.leases
            single = types[0] if len(types) == 1 else None
            if single in (ACCEPT, GAP):
                settle, span = span, ()
            for o in span:
                t = single if single is not None else types[o - first]
                e = live[o]
                if t == RELEASE:
                    leases.n_inflight -= 1
                    self._make_available(o, e, limit, archive)
                elif t == RENEW:
                    e.until = now + lock_ms
                    renewed.append(o)
                elif t == REJECT:
                    rejected.append(o)
                else:
                    settle.append(o)
            recs: list = []
            if rejected:
                self._archive(rejected, REJECTED, recs)
            if archive:
                self._archive(archive, EXCEEDED, recs)
            if settle:
                self._settle_held(settle, recs)
            if renewed:
                flat: list = []
                for o in renewed:
                    e = live[o]
                    heapq.heappush(leases.timers, (e.until, o, e.nonce))
                    flat += (o, e.nonce, e.until, e.received, e.first, e.count)
                recs.append(encode_leases(flat, len(renewed)))
                leases.tidy()
            self._advance_low()
            if recs:
                self._write(recs)

    def release_member(self, member: str, limit: int) -> int:
        """Release every record ``member`` holds (its session closed or it left the group);
        returns how many."""
        with self.lock:
            mine = [o for o, m in self.owner.items() if m == member]
            if not mine:
                return 0
            live = self.leases.live
            archive: list = []
            for o in mine:
                self.leases.n_inflight -= 1
                self._make_available(o, live[o], limit, archive)
            if archive:
                recs: list = []
                self._archive(archive, EXCEEDED, recs)
                self._advance_low()
                self._write(recs)
            return len(mine)

    def reset(self, start: int) -> int:
        """Move the share-partition start offset to ``start`` (clamped to the topic log's
        start..end), forgetting every record in flight: records from there on are acquired
        afresh, those below are settled. For a group with no members (the admin's alter
        offsets). Durable on return (a snapshot). Returns the start offset set."""
        with self.lock:
            start = min(max(start, self.log.start_offset), self.log.end_offset)
            nonce = self.leases.nonce
            self.leases = LeaseTable(None)
            self.leases.start(nonce, [])  # nonces go on past the old ones
            self.owner = {}
            self.low = self.cursor = start
            self._snapshot()
            return start

    def describe(self) -> dict:
        """Start offset, cursor and the in-flight records' counts (by state and delivery count)."""
        with self.lock:
            counts: dict[int, int] = {}
            for e in self.leases.live.values():
                counts[e.count] = counts.get(e.count, 0) + 1
            return {"start_offset": self.low, "cursor": self.cursor, "acquired": self.leases.n_inflight,
                    "available": self.leases.n_available, "delivery_counts": dict(sorted(counts.items()))}

    def close(self) -> None:
        with self.lock:
            try:
                if not self.store.log.closed:
                    self._snapshot()
            finally:
                self.store.close()


def _ranges(got: list) -> list:
    """[(offset, count)] sorted -> [(first, last, count)] of consecutive offsets with one count."""
    out: list = []
    for o, c in got:
        if out and out[-1][1] == o - 1 and out[-1][2] == c:
            out[-1][1] = o
        else:
            out.append([o, o, c])
    return [tuple(r) for r in out]
