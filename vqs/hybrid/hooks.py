"""``queue.Queue``'s subclass hooks for HybridQueue: ``_init``, ``_qsize``, ``_put``, ``_get``.

``queue.Queue`` keeps its items through four methods a subclass may override
(called with the lock held). HybridQueue's default hooks are its two tiers:
``_put`` stores one item (memory tail or spill; durable: written through),
``_get`` takes the head item, ``_qsize`` counts both tiers, ``_init`` does
nothing. ``put``/``get`` inline those tiers for speed and call no hook; so
that a subclass's hooks are honoured at no cost to that fast path, an instance
whose class overrides any hook gets, at construction, ``put``/``get``/
``qsize``/``empty``/``full`` as instance attributes running ``queue.Queue``'s
own algorithm over the hooks (below). Invariants of that path:

* the hooks run under the queue's lock, exactly where ``queue.Queue`` calls
  them; a hook that raises leaves the queue as it was (the item count and
  ``unfinished_tasks`` change only after ``_put`` returns, and the default
  ``_put``/``_get`` change nothing when they raise);
* ``maxsize`` bounds ``self._qsize()``, as in ``queue.Queue``;
* durable: the default ``_put`` writes and fsyncs with the lock held (a hook
  is one call under the lock: no group commit with other putters);
* the batch calls (``put_batch``, ``get_batch``, ``peek_batch``) work on the
  tiers themselves and do not go through the hooks.
"""

from __future__ import annotations

import time
from queue import Empty

from ..errors import DiskFullError, LogClosedError, MessageTooLarge, ShutDown
from .disk_tier import deadline_for

_monotonic = time.monotonic
HOOKS = ("_init", "_qsize", "_put", "_get")


class QueueHooks:
    """The hooks and the path that honours them; a mixin of HybridQueue (its
    state is HybridQueue's, the caller holds ``_lock`` in every hook)."""

    # ------------------------------------------------------------ the hooks

    def _init(self, maxsize: int) -> None:
        """Called once by the constructor, before the directory is opened."""

    def _qsize(self) -> int:
        """Items queued in both tiers (0 once drained by an immediate shutdown)."""
        if self._drained:
            return 0
        return self._end - self._read_off - self._hole_items + len(self._mem)

    def _put(self, item) -> None:
        """Store ``item`` at the tail, waiting (lock released) for room in the
        tiers as the current ``put``'s ``block``/``timeout`` allow."""
        block, deadline = self._hook_wait
        timeout = None if deadline is None else max(0.0, deadline - _monotonic())
        if not self.durable:
            self._admit_locked([item], [self._sizeof(item)], block, timeout)
            return
        payloads = self._serialize([item], "an item")
        pbytes = len(payloads[0])
        while True:
            if self._closed:
                raise LogClosedError(f"HybridQueue {self.path} is closed")
            if self.is_shutdown:
                raise ShutDown
            if self._repairing or self._disk_bytes + self._reserved + pbytes > self._max_disk:
                if pbytes > self._max_disk:
                    raise MessageTooLarge(
                        f"1 item of {pbytes} serialized bytes exceeds max_disk_bytes={self.max_disk_bytes}")
                self._wait_not_full(block, deadline)
                continue
            try:
                first = self._log.append_batch(payloads)
                break
            except DiskFullError as e:
                self._disk_full_errors += 1
                self._wait_disk_space(block, deadline, e)
        self._register_durable_locked([item], payloads, pbytes, first)

    def _get(self):
        """Remove and return the head item (the caller saw ``_qsize()`` > 0)."""
        out = self._take_locked(1)
        if not out:
            # recovery="truncate" cut the disk tier at damage the read met
            raise Empty
        return out[0]

    # ------------------------------------------- the path through the hooks

    def _use_hooks(self) -> None:
        """Route put/get/qsize/empty/full through the hooks (see the module doc)."""
        self.put = self._put_hooked
        self.get = self._get_hooked
        self.qsize = self._qsize_hooked
        self.empty = self._empty_hooked
        self.full = self._full_hooked

    def _put_hooked(self, item, block: bool = True, timeout: float | None = None) -> None:
        deadline = deadline_for(block, timeout)
        with self._lock:
            while True:
                if self._closed:
                    raise LogClosedError(f"HybridQueue {self.path} is closed")
                if self.is_shutdown:
                    raise ShutDown
                if not 0 < self._maxsize <= self._qsize():
                    break
                self._wait_not_full(block, deadline)
            self._hook_wait = (block, deadline)
            self._put(item)
            self._unfinished += 1
            self._puts += 1
            if self._getters:
                self._not_empty.notify()

    def _get_hooked(self, block: bool = True, timeout: float | None = None):
        deadline = deadline_for(block, timeout)
        with self._lock:
            while True:
                if self._closed:
                    raise LogClosedError(f"HybridQueue {self.path} is closed")
                if self._qsize():
                    break
                if self.is_shutdown:
                    raise ShutDown
                if not block:
                    raise Empty
                remaining = None
                if deadline is not None:
                    remaining = deadline - _monotonic()
                    if remaining <= 0:
                        raise Empty
                self._getters += 1
                try:
                    self._not_empty.wait(remaining)
                finally:
                    self._getters -= 1
            item = self._get()
            if self._putters:
                self._not_full.notify()
            return item

    def _qsize_hooked(self) -> int:
        with self._lock:
            return self._qsize()

    def _empty_hooked(self) -> bool:
        with self._lock:
            return not self._qsize()

    def _full_hooked(self) -> bool:
        with self._lock:
            return 0 < self._maxsize <= self._qsize()

    def _drain_hooks_locked(self) -> None:
        """shutdown(immediate=True) with hooks: items a subclass keeps in its own
        structure are removed through ``_get``, as ``queue.Queue`` does (the
        tiers report nothing by then: their items stay, see ``shutdown``)."""
        while self._qsize():
            self._get()
            if self._unfinished > 0:
                self._unfinished -= 1
