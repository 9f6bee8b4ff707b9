"""vqs/server/counters.py against prometheus_client itself: the same updates give the same
exposition bytes (counter and histogram, several label sets, any order, edge values on the
bucket bounds)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

import vqs.server.metrics  # noqa: F401  (disables the _created series server-wide, as served)
from vqs.server.counters import CounterFamily, HistogramFamily

BUCKETS = (0.001, 0.005, 0.025, 0.1, 0.5, 2.5)
LABELS = st.sampled_from([("GET", "/a"), ("POST", "/topics/{topic}/messages"), ("DELETE", "/q")])
AMOUNTS = st.one_of(st.sampled_from(BUCKETS + (0.0,)), st.floats(min_value=0, max_value=10, allow_nan=False))
OPS = st.lists(st.tuples(st.sampled_from(["inc", "observe"]), LABELS, AMOUNTS), max_size=60)


@settings(max_examples=60, deadline=None)
@given(OPS)
def test_same_updates_same_exposition_as_prometheus_client(ops):
    ours_reg, theirs_reg = CollectorRegistry(), CollectorRegistry()
    c1 = CounterFamily("vqs_t_requests", "requests", ["method", "path"], registry=ours_reg)
    h1 = HistogramFamily("vqs_t_seconds", "latency", ["method", "path"], BUCKETS, registry=ours_reg)
    c2 = Counter("vqs_t_requests", "requests", ["method", "path"], registry=theirs_reg)
    h2 = Histogram("vqs_t_seconds", "latency", ["method", "path"], buckets=BUCKETS, registry=theirs_reg)
    for op, labels, x in ops:
        if op == "inc":
            c1.labels(*labels).inc(x)
            c2.labels(*labels).inc(x)
        else:
            h1.labels(*labels).observe(x)
            h2.labels(*labels).observe(x)
    assert generate_latest(ours_reg) == generate_latest(theirs_reg)


def test_a_negative_increment_is_refused_as_prometheus_client_does():
    c = CounterFamily("vqs_t_neg", "n", ["a"])
    try:
        c.labels("x").inc(-1)
    except ValueError:
        pass
    else:
        raise AssertionError("a negative increment was counted")
