"""Kafka listener benchmark: confluent-kafka against `vqs serve --kafka-port`, vs Redis Streams and
VQS's own binary REST path, one run; and the log cleaner, share groups and KIP-848 rebalancing.

    python bench/kafka_bench.py [--quick] [--only produce,compaction,share,rebalance] [--json out.json]

Every section starts its own VQS server (``--flush interval --flush-interval-ms
1000``, a Kafka port) on 127.0.0.1 in a temporary directory; 100-byte values.

``produce`` (issue 16's bars), one client, one partition, with ``redis-server``
(AOF ``appendfsync everysec``: the same promise, fsync within a second):

* Kafka produce: confluent-kafka, ``acks=all``, batched by the client
  (``linger.ms=5``), to delivery of the last message;
* Kafka consume: confluent-kafka ``consume(1000)`` from offset 0 to the end;
* Redis Streams: XADD pipelined 100 at a time; XREADGROUP COUNT 100 + XACK;
* VQS REST (vqs.Client, binary batches): send_batch of 100; read_batches of 100;
* produce latency at ``linger.ms=0``: one message, wait for its delivery, 2,000 times: p50/p99.

``compaction`` (bench/_kafka_compaction.py): a stream of 50 % key updates at
``--compaction-load`` x the single-partition produce rate, to a delete topic
and then a compacted one with the cleaner running: produce latency p50/p99 of
each, the cleaner's throughput and whether it keeps up.

``share`` (bench/_kafka_share.py): one topic read by a classic consumer and by
a ``ShareConsumer`` (consume + acknowledge), and the SQS front's
receive+delete at batch 10 (boto3), in the same server.

``rebalance`` (bench/_kafka_rebalance.py): ``group.protocol=consumer`` members
as processes, one SIGKILLed per round: the time until its partitions are
reassigned and read from.

Each section takes well under a minute at the default sizes (``--quick``:
seconds). Prints Markdown for bench/RESULTS.md and writes JSON (default
bench/kafka_bench.json) whose ``figures`` bench/ab.py compares.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time

import _common as C  # before any vqs import: it decides which vqs is measured
import _kafka_common as K
import _kafka_compaction
import _kafka_rebalance
import _kafka_share
from _common import free_port, wait_port
from _kafka_common import VALUE

SECTIONS = ("produce", "compaction", "share", "rebalance")


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
    """issue 16's bars over the produce section's results."""
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


def sizes(args) -> dict:
    """Counts and durations of every section (``--quick``: a smoke run of seconds)."""
    q = args.quick
    return {
        "n": 20_000 if q else 200_000, "n_lat": 300 if q else 2_000,
        "compaction_seconds": args.compaction_seconds or (3.0 if q else 15.0),
        "compaction_n_rate": 50_000 if q else 200_000,
        "share_n": 20_000 if q else 200_000, "share_n_sqs": 2_000 if q else 20_000,
        "rebalance_rounds": args.rebalance_rounds or (1 if q else 3),
    }


def print_produce(res: dict, info: dict) -> list[dict]:
    n, n_lat = res["n"], res["n_latency"]
    k, r, v = res["kafka"], res["redis"], res["rest"]
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
    figures = [C.figure(name, value, "msg/s") for name, value in k.items() if not name.endswith("_ms")]
    figures += [C.figure(name, value, "ms", better="lower") for name, value in k.items() if name.endswith("_ms")]
    return figures


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("--quick", action="store_true", help="small counts (a smoke run)")
    ap.add_argument("--only", default=",".join(SECTIONS),
                    help=f"comma-separated sections to run (default all: {','.join(SECTIONS)})")
    ap.add_argument("--compaction-seconds", type=float, default=None,
                    help="compaction: seconds of each paced stream (default 15; --quick 3)")
    ap.add_argument("--compaction-load", type=float, default=0.5,
                    help="compaction: the streams' pace as a share of the single-partition produce rate (default 0.5)")
    ap.add_argument("--rebalance-members", type=int, default=3, help="rebalance: group members (default 3)")
    ap.add_argument("--rebalance-rounds", type=int, default=None,
                    help="rebalance: members SIGKILLed, one per round (default 3; --quick 1)")
    ap.add_argument("--session-timeout-ms", type=int, default=6000,
                    help="rebalance: the server's consumer-protocol session timeout (default 6000)")
    ap.add_argument("--json", default=os.path.join(C.HERE, "kafka_bench.json"),
                    help="JSON output (default bench/kafka_bench.json; '' for none)")
    args = ap.parse_args(argv)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(only) - set(SECTIONS))
    if unknown or not only:
        ap.error(f"--only: sections are {', '.join(SECTIONS)} (not {', '.join(unknown) or 'none'})")
    if not 0 < args.compaction_load <= 1.5:
        ap.error("--compaction-load must be in (0, 1.5]")
    z = sizes(args)
    info = C.run_info("kafka_bench", argv, __file__)
    res: dict = {"sections": only, "sizes": z}
    with C.scratch_dir("vqs-kafka-bench-") as tmp:
        if "produce" in only:
            C.note("VQS server (Kafka and REST) ...")
            res["produce"] = p = {"n": z["n"], "n_latency": z["n_lat"]}
            with K.Server(tmp) as srv:
                p["kafka"] = bench_kafka(srv.bootstrap, z["n"], z["n_lat"])
                p["rest"] = bench_rest(srv.url, z["n"])
            C.note("Redis ...")
            p["redis"] = bench_redis(tmp, z["n"])
        if "compaction" in only:
            res["compaction"] = _kafka_compaction.run(tmp, z["compaction_seconds"], args.compaction_load,
                                                      z["compaction_n_rate"])
        if "share" in only:
            res["share"] = _kafka_share.run(tmp, z["share_n"], z["share_n_sqs"])
        if "rebalance" in only:
            res["rebalance"] = _kafka_rebalance.run(tmp, args.rebalance_members, z["rebalance_rounds"],
                                                    args.session_timeout_ms)
    print(f"## Kafka listener — bench/kafka_bench.py\n\n{C.run_header_md(info)}\n")
    all_bars: list[dict] = []
    figures: list[dict] = []
    if "produce" in res:
        figures += print_produce(res["produce"], info)
        b = bars(res["produce"])
        print("\nRatios against the bars (issue 16):\n")
        print(C.bars_table(b))
        all_bars += b
    for name, title, mod in (("compaction", "Compacted topics: the log cleaner under a produce stream",
                              _kafka_compaction),
                             ("share", "Share groups: consume + acknowledge", _kafka_share),
                             ("rebalance", "KIP-848: a member SIGKILLed", _kafka_rebalance)):
        if name in res:
            b = mod.bars(res[name])
            print(f"\n### {title}\n\n{mod.table_md(res[name])}\n\nBars:\n\n{C.bars_table(b)}")
            all_bars += b
            figures += mod.figures(res[name])
    C.write_json(args.json, {**info, **res, "bars": all_bars, "figures": figures})
    return 0


if __name__ == "__main__":
    sys.exit(main())
