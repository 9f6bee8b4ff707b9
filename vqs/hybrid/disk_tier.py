"""The disk tier of a HybridQueue: spill, write-through, read-ahead, reclaim.

The disk backlog is the log range ``[read_off, end)``, older than every item
of the memory tail; ``[read_off, disk_next)`` of it is already deserialized
in the read cache (``_cache`` objects, ``_csz`` their serialized sizes)::

    [ read cache ][ rest of the disk backlog ][ memory tail ]
      read_off .. disk_next .. end               live objects, never serialized

Invariants (all under the queue's one lock):

* spill (``_admit_locked``, non-durable): when a put finds the memory tail
  full, the *oldest* tail items (then, if need be, the first new items) are
  serialized and appended as one batch, so they land right after everything
  already on disk and FIFO order holds; at most a chunk (a quarter of the
  budget, 1024 items / 1 MiB) at a time so one append serves many puts. The
  log is written first and the state updated after: a failed write changes
  nothing (a spill is one record batch, so one write: all or none).
  ``_disk_bytes + pending <= max_disk_bytes`` always.
* a full filesystem (DiskFullError from the log) is the disk tier being full:
  the put raises ``queue.Full`` (``block=False``, or at its timeout) or waits,
  trying the write again every DISK_FULL_RETRY_S and whenever a get frees
  room; the memory tier keeps serving gets meanwhile.
* write-through (``_put_durable``): the append (fsync, group commit with
  concurrent putters) runs outside the lock, with its bytes reserved in
  ``_reserved`` and the put counted in ``_inflight``; its items become
  visible only after it returns.
* read-ahead (``_refill_locked``): reads whole batches from ``disk_next``, at
  most READAHEAD_BYTES per read; non-durable queues checkpoint the consumed
  position first, so a crash redelivers at most one chunk.
* reclaim (``_reclaim_locked``): every half segment of consumed bytes, whole
  consumed segments are deleted, so disk follows the backlog; and when a put
  finds the filesystem full while the disk tier is wholly consumed, at once
  (the log then deletes even its small active segment: a drained queue gives
  its space back on a filesystem smaller than a segment).
* damage a read meets (below the log's recovery point, so recovery at open
  did not see it), by ``recovery``: ``fail`` raises CorruptRecordError,
  ``skip`` - the log quarantines the batch as it reads and its offsets are a
  hole, ``truncate`` - the log is cut there (``_truncate_at_locked``) and the
  items from it on are dropped; the same at open (the backlog scan after a
  crash) and at any later read-ahead.

This is a mixin of :class:`vqs.hybrid.hybrid_queue.HybridQueue`, not an object
of its own: both tiers share one lock, one condition set and the counters, and
``put``/``get`` read them on every call; an extra object on that path would
cost an attribute hop per call on the measured hot paths. The attributes it
uses are declared below and set by ``HybridQueue.__init__``.

Why over 500 lines: the tier's operations share the queue's state and lock
(above); a damaged disk tier (truncate) must adjust the same counters.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable
from itertools import accumulate, islice
from operator import sub as _sub
from queue import Full

from ..errors import CorruptRecordError, DiskFullError, LogClosedError, MessageTooLarge, ShutDown, VQSError
from ..storage import Log, load_gaps
from .checkpoint import Checkpoint
from .serializers import Serializer, wrap_error

#: Read-ahead from disk: at most this many serialized bytes per chunk.
READAHEAD_BYTES = 1 << 20
#: A put waiting because the filesystem is full tries its write again this often.
DISK_FULL_RETRY_S = 0.05
_monotonic = time.monotonic


def deadline_for(block: bool, timeout: float | None) -> float | None:
    """The monotonic deadline of a blocking call, None if it waits forever or not at all."""
    if not block or timeout is None:
        return None
    if timeout < 0:
        raise ValueError("'timeout' must be a non-negative number")
    return _monotonic() + timeout


class DiskTier:
    """Disk-tier operations of a HybridQueue (see the module doc); the caller holds
    ``_lock`` in every ``*_locked`` method."""

    # -- state shared with HybridQueue (set by its __init__) --
    path: str
    durable: bool
    serializer: Serializer
    memory_items: int | None
    memory_bytes: int | None
    max_disk_bytes: int | None
    _lock: threading.Lock
    _not_empty: threading.Condition
    _not_full: threading.Condition
    _all_done: threading.Condition
    _dumps: Callable
    _loads: Callable
    _sizeof: Callable
    _max_items: int
    _max_bytes: float
    _max_disk: float
    _chunk_items: int
    _chunk_bytes: int
    _getters: int
    _putters: int
    _closed: bool
    _log: Log | None
    _ckpt: Checkpoint | None
    _mem: deque          # the memory tail
    _mem_bytes: int
    _cache: deque        # the read cache
    _csz: deque
    _cache_bytes: int
    _read_off: int
    _disk_next: int
    _end: int
    _disk_bytes: int
    _reserved: int
    _inflight: int
    _unfinished: int
    _initial: int
    _puts: int
    _spilled: int
    _disk_writes: int
    _disk_reads: int
    _reclaim_every: int
    _reclaim_left: int
    _drain_reclaim: bool
    _reclaim_to: int | None
    _disk_full_errors: int
    _full_refusals: int
    _serialization_errors: int
    _holes: list
    _hole_items: int
    _repairing: int
    _maxsize: int
    is_shutdown: bool
    _drained: bool
    _drain_end: int
    _inflight_items: int
    _covered_ahead: int
    recovery: str
    _count_locked: Callable[[], int]
    _hook_wait: tuple

    # ------------------------------------------------------------------ open

    def _restore(self) -> None:
        lg, st = self._log, self._ckpt.state
        start, end = lg.start_offset, lg.end_offset
        read_off = start if st is None else min(max(st.read_off, start), end)
        if (st is not None and st.clean and st.end_off == end and st.read_off == read_off
                and not lg.quarantined_batches):
            disk_bytes = st.disk_bytes
        else:
            # After a crash the backlog is read whole. Damage below the log's
            # recovery point (which the log's own recovery did not validate)
            # is met here and handled by the recovery policy (``_scan_bytes``);
            # a truncate moves the end back, so it is read again after.
            disk_bytes = self._scan_bytes(read_off, end)
            end = lg.end_offset
            read_off = min(read_off, end)
        # offsets recovery="skip" removed (quarantined batches): not items
        holes = sorted((a, b) for a, b in load_gaps(lg.path).items() if read_off <= a and b <= end)
        self._holes = holes
        self._hole_items = sum(b - a for a, b in holes)
        self._read_off = self._disk_next = read_off
        self._end = end
        self._disk_bytes = disk_bytes
        self._unfinished = end - read_off - self._hole_items
        self._initial = self._unfinished

    def _scan_bytes(self, off: int, end: int) -> int:
        """Serialized bytes of the records in [off, end) (after a crash). Damage
        met on the way: ``skip`` - the log quarantines it as it reads (a gap);
        ``truncate`` - the log is cut there (``Log.repair``) and the count
        stops at the new end; ``fail`` - CorruptRecordError naming the file."""
        total = 0
        while off < end:
            try:
                batches = self._log.read_batches(off, max_bytes=8 << 20)
            except CorruptRecordError as e:
                if self.recovery != "truncate" or not self._log.repair(e):
                    raise
                end = min(end, self._log.end_offset)
                continue
            if not batches:
                break
            for b in batches:
                a = max(0, off - b.base_offset)
                e = min(b.count, end - b.base_offset)
                if a < e:
                    vo = b.value_offsets
                    total += vo[e] - vo[a]
                off = b.base_offset + e
        return total

    # ----------------------------------------------------------------- write

    def _serialize(self, objs, what: str) -> list[bytes]:
        try:
            return list(map(self._dumps, objs))
        except Exception as e:
            self._serialization_errors += 1
            raise wrap_error(e, f"serializer={self.serializer.name!r} could not serialize {what}") from e

    def _admit_locked(self, items: list, sizes: list, block: bool, timeout: float | None) -> None:
        """Non-durable: make room in the memory tail for ``items`` by spilling its
        oldest entries (and, if need be, the first of ``items``) to disk.
        Holds the lock (released while waiting)."""
        deadline = deadline_for(block, timeout)
        n_new = len(items)
        new_bytes = sum(sizes)
        sizeof = self._sizeof
        while True:
            if self._closed:
                raise LogClosedError(f"HybridQueue {self.path} is closed")
            if self.is_shutdown:
                raise ShutDown
            if self._maxsize > 0 and self._count_locked() + n_new > self._maxsize:
                self._check_fits_maxsize(n_new)
                self._wait_not_full(block, deadline)
                continue
            mem = self._mem
            n_mem = len(mem)
            max_items, max_bytes = self._max_items, self._max_bytes
            if n_mem + n_new <= max_items and self._mem_bytes + new_bytes <= max_bytes:
                mem.extend(items)
                self._mem_bytes += new_bytes
                return
            # The fewest oldest items of (mem ++ items) to move to disk so the rest
            # fits (s_min), and, to amortize, up to a chunk of the tail (s).
            need_n = n_mem + n_new - max_items
            need_b = self._mem_bytes + new_bytes - max_bytes
            take = min(n_mem, max(need_n, self._chunk_items))
            pre = list(accumulate(map(sizeof, islice(mem, take))))
            if need_b > 0 and take < n_mem and (not pre or pre[-1] < need_b):
                pre = list(accumulate(map(sizeof, mem)))
                take = n_mem
            nb = bisect_left(pre, need_b) + 1 if need_b > 0 else 0
            s_min = max(need_n, nb)
            if s_min > n_mem:
                # the whole tail goes, then as few new items as needed
                freed = pre[-1] if pre else 0
                k = 0
                while k < n_new and (n_mem + k < need_n or freed < need_b):
                    freed += sizes[k]
                    k += 1
                s = s_min = n_mem + k
            else:
                s = max(s_min, min(take, self._chunk_items, bisect_right(pre, self._chunk_bytes)))
            objs = list(islice(mem, min(s, n_mem)))
            if s > n_mem:
                objs.extend(items[: s - n_mem])
            payloads = self._serialize(objs, "an item to spill it to disk")
            pbytes = sum(map(len, payloads))
            if self._disk_bytes + pbytes > self._max_disk and s > s_min:
                payloads = payloads[:s_min]
                pbytes = sum(map(len, payloads))
                s = s_min
            if self._disk_bytes + pbytes <= self._max_disk:
                try:
                    first = self._log.append_batch(payloads)
                    break
                except DiskFullError as e:
                    # nothing was written (one batch: all or none); the memory
                    # tier and the state are as before
                    self._disk_full_errors += 1
                    self._wait_disk_space(block, deadline, e)
                    continue
            if s_min > n_mem:
                # Would the new items overflow to disk even with an empty tail?
                k, left_n, left_b = 0, n_new - max_items, new_bytes - max_bytes
                while k < n_new and (k < left_n or left_b > 0):
                    left_b -= sizes[k]
                    k += 1
                forced = sum(map(len, payloads[n_mem:n_mem + k]))
                if forced > self._max_disk:
                    raise MessageTooLarge(
                        f"{k} item(s) of {forced} serialized bytes fit neither the "
                        f"memory budget (memory_items={self.memory_items}, memory_bytes="
                        f"{self.memory_bytes}) nor max_disk_bytes={self.max_disk_bytes}"
                    )
            self._wait_not_full(block, deadline)
        # written above, then the state updated (nothing changed if the write raised)
        if first != self._end:  # pragma: no cover - the log is ours alone
            raise VQSError(f"HybridQueue {self.path}: log end {first} != expected {self._end}")
        n_spill_mem = min(s, n_mem)
        for _ in range(n_spill_mem):
            mem.popleft()
        if mem:
            self._mem_bytes -= pre[n_spill_mem - 1] if n_spill_mem else 0
        else:
            self._mem_bytes = 0
        self._end += s
        self._disk_bytes += pbytes
        self._spilled += s
        self._disk_writes += s
        if s < n_mem + n_new:
            rest = items[max(0, s - n_mem):]
            mem.extend(rest)
            self._mem_bytes += sum(sizes[max(0, s - n_mem):])

    def _check_fits_maxsize(self, n: int) -> None:
        if n > self._maxsize:
            raise MessageTooLarge(f"{n} items can never fit maxsize={self._maxsize}")

    def _wait_not_full(self, block: bool, deadline: float | None, poll: float | None = None) -> None:
        if not block:
            self._full_refusals += 1
            raise Full
        if deadline is None:
            remaining = poll
        else:
            remaining = deadline - _monotonic()
            if remaining <= 0:
                self._full_refusals += 1
                raise Full
            if poll is not None:
                remaining = min(remaining, poll)
        self._putters += 1
        try:
            self._not_full.wait(remaining)
        finally:
            self._putters -= 1

    def _wait_disk_space(self, block: bool, deadline: float | None, err: DiskFullError) -> None:
        """A write found the filesystem full: ``queue.Full`` (naming why) if the
        put may not wait, else wait until a get frees room or DISK_FULL_RETRY_S
        passes (nothing signals freed disk space: the write is simply tried again).
        A disk tier wholly consumed gives its space back first (the log rolls
        and deletes its active segment, whatever its size), and the write is
        then tried again at once; and the get that empties the disk tier reclaims
        (``_drain_reclaim``), as after an open: a durable put written into the
        slack after a drain would otherwise keep the consumed segment until the
        next put that finds no room, which a put-only spell never brings."""
        self._drain_reclaim = True
        if self._read_off >= self._end and self._read_off > self._log.start_offset:
            if self._reclaim_locked(inline=True):
                return
        try:
            self._wait_not_full(block, deadline, DISK_FULL_RETRY_S)
        except Full:
            raise Full(f"HybridQueue {self.path}: the disk tier is full ({err})") from err

    def _put_durable(self, items: list, block: bool, timeout: float | None) -> int:
        """Write-through: serialize, append to the log (fsync, group commit with
        concurrent putters), then make the items visible. Returns how many of
        them an immediate shutdown that came meanwhile did *not* count (0
        without one): AsyncHybridQueue keeps its own task count by it."""
        n = len(items)
        payloads = self._serialize(items, "an item")
        pbytes = sum(map(len, payloads))
        deadline = deadline_for(block, timeout)
        full: DiskFullError | None = None
        while True:
            with self._lock:
                if full is not None:
                    # the last try found the filesystem full: Full, or wait and retry
                    self._wait_disk_space(block, deadline, full)
                while True:
                    if self._closed:
                        raise LogClosedError(f"HybridQueue {self.path} is closed")
                    if self.is_shutdown:
                        raise ShutDown
                    if self._repairing:
                        self._not_full.wait()  # a truncate waits for the puts in flight
                        continue
                    if (self._maxsize > 0
                            and self._count_locked() + self._inflight_items - self._covered_ahead + n
                            > self._maxsize):
                        self._check_fits_maxsize(n)
                        self._wait_not_full(block, deadline)
                        continue
                    if self._disk_bytes + self._reserved + pbytes <= self._max_disk:
                        break
                    if pbytes > self._max_disk:
                        raise MessageTooLarge(
                            f"{n} item(s) of {pbytes} serialized bytes exceed max_disk_bytes="
                            f"{self.max_disk_bytes}"
                        )
                    self._wait_not_full(block, deadline)
                self._reserved += pbytes
                self._inflight += 1
                self._inflight_items += n
                # counted now, so that a consumer's task_done never runs ahead of it
                self._unfinished += n
            try:
                # One item: the log's buffered append, written in one write with the other
                # durable puts of its group commit; a write that finds no space drops that
                # whole buffer (each of its appenders raises DiskFullError and none of it is
                # ever read or written later: Log._write_buffer_locked). Several: one batch.
                first = self._log.append(payloads[0]) if n == 1 else self._log.append_batch(payloads)
                break
            except BaseException as e:
                with self._lock:
                    self._reserved -= pbytes
                    self._inflight -= 1
                    self._inflight_items -= n
                    self._unfinished -= n
                    if self._unfinished == 0:
                        self._all_done.notify_all()
                    self._not_full.notify_all()
                    if isinstance(e, DiskFullError):
                        self._disk_full_errors += 1
                if not isinstance(e, DiskFullError):
                    raise
                full = e
        with self._lock:
            self._reserved -= pbytes
            self._inflight -= 1
            self._inflight_items -= n
            self._puts += n
            fresh = self._register_durable_locked(items, payloads, pbytes, first)
            if self._closed and self._inflight == 0:
                self._not_full.notify_all()  # close() waits for in-flight puts
        return fresh

    def _register_durable_locked(self, items: list, payloads: list, pbytes: int, first: int) -> int:
        """Items written through at log offset ``first`` become visible; returns
        how many of them an immediate shutdown did not count (``_drain_end``)."""
        n = len(items)
        self._disk_bytes += pbytes
        self._disk_writes += n
        if first + n > self._end:
            # Group commit: everything below first + n is durable too, even
            # a concurrent putter's record not registered yet (batches are
            # whole: a put's items are all under the end or none is).
            self._covered_ahead += max(0, first - self._end)
            self._end = first + n
        else:
            self._covered_ahead -= n  # another's group commit had moved the end past these
        if first == self._disk_next:
            # contiguous with the read cache: keep the live objects
            cache, csz = self._cache, self._csz
            k = 0
            while (k < n and len(cache) < self._max_items
                   and self._cache_bytes + len(payloads[k]) <= self._max_bytes):
                cache.append(items[k])
                csz.append(len(payloads[k]))
                self._cache_bytes += len(payloads[k])
                k += 1
            self._disk_next += k
        if self._getters:
            self._not_empty.notify(n)
        if self._drained:
            # admitted before shutdown(immediate=True), registered after: kept
            # on disk, not handed out here, so done as the rest were; unless a
            # group commit had already put them under the end the shutdown
            # counted (batches are contiguous: all of them or none)
            fresh = first + n - max(first, self._drain_end)
            if fresh > 0:
                self._unfinished = max(0, self._unfinished - fresh)
            if self._unfinished == 0:
                self._all_done.notify_all()
            return max(0, fresh)
        return 0

    # ------------------------------------------------------------------ read

    def _refill_locked(self, want: int | None = None) -> int:
        """Read ahead from disk_next into the read cache; return items added."""
        off, end = self._disk_next, self._end
        if off >= end:
            return 0
        if not self.durable:
            # the consumed position so far (a crash redelivers at most this chunk)
            self._ckpt_write_if_room()
        loads = self._loads
        zero_copy = self.serializer.accepts_buffers
        cache, csz = self._cache, self._csz
        added = 0
        while off < end and ((want is None and added == 0) or (want is not None and added < want)):
            try:
                batches = self._log.read_batches(off, max_bytes=READAHEAD_BYTES)
            except CorruptRecordError as e:
                if added:
                    break  # hand out what was read; the next refill meets the damage
                if self.recovery != "truncate":
                    raise
                self._truncate_at_locked(e)
                off, end = self._disk_next, self._end
                continue
            if not batches:
                break
            for b in batches:
                if b.base_offset > off:
                    # a hole left by recovery="skip": passed only with an empty
                    # read cache (the cache holds the offsets [read_off, disk_next))
                    if added or cache:
                        self._disk_next = off
                        self._disk_reads += added
                        return added
                    self._skip_hole_locked(off, b.base_offset)
                    off = b.base_offset
                a = max(0, off - b.base_offset)
                e = min(b.count, end - b.base_offset)
                if a >= e:
                    continue
                o = b.value_offsets.tolist()
                starts, stops = o[a:e], o[a + 1:e + 1]
                if zero_copy:
                    # loads straight from slices of the batch buffer: no copy
                    vals = map(b.value_data.__getitem__, map(slice, starts, stops))
                else:
                    vals = b.values(a, e)
                try:
                    objs = list(map(loads, vals))
                except Exception as ex:
                    raise wrap_error(
                        ex, f"serializer={self.serializer.name!r} could not deserialize an "
                        f"item at log offsets {b.base_offset + a}..{b.base_offset + e - 1} "
                        f"of {self.path}"
                    ) from ex
                cache.extend(objs)
                sizes = list(map(_sub, stops, starts))
                csz.extend(sizes)
                self._cache_bytes += sum(sizes)
                added += e - a
                off = b.base_offset + e
                if off >= end:
                    break
        self._disk_next = off
        self._disk_reads += added
        return added

    def _truncate_at_locked(self, err: CorruptRecordError) -> None:
        """recovery="truncate" and a read met damage (below the log's recovery
        point, so recovery at open did not see it): the log is cut at the
        damaged batch (``Log.repair``) and the items from it on are gone from
        the queue. Durable puts in flight register first (their appends may
        come before the cut) and new ones wait meanwhile, so the counts are
        read back from the log with nothing moving."""
        self._repairing += 1
        try:
            while self._inflight:
                self._not_full.wait(0.01)
            if self._closed:
                raise LogClosedError(f"HybridQueue {self.path} is closed")
            if not self._log.repair(err):
                raise err
        finally:
            self._repairing -= 1
            self._not_full.notify_all()
        cut = self._log.end_offset
        if cut >= self._end:
            return  # another reader already did it
        lo = max(cut, self._read_off)
        lost = self._end - lo - sum(min(b, self._end) - max(a, lo) for a, b in self._holes
                                    if b > lo and a < self._end)
        self._holes = [h for h in self._holes if h[1] <= cut]
        self._hole_items = sum(b - a for a, b in self._holes)
        keep = max(0, cut - self._read_off)  # the read cache holds [read_off, disk_next)
        while len(self._cache) > keep:
            self._cache.pop()
            self._cache_bytes -= self._csz.pop()
        self._read_off = min(self._read_off, cut)
        self._disk_next = min(self._disk_next, cut)
        self._end = cut
        self._unfinished -= lost
        self._disk_bytes = sum(self._csz) + self._scan_bytes(self._disk_next, cut)
        if not self.durable:
            self._ckpt_write_if_room()
        if self._unfinished == 0:
            self._all_done.notify_all()

    def _skip_hole_locked(self, off: int, to: int) -> None:
        """Move the head past the offsets [off, to) that hold no items. Gaps
        known at open (``_holes``) were never counted as items; one that was
        not recorded (a gap at a segment's end) was, and is uncounted now."""
        counted = sum(min(b, to) - max(a, off) for a, b in self._holes if a < to and b > off)
        self._read_off = self._disk_next = to
        self._hole_items -= counted
        extra = to - off - counted
        if extra:
            self._unfinished -= extra
            self._initial -= extra
        self._holes = [h for h in self._holes if h[1] > to]

    def _reclaim_locked(self, inline: bool = False) -> int:
        """Drop log segments wholly consumed (disk follows the backlog); returns
        how many were deleted. With reclaim deferred (``defer_reclaim``) a get
        only records the position to reclaim to and the owner calls
        ``reclaim()`` outside the lock; ``inline`` (a put waiting for disk
        space, which needs the room now) deletes here regardless."""
        self._reclaim_left = self._reclaim_every
        if self._read_off >= self._end:
            self._drain_reclaim = False
        if self._read_off > self._log.start_offset:
            if not self.durable:
                self._ckpt_write_if_room()
            if self._reclaim_to is not None and not inline:
                self._reclaim_to = self._read_off
                return 0
            return self._log.delete_before(self._read_off)
        return 0

    def defer_reclaim(self) -> None:
        """From now on a get does not delete consumed segments itself (a
        deletion writes the log's recovery checkpoint and may roll its active
        segment: fsyncs); it records how far to delete, ``reclaim_pending``
        turns true, and the owner calls ``reclaim()`` (from a thread of its
        choosing). Deferring never loses data: segments are only kept longer;
        an unreclaimed position is reclaimed at close or at the next open."""
        with self._lock:
            if self._reclaim_to is None:
                self._reclaim_to = 0

    @property
    def reclaim_pending(self) -> bool:
        """A deferred reclaim is due (``defer_reclaim``)."""
        to = self._reclaim_to
        return bool(to) and to > self._log.start_offset

    def reclaim(self) -> int:
        """Delete the segments a deferred reclaim recorded as consumed, outside
        the queue's lock (gets and puts go on meanwhile: the log has its own
        lock, and every offset below the recorded one was consumed, so no read
        of this queue needs it). Returns how many segments were deleted."""
        with self._lock:
            to, self._reclaim_to = self._reclaim_to, (0 if self._reclaim_to is not None else None)
            if not to or self._closed:
                return 0
        return self._log.delete_before(to)

    def _ckpt_write_if_room(self) -> None:
        """Non-durable: checkpoint the consumed position, unless the disk is full
        (copy-on-write: checkpoint.py); the older checkpoint stays valid, a
        crash then redelivers more, as at-least-once allows."""
        try:
            self._ckpt.write(self._read_off, self._end, self._disk_bytes)
        except DiskFullError:
            self._disk_full_errors += 1

    # ----------------------------------------------------------------- close

    def _spill_tail_locked(self) -> list:
        """close(): append the whole memory tail to the log, in order. Items the
        serializer refuses are dropped; returns their (position, error) pairs."""
        failed: list = []
        mem = self._mem
        if mem:
            payloads = []
            dumps = self._dumps
            for i, obj in enumerate(mem):
                try:
                    payloads.append(dumps(obj))
                except Exception as e:
                    failed.append((i, e))
            if payloads:
                self._log.append_batch(payloads)
                self._end += len(payloads)
                self._disk_bytes += sum(map(len, payloads))
                self._spilled += len(payloads)
                self._disk_writes += len(payloads)
            mem.clear()
            self._mem_bytes = 0
        return failed
