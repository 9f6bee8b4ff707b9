"""Labelled counters and histograms for the request path, exported as Prometheus families.

Every request updates four of the server's metrics (its count and latency,
messages and bytes in or out). prometheus_client's labelled children cost
about 1.5 us per ``inc`` and 4 us per ``observe`` (bench/RESULTS.md: a check,
a lock per value and a Python loop over the buckets), as much
as the rest of a lean produce's own work; these keep the same numbers as a
plain list per label set under one lock, and build the exposition families
only when ``/metrics`` is scraped.

Invariants: the exposition is prometheus_client's for a ``Counter`` /
``Histogram`` of the same name, help, labels and buckets (``_total``;
``_bucket`` with the same ``le`` strings, cumulative, ``+Inf`` last, then
``_count`` and ``_sum``; no ``_created``, disabled server-wide in metrics.py);
updates from any thread are counted exactly (one lock per family); a label
set appears once it is first used (``labels()``), as with prometheus_client.
"""

from __future__ import annotations

import threading
from bisect import bisect_left

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString


class CounterFamily:
    """A labelled counter: ``labels(*values).inc(n)``."""

    def __init__(self, name: str, documentation: str, labelnames, registry=None):
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._lock = threading.Lock()
        self._cells: dict[tuple, list] = {}
        if registry is not None:
            registry.register(self)

    def labels(self, *values) -> _CounterChild:
        key = _key(self, values)
        with self._lock:
            cell = self._cells.get(key)
            if cell is None:
                cell = self._cells[key] = [0.0]
        return _CounterChild(self._lock, cell)

    def describe(self):
        return [CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)]

    def collect(self):
        fam = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        with self._lock:
            rows = [(k, c[0]) for k, c in self._cells.items()]
        for k, v in rows:
            fam.add_metric(list(k), v)
        yield fam


class _CounterChild:
    __slots__ = ("_lock", "_cell")

    def __init__(self, lock, cell):
        self._lock = lock
        self._cell = cell

    def inc(self, amount: float = 1) -> None:
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        with self._lock:
            self._cell[0] += amount


class HistogramFamily:
    """A labelled histogram: ``labels(*values).observe(x)``; ``buckets`` are the upper bounds
    (``+Inf`` is added)."""

    def __init__(self, name: str, documentation: str, labelnames, buckets, registry=None):
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        bounds = sorted(float(b) for b in buckets)
        if bounds[-1] != float("inf"):
            bounds.append(float("inf"))
        self._bounds = tuple(bounds)
        self._le = [floatToGoString(b) for b in bounds]
        self._lock = threading.Lock()
        self._cells: dict[tuple, list] = {}  # label values -> [count per bucket..., sum]
        if registry is not None:
            registry.register(self)

    def labels(self, *values) -> _HistogramChild:
        key = _key(self, values)
        with self._lock:
            cell = self._cells.get(key)
            if cell is None:
                cell = self._cells[key] = [0] * len(self._bounds) + [0.0]
        return _HistogramChild(self._lock, cell, self._bounds)

    def describe(self):
        return [HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)]

    def collect(self):
        fam = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        with self._lock:
            rows = [(k, list(c)) for k, c in self._cells.items()]
        for k, c in rows:
            acc = 0
            buckets = []
            for le, n in zip(self._le, c):
                acc += n
                buckets.append((le, acc))
            fam.add_metric(list(k), buckets, c[-1])
        yield fam


class _HistogramChild:
    __slots__ = ("_lock", "_cell", "_bounds")

    def __init__(self, lock, cell, bounds):
        self._lock = lock
        self._cell = cell
        self._bounds = bounds

    def observe(self, amount: float) -> None:
        i = bisect_left(self._bounds, amount)  # the first bound >= amount, as prometheus_client's
        cell = self._cell
        with self._lock:
            cell[i] += 1
            cell[-1] += amount


def _key(family, values) -> tuple:
    if len(values) != len(family.labelnames):
        raise ValueError(f"{family.name}: {len(family.labelnames)} label values expected, got {len(values)}")
    return tuple(str(v) for v in values)
