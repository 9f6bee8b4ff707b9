"""The public ``Queue``: one SQS-style queue, its lock, and the operations every
queue type shares (docs/sqs.md, docs/ARCHITECTURE.md).

A queue is a message log plus durable lease state. Storage (``DATA/queues/{name}/``):
``queue.meta`` and ``queue.json`` (config_files.py), ``messages/`` (a vqs.storage.Log: one
record per message, body = value, metadata in record headers: message.py) and
``state/`` (vqs.broker.queue.lease_state: the lease table's changes, leases.py).

``opening.open_queue`` reads the configuration and makes a ``StandardQueue``
(standard.py) or a ``FifoQueue`` (fifo.py): the receive strategy, the delete
rules and the FIFO bookkeeping are chosen once, by class, so no hot path asks
which type it serves. Parts that own their state are objects the queue holds:
``_settings`` (settings.py: the configuration, the identity, their files;
the hot paths read the queue's copies, refreshed by ``_configured``),
``_leases`` (leases.py, with its receipt codec), ``_state`` (lease_state.py),
``_sends`` (send_buffer.py), ``_mover`` (redrive.py: moves between queues,
their intents), ``_maint`` (maintenance.py: purge, expire, reclaim, compact,
their bookkeeping); peek.py reads pending messages for ``peek``, and
batch_entries.py runs the batch actions with per-entry results (functions
over the queue, no state of their own). No mixins: each part owns its
attributes; the queue types (standard.py, fifo.py) subclass ``Queue`` and hold
the receive strategy's structures. Everything that changes
queue state runs under ``self._lock``; fsyncs (``flush="always"``) run after
it is released: concurrent callers share them.

Message states (in memory, rebuilt at open from the snapshot + state log +
message log, recovery.py): fresh (in the log, never received; standard queues
keep no per-message state for these: everything at or past ``cursor`` is
fresh unless tracked or in ``ahead``), the lease states of leases.py, and
deleted (ack, purge, DLQ move, retention); the lowest offset not deleted is
``low``; whole segments below it are deleted from disk (maintenance.py).

Durability (the queue's ``flush`` setting, default ``interval``):

* ``always``: ``send`` returns after the message is fsynced; ``receive``,
  ``delete``, ``change_visibility`` return after their state record is fsynced
  (concurrent callers share fsyncs). A crash (kill -9, power loss) loses no
  acknowledged send or delete, and a leased message never comes back before its
  lease ends.
* ``interval``: sends and state records are buffered (in the queue, handed to
  the logs in batches; standard queues' plain sends too: send_buffer.py) and
  written and fsynced every ``flush_interval_ms`` (100 ms) by a background
  thread; a crash (even a process crash) can lose that last interval: sends
  (lost), deletes (the message is delivered again), leases (the message may
  come back early). This is what makes a send/receive/delete cycle cost
  microseconds, not an fsync.
* ``never``: written when a log's batch buffer fills, and at close.

Moves between queues (dead-letter moves, redrives: redrive.py) are exactly
once: the source fsyncs a move intent, the target appends and fsyncs, the
source deletes; an interrupted move is found in the target and finished.

Receipt handles (SQS's rules; docs/sqs.md states them in full). A handle names a
message and one delivery; its MAC proves this queue issued it (receipt.py); receipt
epochs (leases.py) mark a crash-lost message's handles as a deleted message's.
Standard queues: any handle ever issued deletes the message, or changes its lease
while in flight (no-op when not; deleted: ``MessageNotAvailable``). FIFO queues take
only the current unexpired delivery's (else ``ReceiptHandleExpired`` on delete,
``MessageNotInflight`` on change). Forged or foreign: ``ReceiptHandleIsInvalid``.

This module is over 500 lines: the operations every queue type shares hold the
one queue lock and its invariants, ``close`` must release both logs whatever fails,
and the facade's public methods that delegate to its parts are listed here.
"""

from __future__ import annotations

import heapq
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable

