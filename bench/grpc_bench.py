"""gRPC front benchmark: ProduceStream and Subscribe vs the binary REST path and Redis Streams, one run.

    python bench/grpc_bench.py [--quick] [--rounds 3] [--json out.json]

Starts a VQS server (``--grpc-port``) and ``redis-server`` on 127.0.0.1 in a
temporary directory and stops them afterwards. 100-byte records, one client:

* produce, batches of 100: gRPC ``ProduceStream`` (batches back to back on one
  stream, an ack per batch), gRPC unary ``Produce``, REST binary
  (``vqs.Client``, ``application/vnd.vqs.batch``), Redis pipelined XADD;
* consume, 100 a message: gRPC ``Subscribe`` (``max_records=100``), gRPC
  unary ``Fetch``, REST binary by offset, Redis XREADGROUP COUNT 100 + XACK;
* end-to-end latency, produce -> subscriber (p50/p99; each round, the round with the
  lowest p99 reported): one record at a time (a ms apart, each after the
  previous one's ack) produced on ProduceStream while a Subscribe stream waits;
  for comparison REST (produce + a long-polling reader) and Redis (XADD + XREAD BLOCK);
* HTTP latency (GET /health/live, p50/p99) idle and while gRPC streams run
  flat out: what running gRPC on its own loop and thread costs HTTP.

Each throughput workload runs ``--rounds`` times, interleaved; the best round
counts (load from other users of the machine only slows a round down).
Durability, stated: VQS ``--flush interval --flush-interval-ms 1000``; Redis
AOF ``appendfsync everysec`` (bench/server_bench.py's setting).

Prints Markdown for bench/RESULTS.md and writes JSON (default bench/grpc_bench.json).
"""

from __future__ import annotations

import argparse
import os
import queue
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time

import _common as C  # before any vqs import: it decides which vqs is measured

free_port = C.free_port
wait_port = C.wait_port

VALUE = b"x" * 100
BATCH = [VALUE] * 100




def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


class Server:
    def __init__(self, tmp: str):
        self.port, self.grpc_port = free_port(), free_port()
        self.dir = os.path.join(tmp, "vqs")
        self.log = open(os.path.join(tmp, "vqs-server.log"), "wb")

    def __enter__(self):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vqs.server", "--data-dir", self.dir, "--port", str(self.port),
             "--grpc-port", str(self.grpc_port), "--flush", "interval", "--flush-interval-ms", "1000",
             "--log-level", "warning"], stdout=self.log, stderr=subprocess.STDOUT, cwd=C.vqs_home(),
            env=C.child_env())
        import httpx

        wait_port(self.port)
        for _ in range(400):
            try:
                if httpx.get(self.url + "/health/ready").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        self.log.close()


