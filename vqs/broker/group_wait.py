"""How a group coordinator call waits for the rest of its group: a callback, not a thread.

A ``GroupWait`` is a JoinGroup or SyncGroup that cannot be answered until other
members act (or a deadline passes). The coordinator (coordinator.py) keeps it
in its group and completes it from whichever thread changes the group (another
member's call, or the coordinator's one timer thread at a rebalance deadline
or a session timeout); the waiter only waits for that callback:

- ``wait()`` blocks the calling thread on a ``threading.Event`` (the embedded,
  synchronous API);
- ``await wait_async()`` waits on an asyncio future of the running loop,
  completed with ``loop.call_soon_threadsafe``: a waiting request holds no
  thread, however many wait.

Invariants: a wait completes at most once (``done``, then ``result``); a
callback registered after it completed runs at once. Callbacks run under the
coordinator's lock, so each only hands the result over (sets an Event,
schedules a future). ``cancel()`` withdraws a wait still pending (its answer
could no longer be delivered: the task waiting was cancelled, e.g. its
connection closed) and the coordinator removes its member from the group at
once, so a dead client never holds a rebalance until its timeout; a wait that
completed first is not undone (its member then times out as any silent one).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable


class GroupWait:
    __slots__ = ("_callbacks", "_cancel", "_lock", "answer", "done", "group", "join", "member_id", "ready",
                 "result")

    def __init__(self, lock: threading.Lock, group: str, member_id: str, ready=None, answer=None,
                 cancel: Callable[[GroupWait], None] | None = None):
        self._lock = lock
        self.group = group
        self.member_id = member_id
        self.ready = ready    # group -> bool: may it be answered now? (lock held)
        self.answer = answer  # group -> its result (lock held)
        self._cancel = cancel
        self._callbacks: list = []
        self.join = False  # a JoinGroup's wait (else a SyncGroup's)
        self.done = False
        self.result = None

    @classmethod
    def answered(cls, lock: threading.Lock, group: str, member_id: str, result) -> GroupWait:
        """A call answered without waiting (e.g. an unknown member)."""
        w = cls(lock, group, member_id)
        w.done, w.result = True, result
        return w

    def complete_locked(self, result) -> None:
        """Called once by the coordinator, lock held."""
        self.done, self.result = True, result
        callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb()

    def add_done_callback(self, cb: Callable[[], None]) -> None:
        with self._lock:
            if not self.done:
                self._callbacks.append(cb)
                return
        cb()

    def wait(self):
        """Block this thread until the wait completes; its result."""
        event = threading.Event()
        self.add_done_callback(event.set)
        event.wait()
        return self.result

    async def wait_async(self):
        """Await the result on the running loop (no thread held). Cancelling the awaiting task
        cancels the wait (module doc)."""
        if self.done:
            return self.result
        loop = asyncio.get_running_loop()
        fut = loop.create_future()

        def wake() -> None:
            try:
                loop.call_soon_threadsafe(_set_done, fut)
            except RuntimeError:  # the loop closed: nobody waits any more
                pass

        self.add_done_callback(wake)
        try:
            await fut
        except asyncio.CancelledError:
            self.cancel()
            raise
        return self.result

    def cancel(self) -> None:
        """Withdraw the wait if still pending; its member leaves the group (module doc)."""
        if self._cancel is not None and not self.done:
            self._cancel(self)


def _set_done(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)
