"""Kafka listener benchmark: confluent-kafka against `vqs serve --kafka-port`, vs Redis Streams and
VQS's own binary REST path, one run.

    python bench/kafka_bench.py [--quick] [--json out.json]

Starts a VQS server (``--flush interval --flush-interval-ms 1000`` and a Kafka
port) and ``redis-server`` (AOF ``appendfsync everysec``: the same promise,
fsync within a second) on 127.0.0.1 in a temporary directory. 100-byte values,
one client, one partition:

* Kafka produce: confluent-kafka, ``acks=all``, batched by the client
  (``linger.ms=5``), to delivery of the last message;
* Kafka consume: confluent-kafka ``consume(1000)`` from offset 0 to the end;
* Redis Streams: XADD pipelined 100 at a time; XREADGROUP COUNT 100 + XACK;
* VQS REST (vqs.Client, binary batches): send_batch of 100; read_batches of 100;
* produce latency at ``linger.ms=0``: one message, wait for its delivery, 2,000 times: p50/p99.

Prints Markdown for bench/RESULTS.md and writes JSON (default bench/kafka_bench.json).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time

import _common as C  # before any vqs import: it decides which vqs is measured
from server_bench import free_port, wait_port

VALUE = b"x" * 100


class Server:
    def __init__(self, tmp: str):
        self.port = free_port()
        self.kafka_port = free_port()
        self.dir = os.path.join(tmp, "vqs")

    def __enter__(self):
        self.log = open(os.path.join(os.path.dirname(self.dir), "vqs-server.log"), "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vqs.server", "--data-dir", self.dir, "--port", str(self.port),
             "--kafka-port", str(self.kafka_port), "--flush", "interval", "--flush-interval-ms", "1000",
             "--log-level", "warning"],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=C.vqs_home(), env=C.child_env())
        wait_port(self.port, 60)
        wait_port(self.kafka_port, 60)
        return self

    def __exit__(self, *exc):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        self.log.close()


def bench_kafka(bootstrap: str, n: int, n_lat: int) -> dict:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    out = {}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for t in ("kp", "kl"):
        admin.create_topics([NewTopic(t, num_partitions=1, replication_factor=1)])[t].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 1_000_000})
    t0 = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce("kp", VALUE, partition=0)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0
    out["kafka_produce_c1"] = C.rate(n, time.perf_counter() - t0)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 8 << 20})
    c.assign([TopicPartition("kp", 0, 0)])
    got = 0
    t0 = time.perf_counter()
    while got < n:
        for m in c.consume(1000, timeout=5):
            if not m.error():
                m.value()
                got += 1
    out["kafka_consume_c1"] = C.rate(got, time.perf_counter() - t0)
    c.close()
    lp = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    lp.produce("kl", VALUE, partition=0)
    lp.flush(10)
    lat = []
    for _ in range(n_lat):
        t0 = time.perf_counter()
        lp.produce("kl", VALUE, partition=0)
        lp.flush(10)
        lat.append((time.perf_counter() - t0) * 1000)
    lat.sort()
    out["kafka_produce_latency_p50_ms"] = lat[len(lat) // 2]
    out["kafka_produce_latency_p99_ms"] = lat[int(len(lat) * 0.99)]
    return out


def bench_rest(url: str, n: int) -> dict:
    from vqs.client import Client

    out = {}
    with Client(url) as c:
        c.create_topic("rest")
        p = c.producer()
        batch = [VALUE] * 100
        t0 = time.perf_counter()
        for _ in range(n // 100):
            p.send_batch("rest", batch, partition=0)
        out["rest_produce_b100_c1"] = C.rate(n, time.perf_counter() - t0)
        t0 = time.perf_counter()
        off = got = 0
        while got < n:
            bs, off, _ = c.read_batches("rest", 0, off, max_records=100)
            got += sum(b.count for b in bs)
            for b in bs:
                b.values()
        out["rest_consume_b100_c1"] = C.rate(got, time.perf_counter() - t0)
    return out


def bench_redis(tmp: str, n: int) -> dict:
    import redis

    exe = shutil.which("redis-server")
    if not exe:
        return {"error": "redis-server not installed (apt-get install redis-server)"}
    port = free_port()
    d = os.path.join(tmp, "redis")
    os.makedirs(d)
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--dir", d, "--appendonly", "yes",
                             "--appendfsync", "everysec", "--save", "", "--daemonize", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = {}
    try:
        wait_port(port)
        r = redis.Redis(port=port)
        out["version"] = r.info()["redis_version"]
        t0 = time.perf_counter()
        for _ in range(n // 100):
            pipe = r.pipeline(transaction=False)
            for _ in range(100):
                pipe.xadd("s", {"v": VALUE})
            pipe.execute()
        out["xadd_pipelined_b100_c1"] = C.rate(n, time.perf_counter() - t0)
        r.xgroup_create("s", "g", id="0")
        t0 = time.perf_counter()
        got = 0
        while got < n:
            res = r.xreadgroup("g", "c", {"s": ">"}, count=100)
            ids = [mid for _, msgs in res for mid, _ in msgs]
            r.xack("s", "g", *ids)
            got += len(ids)
        out["xreadgroup_b100_xack_c1"] = C.rate(got, time.perf_counter() - t0)
    finally:
        proc.terminate()
        proc.wait(30)
    return out


def bars(res: dict) -> list[dict]:
    k, r, v = res["kafka"], res["redis"], res["rest"]

    def bar(name, a, b, target):
        if a is None or b is None:
            return {"bar": name, "value": None, "target": f">= {target}x", "ok": None}
        ratio = a / b
        return {"bar": name, "value": ratio, "target": f">= {target}x", "ok": ratio >= target}

    return [
        bar("Kafka produce / Redis pipelined XADD", k["kafka_produce_c1"], r.get("xadd_pipelined_b100_c1"), 1.5),
        bar("Kafka consume / Redis XREADGROUP+XACK", k["kafka_consume_c1"], r.get("xreadgroup_b100_xack_c1"), 1.5),
        bar("Kafka produce / VQS binary REST produce", k["kafka_produce_c1"], v["rest_produce_b100_c1"], 1.0),
        bar("Kafka consume / VQS binary REST consume", k["kafka_consume_c1"], v["rest_consume_b100_c1"], 1.0),
    ]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small counts (a smoke run)")
    ap.add_argument("--json", default=os.path.join(C.HERE, "kafka_bench.json"),
                    help="JSON output (default bench/kafka_bench.json; '' for none)")
    args = ap.parse_args(argv)
    n, n_lat = (20_000, 300) if args.quick else (200_000, 2_000)
    info = C.run_info("kafka_bench", argv, __file__)
    res = {"n": n, "n_latency": n_lat}
    with C.scratch_dir("vqs-kafka-bench-") as tmp:
        C.note("VQS server (Kafka and REST) ...")
        with Server(tmp) as srv:
            res["kafka"] = bench_kafka(f"127.0.0.1:{srv.kafka_port}", n, n_lat)
            res["rest"] = bench_rest(f"http://127.0.0.1:{srv.port}", n)
        C.note("Redis ...")
        res["redis"] = bench_redis(tmp, n)
    k, r, v = res["kafka"], res["redis"], res["rest"]
    print(f"## Kafka listener — bench/kafka_bench.py\n\n{C.run_header_md(info)}\n")
    print(f"{n:,} messages of 100 bytes, one client, one partition; latency over {n_lat:,} sends. "
          "Durability: VQS flush=interval, flush_interval_ms=1000; Redis appendfsync everysec.\n")
    rows = [
        ["produce (msg/s)", C.fmt_num(k["kafka_produce_c1"]), C.fmt_num(r.get("xadd_pipelined_b100_c1")),
         C.fmt_num(v["rest_produce_b100_c1"])],
        ["consume (msg/s)", C.fmt_num(k["kafka_consume_c1"]), C.fmt_num(r.get("xreadgroup_b100_xack_c1")),
         C.fmt_num(v["rest_consume_b100_c1"])],
        ["produce latency p50 / p99 (ms, linger.ms=0, acks=all)",
         f"{k['kafka_produce_latency_p50_ms']:.2f} / {k['kafka_produce_latency_p99_ms']:.2f}", "-", "-"],
    ]
    print(C.markdown_table(["workload", "VQS Kafka (confluent-kafka)", "Redis Streams (pipelined 100)",
                            "VQS REST binary (batches of 100)"], rows, right=[1, 2, 3]))
    print("\nRatios against the bars (issue 16):\n")
    print(C.bars_table(bars(res)))
    figures = [C.figure(name, value, "msg/s") for name, value in k.items() if not name.endswith("_ms")]
    figures += [C.figure(name, value, "ms", better="lower") for name, value in k.items() if name.endswith("_ms")]
    C.write_json(args.json, {**info, **res, "bars": bars(res), "figures": figures})
    return 0


if __name__ == "__main__":
    sys.exit(main())
