"""Helpers of the Spark tests: topics made and read with the Broker."""

from __future__ import annotations

from vqs.broker import Broker
from vqs.pipelines.demo import LocalServer


def make_topic(path, name, partitions=1, records=None, **settings):
    """Create ``name`` under data dir ``path`` and append ``records``:
    {partition: [(value, key, headers, timestamp_ms), ...]}."""
    with Broker(path) as b:
        b.create_topic(name, partitions=partitions, **settings)
        prod = b.producer()
        for p, recs in (records or {}).items():
            if not recs:
                continue
            prod.send_batch(
                name,
                [r[0] for r in recs],
                keys=[r[1] for r in recs],
                headers=[r[2] for r in recs],
                partition=p,
                timestamps_ms=[r[3] for r in recs],
            )


def append(path, name, partition, values, timestamp_ms=None):
    with Broker(path) as b:
        b.producer().send_batch(
            name, values, partition=partition,
            timestamps_ms=None if timestamp_ms is None else [timestamp_ms] * len(values),
        )


def log_contents(path, name):
    """Every record of topic ``name`` as (topic, partition, offset, ts_ms, key, value, headers)."""
    out = []
    with Broker(path) as b:
        t = b.topic(name)
        for p in range(t.partitions):
            lg = t.log(p)
            off = lg.start_offset
            while off < lg.end_offset:
                recs = lg.read(off, max_records=10_000)
                for r in recs:
                    out.append((name, p, r.offset, r.timestamp_ms, r.key, r.value, tuple(r.headers)))
                off = recs[-1].offset + 1
    return out


class Server(LocalServer):
    """The demo's LocalServer (``python -m vqs.server`` on a free loopback
    port), for url-mode tests; its log sits beside the data dir."""

    def __init__(self, data_dir):
        data_dir = str(data_dir)
        super().__init__(data_dir, data_dir.rstrip("/") + ".server.log")


