"""Maintenance of a queue: purge, retention (expire), disk reclaim, state compaction.

``Maintenance`` is the part of a ``Queue`` (``Queue._maint``) that keeps a
queue's disk use bounded. It owns the reclaim bookkeeping (where the last
reclaim stood, where the next look is due, the bytes-per-offset estimate and
the sends it is made from), the time of the last purge and the state-log end
of the last compaction a refusal tried; the state log's growth since its
snapshot is the lease-state store's (``grown``, ``compact_at``). It works
under its queue's lock, on the queue's logs and lease table; the
type-specific parts (which messages are past retention, how far the log may
be cut, what a snapshot records) are the queue type's ``_expire_locked``,
``_reclaim_target`` and ``_snapshot_view``.

Invariants:
* a purge deletes every message sent before it (in flight ones included) with
  one ``P`` state record, at most once per ``PURGE_INTERVAL_MS`` (SQS's rule);
* a message-log segment is deleted only when every offset in it is below
  ``low`` (deleted), and for FIFO queues also older than the deduplication
  window (the window is rebuilt from the log at open);
* reclaim runs once a segment's worth was consumed, and also as soon as the
  queue is drained after its message log's writes found no space (the log's
  ``on_disk_short`` sets ``drain`` and arms the check at the next delete, so
  the delete hot paths test only ``reclaim_next``): the log then rolls and
  deletes even a small active segment while space is short, so a queue on a
  filesystem smaller than a segment drains its way out of a full disk (a
  queue reopened drained on a full disk: the open's reclaim, and every later
  one, let the log try, vqs.storage.log_space);
* the state log is compacted (a snapshot of the whole lease table written
  atomically, then the older state-log segments deleted) under the queue lock,
  once it grew past the store's ``compact_at`` since the last snapshot and at
  close: a crash between the two steps leaves records the snapshot already
  covers, which replay skips (vqs.broker.queue.lease_state). On a full disk
  the store lowers ``compact_at`` until a snapshot succeeds again, so the
  space of delete records comes back often.
"""

from __future__ import annotations

import logging

from ...errors import DiskFullError, LogClosedError, PurgeQueueInProgress
from .lease_records import OP_PURGE
from .lease_state import SHORT_COMPACT_BYTES

logger = logging.getLogger("vqs.broker")

PURGE_INTERVAL_MS = 60_000  # one PurgeQueue per 60 seconds, as SQS


