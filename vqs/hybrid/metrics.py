"""HybridMetrics: a snapshot of a HybridQueue's counters (``queue.metrics``),
and the same numbers as Prometheus metrics.

``queue.metrics`` is a frozen snapshot (plain attributes, ``as_dict()``). It is
also a Prometheus *collector*: ``registry.register(queue.metrics)`` (or
``queue.metrics.register()`` for the default registry) makes every scrape read
the queue's counters afresh, through a weak reference, so a registered
collector neither keeps a closed queue alive nor reports stale numbers.

prometheus-client is not a dependency of VQS: it is imported only when a
scrape or ``register()`` needs it (``pip install prometheus-client``, or the
``server`` extra); without it ``register()`` raises ConfigError saying so.

Latency histograms (``HybridQueue(latency_histograms=True)``) time every
put/get call (two ``perf_counter`` reads and a bisect, about 0.2 µs, which is
why they are off by default: the memory tier's put is ~0.5 µs). Buckets are
fixed (LATENCY_BUCKETS, seconds).

Invariants: counters only grow while a queue is open; a snapshot's numbers
were read under the queue's lock, so they are consistent with each other.
"""

from __future__ import annotations

import threading
import time
import weakref
from bisect import bisect_left
from dataclasses import dataclass, field, fields

from ..errors import ConfigError

#: upper bounds (seconds) of the put/get latency histogram buckets (+Inf implied)
LATENCY_BUCKETS = (1e-6, 5e-6, 2e-5, 1e-4, 5e-4, 0.001, 0.005, 0.025, 0.1, 0.5, 2.5, 10.0)


class _Histogram:
    """Bucket counts and a sum, updated under a lock (a few threads at most)."""

    __slots__ = ("counts", "sum", "_lock")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS) + 1)
        self.sum = 0.0
        self._lock = threading.Lock()

    def observe(self, seconds: float) -> None:
        i = bisect_left(LATENCY_BUCKETS, seconds)
        with self._lock:
            self.counts[i] += 1
            self.sum += seconds

    def snapshot(self) -> tuple[tuple[int, ...], float]:
        with self._lock:
            return tuple(self.counts), self.sum


class LatencyHistograms:
    """put/get latency of one queue; wraps its bound methods (see module doc)."""

    def __init__(self) -> None:
        self.put = _Histogram()
        self.get = _Histogram()

    @staticmethod
    def _timed(fn, hist: _Histogram):
        clock = time.perf_counter
        observe = hist.observe

        def timed(*args, **kwargs):
            t0 = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                observe(clock() - t0)

        timed.__name__ = fn.__name__
        timed.__doc__ = fn.__doc__
        return timed

    def timed_put(self, fn):
        return self._timed(fn, self.put)

    def timed_get(self, fn):
        return self._timed(fn, self.get)