# ---------------------------------------------------------------------------- VQS
class VQSWorkloads:
    def __init__(self, srv: Server, n: int):
        import grpc

        from vqs.client import Client
        from vqs.server.grpc.gen import vqs_pb2 as pb
        from vqs.server.grpc.gen import vqs_pb2_grpc as pbg

        self.pb, self.n = pb, n
        self.channel = grpc.insecure_channel(f"127.0.0.1:{srv.grpc_port}")
        self.records = pbg.RecordsStub(self.channel)
        self.topics = pbg.TopicsStub(self.channel)
        self.client = Client(srv.url)
        self.round = 0

    def topic(self, kind: str) -> str:
        name = f"{kind}-{self.round}"
        self.client.create_topic(name)
        return name

    def rest_produce(self, topic: str) -> float:
        p = self.client.producer()
        t0 = time.perf_counter()
        for _ in range(self.n // 100):
            p.send_batch(topic, BATCH, partition=0)
        return C.rate(self.n, time.perf_counter() - t0)

    def grpc_produce(self, topic: str) -> float:
        req = self.pb.ProduceRequest(topic=topic, partition=0, values=BATCH)
        t0 = time.perf_counter()
        for _ in range(self.n // 100):
            self.records.Produce(req)
        return C.rate(self.n, time.perf_counter() - t0)

    def grpc_produce_stream(self, topic: str) -> float:
        req = self.pb.ProduceRequest(topic=topic, partition=0, values=BATCH)
        t0 = time.perf_counter()
        acked = sum(a.count for a in self.records.ProduceStream(iter([req] * (self.n // 100))))
        dt = time.perf_counter() - t0
        assert acked == self.n, acked
        return C.rate(self.n, dt)

    def rest_consume(self, topic: str) -> float:
        t0 = time.perf_counter()
        off = got = 0
        while got < self.n:
            bs, off, _ = self.client.read_batches(topic, 0, off, max_records=100)
            for b in bs:
                got += len(b.values())
        return C.rate(got, time.perf_counter() - t0)

    def grpc_fetch(self, topic: str) -> float:
        t0 = time.perf_counter()
        off = got = 0
        while got < self.n:
            b = self.records.Fetch(self.pb.FetchRequest(topic=topic, offset=off, max_records=100))
            got += len(list(b.values))
            off = b.next_offset
        return C.rate(got, time.perf_counter() - t0)

    def grpc_subscribe(self, topic: str) -> float:
        t0 = time.perf_counter()
        got = 0
        stream = self.records.Subscribe(self.pb.SubscribeRequest(topic=topic, offset=0, max_records=100))
        for b in stream:
            got += len(list(b.values))
            if got >= self.n:
                break
        dt = time.perf_counter() - t0
        stream.cancel()
        return C.rate(got, dt)

    def grpc_latency(self, count: int) -> list[float]:
        pb = self.pb
        topic = self.topic("lat")
        lat: list[float] = []
        ready = threading.Event()
        stream = self.records.Subscribe(pb.SubscribeRequest(topic=topic, latest=True), timeout=120)

        def reader():
            ready.set()
            for b in stream:
                now = time.perf_counter_ns()
                lat.extend((now - struct.unpack_from("<q", v)[0]) / 1e6 for v in b.values)
                if len(lat) >= count:
                    return

        t = threading.Thread(target=reader)
        t.start()
        ready.wait()
        time.sleep(0.2)

        # closed loop, as REST's (one record, its ack, the next): an open-loop stream on a
        # CPU-starved client measures the client's backlog, not the path
        todo: queue.Queue = queue.Queue()

        def reqs():
            while (req := todo.get()) is not None:
                yield req

        acks = self.records.ProduceStream(reqs())
        for _ in range(count):
            time.sleep(0.001)
            v = struct.pack("<q", time.perf_counter_ns()) + VALUE[8:]
            todo.put(pb.ProduceRequest(topic=topic, partition=0, values=[v]))
            next(acks)
        todo.put(None)
        for _ in acks:
            pass
        t.join(60)
        stream.cancel()
        return lat

    def rest_latency(self, count: int) -> list[float]:
        from vqs.client import Client

        topic = self.topic("rlat")
        lat: list[float] = []

        def reader():
            with Client(self.client.url) as c:
                off = 0
                while len(lat) < count:
                    bs, off, _ = c.read_batches(topic, 0, off, timeout=5)
                    now = time.perf_counter_ns()
                    for b in bs:
                        lat.extend((now - struct.unpack_from("<q", v)[0]) / 1e6 for v in b.values())

        t = threading.Thread(target=reader)
        t.start()
        time.sleep(0.2)
        p = self.client.producer()
        for _ in range(count):
            time.sleep(0.001)
            p.send_batch(topic, [struct.pack("<q", time.perf_counter_ns()) + VALUE[8:]], partition=0)
        t.join(60)
        return lat

    def http_latency_under_grpc_load(self, url: str, count: int) -> tuple[list[float], list[float], float]:
        """GET /health/live latencies idle, then while two gRPC streams run flat out."""
        import httpx

        def probe() -> list[float]:
            out = []
            with httpx.Client() as h:
                for _ in range(count):
                    t0 = time.perf_counter()
                    h.get(url + "/health/live")
                    out.append((time.perf_counter() - t0) * 1000)
                    time.sleep(0.002)
            return out

        idle = probe()
        topic = self.topic("load")
        stop = threading.Event()
        moved = [0]
        req = self.pb.ProduceRequest(topic=topic, partition=0, values=BATCH)

        def producer():
            def reqs():
                while not stop.is_set():
                    yield req
            for a in self.records.ProduceStream(reqs()):
                moved[0] += a.count

        def subscriber():
            s = self.records.Subscribe(self.pb.SubscribeRequest(topic=topic, max_records=100))
            for b in s:
                moved[0] += len(b.values)
                if stop.is_set():
                    s.cancel()
                    return

        ts = [threading.Thread(target=producer), threading.Thread(target=subscriber)]
        for t in ts:
            t.start()
        time.sleep(0.5)
        t0, m0 = time.perf_counter(), moved[0]
        busy = probe()
        grpc_rate = C.rate(moved[0] - m0, time.perf_counter() - t0)
        stop.set()
        for t in ts:
            t.join(30)
        return idle, busy, grpc_rate

    def close(self):
        self.channel.close()
        self.client.close()


# ---------------------------------------------------------------------------- Redis
class RedisWorkloads:
    def __init__(self, tmp: str, n: int):
        import redis

        self.n = n
        self.port = free_port()
        d = os.path.join(tmp, "redis")
        os.makedirs(d)
        self.proc = subprocess.Popen(
            [shutil.which("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1", "--dir", d,
             "--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--daemonize", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port)
        self.r = redis.Redis(port=self.port)
        self.version = self.r.info()["redis_version"]
        self.round = 0

    def xadd(self) -> float:
        key = f"s{self.round}"
        t0 = time.perf_counter()
        for _ in range(self.n // 100):
            pipe = self.r.pipeline(transaction=False)
            for _ in range(100):
                pipe.xadd(key, {"v": VALUE})
            pipe.execute()
        return C.rate(self.n, time.perf_counter() - t0)

    def xreadgroup(self) -> float:
        key = f"s{self.round}"
        self.r.xgroup_create(key, "g", id="0")
        t0 = time.perf_counter()
        got = 0
        while got < self.n:
            res = self.r.xreadgroup("g", "c", {key: ">"}, count=100)
            ids = [mid for _, msgs in res for mid, _ in msgs]
            self.r.xack(key, "g", *ids)
            got += len(ids)
        return C.rate(got, time.perf_counter() - t0)

    def latency(self, count: int) -> list[float]:
        import redis

        lat: list[float] = []
        key = f"lat{self.round}"
        self.r.xadd(key, {"v": b"start"})
        last = self.r.xrevrange(key, count=1)[0][0]

        def reader():
            rr = redis.Redis(port=self.port)
            pos = last
            while len(lat) < count:
                res = rr.xread({key: pos}, count=100, block=5000)
                now = time.perf_counter_ns()
                for _, msgs in res:
                    for mid, fields in msgs:
                        lat.append((now - struct.unpack_from("<q", fields[b"v"])[0]) / 1e6)
                        pos = mid

        t = threading.Thread(target=reader)
        t.start()
        time.sleep(0.2)
        for _ in range(count):
            time.sleep(0.001)
            self.r.xadd(key, {"v": struct.pack("<q", time.perf_counter_ns()) + VALUE[8:]})
        t.join(60)
        return lat

    def close(self):
        self.proc.terminate()
        self.proc.wait(30)


# ---------------------------------------------------------------------------- run
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small counts (a smoke run)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default=os.path.join(C.HERE, "grpc_bench.json"),
                    help="JSON output (default bench/grpc_bench.json; '' for none)")
    args = ap.parse_args(argv)
    n, n_lat = (20_000, 300) if args.quick else (200_000, 2_000)
    info = C.run_info("grpc_bench", argv, __file__)
    rounds: dict[str, list[float]] = {}
    lat_rounds: dict[str, list[list[float]]] = {}

    def keep(name, value):
        rounds.setdefault(name, []).append(value)

    res: dict = {"n": n, "n_latency": n_lat, "uptime_before": _uptime()}
    with C.scratch_dir("vqs-grpc-bench-") as tmp:
        have_redis = shutil.which("redis-server") is not None
        rd = RedisWorkloads(tmp, n) if have_redis else None
        with Server(tmp) as srv:
            v = VQSWorkloads(srv, n)
            try:
                for r in range(args.rounds):
                    C.note(f"round {r + 1}/{args.rounds} ...")
                    v.round = r
                    keep("grpc_produce_stream_b100", v.grpc_produce_stream(a := v.topic("gs")))
                    keep("rest_produce_b100", v.rest_produce(b := v.topic("rb")))
                    keep("grpc_produce_b100", v.grpc_produce(v.topic("gu")))
                    keep("grpc_subscribe_b100", v.grpc_subscribe(a))
                    keep("rest_consume_b100", v.rest_consume(b))
                    keep("grpc_fetch_b100", v.grpc_fetch(a))
                    if rd is not None:
                        rd.round = r
                        keep("redis_xadd_pipelined_b100", rd.xadd())
                        keep("redis_xreadgroup_xack_b100", rd.xreadgroup())
                    lat_rounds.setdefault("grpc", []).append(v.grpc_latency(n_lat))
                    lat_rounds.setdefault("rest", []).append(v.rest_latency(n_lat))
                    if rd is not None:
                        lat_rounds.setdefault("redis", []).append(rd.latency(n_lat))
                # the round with the lowest p99 (load from others only adds to it)
                lat = {k: min(rs, key=lambda xs: pct(xs, 0.99)) for k, rs in lat_rounds.items()}
                C.note("HTTP under gRPC load ...")
                idle, busy, grpc_rate = v.http_latency_under_grpc_load(srv.url, 300 if args.quick else 1000)
            finally:
                v.close()
                if rd is not None:
                    rd.close()
    res["uptime_after"] = _uptime()
    res["throughput"] = {k: max(xs) for k, xs in rounds.items()}
    res["rounds"] = rounds
    res["latency_ms"] = {k: {"p50": pct(xs, 0.5), "p99": pct(xs, 0.99), "n": len(xs),
                             "p99_rounds": [pct(x, 0.99) for x in lat_rounds[k]]} for k, xs in lat.items()}
    res["http_health_ms"] = {"idle": {"p50": pct(idle, 0.5), "p99": pct(idle, 0.99)},
                             "grpc_busy": {"p50": pct(busy, 0.5), "p99": pct(busy, 0.99),
                                           "grpc_records_per_s": grpc_rate}}
    res["redis_version"] = rd.version if rd is not None else None
    print(f"## gRPC front — bench/grpc_bench.py\n\n{C.run_header_md(info)}\n")
    print(f"Load: before `{res['uptime_before']}`, after `{res['uptime_after']}`. {n:,} records of 100 bytes per "
          f"workload, best of {args.rounds} rounds; one client. Durability: VQS flush=interval (1 s), Redis "
          f"appendfsync everysec (Redis {res['redis_version']}).\n")
    print(table(res))
    print("\nBars (issue 17):\n")
    print(C.bars_table(bars(res)))
    C.write_json(args.json, {**info, **res, "bars": bars(res), "figures": figures(res)})
    return 0


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


def table(res: dict) -> str:
    t = res["throughput"]
    rows = [
        ("produce, batch 100", t.get("grpc_produce_stream_b100"), t.get("grpc_produce_b100"),
         t.get("rest_produce_b100"), t.get("redis_xadd_pipelined_b100")),
        ("consume, 100 per message", t.get("grpc_subscribe_b100"), t.get("grpc_fetch_b100"),
         t.get("rest_consume_b100"), t.get("redis_xreadgroup_xack_b100")),
    ]
    out = C.markdown_table(["records/s", "gRPC stream (ProduceStream / Subscribe)", "gRPC unary (Produce / Fetch)",
                            "REST binary", "Redis (pipelined XADD / XREADGROUP+XACK)"],
                           [[name, *(C.fmt_num(x) for x in xs)] for name, *xs in rows], right=[1, 2, 3, 4])
    lat = res["latency_ms"]
    out += ("\n\nEnd-to-end latency, produce -> subscriber (ms, ~1,000 records/s one at a time; the round "
            "with the lowest p99, every round's p99 beside it):\n\n")
    out += C.markdown_table(["path", "p50", "p99", "records", "p99 of each round"],
                            [[k, f"{v['p50']:.2f}", f"{v['p99']:.2f}", v["n"],
                              ", ".join(f"{x:.2f}" for x in v["p99_rounds"])] for k, v in lat.items()],
                            right=[1, 2, 3])
    h = res["http_health_ms"]
    out += ("\n\nHTTP GET /health/live (ms) idle vs while gRPC streams move "
            f"{h['grpc_busy']['grpc_records_per_s']:,.0f} records/s:\n\n")
    out += C.markdown_table(["", "p50", "p99"], [["idle", f"{h['idle']['p50']:.2f}", f"{h['idle']['p99']:.2f}"],
                                                 ["gRPC busy", f"{h['grpc_busy']['p50']:.2f}",
                                                  f"{h['grpc_busy']['p99']:.2f}"]], right=[1, 2])
    return out


def bars(res: dict) -> list[dict]:
    t = res["throughput"]
    out = []
    for name, a, b, target in (
            ("ProduceStream / REST binary produce", "grpc_produce_stream_b100", "rest_produce_b100", 1.0),
            ("Subscribe / REST binary consume", "grpc_subscribe_b100", "rest_consume_b100", 1.0),
            ("ProduceStream / Redis pipelined XADD", "grpc_produce_stream_b100", "redis_xadd_pipelined_b100", 1.5),
            ("Subscribe / Redis XREADGROUP+XACK", "grpc_subscribe_b100", "redis_xreadgroup_xack_b100", 1.5)):
        x, y = t.get(a), t.get(b)
        ratio = x / y if x and y else None
        out.append({"bar": name, "value": ratio, "target": f">= {target}x",
                    "ok": None if ratio is None else ratio >= target})
    return out


def figures(res: dict) -> list[dict]:
    out = [C.figure(k, v, "records/s", vqs=not k.startswith("redis")) for k, v in res["throughput"].items()]
    for k, v in res["latency_ms"].items():
        out.append(C.figure(f"latency_p99_{k}", v["p99"], "ms", better="lower", vqs=k != "redis"))
    return out


if __name__ == "__main__":
    sys.exit(main())
