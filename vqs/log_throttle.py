"""Log lines about a lasting condition (a full disk), bounded in rate per key (a file): the
first occurrence is always logged, then at most a line per ``every_s`` saying how many were
left out; at most ``MAX_KEYS`` conditions are tracked (oldest dropped). Thread-safe.
"""

from __future__ import annotations

import logging
import threading
import time

MAX_KEYS = 4096


class Throttle:
    def __init__(self, logger: logging.Logger, every_s: float = 60.0, clock=time.monotonic):
        self._logger = logger
        self._every = every_s
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: dict[str, list] = {}  # key -> [last logged (clock), occurrences left out]

    def due(self, key: str) -> int | None:
        """For a caller that formats its own line: the occurrences left out since the last
        line (0 for the first), or None (this one is left out, and counted)."""
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

    def warn(self, key: str, msg: str, *args, level: int = logging.WARNING) -> bool:
        """Log ``msg % args`` as a warning (or at ``level``) when due; True when it was logged."""
        left_out = self.due(key)
        if left_out is None:
            return False
        if left_out:
            self._logger.log(level, msg + " (%d more like it since the last such line)", *args, left_out)
        else:
            self._logger.log(level, msg, *args)
        return True

    def clear(self, key: str, msg: str | None = None, *args) -> None:
        """The condition is over: log ``msg`` (info) if it was tracked."""
        if not self._keys:
            return
        with self._lock:
            st = self._keys.pop(key, None)
        if st is not None and msg is not None:
            self._logger.info(msg, *args)
