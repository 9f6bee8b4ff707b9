"""The standard queue: at-least-once delivery, oldest first, no per-message
state for fresh messages.

Structures (under the queue lock), besides the lease table (leases.py):

* ``_cursor``: every offset at or past it is fresh (never received) unless it
  is tracked (has a lease: sent with a delay, or leased before a restart) or in
  ``_ahead`` (deleted while fresh: a delete of a handle found stale, or expired);
* ``_avail``: a heap of offsets below the cursor made visible again (lease or
  delay ended, move failed); entries whose lease changed since are stale and skipped;
* ``_tail`` and ``_sends`` (send_buffer.py): what this process sent, in memory,
  and the plain sends not yet handed to the log;
* ``_low``: the lowest offset not deleted (nothing below is tracked).

Receive takes the visible-again messages below the cursor first (oldest
first), then fresh ones from the cursor on. The hot paths (``_send_plain``,
``_take``'s fresh-run branch, ``delete_batch``) are inlined by hand: each was
measured (bench/queue_bench.py, the send/receive/delete cycle) and a call or an
attribute lookup per message there costs a visible share of a cycle. Keep them
flat when changing them, and keep them in step with the general paths beside them.

Fair queues (fair.py): once a message with a group id was sent, ``_fair``
holds the tenants' in-flight counts; ``_take`` hands a receive to
``fair.take_fair`` while a tenant is or may turn noisy, and the paths where
messages leave flight (``_fire_timers``, ``_deleted_locked``, purge, moves)
tell it. With ``_fair`` None (a queue never sent a group id) each of those
costs one test per call, nothing per message (a send with record headers
looks for a group id among them; plain sends do not).

(Over 500 lines: ``_take`` alone is about 200, one function on purpose, see
above; splitting the standard queue's structures across modules would make
each path read state it does not own.)
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from itertools import repeat

from ...errors import LogClosedError, OverLimit, QueueError
from ...record import Record
from ...storage import BATCH_FIXED, RECORD_FIXED
from . import send_buffer
from .config import MAX_DELAY_S
from .core import Queue
from .fair import FairShare, rebuild_fair, take_fair, turn_fair
from .lease_records import DELETE_ROOM, encode_runs
from .leases import AVAILABLE, INFLIGHT, MAX_INFLIGHT, MOVING, Lease, make_lease
from .message import HEX2, Message, group_id, message_ids, receive_state, sent_at, sent_ms
from .peek import smallest
from .receipt import HANDLE_WORDS
from .send_buffer import Tail
from .validate import MAX_BATCH_BYTES, MAX_BATCH_ENTRIES, check_batch_size

_NO_LIMIT = 1 << 64  # above every offset


class StandardQueue(Queue):
    """A standard (not FIFO) queue (see module doc); a fair queue once a message
    group id was sent to it (fair.py)."""

    _fifo = False

    def __init__(self, path, name, stored, **kw):
        self._avail: list = []
        self._ahead: set[int] = set()
        self._cursor = 0
        self._tail = Tail()
        # plain sends are buffered unless every send must be fsynced before it returns
        self._buffered = stored.config.flush != "always"
        self._fair = FairShare() if stored.fair else None
        super().__init__(path, name, stored, **kw)

    def _recovered(self, cursor: int, ahead: set, now: int) -> None:
        self._cursor = cursor
        self._ahead = ahead
        self._avail = [o for o, e in self._leases.live.items() if e.state == AVAILABLE]
        heapq.heapify(self._avail)
        if not self._opened_clean:
            self._recover_delays(now)
        self._advance_low()
        if self._fair is not None:
            rebuild_fair(self)

    def _recover_delays(self, now: int) -> None:
        """After a crash: track the fresh messages still delayed (a delay has no
        state record; a clean close leaves them in the snapshot), so the counts
        are right at once. Only the last MAX_DELAY_S of sends can still be delayed."""
        log = self._log
        if log.end_offset <= max(self._cursor, log.start_offset):
            return
        t = log.offset_for_time(now - MAX_DELAY_S * 1000)
        if t is None:
            return
        off = max(t, self._cursor, log.start_offset)
        lt = self._leases
        live = lt.live
        ahead = self._ahead
        while off < log.end_offset:
            recs = log.read(off, max_records=4096)
            if not recs:
                break
            for r in recs:
                h = r.headers
                if h and r.offset not in live and r.offset not in ahead:
                    until = receive_state(r.timestamp_ms, h, now, -1)
                    if until > 0:
                        lt.delay(r.offset, until)
            off = recs[-1].offset + 1

    # ============================================================== sending

    def send(self, body, delay_seconds: int | None = None, attributes: dict | None = None,
             group_id: str | None = None, dedup_id: str | None = None) -> str:
        if (body.__class__ is bytes and delay_seconds is None and attributes is None
                and group_id is None and dedup_id is None and not self._delay_ms
                and 0 < len(body) <= self._max_bytes):
            return self._send_plain([body])[0]
        return Queue.send(self, body, delay_seconds, attributes, group_id, dedup_id)

    send.__doc__ = Queue.send.__doc__

    def send_batch(self, entries: Iterable) -> list[str]:
        entries = list(entries)
        n = len(entries)
        if not 0 < n <= MAX_BATCH_ENTRIES:  # check_batch_size, inline
            check_batch_size(n)
        if not self._delay_ms and list(map(type, entries)).count(bytes) == n and all(entries):
            # plain bodies, none empty: when together they fit one message and
            # one batch, each does (else each is validated, and refused, below)
            total = sum(map(len, entries))
            if total <= self._max_bytes and total <= MAX_BATCH_BYTES:
                return self._send_plain(entries, total)
        return self._send_entries(entries)

    send_batch.__doc__ = Queue.send_batch.__doc__

    def _send_plain(self, values: list, nbytes: int | None = None) -> list[str]:
        """Hot path: no delay, no headers. (Inlined by hand: module doc.)"""
        log = self._log
        with self._lock:
            if self._closed:
                raise LogClosedError(f"queue {self.name} is closed")
            if self._epoch_due:
                self._write_epoch_locked()
            ts = self._now_ms()
            n = len(values)
            if nbytes is None:
                nbytes = sum(map(len, values))
            if self._buffered:
                sb = self._sends
                if (sb.error is not None or len(sb.values) + n > sb.max_records
                        or sb.nbytes + nbytes > sb.max_bytes):
                    self._push_locked()
                first = log.end_offset + len(sb.values)
                # counted by the space governor, or refused here (send_buffer.py)
                bound = sb.bound + nbytes + (BATCH_FIXED + RECORD_FIXED * n)
                if bound > sb.claim.held and nbytes <= sb.max_bytes:
                    sb.claim.ensure(bound)  # (DiskFullError: refused, nothing added)
                if nbytes <= sb.max_bytes:
                    # sb.add(values, ts, nbytes), inline
                    sb.bound = bound
                    sb.values += values
                    if ts == sb.last_ts:
                        sb.last_n += n
                    else:
                        if sb.last_n:
                            sb.runs.append((sb.last_ts, sb.last_n))
                        sb.last_ts = ts
                        sb.last_n = n
                    sb.nbytes += nbytes
                else:  # bigger than a batch: straight to the log (pending is empty)
                    log.append_batch(values, timestamps_ms=ts)
            elif n == 1:
                first = log.append(values[0], timestamp_ms=ts)
            else:  # flush="always": one batch, one write: a full disk refuses the whole send, none of it kept
                first = log.append_batch(values, timestamps_ms=ts)
            # self._tail.add(first, values, ts, None, nbytes), inline
            tl = self._tail
            tail = tl.entries
            if not tail:
                tl.base = tl.end = first
            if tl.end == first and tl.nbytes < send_buffer.TAIL_BYTES:
                tail.append((first, tuple(values), ts, None, nbytes))  # tuples: see Tail
                tl.end = first + n
                tl.nbytes += nbytes
            m = self._maint
            m.sent_n += n
            m.sent_b += nbytes
            if self._waiting:
                self._cond.notify(n)
        if self._sync:
            log.flush()
        lo = first & 255
        if lo + n <= 256:  # ids of one block of 256 offsets: its prefix is cached
            blk, pre = self._id_block
            if blk != first >> 8:
                blk = first >> 8
                pre = f"{self._id_prefix}{blk + (self._id_base >> 8):010x}"
                self._id_block = (blk, pre)  # one store: consistent for other threads
            return list(map(pre.__add__, HEX2[lo:lo + n]))
        return message_ids(self._id_prefix, self._id_base, first, n)

    def _send_prepared(self, preps: list) -> list[tuple[str, int]]:
        log = self._log
        with self._lock:
            if self._closed:
                raise LogClosedError(f"queue {self.name} is closed")
            now = self._now_ms()
            values = [p.value for p in preps]
            headers = [p.headers for p in preps] if any(p.headers for p in preps) else None
            first = self._append_locked(values, headers, now)
            pfx = self._id_prefix
            base = self._id_base
            out = []
            lt = self._leases
            for k, p in enumerate(preps):
                o = first + k
                out.append((f"{pfx}{o + base:012x}", o))
                if p.delay_ms:
                    lt.delay(o, now + p.delay_ms)
            if self._waiting:
                self._cond.notify(len(preps))
        if self._sync:
            log.flush()
        return out

    def _append_locked(self, values: list, headers: list | None, ts: int) -> int:
        if (headers is not None and self._fair is None
                and any(group_id(h) is not None for h in headers if h)):
            turn_fair(self)  # the first message group id: a fair queue from now on
        first = Queue._append_locked(self, values, headers, ts)
        self._tail.add(first, values, ts, headers, sum(map(len, values)))
        return first

    def _accepted_locked(self, first: int, values: list, headers: list, now: int) -> None:
        """Messages moved in are fresh messages like any other: nothing to track."""

    # ============================================================ receiving

    def _fire_timers(self, now: int) -> None:
        push = heapq.heappush
        avail = self._avail
        due = self._leases.fire_due(now)
        for o, _ in due:
            push(avail, o)
        if self._fair is not None:
            self._fair.released([o for o, st in due if st == INFLIGHT])

    def _make_available_locked(self, o: int, e: Lease) -> None:
        e.state = AVAILABLE
        self._leases.n_available += 1
        heapq.heappush(self._avail, o)

    def _take(self, n: int, vis: int, now: int, dlq) -> tuple[list, list]:
        """Standard queue: lease up to n visible messages, oldest (lowest offset)
        first. Returns (messages, moves): moves are messages past
        max_receive_count, marked MOVING, for the caller to move to the DLQ."""
        lt = self._leases
        if lt.timers and lt.timers[0][0] <= now:
            self._fire_timers(now)
        if lt.n_inflight >= MAX_INFLIGHT:
            raise OverLimit(
                f"Too many messages in flight on queue {self.name} (limit {MAX_INFLIGHT}); "
                "delete messages or let their visibility timeout end."
            )
        fair = self._fair
        if fair is not None and (fair.near or fair.parked_of):
            return take_fair(self, n, vis, now, dlq)  # a tenant is or may turn noisy (fair.py)
        out: list = []
        moves: list = []
        flat: list = []
        dels: list = []
        live = lt.live
        until = now + vis * 1000
        expire_before = now - self._ret_ms
        codec = lt.codec
        run_tags = codec.run_tags
        hpack = HANDLE_WORDS.pack
        issued = lt.issued
        if len(issued) > 4 * lt.n_inflight + 65536:
            issued.clear()  # stale handles (leases that ended): decoded by MAC instead
        timers = lt.timers
        push = heapq.heappush
        mrc = self.config.max_receive_count if dlq is not None else None
        nonce = lt.nonce
        pfx = self._id_key
        new_message = Message.__new__
        append = out.append
        cursor = self._cursor

        # 1. messages received before (or delayed) and visible again, below the cursor
        while self._avail and len(out) < n:
            t = self._pop_visible_again(cursor, expire_before, dels)
            if t is None:
                break
            o, r, e = t
            if mrc is not None and e.count >= mrc:
                e.state = MOVING
                moves.append((o, r, e))
                continue
            nonce += 1
            handle = lt.lease_again(o, e, nonce, until, now, flat)
            out.append(self._message(o, r.value, r.timestamp_ms, r.headers, handle, e.count, e.first))

        # 2. from the cursor on: fresh messages (and any tracked ones met on the way)
        log = self._log
        ahead = self._ahead
        nfresh = 0
        runs: list = []  # (offset, nonce, n, until, received) per run of fresh messages
        tl = self._tail
        tail = tl.entries
        end = log.end_offset + len(self._sends.values)  # self._end_offset(), inline
        while len(out) < n and cursor < end:
            k = n - len(out)
            tb = tl.base
            if tail and cursor >= tb:
                # sent in this process: take from the in-memory tail (one entry
                # per send call), not from the log
                if cursor > tb:  # the cursor moved past some (deleted before received)
                    while tail and tail[0][0] + len(tail[0][1]) <= cursor:
                        tl.nbytes -= tail.popleft()[4]
                    tb = tl.base = cursor
                    if not tail:
                        continue
                f0, vals, ts, hdrs, nb = tail[0]
                i = tb - f0
                take = len(vals) - i
                if take <= k:  # all that is left of this send
                    tail.popleft()
                    tl.nbytes -= nb
                    if i:
                        vals = vals[i:]
                        if hdrs is not None:
                            hdrs = hdrs[i:]
                else:
                    take = k
                    vals = vals[i:i + k]
                    if hdrs is not None:
                        hdrs = hdrs[i:i + k]
                tl.base = o = tb + take
                o0 = tb
                if (hdrs is None and not ahead and ts > expire_before
                        and (not live or not any(map(live.__contains__, range(o0, o))))):
                    # Hot path: fresh plain messages, none tracked, none expired.
                    # One timer entry and one run of lease entries for all of them.
                    n0 = nonce + 1
                    # the run's receipt tags in one call; a handle is then one pack
                    tags, t = run_tags(o0, n0, take)
                    o = o0
                    for value in vals:
                        nonce += 1
                        # make_lease(nonce, until, 1, now, now, INFLIGHT), inline
                        e = Lease()
                        e.nonce = nonce
                        e.until = until
                        e.count = 1
                        e.received = e.first = now
                        e.state = INFLIGHT
                        live[o] = e
                        handle = hpack(o, nonce, tags[t]).hex()
                        t += 1
                        issued[handle] = (o, nonce)
                        # Message._first_delivery, inline (the hottest loop)
                        m = new_message(Message)
                        m._pfx = pfx
                        m.body = value
                        m.receipt_handle = handle
                        m.sent_timestamp_ms = ts
                        m.first_receive_timestamp_ms = now
                        m.offset = o
                        append(m)
                        o += 1
                    push(timers, (until, o0, n0, take))
                    runs += (o0, n0, take, until, now)
                    nfresh += take
                    cursor = o
                    continue
                recs = list(zip(range(o0, o0 + take), vals, repeat(ts),
                                hdrs if hdrs is not None else repeat(None)))
            else:
                if self._sends.values:
                    self._push_locked()
                recs = [(r.offset, r.value, r.timestamp_ms, r.headers)
                        for r in log.read(cursor, max_records=k)]
                if not recs:
                    break
            for o, value, ts, h in recs:
                cursor = o + 1
                e = live.get(o)
                if e is not None:
                    # delayed at send, or leased before a restart: deliver only if
                    # visible now (it is also in the avail heap; that entry goes stale)
                    if e.state != AVAILABLE:
                        continue
                    lt.n_available -= 1
                    if (sent_at(ts, h) if h else ts) <= expire_before:
                        del live[o]
                        dels.append(o)
                        continue
                    if mrc is not None and e.count >= mrc:
                        e.state = MOVING
                        moves.append((o, Record(o, ts, None, value, h or ()), e))
                        continue
                    nonce += 1
                    handle = lt.lease_again(o, e, nonce, until, now, flat)
                    out.append(self._message(o, value, ts, h or (), handle, e.count, e.first))
                    continue
                if ahead and o in ahead:
                    ahead.discard(o)
                    continue
                if h:
                    st = receive_state(ts, h, now, expire_before)
                    if st:
                        if st > 0:
                            lt.delay(o, st)
                        else:
                            dels.append(o)
                        continue
                elif ts <= expire_before:  # receive_state of a plain record, inline
                    dels.append(o)
                    continue
                nonce += 1
                nfresh += 1
                live[o] = make_lease(nonce, until, 1, now, now, INFLIGHT)
                push(timers, (until, o, nonce))
                flat += (o, nonce, until, now, now, 1)
                handle = codec.encode(o, nonce)
                issued[handle] = (o, nonce)
                if h:
                    out.append(self._message(o, value, ts, h, handle, 1, now))
                else:
                    out.append(Message._first_delivery(pfx, o, value, ts, handle, now))
            if len(out) >= n:
                break
        self._cursor = cursor
        lt.nonce = nonce
        lt.n_inflight += nfresh
        st = self._state
        if runs:
            st.append(encode_runs(runs, len(runs) // 5))
        if flat or dels:
            self._log_ops(flat, dels, now)
        elif st.grown > st.compact_at:
            self._maint.compact_locked(now, False)
        if fair is not None:  # a fair queue, no tenant near noisy: count tenants in flight
            for m in out:
                if m.group_id is not None:
                    fair.leased(m.offset, m.group_id)
        return out, moves


    # ============================================================ deleting

    def delete_batch(self, receipt_handles: Iterable[str]) -> None:
        """Delete up to 10 messages. Every handle is checked first: a malformed or
        forged one raises ReceiptHandleIsInvalid and nothing is deleted.
        (``delete_batch_entries`` gives SQS's per-entry results instead.)
        Hot path: ``_delete_one_locked``'s rules, inlined (module doc)."""
        handles = list(receipt_handles)
        if not 0 < len(handles) <= MAX_BATCH_ENTRIES:  # check_batch_size, inline
            check_batch_size(len(handles))
        lt = self._leases
        # Handles this process issued need no MAC check; taking them out of the
        # cache now is harmless (a handle not found is checked by its MAC).
        try:
            pairs = list(map(lt.issued.pop, handles, repeat(None, len(handles))))
        except TypeError:  # an unhashable "handle"
            pairs = [None] * len(handles)
        if None in pairs:
            dec = lt.decode_mac
            pairs = [dec(h) if p is None else p for h, p in zip(handles, pairs)]
        with self._lock:
            if self._closed:
                raise LogClosedError(f"queue {self.name} is closed")
            self._state.room_for(DELETE_ROOM * len(pairs), False)  # (the floor: lease_state.py)
            live = lt.live
            pop = live.pop
            dels = self._dels
            inflight = 0
            for o, _nonce in pairs:
                e = pop(o, None)
                if e is None:
                    if o >= self._cursor and self._untracked_locked(o):
                        dels.append(o)  # its lease record lost in a crash: still deleted
                    continue  # deleted before: success
                st = e.state
                if st == INFLIGHT:  # under this delivery or a later one
                    inflight += 1
                    dels.append(o)
                    continue
                if st == MOVING:
                    live[o] = e  # being moved: no-op
                    continue
                if st == AVAILABLE:
                    lt.n_available -= 1
                else:
                    lt.n_delayed -= 1
                dels.append(o)
            lt.n_inflight -= inflight
            if self._dels:
                self._flush_dels_locked()
        if self._sync:
            self._state.flush()
        if self._low >= self._maint.reclaim_next:
            self._maint.maybe_reclaim()

    def _delete_one_locked(self, o: int, nonce: int, handle) -> QueueError | None:
        lt = self._leases
        if handle.__class__ is str:
            lt.issued.pop(handle, None)
        e = lt.live.get(o)
        if e is None:
            if self._untracked_locked(o):
                self._dels.append(o)  # its lease record lost in a crash: still deleted
            return None  # already deleted: success
        if e.state == MOVING:
            return None  # being moved: no-op
        lt.forget(o, e)  # any delivery's handle deletes the message
        self._dels.append(o)
        return None

    def _remove_locked(self, o: int, e: Lease | None) -> None:
        """Forget message o (its delete record is written by the caller)."""
        if e is not None:
            self._leases.forget(o, e)

    def _untracked_locked(self, o: int) -> bool:
        """Message o exists and has no lease: fresh (never received, or its lease
        record was lost in a crash; a valid handle for it is then of the latter)."""
        return self._cursor <= o < self._end_offset() and o not in self._ahead

    def _deleted_locked(self, dels: list) -> None:
        if self._fair is not None:
            self._fair.released(dels)
        c = self._cursor
        if max(dels) >= c:
            for o in dels:
                if o >= c:
                    self._ahead.add(o)
        if self._leases.live or self._ahead:
            self._advance_low()
        elif self._low < c:  # _advance_low when nothing is tracked
            self._low = c

    def _advance_low(self) -> None:
        low = self._low
        c = self._cursor
        live = self._leases.live
        if not live:
            low = max(low, c)
        while low < c and low not in live:
            low += 1
        if low == c and self._ahead:
            ahead = self._ahead
            end = self._end_offset()
            while low < end and low in ahead and low not in live:
                ahead.discard(low)
                low += 1
            if low > self._cursor:
                self._cursor = low
        self._low = low

    def _purged_locked(self, below: int) -> None:
        self._ahead = {o for o in self._ahead if o >= below}
        self._cursor = max(self._cursor, below)
        self._tail.clear()
        if self._fair is not None:
            self._fair.purged()

    # ============================================================== counts

    def _fresh_count_locked(self) -> int:
        c = self._cursor
        n = self._end_offset() - c
        if n <= 0:
            return 0
        n -= sum(1 for o in self._ahead if o >= c)
        n -= sum(1 for o in self._leases.live if o >= c)
        return max(0, n)

    def _backlog_locked(self) -> int:
        lt = self._leases
        return (lt.n_inflight + lt.n_delayed + lt.n_available + self._fresh_count_locked()
                + lt.moving_count())

    def _visible_locked(self, moving: int) -> int:
        return self._leases.n_available + self._fresh_count_locked()

    # ========================================================= maintenance

    def _pop_visible_again(self, below: int, expire_before: int, dels: list):
        """The oldest message made visible again (below offset ``below``), out of
        the available count: (offset, record, lease), or None. Those met sent at
        or before ``expire_before`` are forgotten and added to ``dels``."""
        avail = self._avail
        lt = self._leases
        live = lt.live
        while avail and avail[0] < below:
            o = heapq.heappop(avail)
            e = live.get(o)
            if e is None or e.state != AVAILABLE:
                continue
            r = self._read_one(o)
            lt.n_available -= 1
            if r is None or sent_ms(r) <= expire_before:
                del live[o]
                dels.append(o)
                continue
            return o, r, e
        return None

    def _take_for_move(self, n: int, now: int) -> list:
        """Mark up to n visible messages MOVING (no lease); return (o, record, lease)."""
        self._push_locked()
        if self._fair is not None:
            self._fair.unpark_all(self._avail)  # moved oldest first, whatever their tenant
        lt = self._leases
        if lt.timers and lt.timers[0][0] <= now:
            self._fire_timers(now)
        out = []
        dels = []
        expire_before = now - self._ret_ms
        live = lt.live
        while len(out) < n:
            t = self._pop_visible_again(_NO_LIMIT, expire_before, dels)
            if t is None:
                break
            o, r, e = t
            e.state = MOVING
            out.append((o, r, e))
        log = self._log
        ahead = self._ahead
        while len(out) < n and self._cursor < log.end_offset:
            recs = log.read(self._cursor, max_records=n - len(out))
            if not recs:
                break
            for r in recs:
                o = r.offset
                self._cursor = o + 1
                if o in live:
                    continue
                if o in ahead:
                    ahead.discard(o)
                    continue
                if sent_ms(r) <= expire_before:  # a move forgets an expired message even if delayed
                    dels.append(o)
                    continue
                until = receive_state(r.timestamp_ms, r.headers, now, -1) if r.headers else 0
                if until > 0:
                    lt.delay(o, until)
                    continue
                e = live[o] = make_lease(0, 0, 0, 0, 0, MOVING)
                out.append((o, r, e))
        if dels:
            self._dels.extend(dels)
            self._flush_dels_locked()
        return out

    def _expire_locked(self, expire_before: int) -> list:
        """The fresh messages from the cursor on, and the visible-again ones, sent
        at or before ``expire_before``: forgotten; returns their offsets."""
        log = self._log
        live = self._leases.live
        ahead = self._ahead
        dels = []
        while self._cursor < log.end_offset:
            recs = log.read(self._cursor, max_records=1000)
            stop = False
            for r in recs:
                o = r.offset
                if o in live or o in ahead:
                    ahead.discard(o)
                    self._cursor = o + 1
                    continue
                if sent_ms(r) > expire_before:
                    stop = True
                    break
                dels.append(o)
                self._cursor = o + 1
            if stop or not recs:
                break
        for o, e in list(live.items()):
            if e.state == AVAILABLE:
                r = self._read_one(o)
                if r is None or sent_ms(r) <= expire_before:
                    self._remove_locked(o, e)
                    dels.append(o)
        return dels

    def _pending_offsets_locked(self, start: int, n: int) -> list[int]:
        """Peek (peek.py): the n lowest pending offsets at or after ``start``: the
        tracked ones below the cursor, then those from the cursor on not deleted ahead."""
        c = self._cursor
        live = self._leases.live
        out = smallest((o for o in live if o < c), start, n)
        ahead = self._ahead
        o = max(c, start, self._log.start_offset)
        end = self._end_offset()
        while o < end and len(out) < 2 * n:
            if o not in ahead:
                out.append(o)
            o += 1
        return sorted(out)[:n]

    def _reclaim_target(self) -> int:
        return self._low

    def _snapshot_view(self) -> tuple[int, Iterable[int]]:
        return self._cursor, self._ahead