from ...disk import Claim
from ...errors import (
    DiskFullError,
    InvalidParameterValue,
    LogClosedError,
    LogFailedError,
    MessageNotAvailable,
    MessageNotInflight,
    OffsetOutOfRange,
    QueueError,
)
from ...storage import Flusher, Log
from . import batch_entries
from .config import DEFAULT_ARN_PREFIX, MAX_VISIBILITY_S
from .config_files import StoredQueue
from .lease_records import DELETE_ROOM, RECEIVE_ROOM, VISIBILITY_ROOM, encode_deletes, encode_leases
from .lease_state import LeaseStateStore
from .leases import INFLIGHT, LeaseTable
from .maintenance import Maintenance
from .message import Message
from .peek import PeekedMessage, check_peek, read_pending
from .receipt import ReceiptCodec
from .recovery import recover_leases, start_nonces, was_closed_cleanly, write_epoch_record
from .redrive import Mover
from .send_buffer import SendBuffer
from .settings import QueueSettings
from .validate import (
    check_attempt_id,
    check_batch,
    check_batch_size,
    check_receive,
    check_visibility,
    prepare,
    prepare_entry,
)


def _now_ms_from(clock: Callable[[], float]) -> Callable[[], int]:
    if clock is time.time:
        ns = time.time_ns
        return lambda: ns() // 1_000_000
    return lambda: int(clock() * 1000)


logger = logging.getLogger("vqs.broker.queue")

