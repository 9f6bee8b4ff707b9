"""The broker's log cleaner: compacts the partitions of its compacted topics
(``cleanup_policy`` with ``compact``) in one background thread.

A pass visits every partition of every compacted topic and runs the storage
cleaner on it (vqs/cleaner/: what is kept, the space rules; the crash-safe
swap is storage's), its reading and writing in a worker process (``worker``, the
default: this process's threads keep the interpreter; only the swaps run here). Passes run one at a time (``_pass_lock``): the background
thread's every ``interval_s`` and any ``Broker.compact`` call, so two never
write the same partition's cleaned files. A failed partition is logged and
the pass goes on; a closed log ends its part of the pass quietly.
"""

from __future__ import annotations

import logging
import threading
from functools import partial

from ..cleaner import CleanStats, clean_log
from ..errors import LogClosedError, VQSError
from .catalog import compaction_settings

logger = logging.getLogger(__name__)

#: how often the background thread looks for dirty partitions (Kafka's log.cleaner.backoff.ms)
DEFAULT_INTERVAL_S = 15.0


class TopicCleaner:
    """Compaction of a broker's compacted topics (module doc)."""

    def __init__(self, catalog, interval_s: float = DEFAULT_INTERVAL_S, now_ms=None, *, worker: bool = True,
                 io_max_bytes_per_s: float | None = None, snapshot_producers=None):
        self._catalog = catalog
        #: (topic, partition) -> offset: records the partition's idempotent producers durably
        #: before a pass (clean_log's ``snapshot_producers``); None: their batches stay whole
        self._snapshot_producers = snapshot_producers
        self._worker = worker
        self._io_max_bytes_per_s = io_max_bytes_per_s  # (each pass's bound: clean_log)
        self._interval_s = interval_s
        self._now_ms = now_ms  # None: each log's own clock
        self._pass_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        #: what every pass did since the broker opened (the server's /metrics reports it)
        self.totals = CleanStats()

    def start(self) -> None:
        """Start the background thread (once; it sleeps while no topic is compacted)."""
        with self._start_lock:
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._loop, name="vqs-log-cleaner", daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self.run()
            except Exception:  # keep the thread alive; say what failed
                logger.exception("log cleaner pass failed")

    def run(self, topic: str | None = None, *, force: bool = False) -> CleanStats:
        """One pass over ``topic`` (None: every compacted topic); ``force``: clean whatever
        the dirty ratio. Returns the totals."""
        total = CleanStats()
        with self._pass_lock:
            topics = [self._catalog.get(topic)] if topic is not None else self._catalog.all()
            for t in topics:
                if not t.compacted or self._stop.is_set():
                    continue
                settings = compaction_settings(t.config)
                for p in range(t.partitions):
                    try:
                        log = t.log(p)
                        now = self._now_ms() if self._now_ms is not None else None
                        snap = self._snapshot_producers
                        s = clean_log(log, settings, now, force=force, stop=self._stop.is_set, worker=self._worker,
                                      io_max_bytes_per_s=self._io_max_bytes_per_s,
                                      snapshot_producers=None if snap is None else partial(snap, t, p))
                    except LogClosedError:
                        break  # deleted or closing
                    except (VQSError, OSError) as e:  # (a damaged segment, a failing disk: the log says)
                        logger.warning("log cleaner skipped %s partition %d: %s", t.name, p, e)
                        continue
                    for k in vars(total):
                        setattr(total, k, getattr(total, k) + getattr(s, k))
            for k in vars(total):
                setattr(self.totals, k, getattr(self.totals, k) + getattr(total, k))
        return total

    def close(self) -> None:
        """Stop the thread; a pass in progress ends after the group it is cleaning."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
