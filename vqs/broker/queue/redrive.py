"""Moving messages between queues: dead-letter moves, redrive, message move tasks.

``Mover`` is the part of a ``Queue`` (``Queue._mover``) that moves its
messages out and takes moved messages in. It owns the move intents not yet
resolved (``intents``) and the moves its target took but could not fsync yet
(``parked``); it works under its queue's lock, on its queue's state log and
lease table.

* A dead-letter move: a receive that meets a message past the queue's
  ``max_receive_count`` marks it MOVING (no lease) and, after releasing the
  lock, appends it to the dead-letter queue (``Mover.finish``).
* A redrive (``Mover.redrive``, ``Queue.move_messages``): visible messages of a dead-letter queue go
  back to the queue each came from, or to a given destination.
* A message move task (SQS StartMessageMoveTask): a redrive on a background
  thread, with a handle, a status and a rate (move_tasks.py).

Invariants:
* a move is exactly once: each message ends up in the target once and gone
  from the source, or stays in the source, whatever fails and wherever a
  crash comes. The order (``Mover.move_to``):
  1. the source appends a move intent (state record "M": target, the
     target's log end, the offsets) and fsyncs its state log; a full disk
     refuses the move here, nothing changed;
  2. the target appends the messages one record each (its ``Mover.accept``):
     its log refuses a record it cannot cover before buffering it
     (storage/log_buffer.py), so a full disk takes the first k and not the
     rest, never a part of one; then it fsyncs them;
  3. the source deletes the k ("D" record, with its flush policy) and makes
     the rest visible again (not in the target: nothing to undo).
  Crash reasoning: before 1 is durable, the target holds none of them (its
  append comes after): they stay in the source. After 1, the intent replays
  at the next open (``Mover.intents``); before moving such a message again the
  source reads the target's log from the recorded end for its message id
  (``Mover._resolve``): found (2 reached the disk, 3 did not), the move is
  finished by the delete alone; not found, it is moved again. A refused or
  failed move leaves an intent that resolves to "not found". Where step 2's
  fsync fails (a full disk found at the write: the kernel's ENOSPC, soft) the
  target holds the messages in memory: they stay MOVING here, not deleted
  (``Mover.parked``), until it has fsynced them (``Mover.settle``: the
  next move, the interval tick, close); if the process stops first, the
  intent resolves it at the next open. Cost: one state-log fsync per move
  batch besides the target's, and a scan of the target's log records
  appended since the intent, once per interrupted move;
* a receive does not return a message past max_receive_count that could not
  be moved (a full disk, no DLQ): it stays, visible again when that receive
  ends (core.py ``receive``);
* a moved message keeps its message id (``H_ID``); moved to a dead-letter
  queue it keeps its original sent timestamp (retention counts from it, as in
  SQS) and records its source queue and receive count; redriven out, it starts
  a new retention period and a new receive count;
* a MOVING message is invisible and counted as not visible; if the move
  fails it becomes AVAILABLE again. Until an interrupted move is resolved the
  message shows in both queues' counts (it is delivered from the target only).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ...errors import LogClosedError, VQSError
from ...log_throttle import Throttle
from ...record import Record
from .lease_records import DELETE_ROOM, encode_move
from .leases import AVAILABLE, MOVING
from .message import H_COUNT, H_DELAY, H_ID, H_SENT, H_SOURCE

logger = logging.getLogger(__name__)
_refused = Throttle(logger)  # a full disk refuses every move: a line a minute per queue


class Mover:
    """One queue's moves to and from other queues (see module doc)."""

    __slots__ = ("_q", "intents", "parked")

    def __init__(self, queue):
        self._q = queue
        #: offset -> (target queue name, target's log end): move intents (state records "M")
        self.intents: dict = {}
        #: (target queue, moves) it took but could not fsync yet
        self.parked: list = []

    def finish(self, moves: list, dlq) -> list:
        """Move ``moves`` (MOVING here) to ``dlq``, each message once or not at
        all (module doc); return the ones not moved, still MOVING: the caller
        makes them visible again (``failed_locked``) once its receive ends."""
        q = self._q
        self.settle()
        if dlq is None or dlq._closed:
            _refused.warn(f"{q.name}>", "queue %s: messages past maxReceiveCount stay here "
                          "(dead-letter queue %s unavailable)", q.name, q.config.dead_letter_queue)
            return moves
        return self.move_to(dlq, moves, q.name)[1]

    def move_to(self, target, items: list, source: str | None) -> tuple[int, list]:
        """Move ``items`` (MOVING here) to queue ``target`` (``source``: this
        queue's name for a dead-letter move, None for a redrive), each once or
        not at all; return (how many are in ``target`` now, the ones that are
        not: still MOVING). The order that makes a move exactly once (module doc):
        the move intent fsynced here, the append to ``target`` and its fsync,
        then the delete record here."""
        q = self._q
        written = finished = False
        found: list = []
        offsets: list = []
        try:
            found, items = self._resolve(items)
            offsets = [o for o, _, _ in items]
            end = target._log.end_offset  # its records for these land at or past it
            rec = encode_move(target.name, end, offsets) if items else b""
            with q._lock:
                # the intent and the delete records have their space before anything moves
                q._state.room_for(len(rec) + DELETE_ROOM * (len(found) + len(items)))
            self._moved(target, found, True)  # interrupted moves that reached their target
            finished = True
            if not items:
                return len(found), []
            with q._lock:
                q._state.append(rec)
                written = True
                mm = self.intents
                for o in offsets:
                    mm[o] = (target.name, end)
                q._state.push()
            q._state.flush()  # durable before the target can hold any of them
            k, synced = target._mover.accept([(self._with_id(r), e.count) for _, r, e in items],
                                             source=source)
        except VQSError as e:
            _refused.warn(f"{q.name}>", "queue %s: messages stay here, visible again (moving them "
                          "to queue %s failed: %s)", q.name, target.name, e)
            if written:  # not in the target (a refused intent may still be replayed: looked up, not found)
                with q._lock:
                    for o in offsets:
                        self.intents.pop(o, None)
            if not finished:  # (no room: their intents stay, resolved again next time)
                return 0, found + items
            return len(found), items
        done, stay = items[:k], items[k:]
        if stay:
            with q._lock:
                for o, _, _ in stay:
                    self.intents.pop(o, None)
        self._moved(target, done, synced)
        return len(found) + k, stay

    def _resolve(self, items: list) -> tuple[list, list]:
        """Split ``items`` into (already in their target, not): the ones with a
        move intent left from before a crash or a close (``intents``) are
        looked up by message id in their target's log from where it ended then.
        Raises when a target cannot be read. The intents stay (``intents``)
        until the message is deleted here or a new intent replaces its own."""
        mm = self.intents
        if not mm:
            return [], items
        by: dict = {}
        rest = []
        for it in items:
            m = mm.get(it[0])
            if m is None:
                rest.append(it)
            else:
                by.setdefault(m, []).append(it)
        if not by:
            return [], items
        q = self._q
        found = []
        for (name, end), its in by.items():
            want = {dict(self._with_id(r).headers)[H_ID]: (o, r, e) for o, r, e in its}
            tgt = q._resolver(name)
            if tgt is not None and tgt is not q:
                log = tgt._log
                off = max(end, log.start_offset)
                while want and off < log.end_offset:
                    recs = log.read(off, max_records=1024)
                    if not recs:
                        break
                    for r in recs:
                        it = want.pop(dict(r.headers).get(H_ID) if r.headers else None, None)
                        if it is not None:
                            found.append(it)
                    off = recs[-1].offset + 1
            rest += want.values()  # not there (or its queue is gone): moved again
        return found, rest

    def _moved(self, target, done: list, synced: bool) -> None:
        """``done`` are in ``target`` now: delete them here. ``synced`` False:
        ``target`` could not fsync them yet: they stay MOVING (invisible, not
        deleted, their intent kept) until it has (``settle``)."""
        if not done:
            return
        q = self._q
        with q._lock:
            if not synced:
                self.parked.append((target, done))
                return
            self.done_locked(done)
        if q._sync:
            q._state.flush()

    def settle(self) -> None:
        """Delete the parked moves (``_moved``) whose target has fsynced them
        since. A target closed meanwhile cannot say: they stay here, MOVING,
        until this queue closes; their intents are looked up at the next move."""
        if not self.parked:
            return
        q = self._q
        with q._lock:
            parked, self.parked = self.parked, []
        for target, done in parked:
            try:
                target._log.flush()
            except VQSError:
                with q._lock:
                    self.parked.append((target, done))
                continue
            self._moved(target, done, True)

    def done_locked(self, moves: list) -> None:
        """Delete the messages of ``moves`` (now in their target) here."""
        q = self._q
        lt = q._leases
        live = lt.live
        mm = self.intents
        for o, _, e in moves:
            if live.get(o) is e and e.state == MOVING:
                e.state = AVAILABLE
                lt.n_available += 1
                q._remove_locked(o, e)
                q._dels.append(o)
                mm.pop(o, None)
        if q._dels:
            q._flush_dels_locked()

    def failed_locked(self, moves: list) -> None:
        """Make the messages of ``moves`` (not moved) visible again."""
        q = self._q
        live = q._leases.live
        for o, _, e in moves:
            if live.get(o) is e and e.state == MOVING:
                q._make_available_locked(o, e)

    def accept(self, items: list, *, source: str | None) -> tuple[int, bool]:
        """Append messages moved from another queue (DLQ move, or redrive out of a DLQ).

        items: (record, receive_count). Messages keep their id and original sent
        timestamp (retention counts from it, as SQS does for DLQs); a redriven
        message (source None) starts a new retention period.

        One append per message: the log refuses a record it cannot cover before
        buffering it (storage/log_buffer.py), so on a full disk the first k
        are taken and the rest not, never a part of one. Returns (k, synced):
        synced is whether the k are fsynced (always tried: the caller deletes
        them from their old queue next, and that delete must never be durable
        before this append is). Raises only when none was taken."""
        q = self._q
        values, headers = [], []
        for r, count in items:
            h = dict(r.headers) if r.headers else {}
            h.pop(H_DELAY, None)
            if source is not None:
                h.setdefault(H_SENT, str(r.timestamp_ms).encode())
                h[H_SOURCE] = source.encode()
                h[H_COUNT] = str(count).encode()
            else:
                h.pop(H_SENT, None)
                h.pop(H_SOURCE, None)
                h.pop(H_COUNT, None)
            values.append(r.value)
            headers.append(tuple(h.items()))
        k = 0
        with q._lock:
            if q._closed:
                raise LogClosedError(f"queue {q.name} is closed")
            now = q._now_ms()
            try:
                for v, h in zip(values, headers):
                    first = q._append_locked([v], [h], now)
                    q._accepted_locked(first, [v], [h], now)
                    k += 1
            except VQSError:
                if k == 0:
                    raise
            if q._waiting:
                q._cond.notify(k)
        try:
            q._log.flush()
        except VQSError:
            return k, False
        return k, True

    def redrive(self, destination: str | None = None, *, max_messages: int | None = None,
                max_per_second: float | None = None, cancel: threading.Event | None = None,
                progress: Callable[[int], None] | None = None) -> int:
        """``Queue.move_messages``: move visible messages out of this (dead-letter)
        queue to ``destination``, or back to the queue each came from when None.
        Returns how many moved. Messages with no known source (and no destination) stay."""
        q = self._q
        moved = 0
        while max_messages is None or moved < max_messages:
            if cancel is not None and cancel.is_set():
                break
            k = 10 if max_messages is None else min(10, max_messages - moved)
            if max_per_second:
                k = max(1, min(k, int(max_per_second)))
            with q._lock:
                if q._closed:
                    raise LogClosedError(f"queue {q.name} is closed")
                now = q._now_ms()
                batch = q._take_for_move(k, now)
            if not batch:
                break
            by_target: dict[str, list] = {}
            stuck = []
            for o, r, e in batch:
                tgt = destination
                if tgt is None:
                    src = dict(r.headers).get(H_SOURCE) if r.headers else None
                    tgt = src.decode() if src is not None else None
                t = q._resolver(tgt) if tgt is not None else None
                if t is None or t is q:
                    stuck.append((o, r, e))
                else:
                    by_target.setdefault(tgt, []).append((o, r, e))
            done = 0
            for tgt, items in by_target.items():
                n, stay = self.move_to(q._resolver(tgt), items, None)  # each message moved once or not at all
                done += n
                stuck += stay
            with q._lock:
                self.failed_locked(stuck)
            moved += done
            if progress is not None and done:
                progress(done)
            if not done:
                break
            if max_per_second:
                if cancel is not None:
                    cancel.wait(done / max_per_second)  # a stop does not wait the pause out
                else:
                    time.sleep(done / max_per_second)
        q._maint.maybe_reclaim()
        return moved

    def _with_id(self, r):
        """A copy of record r whose headers carry its message id (for moving out)."""
        h = tuple(r.headers) if r.headers else ()
        if not any(k == H_ID for k, _ in h):
            h = h + ((H_ID, self._q._message_id_at(r.offset).encode()),)
        return Record(r.offset, r.timestamp_ms, r.key, r.value, h)
