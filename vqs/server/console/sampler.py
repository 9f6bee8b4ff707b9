"""The console's history: the server's counters sampled once a second, kept for 15 minutes.

The numbers are those of ``/metrics``: ``vqs_messages_in`` and
``vqs_messages_out`` (every REST and SQS produce, send, consume and receive)
and the backlog that ``/metrics`` computes when scraped (group lag plus the
messages queues hold). Rates are differences of the counters between samples.

Invariants: at most ``WINDOW_S`` seconds of history (900 points of the
totals and of each group's lag, 90 points per topic and queue); nothing is persisted (a
restart starts a new history). A backlog pass walks every topic, group and
queue, so it runs at most every second and never takes more than about 5% of
one core: after a pass that took ``t`` seconds the next waits ``20 t``.
Sampling runs in the server's lifespan (a task started and cancelled with it).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import deque

import anyio

from ...errors import LogClosedError, QueueDoesNotExist, TopicDoesNotExist, VQSError

logger = logging.getLogger("vqs.server.console")

WINDOW_S = 900
PER_NAME_EVERY_S = 10
_GONE = (TopicDoesNotExist, QueueDoesNotExist, LogClosedError)


def _by_name(counter) -> dict[tuple[str, str], float]:
    out = {}
    for fam in counter.collect():
        for s in fam.samples:
            if s.name.endswith("_total"):
                out[(s.labels["kind"], s.labels["name"])] = s.value
    return out


class Sampler:
    def __init__(self, ctx):
        self.ctx = ctx
        self.totals: deque = deque(maxlen=WINDOW_S + 1)  # (t, in, out, backlog)
        self.per_name: dict[tuple[str, str], deque] = {}  # (kind, name) -> (t, in, out)
        self.group_lag: dict[str, deque] = {}  # group -> (t, lag)
        self.backlog = 0
        self._next_backlog = 0.0
        self._next_per_name = 0.0
        self._failing: type | None = None

    async def run(self) -> None:
        """Sample every second until cancelled (the server's lifespan)."""
        while True:
            if self.ctx.ready and not self.ctx.stopping:
                try:
                    await self.ctx.run(self.tick)
                    self._failing = None
                except Exception as e:  # a sample is never worth stopping the history for
                    if type(e) is not self._failing:  # once per kind of failure, not every second
                        self._failing = type(e)
                        logger.warning("console sampler: %s (the charts miss these samples)", type(e).__name__,
                                       exc_info=True)
            await anyio.sleep(1.0)

    def tick(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        m = self.ctx.metrics
        ins, outs = _by_name(m.messages_in), _by_name(m.messages_out)
        if time.monotonic() >= self._next_backlog:
            t0 = time.monotonic()
            self.backlog = self._backlog(now)
            took = time.monotonic() - t0
            self._next_backlog = time.monotonic() + max(1.0, 20 * took) - 0.05
        self.totals.append((now, sum(ins.values()), sum(outs.values()), self.backlog))
        if now >= self._next_per_name:
            self._next_per_name = now + PER_NAME_EVERY_S
            for key in set(ins) | set(outs):
                d = self.per_name.get(key)
                if d is None:
                    d = self.per_name[key] = deque(maxlen=WINDOW_S // PER_NAME_EVERY_S + 1)
                d.append((now, ins.get(key, 0.0), outs.get(key, 0.0)))

    def _backlog(self, now: float) -> int:
        b = self.ctx.broker
        if b is None:
            return 0
        total = 0
        try:
            seen = set()
            for g in b.groups():
                try:
                    lag = sum(r.lag for r in b.describe_group(g))
                except _GONE:
                    continue
                seen.add(g)
                total += lag
                d = self.group_lag.get(g)
                if d is None:
                    d = self.group_lag[g] = deque(maxlen=WINDOW_S + 1)
                d.append((now, lag))
            for g in set(self.group_lag) - seen:
                del self.group_lag[g]
            for qn in b.queues():
                try:
                    c = b.queue(qn).counts()
                except _GONE:
                    continue
                total += c["visible"] + c["in_flight"] + c["delayed"]
        except (LogClosedError, VQSError):
            pass
        return total

    # ------------------------------------------------------------------ views
    def overview_series(self, seconds: int = WINDOW_S) -> dict:
        """``{"t": [...], "produce": [...], "consume": [...], "backlog": [...]}``:
        rates in messages per second between consecutive samples."""
        pts = list(self.totals)
        if seconds < WINDOW_S and pts:
            cut = pts[-1][0] - seconds
            pts = [p for p in pts if p[0] >= cut]
        t, prod, cons, back = [], [], [], []
        for a, b in itertools.pairwise(pts):
            dt = b[0] - a[0]
            if dt <= 0:
                continue
            t.append(round(b[0], 3))
            prod.append(round(max(0.0, b[1] - a[1]) / dt, 3))
            cons.append(round(max(0.0, b[2] - a[2]) / dt, 3))
            back.append(b[3])
        return {"t": t, "produce": prod, "consume": cons, "backlog": back}

    def rates(self, kind: str, name: str) -> tuple[list[float], float, float]:
        """(produce-rate points for a sparkline, the latest in rate, the latest out rate)."""
        pts = list(self.per_name.get((kind, name), ()))
        rin = []
        last_in = last_out = 0.0
        for a, b in itertools.pairwise(pts):
            dt = b[0] - a[0]
            if dt > 0:
                last_in = (b[1] - a[1]) / dt
                last_out = (b[2] - a[2]) / dt
                rin.append(last_in)
        return rin, last_in, last_out

    def lag_series(self, group: str) -> dict:
        pts = list(self.group_lag.get(group, ()))
        return {"t": [round(p[0], 3) for p in pts], "lag": [p[1] for p in pts]}
