"""The FIFO queue: exactly-once processing within the deduplication window,
strict order within a message group.

Structures (under the queue lock), besides the lease table (leases.py):

* ``_groups``: group id -> deque of the offsets of its messages not deleted,
  in order; ``_group_of``: offset -> group id, for every message not deleted
  (FIFO keeps no cursor: every pending message is in a group);
* ``_ready``: the groups whose head (oldest message not deleted) is visible,
  in the order they became so: a deque of ``(seq, group)``, with
  ``_ready_at``: group -> the seq of its one valid entry (other entries of the
  group are stale and skipped). A group leaves it when receive takes its head;
  it joins again at the back when its head is visible again (lease over,
  ChangeMessageVisibility to 0, or the head deleted and the next one visible).
* ``_dedup``: the 5-minute deduplication window (vqs.broker.queue.dedup), rebuilt
  from the message log at open (the log keeps the window's segments:
  ``_reclaim_target``);
* ``_attempts``: ReceiveRequestAttemptId -> (expiry, messages) for safe retries.

Receive takes groups in ``_ready`` order and from each as many messages as
asked, in order from its head, up to the first one that is not visible (in
flight, delayed or moving): as SQS, a message in flight hides the messages of
its group behind it, not those before it, and a group whose head became
visible again queues behind the groups already waiting.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable

from ...errors import LogClosedError, QueueError, ReceiptHandleExpired
from .core import Queue
from .dedup import WINDOW_MS, DedupWindow
from .lease_records import DELETE_ROOM
from .leases import AVAILABLE, INFLIGHT, MAX_INFLIGHT, MOVING, Lease, make_lease
from .message import H_DEDUP, H_GROUP, H_ID, receive_state, sent_ms
from .peek import smallest
from .validate import check_batch_size


class FifoQueue(Queue):
    """A FIFO queue (see module doc)."""

    _fifo = True

    def __init__(self, path, name, stored, **kw):
        self._groups: dict[str, deque] = {}
        self._group_of: dict[int, str] = {}
        self._ready: deque = deque()
        self._ready_at: dict[str, int] = {}
        self._ready_seq = 0
        self._dedup = DedupWindow(WINDOW_MS)
        self._attempts: dict[str, tuple[int, list]] = {}
        # the deduplication scope never changes after creation: the send path's copy
        self._scope_group = stored.dedup_scope == "messageGroup"
        super().__init__(path, name, stored, **kw)

    def _recovered(self, cursor: int, ahead: set, now: int) -> None:
        """Every message not deleted is in a group deque; rebuild them (and the
        dedup window) from the message log (``cursor``/``ahead``: what the
        state says was deleted)."""
        log = self._log
        end = log.end_offset
        low = self._low
        lt = self._leases
        live = lt.live
        win_start = now - WINDOW_MS
        scope_group = self._scope_group
        dedup_from = self._settings.dedup_from
        scan_from = low
        t = log.offset_for_time(win_start) if log.end_offset > log.start_offset else None
        if t is not None:
            scan_from = min(low, t)
        scan_from = max(scan_from, log.start_offset)
        off = scan_from
        while off < end:
            recs = log.read(off, max_records=4096)
            if not recs:
                break
            for r in recs:
                o = r.offset
                h = dict(r.headers) if r.headers else {}
                if r.timestamp_ms > win_start and H_ID not in h and H_DEDUP in h and o >= dedup_from:
                    # (a message moved in from another queue carries H_ID: not a send)
                    g = h.get(H_GROUP, b"").decode()
                    d = h[H_DEDUP].decode()
                    self._dedup.add((g, d) if scope_group else d, r.timestamp_ms, o)
                if o < low:
                    continue
                deleted = o in ahead or (o < cursor and o not in live)
                if deleted:
                    continue
                g = h.get(H_GROUP, b"").decode()
                dq = self._groups.get(g)
                if dq is None:
                    dq = self._groups[g] = deque()
                dq.append(o)
                self._group_of[o] = g
                e = live.get(o)
                if e is None and h:
                    until = receive_state(r.timestamp_ms, r.headers, now, -1)
                    if until > 0:
                        lt.delay(o, until)
            off = recs[-1].offset + 1
        # FIFO keeps no cursor: every pending message is in a group.
        for _, g in sorted((dq[0], g) for g, dq in self._groups.items()):
            self._ready_if_head_visible(g)
        self._advance_low()


    # ============================================================== sending

    def _send_prepared(self, preps: list) -> list[tuple[str, int]]:
        log = self._log
        out: list = [None] * len(preps)
        dup_of: dict[int, int] = {}  # entry index -> index of the earlier entry it repeats
        with self._lock:
            if self._closed:
                raise LogClosedError(f"queue {self.name} is closed")
            now = self._now_ms()
            todo = []
            dd = self._dedup
            first_in_batch: dict = {}
            scope_group = self._scope_group
            keys = [(p.group, p.dedup_id) if scope_group else p.dedup_id for p in preps]
            for i, key in enumerate(keys):
                prev = dd.lookup(key, now)
                if prev is not None:
                    out[i] = (self._message_id_at(prev), prev)
                    continue
                j = first_in_batch.get(key)
                if j is not None:
                    dup_of[i] = j
                    continue
                first_in_batch[key] = i
                todo.append(i)
            if todo:
                values = [preps[i].value for i in todo]
                headers = [preps[i].headers for i in todo] if any(preps[i].headers for i in todo) else None
                first = self._append_locked(values, headers, now)
                pfx = self._id_prefix
                base = self._id_base
                for k, i in enumerate(todo):
                    o = first + k
                    p = preps[i]
                    out[i] = (f"{pfx}{o + base:012x}", o)
                    if p.delay_ms:
                        self._leases.delay(o, now + p.delay_ms)
                    dd.add(keys[i], now, o)
                    self._fifo_add(o, p.group)
                if self._waiting:
                    self._cond.notify(len(todo))
            for i, j in dup_of.items():
                out[i] = out[j]
        if self._sync and todo:
            log.flush()
        return out

    def _fifo_add(self, o: int, g: str) -> None:
        dq = self._groups.get(g)
        if dq is None:
            dq = self._groups[g] = deque()
        dq.append(o)
        self._group_of[o] = g
        if len(dq) == 1:
            self._ready_if_head_visible(g)

    def _ready_if_head_visible(self, g: str) -> None:
        """Queue group g at the back of ``_ready`` if its head is visible and
        it is not queued already."""
        if g in self._ready_at:
            return
        dq = self._groups.get(g)
        if not dq:
            return
        e = self._leases.live.get(dq[0])
        if e is None or e.state == AVAILABLE:
            self._ready_seq = seq = self._ready_seq + 1
            self._ready_at[g] = seq
            self._ready.append((seq, g))

    def _accepted_locked(self, first: int, values: list, headers: list, now: int) -> None:
        """Messages moved in join their groups (they are not deduplicated: a move
        is not a send)."""
        for k, h in enumerate(headers):
            g = dict(h).get(H_GROUP, b"").decode()
            self._fifo_add(first + k, g)

    # ============================================================ receiving

    def _fire_timers(self, now: int) -> None:
        group_of, groups = self._group_of, self._groups
        for o, _ in self._leases.fire_due(now):
            g = group_of.get(o)
            if g is not None and groups[g][0] == o:
                self._ready_if_head_visible(g)

    def _make_available_locked(self, o: int, e: Lease) -> None:
        e.state = AVAILABLE
        self._leases.n_available += 1
        g = self._group_of.get(o)
        if g is not None and self._groups[g][0] == o:
            self._ready_if_head_visible(g)

    def _take(self, n: int, vis: int, now: int, dlq) -> tuple[list, list]:
        """Lease up to n messages: groups in ``_ready`` order, from each the
        visible messages from its head on, in order, up to the first one that
        is not visible. Returns (messages, moves) like StandardQueue._take."""
        lt = self._leases
        if lt.timers and lt.timers[0][0] <= now:
            self._fire_timers(now)
        out: list = []
        moves: list = []
        flat: list = []
        dels: list = []
        if lt.n_inflight >= MAX_INFLIGHT:
            return out, moves  # SQS FIFO returns no messages (no error) at the limit
        live = lt.live
        until = now + vis * 1000
        expire_before = now - self._ret_ms
        mrc = self.config.max_receive_count if dlq is not None else None
        ready, ready_at = self._ready, self._ready_at
        groups = self._groups
        while ready and len(out) < n:
            seq, g = ready.popleft()
            if ready_at.get(g) != seq:
                continue  # stale
            del ready_at[g]
            dq = groups.get(g)
            if not dq:
                continue
            took = 0
            while len(out) < n and took < len(dq):
                o = dq[took]  # strict order from the head: nothing is skipped
                e = live.get(o)
                if e is not None and e.state != AVAILABLE:
                    break  # delayed or moving: the group waits
                r = self._retained_record(o, e, expire_before, dels)
                if r is None:
                    continue
                if mrc is not None and e is not None and e.count >= mrc:
                    lt.n_available -= 1
                    e.state = MOVING
                    moves.append((o, r, e))
                    break
                lt.nonce += 1
                nonce = lt.nonce
                if e is None:
                    e = live[o] = make_lease(nonce, until, 1, now, now, INFLIGHT)
                    lt.n_inflight += 1
                    heapq.heappush(lt.timers, (until, o, nonce))
                    flat += (o, nonce, until, now, now, 1)
                    handle = lt.codec.encode(o, nonce)
                    lt.issued[handle] = (o, nonce)
                else:
                    lt.n_available -= 1
                    handle = lt.lease_again(o, e, nonce, until, now, flat)
                out.append(self._message(o, r.value, r.timestamp_ms, r.headers,
                                         handle, e.count, e.first))
                took += 1
            if g in ready_at:
                # re-queued while we took from it (an expired head was dropped):
                # keep it only if its head is still visible
                e = live.get(dq[0]) if dq else None
                if e is not None and e.state != AVAILABLE:
                    del ready_at[g]
        self._log_ops(flat, dels, now)
        return out, moves

    def _retry_attempt(self, attempt_id: str, vis: int) -> list | None:
        with self._lock:
            now = self._now_ms()
            att = self._attempts
            for k in [k for k, (exp, _) in att.items() if exp <= now]:
                del att[k]
            prev = att.get(attempt_id)
            if prev is None:
                return None
            msgs = prev[1]
            lt = self._leases
            live = lt.live
            for m in msgs:
                e = live.get(m.offset)
                if (e is None or e.state != INFLIGHT or e.until <= now
                        or e.nonce != lt.decode(m.receipt_handle)[1]):
                    del att[attempt_id]
                    return None
            flat = []
            until = now + vis * 1000
            for m in msgs:
                e = live[m.offset]
                e.until = until
                heapq.heappush(lt.timers, (until, m.offset, e.nonce))
                flat += (m.offset, e.nonce, until, e.received, e.first, e.count)
            lt.tidy()
            self._log_ops(flat, [], now)
        if self._sync:
            self._state.flush()
        return list(msgs)


    def _retained_record(self, o: int, e: Lease | None, expire_before: int, dels: list):
        """The record of message ``o`` (a group's head), or None if it is gone or
        was sent at or before ``expire_before``: then it is forgotten and added
        to ``dels``."""
        r = self._read_one(o)
        if r is None or sent_ms(r) <= expire_before:
            self._remove_locked(o, e)
            dels.append(o)
            return None
        return r

    def _remember_attempt(self, attempt_id: str, msgs: list) -> None:
        with self._lock:
            self._attempts[attempt_id] = (self._now_ms() + WINDOW_MS, msgs)

    # ============================================================ deleting

    def delete_batch(self, receipt_handles: Iterable[str]) -> None:
        """Delete up to 10 messages. Every handle is checked first: a malformed or
        forged one raises ReceiptHandleIsInvalid and nothing is deleted; then the
        FIFO rules (module doc of core) apply to each, the first error is raised
        after the others were deleted. (``delete_batch_entries`` gives SQS's
        per-entry results instead.)"""
        handles = list(receipt_handles)
        check_batch_size(len(handles))
        lt = self._leases
        try:
            pairs = list(map(lt.issued.get, handles))
        except TypeError:  # an unhashable "handle"
            pairs = [None] * len(handles)
        if None in pairs:
            dec = lt.decode_mac
            pairs = [dec(h) if p is None else p for h, p in zip(handles, pairs)]
        errs = None
        with self._lock:
            if self._closed:
                raise LogClosedError(f"queue {self.name} is closed")
            self._state.room_for(DELETE_ROOM * len(pairs), False)  # (the floor: lease_state.py)
            for (o, nonce), h in zip(pairs, handles):
                err = self._delete_one_locked(o, nonce, h)
                if err is not None and errs is None:
                    errs = err
            if self._dels:
                self._flush_dels_locked()
        if self._sync:
            self._state.flush()
        if errs is not None:
            raise errs
        if self._low >= self._maint.reclaim_next:
            self._maint.maybe_reclaim()

    def _delete_one_locked(self, o: int, nonce: int, handle) -> QueueError | None:
        lt = self._leases
        if handle.__class__ is str:
            lt.issued.pop(handle, None)
        e = lt.live.get(o)
        if e is None:
            if o in self._group_of:
                # never received under this handle's delivery (state lost in a crash)
                return ReceiptHandleExpired(handle)
            return None  # already deleted: success
        if e.nonce != nonce or e.state != INFLIGHT or e.until <= self._now_ms():
            return ReceiptHandleExpired(handle)
        self._remove_locked(o, e)
        self._dels.append(o)
        return None

    def _untracked_locked(self, o: int) -> bool:
        """Message o exists and has no lease (never received, or its lease lost in a crash)."""
        return o in self._group_of and o not in self._leases.live

    def _remove_locked(self, o: int, e: Lease | None) -> None:
        """Forget message o (its delete record is written by the caller)."""
        if e is not None:
            self._leases.forget(o, e)
        g = self._group_of.pop(o, None)
        if g is not None:
            dq = self._groups[g]
            if dq and dq[0] == o:
                dq.popleft()
            else:
                try:
                    dq.remove(o)
                except ValueError:
                    pass
            if not dq:
                del self._groups[g]
                self._ready_at.pop(g, None)
            else:
                self._ready_if_head_visible(g)

    def _deleted_locked(self, dels: list) -> None:
        self._advance_low()

    def _advance_low(self) -> None:
        low = self._low
        end = self._log.end_offset
        g = self._group_of
        while low < end and low not in g:
            low += 1
        self._low = low

    def _purged_locked(self, below: int) -> None:
        """A purge also empties the deduplication window (SQS), for good: the
        window's rebuild at open starts at ``dedup_from`` (settings.py, queue.json, replaced
        atomically here, before the purge returns). Crash reasoning: before that
        write, the window comes back whole (as if the purge had not cleared it);
        after it but before the purge record reached the state log, the purge
        is undone but its window stays cleared (a send may then be accepted
        again): neither loses a message, and the purge was not acknowledged."""
        for o in [o for o in self._group_of if o < below]:
            self._remove_locked(o, None)
        self._dedup.clear()
        self._settings.dedup_from = below
        self._save_files()

    # ============================================================== counts

    def _backlog_locked(self) -> int:
        return len(self._group_of)

    def _visible_locked(self, moving: int) -> int:
        lt = self._leases
        return len(self._group_of) - lt.n_inflight - lt.n_delayed - moving

    # ========================================================= maintenance

    def _take_for_move(self, n: int, now: int) -> list:
        """Mark up to n visible messages MOVING (no lease), at most one per group
        per call (keeps group order simple); return (o, record, lease)."""
        self._push_locked()
        lt = self._leases
        if lt.timers and lt.timers[0][0] <= now:
            self._fire_timers(now)
        out = []
        dels = []
        expire_before = now - self._ret_ms
        live = lt.live
        for _g, dq in list(self._groups.items()):
            if len(out) >= n:
                break
            for o in list(dq):
                if len(out) >= n:
                    break
                e = live.get(o)
                if e is not None and e.state != AVAILABLE:
                    break
                r = self._retained_record(o, e, expire_before, dels)
                if r is None:
                    continue
                if e is None:
                    e = live[o] = make_lease(0, 0, 0, 0, 0, MOVING)
                else:
                    lt.n_available -= 1
                    e.state = MOVING
                out.append((o, r, e))
                break  # one per group per pass keeps group order simple
        if dels:
            self._dels.extend(dels)
            self._flush_dels_locked()
        return out

    def _expire_locked(self, expire_before: int) -> list:
        """The visible messages at the head of each group sent at or before
        ``expire_before``: forgotten; returns their offsets."""
        live = self._leases.live
        dels = []
        for _g, dq in list(self._groups.items()):
            for o in list(dq):
                e = live.get(o)
                if e is not None and e.state != AVAILABLE:
                    break
                if self._retained_record(o, e, expire_before, dels) is not None:
                    break
        return dels

    def _pending_offsets_locked(self, start: int, n: int) -> list[int]:
        """Peek (peek.py): every pending message of a FIFO queue is in a group."""
        return smallest(self._group_of, start, n)

    def _reclaim_target(self) -> int:
        """``low``, but never into the deduplication window (rebuilt from the log)."""
        t = self._log.offset_for_time(self._now_ms() - WINDOW_MS)
        return min(self._low, self._log.end_offset if t is None else t)

    def _snapshot_view(self) -> tuple[int, Iterable[int]]:
        # cursor == low in the snapshot; every offset in [low, end) that is in
        # no group is deleted
        g = self._group_of
        return self._low, [o for o in range(self._low, self._log.end_offset) if o not in g]