class Maintenance:
    """purge / expire / reclaim / compact of one ``Queue`` (see module doc)."""

    __slots__ = ("_q", "last_purge_ms", "reclaim_low", "reclaim_next", "drain", "bytes_per_offset",
                 "sent_n", "sent_b", "tried_end")

    def __init__(self, queue):
        self._q = queue
        self.last_purge_ms: int | None = None
        self.reclaim_low = 0  # ``low`` at the last reclaim
        self.reclaim_next = 0  # the delete hot paths call ``maybe_reclaim`` once ``low`` reaches it
        self.drain = False  # reclaim once drained (the message log's writes found no space)
        self.bytes_per_offset = 0.0
        self.sent_n = self.sent_b = 0  # messages (and their bytes) sent by this process
        self.tried_end = -1  # state-log end at the last refusal's compaction

    def start(self, low: int) -> None:
        """The queue opened with ``low`` its lowest offset not deleted."""
        self.reclaim_low = low
        self.reclaim_next = low + 16

    def purge(self) -> None:
        q = self._q
        with q._lock:
            if q._closed:
                raise LogClosedError(f"queue {q.name} is closed")
            now = q._now_ms()
            if self.last_purge_ms is not None and now - self.last_purge_ms < PURGE_INTERVAL_MS:
                raise PurgeQueueInProgress(q.name)
            q._push_locked()
            below = q._log.end_offset
            q._state.append(bytes([OP_PURGE]) + below.to_bytes(8, "little"))
            live = q._leases.live
            for o in [o for o in live if o < below]:
                q._remove_locked(o, live[o])
            q._purged_locked(below)
            q._low = max(q._low, below)
            q._leases.issued.clear()
            q._advance_low()
            self.last_purge_ms = now
        if q._sync:
            q._state.flush()
        self.reclaim()

    def disk_short(self) -> None:
        """The message log's writes found no space (``Log.on_disk_short``, under
        the log's lock): reclaim once drained; look again at the next delete."""
        self.drain = True
        self.reclaim_next = 0

    def maybe_reclaim(self) -> None:
        q = self._q
        low = q._low
        if low < self.reclaim_next:
            return
        # bytes per offset: what this process sent (the log's size over its span
        # overstates it once the active segment holds consumed messages)
        if self.sent_n >= 64:
            bpo = self.sent_b / self.sent_n + 16
        else:
            bpo = self.bytes_per_offset
            if bpo <= 0:
                log = q._log
                span = log.end_offset - log.start_offset
                size = log.size_bytes
                if span >= 1024 and size > 0:
                    bpo = self.bytes_per_offset = min(65536.0, max(1.0, size / span))
                else:
                    bpo = 1024.0
        need = max(16, int(q.config.segment_bytes / bpo))
        if low - self.reclaim_low >= need:
            self.reclaim()
            return
        nxt = min(self.reclaim_low + need, low + 4096)
        if self.drain:
            # Writes found no space: reclaim as soon as the queue is drained
            # (pending sends included), whatever was consumed; until then,
            # look again when the current end is reached.
            end = q._end_offset()
            if low >= end and low > self.reclaim_low:
                self.drain = False
                self.reclaim()
                return
            nxt = min(nxt, max(end, low + 1))
        self.reclaim_next = nxt

    def reclaim(self) -> int:
        q = self._q
        with q._lock:
            if q._closed:
                return 0
            try:
                q._push_locked()
            except DiskFullError:
                # Pending sends stay pending (the next push writes them); what the
                # log holds is reclaimed all the same: that is what frees the space.
                pass
            target = q._reclaim_target()
            self.reclaim_low = q._low
            self.reclaim_next = q._low + 16
            if self.drain:
                # armed: look again at the delete that drains the queue, not 16
                # offsets on (else a reclaim between the arming and the drain sets
                # the next look past the end, and the first send after the drain
                # lands in the consumed segment, which then cannot go)
                self.reclaim_next = min(self.reclaim_next, max(q._end_offset(), q._low + 1))
        log = q._log
        # (== start: a drained log's consumed segment goes while space is short, log_space.py)
        return log.delete_before(target) if target >= log.start_offset else 0

    def reclaim_at_close(self) -> None:
        q = self._q
        target = q._reclaim_target()
        if target > q._log.start_offset:
            q._log.delete_before(target)

    def expire(self) -> int:
        q = self._q
        with q._lock:
            if q._closed:
                return 0
            try:
                q._push_locked()
            except DiskFullError:
                pass  # (as in reclaim: the pending records stay pending; expiry goes on)
            dels = q._expire_locked(q._now_ms() - q._ret_ms)
            if dels:
                q._dels.extend(dels)
                q._flush_dels_locked()
        if q._sync and dels:
            q._state.flush()
        return len(dels)

    def compact_locked(self, now: int, required: bool = True) -> None:
        """Snapshot the lease state. ``required=False`` (the periodic compaction
        of a growing state log): on a full disk it waits (the state log, whose
        appends are control writes, stays the truth) and is tried again later."""
        q = self._q
        st = q._state
        cursor, ahead = q._snapshot_view()
        try:
            st.write_snapshot(low=q._low, cursor=cursor, live=q._leases.live,
                              deleted_ahead=ahead, now_ms=now, moving=q._mover.intents)
        except DiskFullError:
            if required:
                raise
            # (once per full spell: on a full disk it is tried often)
            (logger.debug if st.compact_at == SHORT_COMPACT_BYTES else logger.warning)(
                "queue %s: lease-state snapshot waits, the disk is full", q.name)
            st.snapshot_waits()

    def room_after_compact_locked(self, nbytes: int) -> None:
        """A receive or visibility change found only the deletes' floor left (a
        full disk): compact, which gives the state log's space back, and ask
        again; DiskFullError if still refused. Once per state-log end: a
        refusal with nothing new to reclaim costs no snapshot attempt."""
        st = self._q._state
        end = st.log.end_offset
        if end != self.tried_end:
            self.tried_end = end
            self.compact_locked(self._q._now_ms(), required=False)
        st.room_for(nbytes)
