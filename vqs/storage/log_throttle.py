"""Log lines about a lasting condition (a full disk), bounded in rate.

A full disk can last minutes while producers retry and every flush tick
meets it again; one log line per occurrence would flood the server's log
(thousands of lines a second; the log may live on the full disk itself).
``Throttle.warn(key, ...)`` logs the first occurrence for ``key`` (a file or
directory), then at most one line per ``every_s`` seconds saying how many
were left out (``due`` tells a caller that formats its own line); ``Throttle.clear(key, ...)`` ends the condition (logging that
it did, if it was logged). Invariants: the first occurrence of a condition is
always logged; memory is bounded (at most ``MAX_KEYS`` conditions tracked,
the oldest dropped first); thread-safe; a call on a key that is not tracked
costs a dict lookup under a lock.
"""

from __future__ import annotations

import logging
import threading
import time

MAX_KEYS = 4096


class Throttle:
    """Rate-limited warnings per key (module doc)."""

    def __init__(self, logger: logging.Logger, every_s: float = 60.0, clock=time.monotonic):
        self._logger = logger
        self._every = every_s
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: dict[str, list] = {}  # key -> [last logged (clock), occurrences left out]

    def due(self, key: str) -> int | None:
        """Whether a line for ``key`` is due now: the number of occurrences left
        out since the last one (0 for the first), or None (this one is left out,
        and counted)."""
        now = self._clock()
        with self._lock:
            st = self._keys.get(key)
            if st is not None and now - st[0] < self._every:
                st[1] += 1
                return None
            left_out = st[1] if st is not None else 0
            if st is None and len(self._keys) >= MAX_KEYS:
                self._keys.pop(next(iter(self._keys)))
            self._keys[key] = [now, 0]
        return left_out

    def warn(self, key: str, msg: str, *args) -> bool:
        """Log ``msg % args`` as a warning unless ``key`` was logged less than
        ``every_s`` ago (then count it); True when it was logged."""
        left_out = self.due(key)
        if left_out is None:
            return False
        if left_out:
            self._logger.warning(msg + " (%d more like it since the last such line)", *args, left_out)
        else:
            self._logger.warning(msg, *args)
        return True

    def clear(self, key: str, msg: str | None = None, *args) -> None:
        """The condition of ``key`` is over: log ``msg`` (info) if it was tracked."""
        if not self._keys:
            return
        with self._lock:
            st = self._keys.pop(key, None)
        if st is not None and msg is not None:
            self._logger.info(msg, *args)
