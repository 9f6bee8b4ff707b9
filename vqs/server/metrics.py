"""Prometheus metrics of the server (``GET /metrics``).

Counters are updated on the request path (cheap: a lock and an add); gauges
of backlog, disk bytes and segments are computed when /metrics is scraped:
``vqs_disk_bytes`` / ``vqs_segments`` per topic and per queue (message log
plus lease-state log), ``vqs_disk_free_bytes`` / ``vqs_disk_total_bytes`` of
the data directory's filesystem, and ``vqs_log_failed`` / ``vqs_log_disk_full``
(0 or 1) per topic and queue (vqs/server/health.py says what they mean).
"""

from __future__ import annotations

import time

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from ..errors import CorruptRecordError, LogClosedError, QueueDoesNotExist, TopicDoesNotExist
from .counters import CounterFamily, HistogramFamily
from .health import disk_space, named_logs

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

disable_created_metrics()

# a topic or queue deleted (its logs closed) between being listed and being read by a scrape
_GONE = (TopicDoesNotExist, QueueDoesNotExist, LogClosedError)

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25)


class Metrics:
    def __init__(self, broker_ref=None, auth_failures=None):
        self.registry = r = CollectorRegistry(auto_describe=True)
        # per request: counters.py's families (the same exposition, a fraction of the cost)
        self.requests = CounterFamily("vqs_http_requests", "Requests over HTTP and the native protocol (api=native)", ["api", "route", "method", "status"],
                                      registry=r)
        self.latency = HistogramFamily("vqs_http_request_duration_seconds", "HTTP request latency",
                                       ["api", "route"], buckets=_BUCKETS, registry=r)
        self.errors = Counter("vqs_errors", "Error responses by code", ["api", "code"], registry=r)
        self.messages_in = CounterFamily("vqs_messages_in", "Messages written", ["kind", "name"], registry=r)
        self.bytes_in = CounterFamily("vqs_bytes_in", "Message bytes written", ["kind", "name"], registry=r)
        self.messages_out = CounterFamily("vqs_messages_out", "Messages read or received", ["kind", "name"],
                                          registry=r)
        self.bytes_out = CounterFamily("vqs_bytes_out", "Message bytes read or received", ["kind", "name"],
                                       registry=r)
        self.connections = Gauge("vqs_http_connections", "Open HTTP connections", registry=r)
        self.long_polls = Gauge("vqs_long_poll_waiters", "Requests waiting in a long poll", registry=r)
        self.rejected = Counter("vqs_rejected_requests", "Requests refused by a limit", ["reason"], registry=r)
        self.started = time.time()
        self._in: dict = {}  # (kind, name) -> the labelled children of messages_in, bytes_in
        self._out: dict = {}
        self._broker_ref = broker_ref
        r.register(_BrokerCollector(lambda: self._broker_ref() if self._broker_ref else None))
        #: requests answered by the HTTP fast path (fast_http.py), by api ("rest", "sqs"): plain ints,
        #: added to on the event loop's thread only (no lock), exported as vqs_fast_http_requests_total
        self.fast_http = {"rest": 0, "sqs": 0}
        r.register(_CountsCollector("vqs_fast_http_requests", "HTTP requests answered by the fast path "
                                    "(below ASGI), by API", "api", self.fast_http))
        if auth_failures is not None:  # (auth_failures.py: every front's, Kafka's and gRPC's too)
            r.register(_CountsCollector("vqs_authentication_failures", "Failed authentications (no credential, "
                                        "or a wrong one), by front", "front", auth_failures.counts))

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def count_in(self, kind: str, name: str, n: int, nbytes: int) -> None:
        pair = self._in.get((kind, name))
        if pair is None:  # labels() costs more than the increments: its children are kept
            pair = self._in[(kind, name)] = (self.messages_in.labels(kind, name), self.bytes_in.labels(kind, name))
        pair[0].inc(n)
        pair[1].inc(nbytes)

    def count_out(self, kind: str, name: str, n: int, nbytes: int) -> None:
        if n:
            pair = self._out.get((kind, name))
            if pair is None:
                pair = self._out[(kind, name)] = (self.messages_out.labels(kind, name),
                                                  self.bytes_out.labels(kind, name))
            pair[0].inc(n)
            pair[1].inc(nbytes)