class Queue:
    """One SQS-style queue (see module doc). Made by ``QueueRegistry``, which
    opens it with ``opening.open_queue``; the constructor is that of the queue's type."""

    _fifo = False  # the class says (StandardQueue, FifoQueue)
    _fair = None  # a standard queue's tenants once it saw a message group id (fair.py)

    def __init__(self, path: str, name: str, stored: StoredQueue, *, clock: Callable[[], float],
                 resolver: Callable[[str], Queue | None] | None, lister: Callable[[], list] | None):
        """Open the logs and recover (``stored`` as read by ``config_files.read_files``).
        Subclasses make their own structures first, then call this."""
        if type(self) is Queue:
            raise TypeError("Queue is abstract: use opening.open_queue (or QueueRegistry)")
        self.name = name
        self.path = path
        self._clock = clock
        self._now_ms = _now_ms_from(clock)
        self._resolver = resolver or (lambda n: None)
        self._lister = lister or (list)
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._waiting = 0
        self._closed = False
        self._settings = settings = QueueSettings(path, name, stored)
        self._configured()
        cfg = self.config
        # the identity never changes: the hot paths' copies
        self._id_prefix, self._id_base = settings.id_prefix, settings.id_base
        self._id_key = (settings.id_prefix, settings.id_base)  # what a Message needs to name itself
        self._sync = cfg.flush == "always"
        opts = cfg.log_options()
        messages = os.path.join(path, "messages")
        clean = was_closed_cleanly(messages)
        if self._sync:
            # Appends are buffered under the queue lock; the caller fsyncs after
            # releasing it (log.flush), so concurrent callers share fsyncs.
            opts["flush"] = "interval"
        self._maint = maint = Maintenance(self)  # purge, expire, reclaim, compact (maintenance.py)
        self._log = Log.open(messages, **opts)
        self._log.on_disk_short = maint.disk_short  # reclaim once drained (maintenance.py)
        # pending plain sends (standard queues under a relaxed flush policy only
        # add to it; it stays empty otherwise)
        self._sends = SendBuffer(cfg.batch_max_records, cfg.batch_max_bytes,
                                 Claim(messages, cfg.min_free_bytes))
        self._leases = LeaseTable(ReceiptCodec(settings.secret))
        self._epoch_due = False  # a receipt epoch not yet durable (an open on a full disk)
        self._dels: list = []  # offsets deleted under the lock, their record not yet written
        self._mover = Mover(self)  # moves to and from other queues, their intents (redrive.py)
        self._id_block = (-1, "")  # (offset >> 8, message-id prefix of those offsets)
        try:
            self._state = LeaseStateStore(
                os.path.join(path, "state"), flush=opts["flush"],
                flush_interval_ms=cfg.flush_interval_ms, recovery=cfg.recovery,
                buffered=not self._sync, min_free_bytes=cfg.min_free_bytes,
            )
        except BaseException:
            self._log.close()
            raise
        try:
            self._recover(clean)
        except BaseException:
            self._state.close()
            self._log.close()
            raise
        maint.reclaim()  # restarted drained on a full disk: the consumed segment goes
        if cfg.flush == "interval":
            Flusher.shared().register(self, cfg.flush_interval_ms / 1000)

    def _recover(self, clean: bool) -> None:
        now = self._now_ms()
        log = self._log
        state = self._state
        st = state.recover()
        low, cursor, ahead, dirty = recover_leases(st, self._leases, log.start_offset,
                                                   log.end_offset, now)
        live = self._leases.live
        self._mover.intents = {o: m for o, m in st.moving.items() if o in live}
        if start_nonces(st, state, self._leases, log.end_offset, low, clean):
            dirty = True  # a new receipt epoch: durable (the snapshot below) before any handle
        self._opened_clean = clean
        self._low = low
        self._maint.start(low)
        self._recovered(cursor, ahead, now)
        if dirty:
            try:
                self._maint.compact_locked(now)
            except DiskFullError:
                # An open after a crash on a full disk: the state log (a control write)
                # takes the epoch instead, durable before any handle; the snapshot waits.
                try:
                    write_epoch_record(state, self._leases, log.end_offset, st.max_nonce)
                except DiskFullError as e:
                    # Not even that (the disk full to the last block): open all the same. The epoch holds in memory; it must be
                    # durable before a message reuses an offset at or past log.end_offset
                    # (a later crash would otherwise forget it), so sends wait for it
                    # (_write_epoch_locked). Handles of the messages below are safe.
                    logger.warning("queue %s: opened after a crash without writing its lease-state "
                                   "snapshot or receipt epoch (%s); sends wait until it is written",
                                   self.name, e)
                    self._epoch_due = True
                state.snapshot_waits()  # the periodic snapshot tries again

    # ======================================================= settings (settings.py)

    def _configured(self) -> None:
        """Refresh the copies of the settings the hot paths read (after a change)."""
        self.config = cfg = self._settings.config
        self._ret_ms = cfg.retention_seconds * 1000
        self._vis_default = cfg.visibility_timeout
        self._delay_ms = cfg.delay_seconds * 1000
        self._max_bytes = cfg.max_message_bytes

    @property
    def created_ms(self) -> int:
        return self._settings.created_ms

    @property
    def modified_ms(self) -> int:
        return self._settings.modified_ms

    def _save_files(self) -> None:
        """Write the settings files, with the counters of this moment (under the lock)."""
        self._push_locked()
        self._settings.save((self._backlog_locked(), self._low, self._log.end_offset),
                            self._fair is not None)

    def counts(self) -> dict:
        """{"visible", "in_flight", "delayed"}: SQS's approximate counts."""
        with self._lock:
            now = self._now_ms()
            lt = self._leases
            if lt.timers and lt.timers[0][0] <= now:
                self._fire_timers(now)
            moving = lt.moving_count() if len(lt.live) < 100_000 else 0
            visible = self._visible_locked(moving)
            return {"visible": max(0, visible), "in_flight": lt.n_inflight + moving,
                    "delayed": lt.n_delayed}

    def get_attributes(self, names: Iterable[str] | None = None, *,
                       arn_prefix: str = DEFAULT_ARN_PREFIX) -> dict[str, str]:
        """GetQueueAttributes: SQS attribute names -> values formatted as SQS does
        (strings). ``names`` None or containing "All" returns every attribute."""
        return self._settings.attributes(self.counts(), names, arn_prefix)

    def set_attributes(self, attrs: dict | None = None, **kw) -> None:
        """SetQueueAttributes: Python or SQS names (config.py)."""
        self._apply_changes(self._settings.attribute_changes({**(attrs or {}), **kw}))

    def tags(self) -> dict[str, str]:
        return dict(self.config.tags)

    def tag(self, tags: dict[str, str]) -> None:
        self._apply_changes(self._settings.tagged(tags))

    def untag(self, keys: Iterable[str]) -> None:
        self._apply_changes(self._settings.untagged(keys))

    def _apply_changes(self, changes: dict) -> None:
        new = self._settings.checked(changes, self._resolver)
        if new is None:
            return
        with self._lock:
            self._settings.replace(new, self._now_ms(), self._save_files)
            self._configured()
            if self._waiting:
                self._cond.notify_all()

    def _write_epoch_locked(self) -> None:
        """Sends while the receipt epoch is not durable (``_epoch_due``): write it
        now (a snapshot, else an "E" record), or refuse with DiskFullError."""
        try:
            self._maint.compact_locked(self._now_ms())
        except DiskFullError:
            self._state.write_epoch(*self._state.epochs[-1])  # (the open put it last)
        self._epoch_due = False

    # ------------------------------------------------- buffered sends, flushing

    def _end_offset(self) -> int:
        """The next offset to be written (pending sends included)."""
        return self._log.end_offset + len(self._sends.values)

    def _push_locked(self) -> None:
        """Hand the pending sends to the message log (one batch), and the
        pending state records to the state log."""
        if self._sends.values:
            self._sends.push(self._log)
        self._state.push()

    def _flush_tick(self) -> bool:
        """The interval flusher's tick (flush="interval"): hand pending sends and
        state records to their logs and fsync them; False once closed."""
        if self._mover.parked:
            self._mover.settle()  # moves whose target has fsynced them since (redrive.py)
        with self._lock:
            if self._closed:
                return False
            pushed = bool(self._sends.values) or self._state.pending
            if self._epoch_due:
                try:
                    self._write_epoch_locked()
                except DiskFullError:
                    pass  # still no space: the next tick tries again
            if pushed:
                self._push_locked()
        if pushed:
            try:
                self._log.flush()
                self._state.flush()
            except LogClosedError:
                return False
        return True

    # ============================================================== sending

    def send(self, body, delay_seconds: int | None = None, attributes: dict | None = None,
             group_id: str | None = None, dedup_id: str | None = None) -> str:
        """Send one message; return its message id (see ``send_message`` for the
        FIFO sequence number). Raises on invalid input (SQS's errors)."""
        p = prepare(self.config, body, delay_seconds, attributes, group_id, dedup_id)
        return self._send_prepared([p])[0][0]

    def send_message(self, body, delay_seconds: int | None = None, attributes: dict | None = None,
                     group_id: str | None = None, dedup_id: str | None = None, *,
                     trace_header: str | None = None) -> dict:
        """Like ``send``; returns ``{"message_id", "sequence_number"}`` (None for standard queues).
        ``trace_header``: SQS's AWSTraceHeader, stored with the message (``Message.trace_header``)."""
        p = prepare(self.config, body, delay_seconds, attributes, group_id, dedup_id, trace_header=trace_header)
        mid, off = self._send_prepared([p])[0]
        return {"message_id": mid, "sequence_number": f"{off:020d}" if self._fifo else None}

    def send_batch(self, entries: Iterable) -> list[str]:
        """Send 1-10 messages; return their ids (in order).

        An entry is a body (str/bytes) or a dict with ``body`` and optional
        ``delay_seconds``, ``attributes``, ``group_id``, ``dedup_id``, ``id``.
        Every entry is validated first: an invalid one raises and nothing is sent.
        (``send_batch_entries`` gives SQS's per-entry results instead.)
        """
        entries = list(entries)
        check_batch_size(len(entries))
        return self._send_entries(entries)

    def _send_entries(self, entries: list) -> list[str]:
        cfg = self.config
        preps = [prepare_entry(cfg, e) for e in entries]
        check_batch(preps)
        return [mid for mid, _ in self._send_prepared(preps)]

    def _append_locked(self, values: list, headers: list | None, ts: int) -> int:
        """Append (buffered, as the log's flush policy says); return the first offset."""
        if self._epoch_due:
            self._write_epoch_locked()
        if self._sends.values:
            self._push_locked()  # keep the order of offsets
        n = len(values)
        if self._sync and n > 1:
            # flush="always": one batch, one write (a full disk refuses the whole send, none of
            # it kept); its fsync follows anyway. Under interval the records join the log's
            # buffer (a write per send would cost ~40% of the rate of sends with attributes),
            # so a buffer written as it fills can keep the first part of a refused send.
            first = self._log.append_batch(values, headers=headers, timestamps_ms=ts)
        else:
            ap = self._log.append
            if headers is None:
                first = ap(values[0], timestamp_ms=ts)
                for i in range(1, n):
                    ap(values[i], timestamp_ms=ts)
            else:
                first = ap(values[0], headers=headers[0], timestamp_ms=ts)
                for i in range(1, n):
                    ap(values[i], headers=headers[i], timestamp_ms=ts)
        m = self._maint
        m.sent_n += n
        m.sent_b += sum(map(len, values))
        return first

    def _message_id_at(self, o: int) -> str:
        return f"{self._id_prefix}{o + self._id_base:012x}"

    def _read_one(self, o: int):
        """The record at offset o, or None if it is gone (below the log start, or
        a gap left by recovery="skip"); other read errors propagate."""
        if self._sends.values:
            self._push_locked()
        try:
            recs = self._log.read(o, max_records=1)
        except OffsetOutOfRange:
            return None
        if not recs or recs[0].offset != o:
            return None
        return recs[0]

    def _message(self, o: int, value, ts: int, headers, handle: str, count: int, first: int) -> Message:
        return Message._from_record(self._id_key, self._fifo, o, value, ts, headers, handle,
                                    count, first)

    # ============================================================ receiving

    def receive(self, max_messages: int = 1, wait_seconds: float | None = None,
                visibility_timeout: int | None = None, attempt_id: str | None = None) -> list[Message]:
        """Receive up to ``max_messages`` (1-10) visible messages, leasing them
        for ``visibility_timeout`` seconds (default: the queue's). With
        ``wait_seconds`` (0-20; default the queue's ReceiveMessageWaitTimeSeconds)
        waits until at least one message is available (long poll, woken by sends
        and by leases or delays ending). Returns [] when none came.

        FIFO queues: ``attempt_id`` (SQS ReceiveRequestAttemptId) makes a retry
        safe: within 5 minutes, a receive with the same id whose messages are all
        still in flight under the leases it made returns the same messages and
        receipt handles again, with their visibility timeout restarted."""
        if (max_messages.__class__ is int and 1 <= max_messages <= 10 and wait_seconds is None
                and visibility_timeout is None):  # the common call: check_receive, inline
            wait = self.config.receive_wait_seconds
            vis = self._vis_default
        else:
            wait, vis = check_receive(max_messages, wait_seconds, visibility_timeout,
                                      self.config.receive_wait_seconds, self._vis_default)
        if attempt_id is not None:
            if not self._fifo:
                attempt_id = None  # SQS ignores it on standard queues
            else:
                check_attempt_id(attempt_id)
                again = self._retry_attempt(attempt_id, vis)
                if again is not None:
                    return again
        dlq = None
        if self.config.dead_letter_queue is not None:
            dlq = self._resolver(self.config.dead_letter_queue)
            if dlq is self:
                dlq = None  # SQS accepts a queue as its own DLQ; moving to itself is a no-op
        deadline = None
        # Messages past max_receive_count that the DLQ refused (a full disk): they
        # stay here, and this receive does not return them (SQS never delivers a
        # message past its maxReceiveCount: a poison message must not reach a
        # consumer again) nor raises (a full queue drains on a full disk); they
        # turn visible again, counted, when the call ends, so the next receive
        # tries the move again.
        refused = None
        try:
            while True:
                with self._lock:
                    if self._closed:
                        if deadline is not None:
                            return []  # closed while we waited
                        raise LogClosedError(f"queue {self.name} is closed")
                    # the lease records this take appends have space before it leases
                    # (a full disk refuses the receive with nothing leased)
                    try:
                        self._state.room_for(RECEIVE_ROOM * max_messages)
                    except DiskFullError:
                        self._maint.room_after_compact_locked(RECEIVE_ROOM * max_messages)
                    now = self._now_ms()
                    msgs, moves = self._take(max_messages, vis, now, dlq)
                    if msgs:
                        self._leases.tidy()  # the timers of deleted messages (leases.py)
                    if not msgs and not moves:
                        if wait <= 0:
                            return msgs
                        mono = time.monotonic()
                        if deadline is None:
                            deadline = mono + wait
                        left = deadline - mono
                        if left <= 0:
                            return msgs
                        timers = self._leases.timers
                        if timers:
                            left = min(left, max(0.001, (timers[0][0] - now) / 1000))
                        self._waiting += 1
                        try:
                            self._cond.wait(left)
                        finally:
                            self._waiting -= 1
                        continue
                if self._sync:
                    self._state.flush()
                if moves:
                    stay = self._mover.finish(moves, dlq)
                    if stay:
                        refused = stay if refused is None else refused + stay
                    if not msgs:
                        continue
                if attempt_id is not None and msgs:
                    self._remember_attempt(attempt_id, msgs)
                return msgs
        finally:
            if refused:
                with self._lock:
                    self._mover.failed_locked(refused)

    def _log_ops(self, flat: list, dels: list, now: int) -> None:
        """Write the lease records ``flat`` and the deletes ``dels`` made by a receive."""
        st = self._state
        if flat:
            st.append(encode_leases(flat, len(flat) // 6))
        if dels:
            st.append(encode_deletes(dels))
            self._deleted_locked(dels)
        if st.grown > st.compact_at:
            self._maint.compact_locked(now, False)

    def _flush_dels_locked(self) -> None:
        """Write the delete record of ``self._dels`` (offsets already forgotten)."""
        dels = self._dels
        self._dels = []
        st = self._state
        st.append(encode_deletes(dels))
        self._deleted_locked(dels)
        if st.grown > st.compact_at:
            self._maint.compact_locked(self._now_ms(), False)

    # ============================================================ deleting

    def delete(self, receipt_handle: str) -> None:
        """Delete (acknowledge) a received message (stale-handle rules: module doc)."""
        o, nonce = self._leases.decode(receipt_handle)
        with self._lock:
            if self._closed:
                raise LogClosedError(f"queue {self.name} is closed")
            self._state.room_for(DELETE_ROOM, False)  # (the floor is for deletes: lease_state.py)
            err = self._delete_one_locked(o, nonce, receipt_handle)
            if self._dels:
                self._flush_dels_locked()
        if self._sync:
            self._state.flush()
        if err is not None:
            raise err
        self._maint.maybe_reclaim()

    # ============================================================ visibility

    def change_visibility(self, receipt_handle: str, visibility_timeout: int) -> None:
        """Set the lease of a message in flight to end ``visibility_timeout``
        seconds from now (0: visible now). The lease can't end more than 12 hours
        after the message was received (InvalidParameterValue). Stale-handle
        rules: module doc."""
        o, nonce = self._leases.decode(receipt_handle)
        check_visibility(visibility_timeout)
        with self._lock:
            if self._closed:
                raise LogClosedError(f"queue {self.name} is closed")
            err = self._change_vis_locked(o, nonce, visibility_timeout, self._now_ms(),
                                          receipt_handle)
        if self._sync:
            self._state.flush()
        if err is not None:
            raise err

    def _change_vis_locked(self, o: int, nonce: int, seconds: int, now: int,
                           handle: str | None = None) -> QueueError | None:
        """The rules of the module doc; the error to answer, or None."""
        lt = self._leases
        e = lt.live.get(o)
        if e is None:
            if self._untracked_locked(o):
                # there, never received since a restart that lost its lease record
                return None if not self._fifo else MessageNotInflight()
            return MessageNotAvailable(handle)  # deleted (or a lost message's handle)
        if self._fifo:
            if e.nonce != nonce or e.state != INFLIGHT or e.until <= now:
                return MessageNotInflight()
        elif e.state != INFLIGHT or e.until <= now:
            return None  # standard: not in flight, nothing to change
        nonce = e.nonce  # standard: any handle of the message changes its current lease
        until = now + seconds * 1000
        if until - e.received > MAX_VISIBILITY_S * 1000:
            return InvalidParameterValue(
                f"Value {seconds} for parameter VisibilityTimeout is invalid. Reason: Total "
                f"VisibilityTimeout for the message is beyond the limit [{MAX_VISIBILITY_S} seconds]"
            )
        # a full disk refuses it here, with nothing changed (deletes keep a floor: lease_state.py)
        try:
            self._state.room_for(VISIBILITY_ROOM)
        except DiskFullError:
            self._maint.room_after_compact_locked(VISIBILITY_ROOM)
        # first: refused for space (DiskFullError), the lease is unchanged
        self._state.append(encode_leases([o, nonce, until, e.received, e.first, e.count], 1))
        e.until = until
        heapq.heappush(lt.timers, (until, o, nonce))
        lt.tidy()
        if seconds == 0:
            self._fire_timers(now)
            if self._waiting:
                self._cond.notify()
        return None

    # ============================== batch entries (batch_entries.py)

    def send_batch_entries(self, entries: list[dict]) -> dict:
        """SQS SendMessageBatch: each entry a dict with ``id`` and ``body`` (and the
        optional fields of ``send_batch``). Returns ``{"successful": [{"id",
        "message_id", "sequence_number"}], "failed": [{"id", "code",
        "sender_fault", "message"}]}``. Whole-request problems (no entries, more
        than 10, repeated or invalid ids, over 1 MiB) raise."""
        return batch_entries.send_entries(self, entries)

    def delete_batch_entries(self, entries: list[dict]) -> dict:
        """SQS DeleteMessageBatch: entries ``{"id", "receipt_handle"}``; returns
        ``{"successful": [{"id"}], "failed": [{"id", "code", "sender_fault", "message"}]}``."""
        return batch_entries.delete_entries(self, entries)

    def change_visibility_batch_entries(self, entries: list[dict]) -> dict:
        """SQS ChangeMessageVisibilityBatch: entries ``{"id", "receipt_handle",
        "visibility_timeout"}``; returns successful/failed like ``delete_batch_entries``."""
        return batch_entries.change_visibility_entries(self, entries)

    # ================================== maintenance (maintenance.py)

    def purge(self) -> None:
        """Delete every message sent before this call (in flight ones included).
        Only one purge per 60 seconds (PurgeQueueInProgress)."""
        self._maint.purge()

    def expire(self) -> int:
        """Retention: delete visible messages older than MessageRetentionPeriod now
        (receive does it as it meets them). Returns how many were deleted."""
        return self._maint.expire()

    def reclaim(self) -> int:
        """Delete the message-log segments below the lowest message not yet deleted
        (FIFO queues keep the last 5 minutes, the deduplication window). Returns
        the number of segments deleted."""
        return self._maint.reclaim()

    def compact(self) -> None:
        """Write a snapshot of the lease state and drop the state log below it."""
        with self._lock:
            if self._closed:
                return
            self._maint.compact_locked(self._now_ms())

    # ============================================== moves (redrive.py)

    def move_messages(self, destination: str | None = None, *, max_messages: int | None = None,
                      max_per_second: float | None = None, cancel: threading.Event | None = None,
                      progress: Callable[[int], None] | None = None) -> int:
        """Redrive: move visible messages out of this (dead-letter) queue to
        ``destination``, or back to the queue each came from when None. Returns
        how many moved. Messages with no known source (and no destination) stay."""
        return self._mover.redrive(destination, max_messages=max_messages,
                                   max_per_second=max_per_second, cancel=cancel, progress=progress)

    def dead_letter_source_queues(self) -> list[str]:
        """Names of the queues whose RedrivePolicy targets this queue."""
        return sorted(q.name for q in self._lister()
                      if q is not self and q.config.dead_letter_queue == self.name)

    # ================================================================ peek

    def peek(self, max_messages: int = 10, from_offset: int = 0) -> list[PeekedMessage]:
        """Up to ``max_messages`` (1-100) pending messages at or after ``from_offset``,
        oldest first, without receiving them (peek.py)."""
        check_peek(max_messages)
        with self._lock:
            if self._closed:
                raise LogClosedError(f"queue {self.name} is closed")
            self._push_locked()
            return read_pending(self._log, self._leases.live,
                                self._pending_offsets_locked(max(0, from_offset), max_messages),
                                self._id_key, self._fifo)

    def oldest_sent_ms(self) -> int | None:
        """When the oldest pending message was sent (None: the queue is empty);
        the console's "age of the oldest message" (SQS's ApproximateAgeOfOldestMessage)."""
        got = self.peek(1)
        return got[0].message.sent_timestamp_ms if got else None

    # ============================================================== closing

    def flush(self) -> None:
        """fsync the message log and the state log."""
        with self._lock:
            if not self._closed:
                self._push_locked()
        self._log.flush()
        self._state.flush()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def logs(self) -> tuple:
        """The queue's two storage logs: (message log, lease-state log)."""
        return self._log, self._state.log

    @property
    def size_bytes(self) -> int:
        """Bytes of both logs' segment files."""
        return self._log.size_bytes + self._state.log.size_bytes

    @property
    def segment_count(self) -> int:
        return self._log.segment_count + self._state.log.segment_count

    def close(self) -> None:
        """Flush, snapshot the lease state, write queue.meta, close the logs; wakes
        long polls (they return []). Idempotent. Whatever fails (a full disk),
        both logs are closed (their locks released); the first error is raised."""
        errors = []
        self._mover.settle()  # moves whose target has fsynced them since: delete them here
        with self._lock:
            if self._closed:
                return
            try:
                self._push_locked()  # acknowledged sends: failing to write them is an error
            except BaseException as e:
                errors.append(e)
            # The snapshot and queue.json/queue.meta are replaced atomically: on a full disk
            # the old ones stay, as after a crash (the state log replays onto the old
            # snapshot; opening reads only the settings files' settings, which every change
            # already wrote), so closing on a full disk is not an error.
            for step in (lambda: self._maint.compact_locked(self._now_ms()), self._save_files):
                try:
                    step()
                except DiskFullError as e:
                    logger.warning("queue %s: closed without refreshing its snapshot or settings "
                                   "files: %s", self.name, e)
                except OSError as e:
                    # An I/O error (EIO): the old files stay too (replaced atomically), but
                    # the disk is failing; said as a failed log says it, never a raw OSError
                    errors.append(LogFailedError(
                        f"queue {self.name}: writing its snapshot or settings files at close failed: {e}",
                        path=e.filename or self._state.path))
                except BaseException as e:
                    errors.append(e)
            self._closed = True
            self._cond.notify_all()
        for step in (self._log.flush, self._maint.reclaim_at_close, self._state.close, self._log.close):
            try:
                step()
            except BaseException as e:
                errors.append(e)
        if errors:
            raise errors[0]

    def __repr__(self) -> str:
        return f"Queue({self.name!r}, fifo={self._fifo}, low={self._low}, end={self._end_offset()})"
