"""Maintenance of a queue: purge, retention (expire), disk reclaim, state compaction.

``Maintenance`` is the part of ``Queue`` (mixed into it) that keeps a queue's
disk use bounded; the type-specific parts (which messages are past retention,
how far the log may be cut, what a snapshot records) are the queue type's
``_expire_locked``, ``_reclaim_target`` and ``_snapshot_view``.

Invariants:
* a purge deletes every message sent before it (in flight ones included) with
  one ``P`` state record, at most once per ``PURGE_INTERVAL_MS`` (SQS's rule);
* a message-log segment is deleted only when every offset in it is below
  ``low`` (deleted), and for FIFO queues also older than the deduplication
  window (the window is rebuilt from the log at open);
* reclaim runs once a segment's worth was consumed, and also as soon as the
  queue is drained after its message log's writes found no space (the log's
  ``on_disk_short`` sets ``_drain_reclaim`` and arms the check at the next
  delete, so the delete hot paths test only ``_reclaim_next`` as before): the
  log then rolls and deletes even a small active segment while space is
  short, so a queue on a filesystem smaller than a segment drains its way
  out of a full disk (a queue reopened drained on a full disk: the open's
  reclaim, and every later one, let the log try, vqs.storage.log_space);
* the state log is compacted (a snapshot of the whole lease table written
  atomically, then the older state-log segments deleted) under the queue lock,
  once it grew past ``COMPACT_BYTES`` since the last snapshot and at close: a
  crash between the two steps leaves records the snapshot already covers,
  which replay skips (vqs.broker.queue.lease_state). On a full disk (the state
  store found no space: ``_state_short``) the threshold is
  ``SHORT_COMPACT_BYTES`` until a snapshot succeeds again, so the space of
  delete records comes back often (vqs.broker.queue.lease_state).
"""

from __future__ import annotations

import logging

from ...errors import DiskFullError, LogClosedError, PurgeQueueInProgress
from .lease_records import OP_PURGE

logger = logging.getLogger("vqs.broker")

COMPACT_BYTES = 8 << 20  # compact the state log (snapshot) past this many bytes
#: on a full disk (the state store is ``short``): compact after this much, so the
#: space of delete records comes back (vqs.broker.queue.lease_state)
SHORT_COMPACT_BYTES = 32 << 10
PURGE_INTERVAL_MS = 60_000  # one PurgeQueue per 60 seconds, as SQS


