"""Send buffering and the in-memory tail of a standard queue.

``SendBuffer``: under a relaxed flush policy (``interval``, ``never``) a
standard queue's plain sends are kept here and handed to the message log as
one ``append_batch`` (one call per up to ``max_records`` messages instead of
one ``Log.append`` per message); the interval tick hands them over and fsyncs,
so the promise of the policy (at most one interval lost) is unchanged.
Invariants:
* the pending values have the offsets ``log.end_offset``, ``log.end_offset + 1``, ...
  (anything else that appends to the log pushes them first);
* their send timestamps are kept run-length encoded: ``runs`` = [(ts, count)]
  for the runs before the last, the last in ``last_ts``/``last_n`` (a send in
  the same ms only adds to ``last_n``);
* a failed push keeps what was not written pending and records the error in
  ``error``; sends push (retry) before adding to a buffer with an error;
* acknowledged pending sends have their disk space already: ``bound`` (an
  upper bound of what they encode to: a batch header per send, as a push may
  write one batch per send-ms run) never exceeds ``claim.held``, what the
  space governor counts as used for them (vqs/disk/space.py ``Claim``); a send
  that cannot be covered is refused (DiskFullError) before it is added.

``Tail``: what this process sent and nobody has received yet, kept in memory
so that receive needn't read it back from the log: one entry per send call,
``(first offset, values, sent_ms, headers or None, bytes)``, for
consecutive offsets; the messages not yet taken are those from ``base`` (in
the first entry) to ``end``. At most ``TAIL_BYTES`` of bodies are kept (a send
that does not fit is read back from the log). An entry is all tuples, ints and
bytes (values and headers copied into tuples), so the cyclic collector stops
tracking it at its first collection: a full collection never walks the tail
(as lists, 170,000 plain sends made 340,000 tracked objects and a full
collection in the server paused the event loop up to ~130 ms: the queue and
SQS rows' p99 in bench/RESULTS.md).
"""

from __future__ import annotations

from collections import deque
from itertools import chain, repeat, starmap

from ...disk import Claim
from ...storage import BATCH_FIXED, RECORD_FIXED, Log

TAIL_BYTES = 32 << 20  # in-memory copy of recently sent, not yet received messages
PUSH_RUN_RECORDS = 32  # pushes pending sends as a batch per send-ms run when runs average this


class SendBuffer:
    """Pending plain sends of a standard queue (see module doc)."""

    __slots__ = ("values", "runs", "last_ts", "last_n", "nbytes", "max_records", "max_bytes", "error",
                 "bound", "claim")

    def __init__(self, max_records: int, max_bytes: int, claim: Claim):
        self.values: list = []
        self.runs: list = []
        self.last_ts = -1
        self.last_n = 0
        self.nbytes = 0
        self.max_records = max(1, min(max_records, 4096))
        self.max_bytes = max(1, max_bytes)
        self.error: BaseException | None = None
        self.bound = 0  # what the pending sends encode to, at most (module doc)
        self.claim = claim  # what the space governor counts for them (module doc)

    @staticmethod
    def send_bound(bound: int, n: int, nbytes: int) -> int:
        """``bound`` after a send of ``n`` values of ``nbytes`` bytes is added."""
        return bound + BATCH_FIXED + RECORD_FIXED * n + nbytes

    def __len__(self) -> int:
        return len(self.values)

    def add(self, values: list, ts: int, nbytes: int) -> None:
        """Add a send's values (the caller checked they fit: ``fits``)."""
        self.values += values
        self.bound = self.send_bound(self.bound, len(values), nbytes)
        if ts == self.last_ts:
            self.last_n += len(values)
        else:
            if self.last_n:
                self.runs.append((self.last_ts, self.last_n))
            self.last_ts = ts
            self.last_n = len(values)
        self.nbytes += nbytes

    def push(self, log: Log) -> None:
        """Hand the pending sends to ``log`` (see module doc for failures)."""
        pv = self.values
        if not pv:
            return
        runs = self.runs
        # what the claim counted becomes the log's grant for them (append_batch(claim=));
        # counted again if the write fails: they stay pending
        try:
            if not runs:  # one run: one timestamp for the batch
                log.append_batch(pv, timestamps_ms=self.last_ts, claim=self.claim)
            elif len(pv) >= PUSH_RUN_RECORDS * (len(runs) + 1):
                self._push_runs(log)
            else:
                ts = list(chain.from_iterable(starmap(repeat, runs)))
                ts += repeat(self.last_ts, self.last_n)
                log.append_batch(pv, timestamps_ms=ts, claim=self.claim)
        except BaseException as e:
            # kept pending (retried at the next push); sends refuse until a push succeeds
            self.error = e
            # what is still pending (the runs written before a failure left it) is counted again
            self.bound = (BATCH_FIXED * (len(self.runs) + 1) + RECORD_FIXED * len(self.values)
                          + sum(map(len, self.values)))
            self.claim.force(self.bound)
            raise
        self.values = []
        self.runs = []
        self.last_ts = -1
        self.last_n = 0
        self.nbytes = 0
        self.error = None
        self.bound = 0
        self.claim.release()  # (what the batches' grants did not need)

    def _push_runs(self, log: Log) -> None:
        """One batch per run of equal send timestamps: a batch whose records share
        one timestamp needs no per-record timestamp column, which costs the log
        about a microsecond a record to build. (Runs are long when sends are
        frequent; push takes this path only then.) If an append fails, the runs
        written before it leave the pending list."""
        pv = self.values
        runs = self.runs
        i = done = 0
        try:
            for ts, c in runs:
                log.append_batch(pv[i:i + c], timestamps_ms=ts, claim=self.claim)
                i += c
                done += 1
            log.append_batch(pv[i:], timestamps_ms=self.last_ts, claim=self.claim)
        except BaseException:
            if i:
                del pv[:i]
                del runs[:done]
                self.nbytes = sum(map(len, pv))
            raise


class Tail:
    """The in-memory tail of a standard queue (see module doc)."""

    __slots__ = ("entries", "base", "end", "nbytes")

    def __init__(self):
        self.entries: deque = deque()
        self.base = 0
        self.end = 0
        self.nbytes = 0

    def add(self, first: int, values: list, ts: int, headers: list | None, nbytes: int) -> None:
        """Remember a send of ``values`` at offsets ``first``... (kept only when it
        follows the last one kept and the budget allows)."""
        entries = self.entries
        if not entries:
            self.base = self.end = first
        if self.end == first and self.nbytes < TAIL_BYTES:
            entries.append((first, tuple(values), ts, None if headers is None else tuple(headers), nbytes))
            self.end = first + len(values)
            self.nbytes += nbytes

    def clear(self) -> None:
        self.entries.clear()
        self.nbytes = 0
