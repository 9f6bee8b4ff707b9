"""What the sections of bench/kafka_bench.py share: a VQS server with a Kafka
port as a child process, topics made through the admin API, and a batched
confluent-kafka produce.

Invariants: the server binds 127.0.0.1 only, runs the vqs tree _common chose
(``cwd`` and PYTHONPATH), writes its output to ``server.log`` beside its data
directory, and is stopped (SIGTERM, then SIGKILL after 60 s) on exit from
the ``with`` block, error or not.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import _common as C

VALUE = b"x" * 100


class Server:
    """``python -m vqs.server`` (or ``script``, a wrapper taking the same options) with an HTTP
    and a Kafka port; ``env``: VQS_* settings for this server only."""

    def __init__(self, tmp: str, name: str = "vqs", env: dict | None = None, script: str | None = None):
        self.port = C.free_port()
        self.kafka_port = C.free_port()
        self.dir = os.path.join(tmp, name)
        self.env = env or {}
        self.script = script

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        os.makedirs(self.dir, exist_ok=True)
        self.log = open(os.path.join(os.path.dirname(self.dir), os.path.basename(self.dir) + "-server.log"), "wb")
        head = [sys.executable, self.script] if self.script else [sys.executable, "-m", "vqs.server"]
        self.proc = subprocess.Popen(
            [*head, "--data-dir", self.dir, "--port", str(self.port),
             "--kafka-port", str(self.kafka_port), "--flush", "interval", "--flush-interval-ms", "1000",
             "--log-level", "warning"],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=C.vqs_home(), env={**C.child_env(), **self.env})
        try:
            C.wait_port(self.port, 60)
            C.wait_port(self.kafka_port, 60)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        C.stop_process(self.proc)
        self.log.close()

    def partition_dir(self, topic: str, partition: int = 0) -> str:
        """The Log directory of ``topic``'s ``partition`` (vqs/broker/layout.py)."""
        return os.path.join(self.dir, "topics", topic, str(partition))


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                  config=config or {})])[name].result(30)


def producer(bootstrap: str, **conf):
    """A batching producer as the produce rows use (acks=all, linger.ms=5)."""
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 1 << 20,
                     "queue.buffering.max.messages": 1_000_000, **conf})


def produce_all(p, topic: str, n: int, value: bytes = VALUE, partition: int = 0) -> float:
    """Produce ``n`` copies of ``value`` as fast as the client takes them; seconds to the last delivery."""
    t0 = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value, partition=partition)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0, "records left undelivered"
    return time.perf_counter() - t0


def percentile(sorted_xs: list, q: float):
    """The ``q`` quantile (0..1) of an ascending list, nearest rank; None if empty."""
    if not sorted_xs:
        return None
    return sorted_xs[min(len(sorted_xs) - 1, int(len(sorted_xs) * q))]
