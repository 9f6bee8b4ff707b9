"""Group commit for ``flush="always"``: appenders at about the same time share one fsync.

One thread at a time leads the next fsync. It may wait up to one fsync's time for the last
group's threads to append again (PostgreSQL's commit_delay); the appender that completes the
group fsyncs for all. Waiters block on private locks and wake each other in turn: one
wake-up per append, no convoy.

Invariants (under the log's lock):
- a waiter registers in its own append's critical section, so every waiter listed when the
  buffer is written has its records in that write, and the fsync after it covers them;
- at most one leader; a fsync that ends with appenders waiting hands the first the
  leadership (``HEIR``), so none waits for a leader that does not come;
- on failure or close every waiter is released and re-checks the log; one whose records
  were in a buffer dropped unwritten raises its DiskFullError (``await_durable``).
"""

from __future__ import annotations

from _thread import allocate_lock as _allocate_lock
from itertools import pairwise
from typing import TYPE_CHECKING

from ..errors import DiskFullError

if TYPE_CHECKING:
    from .log import Log

#: a waiter is ``[held lock, the next waiter to wake]``; HEIR as the next: lead
HEIR = [None, None]


class GroupCommit:
    __slots__ = ("leading", "delaying", "delay_waiter", "waiters", "expected_group", "fsync_seconds")

    def __init__(self) -> None:
        self.leading = False  # some thread is responsible for the next fsync
        self.delaying = False  # the leader waits for its group to gather (commit delay)
        self.delay_waiter: list | None = None  # the delaying leader's own waiter
        self.waiters: list[list] = []  # appenders waiting for the next group's fsync
        self.expected_group = 1  # threads seen around the last group: how many to wait for
        self.fsync_seconds = 0.001  # moving average of fsync times: the longest commit delay

    def join_locked(self):
        """After buffering (log lock held): what the appender does next, as
        (``"sync"``, None), (``"delay"``, waiter) or (``"wait"``, waiter)."""
        if not self.leading:
            self.leading = True
            return self._lead_locked()
        if self.delaying and len(self.waiters) + 1 >= self.expected_group:
            self.delaying = False  # the group is complete: this thread syncs it
            return "sync", None
        w = [_allocate_lock(), None]  # [held lock, the next waiter to wake]
        w[0].acquire()
        self.waiters.append(w)
        return "wait", w

    def _lead_locked(self):
        if self.expected_group > 1 and len(self.waiters) + 1 < self.expected_group:
            w = [_allocate_lock(), None]
            w[0].acquire()
            self.waiters.append(w)
            self.delaying = True
            self.delay_waiter = w
            return "delay", w
        return "sync", None

    def await_durable(self, log: Log, target: int, step, gen: list | None = None) -> None:
        """Return once offsets below ``target`` are fsynced (lock not held); ``gen``: the
        ``WriteBuffer.gen`` the records went into: dropped unwritten, raise its error (also
        where later records took the offsets back and were fsynced)."""
        self._await_durable(log, target, step)
        if gen is not None and gen[0] is not None:
            e = gen[0]
            raise DiskFullError(str(e), path=e.path)

    def _await_durable(self, log: Log, target: int, step) -> None:
        action, w = step
        while True:
            if action == "sync":
                with log._lock:
                    if not (log._closed and log._sync.durable_end >= target):  # close() synced it
                        self._sync_group_locked(log)
                return
            if action == "delay":
                released = w[0].acquire(True, self.fsync_seconds)
            else:
                released = w[0].acquire()
            if released:
                nxt = w[1]
                if nxt is HEIR:
                    # handed the leadership: lead even if another fsync covered our records,
                    # or the waiters behind us would wait forever
                    with log._lock:
                        if log._blocked:
                            if log._closed and log._sync.durable_end >= target:
                                return
                            log._check_writable()
                        action, w = self._lead_locked()
                    continue
                if nxt is not None:
                    nxt[0].release()  # pass the wake-up on (no thundering herd)
                if log._sync.durable_end >= target:
                    return
                with log._lock:
                    if log._blocked:
                        log._check_writable()
                    # (not reached by the protocol; if it ever is, take the normal path)
                    action, w = self.join_locked()
                continue
            # the commit delay ran out: sync, unless a joiner claimed it (we are in its group)
            with log._lock:
                if self.delaying and self.delay_waiter is w:
                    self.delaying = False
                    self.waiters.remove(w)
                    self._sync_group_locked(log)
                    return
            action = "wait"

    def _sync_group_locked(self, log: Log) -> None:
        group: list = []
        try:
            log._sync.wait_idle()  # flush() or the flusher thread is fsyncing
            if log._blocked:
                log._check_writable()
            group = self.waiters
            self.waiters = []
            log._sync.sync_log(log)
            n = len(group)
            if group:
                for a, b in pairwise(group):
                    a[1] = b
                group[0][0].release()
                group = []
            # this group and those who appended during the fsync: the next group
            self.expected_group = n + 1 + len(self.waiters)
        except BaseException:
            # Failure or close: wake everyone; they re-check and raise.
            for g in group:
                g[0].release()
            self.release_all()
            raise
        if self.waiters:
            heir = self.waiters.pop(0)  # it leads the next group
            heir[1] = HEIR
            heir[0].release()
        else:
            self.leading = False

    def release_all(self) -> None:
        """Wake every waiter and drop the leadership (failure or close; lock held)."""
        for w in self.waiters:
            w[0].release()
        self.waiters = []
        self.leading = self.delaying = False