class Maintenance:
    """purge / expire / reclaim / compact of a ``Queue`` (see module doc)."""

    def purge(self) -> None:
        """Delete every message sent before this call (in flight ones included).
        Only one purge per 60 seconds (PurgeQueueInProgress)."""
        with self._lock:
            if self._closed:
                raise LogClosedError(f"queue {self.name} is closed")
            now = self._now_ms()
            if self._last_purge_ms is not None and now - self._last_purge_ms < PURGE_INTERVAL_MS:
                raise PurgeQueueInProgress(self.name)
            self._push_locked()
            below = self._log.end_offset
            v = bytes([OP_PURGE]) + below.to_bytes(8, "little")
            self._state.append(v)
            self._state_bytes += len(v)
            live = self._leases.live
            for o in [o for o in live if o < below]:
                self._remove_locked(o, live[o])
            self._purged_locked(below)
            self._low = max(self._low, below)
            self._leases.issued.clear()
            self._advance_low()
            self._last_purge_ms = now
        if self._sync:
            self._state.flush()
        self.reclaim()


    def _disk_short(self) -> None:
        """The message log's writes found no space (``Log.on_disk_short``, under
        the log's lock): reclaim once drained; look again at the next delete."""
        self._drain_reclaim = True
        self._reclaim_next = 0

    def _maybe_reclaim(self) -> None:
        low = self._low
        if low < self._reclaim_next:
            return
        # bytes per offset: what this process sent (the log's size over its span
        # overstates it once the active segment holds consumed messages)
        if self._sent_n >= 64:
            bpo = self._sent_b / self._sent_n + 16
        else:
            bpo = self._bytes_per_offset
            if bpo <= 0:
                span = self._log.end_offset - self._log.start_offset
                size = self._log.size_bytes
                if span >= 1024 and size > 0:
                    bpo = self._bytes_per_offset = min(65536.0, max(1.0, size / span))
                else:
                    bpo = 1024.0
        need = max(16, int(self.config.segment_bytes / bpo))
        if low - self._reclaim_low >= need:
            self.reclaim()
            return
        nxt = min(self._reclaim_low + need, low + 4096)
        if self._drain_reclaim:
            # Writes found no space: reclaim as soon as the queue is drained,
            # whatever was consumed (the log then deletes even a small active
            # segment, so a queue on a filesystem smaller than a segment drains
            # its way out); until then, look again when the current end is reached.
            end = self._end_offset()  # (pending sends included: drained means those too)
            if low >= end and low > self._reclaim_low:
                self._drain_reclaim = False
                self.reclaim()
                return
            nxt = min(nxt, max(end, low + 1))
        self._reclaim_next = nxt

    def reclaim(self) -> int:
        """Delete the message-log segments below the lowest message not yet deleted
        (FIFO queues keep the last 5 minutes, the deduplication window). Returns
        the number of segments deleted."""
        with self._lock:
            if self._closed:
                return 0
            try:
                self._push_locked()
            except DiskFullError:
                # Pending sends find no space: they stay pending (the next push
                # writes them). What the log holds is reclaimed all the same:
                # that is what frees the space (a delete never fails for it).
                pass
            target = self._reclaim_target()
            self._reclaim_low = self._low
            self._reclaim_next = self._low + 16
            if self._drain_reclaim:
                # armed (a refusal, or an open on a short disk): look again at the
                # delete that drains the queue, not 16 offsets on. Else a reclaim
                # between the arming and the drain (the open's, a tick's) set the
                # next look past the end, the drain passed unseen, and the first
                # send after it landed in the consumed segment, which then held a
                # live message and could not go
                self._reclaim_next = min(self._reclaim_next, max(self._end_offset(), self._low + 1))
        log = self._log
        # (== start: a drained log's consumed segment goes while space is short, log_space.py)
        return log.delete_before(target) if target >= log.start_offset else 0

    def expire(self) -> int:
        """Retention: delete visible messages older than MessageRetentionPeriod now
        (receive does it as it meets them). Returns how many were deleted."""
        with self._lock:
            if self._closed:
                return 0
            try:
                self._push_locked()
            except DiskFullError:
                pass  # (as in reclaim: the pending records stay pending; expiry goes on)
            now = self._now_ms()
            dels = self._expire_locked(now - self._ret_ms)
            if dels:
                self._dels.extend(dels)
                self._flush_dels_locked()
        if self._sync and dels:
            self._state.flush()
        return len(dels)

    def _compact_locked(self, now: int, *, required: bool = True) -> None:
        """Snapshot the lease state. ``required=False`` (the periodic compaction
        of a growing state log): on a full disk it waits (the state log, whose
        appends are control writes, stays the truth) and is tried again later."""
        cursor, ahead = self._snapshot_view()
        try:
            self._state.write_snapshot(low=self._low, cursor=cursor, live=self._leases.live,
                                       deleted_ahead=ahead, now_ms=now, moving=self._mover.intents)
        except DiskFullError:
            if required:
                raise
            # (once per full spell: on a full disk it is tried often, maintenance doc)
            (logger.debug if self._compact_at == SHORT_COMPACT_BYTES else logger.warning)(
                "queue %s: lease-state snapshot waits, the disk is full", self.name)
            self._state_bytes = self._compact_at // 2  # try again after half as much again
            return
        self._state_bytes = 0
        self._compact_at = SHORT_COMPACT_BYTES if self._state.short else COMPACT_BYTES

    def _state_short(self) -> None:
        """The state store found no space (``LeaseStateStore.on_short``, maybe
        under the state log's lock): compact often until space is back, so
        deletes keep their room (module doc)."""
        self._compact_at = SHORT_COMPACT_BYTES

    def compact(self) -> None:
        """Write a snapshot of the lease state and drop the state log below it."""
        with self._lock:
            if self._closed:
                return
            self._compact_locked(self._now_ms())
