"""The console's sampler: rates are differences of the /metrics counters over time."""

from __future__ import annotations

from vqs.server.console.sampler import WINDOW_S, Sampler
from vqs.server.context import ServerContext
from vqs.server.settings import Settings


def test_rates_are_counter_differences_over_time():
    ctx = ServerContext(Settings())
    s = Sampler(ctx)
    m = ctx.metrics
    m.count_in("topic", "t", 10, 100)
    s.tick(now=1000.0)
    m.count_in("topic", "t", 20, 200)
    m.count_in("queue", "q", 10, 100)
    m.count_out("queue", "q", 4, 40)
    s.tick(now=1002.0)
    series = s.overview_series()
    assert series == {"t": [1002.0], "produce": [15.0], "consume": [2.0], "backlog": [0]}
    m.count_in("topic", "t", 50, 500)
    s.tick(now=1012.0)  # per-name points at most every 10 s: at 1000, then here
    spark, rin, rout = s.rates("topic", "t")
    assert spark == [rin] and rin == (20 + 50) / 12 and rout == 0.0
    for i in range(WINDOW_S + 10):
        s.tick(now=2000.0 + i)
    assert len(s.totals) == WINDOW_S + 1  # 15 minutes kept, no more
