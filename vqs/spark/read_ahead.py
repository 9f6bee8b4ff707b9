"""Verify log batches ahead of the reader, on a second thread.

A path-mode read (reader.py) spends most of its own CPU on one thing: the
CRC-32C of every batch, a pass over all the data (``Log.scan_batches`` checks
each batch when it is asked for). Meanwhile Spark's Python worker spends most
of the task blocked in a socket write, handing the previous batch to the JVM.
:class:`ReadAhead` runs the scan (lookups, header parsing and the CRC check)
on a thread of its own, up to ``depth`` batches ahead of the consumer, so the
check of the next batches overlaps the hand-off of the current one (the
``crc32c`` extension releases the GIL over large buffers, and the socket write
releases it while it blocks): the consumer finds the next batch verified
when it asks for it.

Invariants:

- the consumer gets exactly the items the wrapped iterator yields, in its
  order, and then what ended it: its end, or the exception it raised
  (re-raised in the consumer's thread, at the same place in the sequence;
  every batch before a corrupt one is delivered first). So a batch is handed
  out only after the scan's own checks passed, as without read-ahead;
- the wrapped iterator runs on the read-ahead thread only, from its first
  ``next()`` to its ``close()``;
- :meth:`ReadAhead.close` (also on leaving the ``with`` block; a consumer
  that stops early must close it, as reader.py does with ``with`` inside a
  generator, which Python closes when it is dropped) returns only after that
  thread has stopped and closed the wrapped iterator: the source it reads may
  be closed right after. Nothing waits on a timeout: closing wakes a producer waiting
  for room, and one inside the wrapped iterator stops after that one item.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator

#: Batches verified ahead of the consumer (log batches are <= 1 MiB by
#: default, so a few MiB: still in the CPU's last-level cache when sent).
DEFAULT_DEPTH = 2

_END = object()


class _Raised:
    __slots__ = ("exc",)

    def __init__(self, exc: BaseException):
        self.exc = exc


class ReadAhead:
    """Iterate ``source`` on a background thread, ``depth`` items ahead."""

    def __init__(self, source: Iterator, depth: int = DEFAULT_DEPTH, name: str = "vqs-read-ahead"):
        if depth < 1:
            raise ValueError(f"read-ahead depth must be >= 1, not {depth}")
        self._source = source
        self._depth = depth
        self._buf: deque = deque()  # verified, not yet taken (under _cond)
        self._taken: deque = deque()  # taken by the consumer, not yet returned
        self._cond = threading.Condition(threading.Lock())
        self._stop = False
        self._done = False  # the consumer has seen the end, or closed
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _put(self, item) -> bool:
        """Hand ``item`` to the consumer; False once it has closed."""
        with self._cond:
            while len(self._buf) >= self._depth and not self._stop:
                self._cond.wait()
            if self._stop:
                return False
            self._buf.append(item)
            self._cond.notify()
            return True

    def _run(self) -> None:
        src = self._source
        try:
            for item in src:
                if not self._put(item):
                    return
            self._put(_END)
        except BaseException as e:  # handed to the consumer, raised there
            self._put(_Raised(e))
        finally:
            close = getattr(src, "close", None)
            if close is not None:
                close()

    def __iter__(self) -> ReadAhead:
        return self

    def __next__(self):
        taken = self._taken
        if not taken:
            if self._done:
                raise StopIteration
            with self._cond:
                while not self._buf:
                    self._cond.wait()
                # everything verified so far at once: one hand-over (and at
                # most one wake-up of the producer) per group, not per batch
                taken.extend(self._buf)
                self._buf.clear()
                self._cond.notify()
        item = taken.popleft()
        if item is _END:
            self.close()
            raise StopIteration
        if isinstance(item, _Raised):
            self.close()
            raise item.exc
        return item

    def close(self) -> None:
        """Stop the thread (it closes the wrapped iterator) and wait for it.
        A producer inside the wrapped iterator finishes that one item first."""
        self._done = True
        self._taken.clear()
        with self._cond:
            self._stop = True
            self._buf.clear()
            self._cond.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def __enter__(self) -> ReadAhead:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