class _CountsCollector:
    """A counter family of one label read from a dict its owner keeps (label value -> count):
    ``vqs_fast_http_requests_total{api}`` (which requests the HTTP fast path answered; the others
    went through ASGI, vqs_http_requests counts both) and
    ``vqs_authentication_failures_total{front}`` (auth_failures.py)."""

    def __init__(self, name: str, help_text: str, label: str, counts: dict):
        self._name, self._help, self._label, self._counts = name, help_text, label, counts

    def describe(self):
        return []

    def collect(self):
        fam = CounterMetricFamily(self._name, self._help, labels=[self._label])
        for value, n in list(self._counts.items()):
            fam.add_metric([value], n)
        yield fam


class _BrokerCollector:
    """Backlog per topic partition, queue and group; disk bytes and segments."""

    def __init__(self, get_broker):
        self._get = get_broker

    def describe(self):
        return []

    def collect(self):
        broker = self._get()
        if broker is None:
            return
        end = GaugeMetricFamily("vqs_topic_end_offset", "Next offset to be written", labels=["topic", "partition"])
        start = GaugeMetricFamily("vqs_topic_start_offset", "First offset still stored", labels=["topic", "partition"])
        disk = GaugeMetricFamily("vqs_disk_bytes", "Bytes on disk", labels=["kind", "name"])
        segs = GaugeMetricFamily("vqs_segments", "Log segments", labels=["kind", "name"])
        lag = GaugeMetricFamily("vqs_group_lag", "Messages a consumer group has not committed",
                                labels=["group", "topic", "partition"])
        qv = GaugeMetricFamily("vqs_queue_messages", "Queue messages by state", labels=["queue", "state"])
        free = GaugeMetricFamily("vqs_disk_free_bytes", "Free bytes of the data directory's filesystem")
        total = GaugeMetricFamily("vqs_disk_total_bytes", "Size of the data directory's filesystem")
        failed = GaugeMetricFamily("vqs_log_failed", "1 if a log of the topic or queue failed a disk "
                                   "write or fsync (I/O error: no writes until a restart)", labels=["kind", "name"])
        full = GaugeMetricFamily("vqs_log_disk_full", "1 while writes to the topic or queue find no space "
                                 "(or are refused under min_free_bytes)", labels=["kind", "name"])
        try:
            f, t = disk_space(broker.path)
            free.add_metric([], f)
            total.add_metric([], t)
        except OSError:
            pass
        try:
            flags: dict[tuple[str, str], list[int]] = {}
            for kind, name, _part, lg in named_logs(broker):
                fl = flags.setdefault((kind, name), [0, 0])
                fl[0] |= lg.failed is not None
                fl[1] |= lg.disk_full
            for (kind, name), (fa, fu) in flags.items():
                failed.add_metric([kind, name], fa)
                full.add_metric([kind, name], fu)
        except LogClosedError:
            pass
        try:
            for name in broker.topics():
                try:
                    t = broker.topic(name)
                    total_segments = 0
                    for p in range(t.partitions):
                        lg = t.log(p)
                        end.add_metric([name, str(p)], lg.end_offset)
                        start.add_metric([name, str(p)], lg.start_offset)
                        total_segments += lg.segment_count
                    disk.add_metric(["topic", name], t.size_bytes)
                    segs.add_metric(["topic", name], total_segments)
                except _GONE:
                    continue
            for g in broker.groups():
                try:
                    for row in broker.describe_group(g):
                        lag.add_metric([g, row.topic, str(row.partition)], row.lag)
                except _GONE:
                    continue
            for qn in broker.queues():
                try:
                    q = broker.queue(qn)
                    a = q.get_attributes()
                    for state, key in (("visible", "ApproximateNumberOfMessages"),
                                       ("in_flight", "ApproximateNumberOfMessagesNotVisible"),
                                       ("delayed", "ApproximateNumberOfMessagesDelayed")):
                        if key in a:
                            qv.add_metric([qn, state], int(a[key]))
                    for attr, fam in (("size_bytes", disk), ("segment_count", segs)):
                        v = getattr(q, attr, None)
                        if isinstance(v, int):
                            fam.add_metric(["queue", qn], v)
                except _GONE:
                    continue
                except CorruptRecordError:  # it cannot be opened: vqs_log_failed says so (health.py)
                    continue
        except LogClosedError:  # the broker closed during the scrape: report what was gathered
            pass
        cleaned = CounterMetricFamily("vqs_cleaner_bytes", "Bytes the log cleaner read and wrote "
                                      "(compacted topics)", labels=["direction"])
        removed = CounterMetricFamily("vqs_cleaner_records_removed", "Records the log cleaner removed")
        c = broker.cleaner_totals
        cleaned.add_metric(["in"], c.bytes_in)
        cleaned.add_metric(["out"], c.bytes_out)
        removed.add_metric([], c.records_removed)
        yield from (end, start, disk, segs, lag, qv, free, total, failed, full, cleaned, removed)
