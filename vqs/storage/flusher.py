"""One background thread that flushes every ``flush="interval"`` log (not one thread per
partition): a heap orders them by when their next flush is due.

Invariant: a registered, open log is flushed at most ``interval`` after its previous flush
ended, unless other logs' fsyncs delay the single thread.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
import weakref

from ..errors import DiskFullError
from ..log_throttle import Throttle

logger = logging.getLogger("vqs.storage")
_full = Throttle(logger)  # a full disk meets every tick of every log: a line a minute per file


class Flusher:
    """Use ``Flusher.shared()``."""

    _shared: Flusher | None = None
    _shared_lock = threading.Lock()

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list = []  # (due monotonic time, seq, weakref to Log, interval s)
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    @classmethod
    def shared(cls) -> Flusher:
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    def register(self, target, interval_s: float) -> None:
        """Flush ``target`` (an object with ``_flush_tick() -> bool``) every
        ``interval_s`` until its tick returns False (it was closed)."""
        with self._cond:
            entry = (time.monotonic() + interval_s, next(self._seq), weakref.ref(target), interval_s)
            heapq.heappush(self._heap, entry)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="vqs-flusher", daemon=True)
                self._thread.start()
            if self._heap[0] is entry:
                # due first: wake the thread to wait for less (only then: opening 10,000
                # partitions must not wake it 10,000 times)
                self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if not self._heap:
                        self._cond.wait()
                        continue
                    due = self._heap[0][0]
                    now = time.monotonic()
                    if due > now:
                        self._cond.wait(due - now)
                        continue
                    _, _, ref, interval = heapq.heappop(self._heap)
                    break
            target = ref()
            if target is None:
                continue
            try:
                again = target._flush_tick()
            except DiskFullError as e:  # not a failure: the buffered writes wait for space
                _full.warn(e.path or "", "background flush waits for disk space: %s", e)
                again = True
            except Exception:  # the log stores the error and refuses writes; keep serving others
                logger.exception("background flush failed")
                again = True
            del target
            if again:
                with self._cond:
                    heapq.heappush(self._heap, (time.monotonic() + interval, next(self._seq), ref, interval))