@dataclass(frozen=True)
class HybridMetrics:
    """A snapshot of a HybridQueue's counters (``queue.metrics``); also a
    Prometheus collector of the live queue (module doc)."""

    puts: int            #: items put since open
    gets: int            #: items got since open
    spilled: int         #: items moved from the memory tail to disk (budget full, or close)
    disk_writes: int     #: items written to the log (spilled, or every put when durable)
    disk_reads: int      #: items read back from the log (read-ahead)
    memory_items: int    #: live objects held: memory tail + read cache
    memory_bytes: int    #: their estimated size (see docs/hybrid.md)
    disk_items: int      #: unconsumed items in the log (read cache included)
    disk_bytes: int      #: their serialized size
    log_bytes: int       #: size of the log's files
    log_segments: int
    durable: bool
    disk_full_errors: int = 0       #: disk writes that found the filesystem full
    full_refusals: int = 0          #: puts that raised queue.Full
    serialization_errors: int = 0   #: items the serializer refused
    items: int = 0                  #: items in the queue, both tiers (``qsize()``)
    #: the queue itself (a weak reference), read again at each scrape
    source: object = field(default=None, repr=False, compare=False)
    #: the ``queue`` label of the Prometheus metrics (default: the queue's path)
    label: str | None = field(default=None, repr=False, compare=False)

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("source", "label")}

    # ------------------------------------------------------ Prometheus collector

    def labelled(self, name: str) -> HybridMetrics:
        """The same collector with ``queue=name`` as its label (instead of the path)."""
        return HybridMetrics(**{f.name: getattr(self, f.name) for f in fields(self) if f.name != "label"},
                             label=name)

    def register(self, registry=None) -> HybridMetrics:
        """Register with ``registry`` (default: prometheus_client's global REGISTRY)."""
        prom = _prometheus()
        (registry if registry is not None else prom.REGISTRY).register(self)
        return self

    def describe(self):
        return []  # the families are known only at collect time (no auto-describe needed)

    def collect(self):
        core = _prometheus().core
        ref = self.source
        q = ref() if isinstance(ref, weakref.ref) else None
        if q is None or q.closed:
            return
        m = q.metrics
        hist = q._latency
        lab = [self.label or q.path]
        g = core.GaugeMetricFamily
        c = core.CounterMetricFamily

        def gauge(name, doc, value):
            fam = g(name, doc, labels=["queue"])
            fam.add_metric(lab, value)
            return fam

        def counter(name, doc, value):
            fam = c(name, doc, labels=["queue"])
            fam.add_metric(lab, value)
            return fam

        yield gauge("vqs_hybrid_items", "Items in the queue (both tiers)", m.items)
        yield gauge("vqs_hybrid_memory_items", "Live objects held (memory tail + read cache)", m.memory_items)
        yield gauge("vqs_hybrid_disk_items", "Unconsumed items in the disk tier", m.disk_items)
        yield gauge("vqs_hybrid_memory_bytes", "Estimated size of the live objects held", m.memory_bytes)
        yield gauge("vqs_hybrid_disk_bytes", "Serialized bytes waiting in the disk tier", m.disk_bytes)
        yield gauge("vqs_hybrid_log_bytes", "Size of the disk tier's log files", m.log_bytes)
        yield gauge("vqs_hybrid_log_segments", "Segments of the disk tier's log", m.log_segments)
        yield counter("vqs_hybrid_puts", "Items put since open", m.puts)
        yield counter("vqs_hybrid_gets", "Items got since open", m.gets)
        yield counter("vqs_hybrid_spilled", "Items spilled from memory to disk", m.spilled)
        yield counter("vqs_hybrid_disk_writes", "Items written to the disk tier", m.disk_writes)
        yield counter("vqs_hybrid_disk_reads", "Items read back from the disk tier", m.disk_reads)
        err = c("vqs_hybrid_errors", "Errors by kind", labels=["queue", "kind"])
        err.add_metric(lab + ["disk_full"], m.disk_full_errors)
        err.add_metric(lab + ["queue_full"], m.full_refusals)
        err.add_metric(lab + ["serialization"], m.serialization_errors)
        yield err
        if hist is not None:
            for name, h in (("put", hist.put), ("get", hist.get)):
                counts, total = h.snapshot()
                buckets, acc = [], 0
                for bound, n in zip((*map(repr, LATENCY_BUCKETS), "+Inf"), counts):
                    acc += n
                    buckets.append((bound, acc))
                fam = core.HistogramMetricFamily(f"vqs_hybrid_{name}_latency_seconds",
                                                 f"Latency of {name} calls", labels=["queue"])
                fam.add_metric(lab, buckets, total)
                yield fam


def _prometheus():
    try:
        import prometheus_client
        import prometheus_client.core
    except ImportError as e:
        raise ConfigError(
            "HybridQueue metrics for Prometheus need prometheus-client: "
            "pip install prometheus-client (or vqs[server])"
        ) from e
    return prometheus_client
