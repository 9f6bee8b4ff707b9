"""Server benchmark: VQS over HTTP vs Redis Streams and NATS JetStream, one run.

    python bench/server_bench.py [--quick] [--json out.json]

Starts everything itself on 127.0.0.1 (a VQS server process, ``redis-server``,
``nats-server -js``) in a temporary directory and stops it afterwards.
Workloads use 100-byte messages:

* produce over HTTP (vqs.Client, binary record-batch bodies), batches of 1 and
  100, 1 and 16 concurrent clients;
* consume by offset over HTTP (binary), batches of 100 (and 1), 1 and 16 clients;
* queue send and receive+delete through vqs.Client, one message a request;
* vqs.Client goes over the server's native port (``--native-port``, docs/native.md), as it
  does by default against a loopback server with one;
* one message a request again, interleaved: vqs.Client over the native port and over HTTP
  (``native=False``) and redis-py, one after another in each of ``ROUNDS`` rounds with both
  servers up; the one-message bars take the median round's ratio;
* each one-message loop also measures the CPU each message cost the client (this process) and
  the server (its whole process, from /proc): where a gap to Redis lies, in the same run;
* the floor: the same client's one-message request against a Python HTTP
  server that does nothing (bench/_noop_http_server.py, uvloop);
* SQS send → receive → delete through boto3 (batches of 1 and 10);
* Redis Streams: XADD one at a time, XADD pipelined 100 at a time,
  XREADGROUP COUNT 1 + XACK, XREADGROUP COUNT 100 + XACK;
* NATS JetStream (file storage): publish with ack one at a time and 100 in
  flight, pull-consume 100 at a time with acks.

Durability, stated: Redis runs with AOF ``appendfsync everysec``; the VQS server
runs with ``--flush interval --flush-interval-ms 1000`` (acknowledged writes
reach the OS at once and are fsynced within a second: the same promise as
everysec); JetStream's file store acknowledges after writing to the OS and
fsyncs on its own timer (``sync_interval``, 2 minutes by default in 2.9).

Prints Markdown (the run's date, machine, command and commit, and the table)
ready for bench/RESULTS.md, and writes JSON (default bench/server_bench.json)
whose ``figures`` bench/ab.py compares.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import _common as C  # before any vqs import: it decides which vqs is measured

free_port = C.free_port
wait_port = C.wait_port

VALUE = b"x" * 100




rate = C.rate


def threads(k: int, fn) -> float:
    """Run fn(i) in k threads at once; return the wall time."""
    barrier = threading.Barrier(k + 1)
    errs = []

    def run(i):
        barrier.wait()
        try:
            fn(i)
        except Exception as e:
            errs.append(e)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(k)]
    for t in ts:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    dt = time.perf_counter() - t0
    if errs:
        raise errs[0]
    return dt


# ------------------------------------------------------------------------------ VQS
class VQSServer:
    def __init__(self, tmp: str):
        self.port = free_port()
        self.native_port = free_port()
        self.dir = os.path.join(tmp, "vqs")
        self.proc = None

    def __enter__(self):
        self.log = open(os.path.join(os.path.dirname(self.dir), "vqs-server.log"), "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vqs.server", "--data-dir", self.dir, "--port", str(self.port),
             "--native-port", str(self.native_port),
             "--flush", "interval", "--flush-interval-ms", "1000", "--log-level", "warning"],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=C.vqs_home(), env=C.child_env())
        wait_port(self.port)
        import httpx

        for _ in range(200):
            try:
                if httpx.get(self.url + "/health/ready").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        return self

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        self.log.close()


def _receive_delete_one_by_one(q, n: int) -> float:
    """vqs.Client receiving ``n`` messages of queue ``q`` one a request, each deleted: msg/s."""
    t0 = time.perf_counter()
    got = 0
    while got < n:
        for m in q.receive(1):
            q.delete(m.receipt_handle)
            got += 1
    return rate(got, time.perf_counter() - t0)


def bench_vqs(url: str, n: int, n_single: int) -> dict:
    from vqs.client import Client

    out = {}
    with Client(url) as c:
        c.create_topic("b1")
        c.create_topic("b100")
        c.create_topic("b16", partitions=16)
        p = c.producer()
        # produce, batch 1, 1 client
        t0 = time.perf_counter()
        for _ in range(n_single):
            p.send("b1", VALUE)
        out["produce_b1_c1"] = rate(n_single, time.perf_counter() - t0)
        # produce, batch 100, 1 client
        batch = [VALUE] * 100
        t0 = time.perf_counter()
        for _ in range(n // 100):
            p.send_batch("b100", batch, partition=0)
        out["produce_b100_c1"] = rate(n, time.perf_counter() - t0)
        # consume by offset, batch 100, 1 client
        t0 = time.perf_counter()
        off = got = 0
        while got < n:
            bs, off, _ = c.read_batches("b100", 0, off, max_records=100)
            got += sum(b.count for b in bs)
            for b in bs:
                b.values()
        out["consume_b100_c1"] = rate(got, time.perf_counter() - t0)
        # consume, batch 1, 1 client
        t0 = time.perf_counter()
        off = 0
        for _ in range(n_single):
            bs, off, _ = c.read_batches("b1", 0, off, max_records=1)
            bs[0].values()
        out["consume_b1_c1"] = rate(n_single, time.perf_counter() - t0)

    # 16 clients: one partition each
    per = max(100, n // 16 // 100 * 100)

    def prod(i):
        with Client(url) as cc:
            pp = cc.producer()
            for _ in range(per // 100):
                pp.send_batch("b16", batch, partition=i)

    out["produce_b100_c16"] = rate(16 * per, threads(16, prod))

    def prod1(i):
        with Client(url) as cc:
            pp = cc.producer()
            for _ in range(n_single // 16):
                pp.send("b1", VALUE)

    out["produce_b1_c16"] = rate(16 * (n_single // 16), threads(16, prod1))

    def cons(i):
        with Client(url) as cc:
            off = got = 0
            while got < per:
                bs, off, _ = cc.read_batches("b16", i, off, max_records=100)
                got += sum(b.count for b in bs)
                for b in bs:
                    b.values()

    out["consume_b100_c16"] = rate(16 * per, threads(16, cons))

    # queues through vqs.Client, one message a request
    with Client(url) as c:
        q = c.create_queue("q1")
        t0 = time.perf_counter()
        for _ in range(n_single):
            q.send(VALUE)
        out["queue_send_b1_c1"] = rate(n_single, time.perf_counter() - t0)
        out["queue_receive_delete_b1_c1"] = _receive_delete_one_by_one(q, n_single)
    return out


def bench_floor(n_single: int) -> dict:
    """The same client's one-message request against a Python HTTP server that
    does nothing (bench/_noop_http_server.py): the most any Python server can
    answer here, so what a bar above it would need."""
    from vqs.client.lean import LeanHTTP

    port = free_port()
    proc = subprocess.Popen([sys.executable, os.path.join(C.HERE, "_noop_http_server.py"), str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        http = LeanHTTP("127.0.0.1", port, b"")
        hdrs = b"content-type: application/octet-stream\r\n"
        t0 = time.perf_counter()
        for _ in range(n_single):
            http.request("POST", "/topics/b1/messages", hdrs, VALUE, 10)
        out = {"noop_b1_c1": rate(n_single, time.perf_counter() - t0)}
        http.close()
    finally:
        proc.terminate()
        proc.wait(30)
    return out


def bench_sqs(url: str, n: int) -> dict:
    import boto3

    sqs = boto3.client("sqs", endpoint_url=url, region_name="us-east-1", aws_access_key_id="x",
                       aws_secret_access_key="y")
    out = {}
    q = sqs.create_queue(QueueName="bench")["QueueUrl"]
    body = "x" * 100
    t0 = time.perf_counter()
    for _ in range(n):
        sqs.send_message(QueueUrl=q, MessageBody=body)
    got = 0
    while got < n:
        ms = sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=1).get("Messages", [])
        for m in ms:
            sqs.delete_message(QueueUrl=q, ReceiptHandle=m["ReceiptHandle"])
        got += len(ms)
    out["sqs_cycle_b1"] = rate(n, time.perf_counter() - t0)
    t0 = time.perf_counter()
    entries = [{"Id": str(i), "MessageBody": body} for i in range(10)]
    for _ in range(n // 10):
        sqs.send_message_batch(QueueUrl=q, Entries=entries)
    got = 0
    while got < n // 10 * 10:
        ms = sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=10).get("Messages", [])
        if ms:
            sqs.delete_message_batch(QueueUrl=q, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                                                          for i, m in enumerate(ms)])
        got += len(ms)
    out["sqs_cycle_b10"] = rate(got, time.perf_counter() - t0)
    return out


# ---------------------------------------------------------------------------- Redis
def _redis_server(tmp: str, name: str):
    """``redis-server`` (AOF, everysec) on a free port, its files in ``tmp/name``: (process, port)."""
    exe = shutil.which("redis-server")
    port = free_port()
    d = os.path.join(tmp, name)
    os.makedirs(d)
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--dir", d, "--appendonly", "yes",
                             "--appendfsync", "everysec", "--save", "", "--daemonize", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return proc, port


def _repeat(n: int, fn, *args) -> None:
    for _ in range(n):
        fn(*args)


def _proc_cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system, all threads) process ``pid`` has used so far, from
    /proc/<pid>/stat; None where there is no /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _read_ack_one_by_one(r, stream: str, n: int) -> float:
    """redis-py reading ``n`` entries of ``stream`` as group ``g``, XREADGROUP COUNT 1 then XACK each: msg/s."""
    t0 = time.perf_counter()
    got = 0
    while got < n:
        for _, msgs in r.xreadgroup("g", "c", {stream: ">"}, count=1):
            for mid, _ in msgs:
                r.xack(stream, "g", mid)
                got += 1
    return rate(got, time.perf_counter() - t0)


def bench_redis(tmp: str, n: int, n_single: int) -> dict:
    import redis

    if not shutil.which("redis-server"):
        return {"error": "redis-server not installed (apt-get install redis-server)"}
    proc, port = _redis_server(tmp, "redis")
    out = {"version": None}
    try:
        r = redis.Redis(port=port)
        out["version"] = r.info()["redis_version"]
        t0 = time.perf_counter()
        for _ in range(n_single):
            r.xadd("s1", {"v": VALUE})
        out["xadd_b1_c1"] = rate(n_single, time.perf_counter() - t0)
        t0 = time.perf_counter()
        for _ in range(n // 100):
            pipe = r.pipeline(transaction=False)
            for _ in range(100):
                pipe.xadd("s100", {"v": VALUE})
            pipe.execute()
        out["xadd_pipelined_b100_c1"] = rate(n, time.perf_counter() - t0)
        r.xgroup_create("s1", "g", id="0")
        out["xreadgroup_b1_xack_c1"] = _read_ack_one_by_one(r, "s1", n_single)
        r.xgroup_create("s100", "g", id="0")
        t0 = time.perf_counter()
        got = 0
        while got < n:
            res = r.xreadgroup("g", "c", {"s100": ">"}, count=100)
            ids = [mid for _, msgs in res for mid, _ in msgs]
            r.xack("s100", "g", *ids)
            got += len(ids)
        out["xreadgroup_b100_xack_c1"] = rate(got, time.perf_counter() - t0)
        per = max(100, n // 16 // 100 * 100)

        def prod(i):
            rr = redis.Redis(port=port)
            for _ in range(per // 100):
                pipe = rr.pipeline(transaction=False)
                for _ in range(100):
                    pipe.xadd(f"p{i}", {"v": VALUE})
                pipe.execute()

        out["xadd_pipelined_b100_c16"] = rate(16 * per, threads(16, prod))

        def cons(i):
            rr = redis.Redis(port=port)
            rr.xgroup_create(f"p{i}", "g", id="0")
            got = 0
            while got < per:
                res = rr.xreadgroup("g", "c", {f"p{i}": ">"}, count=100)
                ids = [mid for _, msgs in res for mid, _ in msgs]
                rr.xack(f"p{i}", "g", *ids)
                got += len(ids)

        out["xreadgroup_b100_xack_c16"] = rate(16 * per, threads(16, cons))
    finally:
        proc.terminate()
        proc.wait(30)
    return out


# ------------------------------------------------------- one message a request, interleaved
#: rounds of the interleaved one-message comparison (the bars take the median round)
ROUNDS = 5
ONE = ("produce", "queue_send", "queue_receive_delete")


def one_message_rounds(tmp: str, n_single: int, rounds: int) -> dict:
    """vqs.Client's one-message requests (over the native port, and over HTTP with
    ``native=False``) and redis-py's XADD and XREADGROUP COUNT 1 + XACK, one after another in
    each of ``rounds`` rounds, both servers up throughout: each round's ratios to Redis, so a
    machine that changes speed between sections moves both sides of a ratio alike. The bars
    take the median round."""
    import redis

    from vqs.client import Client

    if not shutil.which("redis-server"):
        return {"error": "redis-server not installed (apt-get install redis-server)"}
    proc, port = _redis_server(tmp, "redis-rounds")
    os.makedirs(os.path.join(tmp, "rounds"))
    out: dict = {"rounds": []}
    try:
        with VQSServer(os.path.join(tmp, "rounds")) as srv, Client(srv.url) as nat, \
                Client(srv.url, native=False) as http:
            r = redis.Redis(port=port)
            r.xadd("s", {"v": VALUE})
            r.xgroup_create("s", "g", id="$")
            nat.create_topic("t")
            queues = {"native": nat.create_queue("qn"), "http": http.queue("qn")}
            producers = {"native": nat.producer(), "http": http.producer()}
            spid = srv.proc.pid

            def timed(key: str, server_pid: int, n: int, fn, *args) -> None:
                """``fn(*args)`` sends ``n`` messages; its rate under ``key`` and, where /proc is,
                the CPU each message cost the client (this process) and the server, in µs."""
                c0, s0 = time.process_time(), _proc_cpu_s(server_pid)
                t0 = time.perf_counter()
                fn(*args)
                took = time.perf_counter() - t0
                row[key] = rate(n, took)
                s1 = _proc_cpu_s(server_pid)
                if s0 is not None and s1 is not None:
                    row[f"{key}_client_us"] = (time.process_time() - c0) / n * 1e6
                    row[f"{key}_server_us"] = (s1 - s0) / n * 1e6

            for _ in range(rounds):
                row: dict = {}
                timed("redis_xadd", proc.pid, n_single, _repeat, n_single, r.xadd, "s", {"v": VALUE})
                timed("redis_xreadgroup_xack", proc.pid, n_single, _read_ack_one_by_one, r, "s", n_single)
                for way in ("native", "http"):
                    p, q = producers[way], queues[way]
                    timed(f"produce_{way}", spid, n_single, _repeat, n_single, p.send, "t", VALUE)
                    timed(f"queue_send_{way}", spid, n_single, _repeat, n_single, q.send, VALUE)
                    timed(f"queue_receive_delete_{way}", spid, n_single, _receive_delete_one_by_one, q, n_single)
                for way in ("native", "http"):
                    row[f"produce_{way}_ratio"] = row[f"produce_{way}"] / row["redis_xadd"]
                    row[f"queue_send_{way}_ratio"] = row[f"queue_send_{way}"] / row["redis_xadd"]
                    row[f"queue_receive_delete_{way}_ratio"] = (row[f"queue_receive_delete_{way}"]
                                                                / row["redis_xreadgroup_xack"])
                out["rounds"].append(row)
            out["native_used"] = nat._transport._native.__class__.__name__ == "NativeClient"
    finally:
        proc.terminate()
        proc.wait(30)
    keys = out["rounds"][0].keys()
    out["median"] = {k: C.median([row[k] for row in out["rounds"]]) for k in keys}
    return out


def rounds_table(res: dict) -> str:
    rd = res.get("rounds", {})
    if "median" not in rd:
        return rd.get("error", "-")
    m = rd["median"]
    names = {"produce": ("produce", "XADD", "redis_xadd"), "queue_send": ("queue send", "XADD", "redis_xadd"),
             "queue_receive_delete": ("queue receive+delete", "XREADGROUP COUNT 1 + XACK",
                                      "redis_xreadgroup_xack")}
    rows = []
    for k in ONE:
        label, peer, rkey = names[k]
        rows.append([f"{label}, batch 1, 1 client", C.fmt_num(m[f"{k}_native"]), C.fmt_num(m[f"{k}_http"]),
                     f"{C.fmt_num(m[rkey])} ({peer})", C.fmt_ratio(m[f"{k}_native_ratio"]),
                     C.fmt_ratio(m[f"{k}_http_ratio"]),
                     ", ".join(f"{row[f'{k}_native_ratio']:.2f}" for row in rd["rounds"])])
    out = C.markdown_table(["one message a request (median of the rounds)", "vqs.Client native msg/s",
                            "vqs.Client HTTP msg/s", "redis-py msg/s", "native / Redis", "HTTP / Redis",
                            "native / Redis, each round"], rows, right=[1, 2, 3, 4, 5])
    if f"{ONE[0]}_native_client_us" not in m:
        return out
    us = "{:.0f} / {:.0f}".format
    cpu = [[label, us(m[f"{k}_native_client_us"], m[f"{k}_native_server_us"]),
            us(m[f"{k}_http_client_us"], m[f"{k}_http_server_us"]),
            us(m[f"{rkey}_client_us"], m[f"{rkey}_server_us"]) + f" ({peer})"]
           for k in ONE for label, peer, rkey in [names[k]]]
    return out + "\n\nCPU each message cost, client / server in µs (user + system, median of the rounds; the " \
        "client is this process, the server every thread of its process, from /proc):\n\n" + \
        C.markdown_table(["one message a request", "vqs.Client native", "vqs.Client HTTP", "redis-py / Redis"],
                         cpu, right=[1, 2, 3])


# ----------------------------------------------------------------------------- NATS
def bench_nats(tmp: str, n: int, n_single: int) -> dict:
    exe = shutil.which("nats-server")
    if not exe:
        return {"error": "nats-server not installed (apt-get install nats-server)"}
    try:
        import nats
    except ImportError:
        return {"error": "nats-py not installed"}
    port = free_port()
    d = os.path.join(tmp, "nats")
    os.makedirs(d)
    proc = subprocess.Popen([exe, "-js", "-sd", d, "-a", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = {}

    async def main():
        nc = await nats.connect(f"nats://127.0.0.1:{port}")
        out["version"] = nc.connected_server_version.major and str(nc.connected_server_version)
        js = nc.jetstream()
        await js.add_stream(name="B", subjects=["b.*"], storage="file")
        t0 = time.perf_counter()
        for _ in range(n_single):
            await js.publish("b.one", VALUE)
        out["js_publish_b1_c1"] = rate(n_single, time.perf_counter() - t0)
        nb = min(n, 20_000)
        t0 = time.perf_counter()
        for _ in range(nb // 100):
            await asyncio.gather(*(js.publish("b.hundred", VALUE) for _ in range(100)))
        out["js_publish_100_in_flight_c1"] = rate(nb, time.perf_counter() - t0)
        sub = await js.pull_subscribe("b.hundred", durable="d")
        t0 = time.perf_counter()
        got = 0
        while got < nb:
            msgs = await sub.fetch(100, timeout=5)
            await asyncio.gather(*(m.ack() for m in msgs))
            got += len(msgs)
        out["js_fetch_b100_ack_c1"] = rate(got, time.perf_counter() - t0)
        await nc.close()

    try:
        wait_port(port)
        asyncio.run(main())
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {e}"
    finally:
        proc.terminate()
        proc.wait(30)
    return out


# ------------------------------------------------------------------------------ main
def table_rows(res: dict) -> list[tuple]:
    v, r, ns, s = res["vqs"], res["redis"], res["nats"], res["sqs"]
    return [
        ("produce, batch 1, 1 client", v.get("produce_b1_c1"), r.get("xadd_b1_c1"), ns.get("js_publish_b1_c1")),
        ("produce, batch 100, 1 client", v.get("produce_b100_c1"), r.get("xadd_pipelined_b100_c1"),
         ns.get("js_publish_100_in_flight_c1")),
        ("produce, batch 1, 16 clients", v.get("produce_b1_c16"), None, None),
        ("produce, batch 100, 16 clients", v.get("produce_b100_c16"), r.get("xadd_pipelined_b100_c16"), None),
        ("consume, batch 1, 1 client", v.get("consume_b1_c1"), None, None),
        ("consume, batch 100, 1 client", v.get("consume_b100_c1"), r.get("xreadgroup_b100_xack_c1"),
         ns.get("js_fetch_b100_ack_c1")),
        ("consume, batch 100, 16 clients", v.get("consume_b100_c16"), r.get("xreadgroup_b100_xack_c16"), None),
        ("queue send, batch 1, 1 client (vqs.Client / XADD)", v.get("queue_send_b1_c1"), r.get("xadd_b1_c1"), None),
        ("queue receive+delete, batch 1, 1 client (vqs.Client / XREADGROUP+XACK)",
         v.get("queue_receive_delete_b1_c1"), r.get("xreadgroup_b1_xack_c1"), None),
        ("floor: no-op Python HTTP server, batch 1, 1 client (same client / XADD)",
         res.get("floor", {}).get("noop_b1_c1"), r.get("xadd_b1_c1"), None),
        ("SQS send+receive+delete, batch 1 (boto3)", s.get("sqs_cycle_b1"), None, None),
        ("SQS send+receive+delete, batch 10 (boto3)", s.get("sqs_cycle_b10"), None, None),
    ]


def table(res: dict) -> str:
    return C.markdown_table(
        ["workload (100-byte messages)", "VQS msg/s", "Redis Streams msg/s", "NATS JetStream msg/s", "VQS / Redis"],
        [[name, C.fmt_num(a), C.fmt_num(b), C.fmt_num(c), C.fmt_ratio(None if a is None or b is None else a / b)]
         for name, a, b, c in table_rows(res)],
        right=[1, 2, 3, 4])


def bars(res: dict) -> list[dict]:
    """Issue 4's throughput bars (from one client, at comparable durability)."""
    v, r = res["vqs"], res["redis"]
    out = []
    for name, a, b in (("produce, batch 100, 1 client / Redis pipelined XADD (batches of 100)",
                        v.get("produce_b100_c1"), r.get("xadd_pipelined_b100_c1")),
                       ("consume by offset, batch 100, 1 client / Redis XREADGROUP COUNT 100 + XACK",
                        v.get("consume_b100_c1"), r.get("xreadgroup_b100_xack_c1"))):
        value = None if a is None or b is None else a / b
        out.append({"bar": name, "value": value, "target": ">= 1.0", "ok": None if value is None else value >= 1.0})
    floor = res.get("floor", {}).get("noop_b1_c1")
    m = res.get("rounds", {}).get("median", {})
    for name, key, peer in (("produce, batch 1, 1 client / Redis XADD (one at a time)", "produce", "xadd_b1_c1"),
                            ("queue send, batch 1, 1 client / Redis XADD", "queue_send", "xadd_b1_c1"),
                            ("queue receive+delete, batch 1, 1 client / Redis XREADGROUP COUNT 1 + XACK",
                             "queue_receive_delete", "xreadgroup_b1_xack_c1")):
        value = m.get(f"{key}_native_ratio")
        row = {"bar": name + f" (median of {ROUNDS} interleaved rounds)", "value": value, "target": ">= 1.0",
               "ok": None if value is None else value >= 1.0}
        if floor and r.get(peer):
            row["bar"] += f" (a no-op Python HTTP server reaches {floor / r[peer]:.2f})"
        out.append(row)
    return out


def figures(res: dict) -> list[dict]:
    out = []
    for name, a, b, c in table_rows(res):
        for system, x in (("vqs", a), ("redis", b), ("nats", c)):
            if x is not None:
                out.append(C.figure(f"{system} | {name}", x, "msg/s", vqs=system == "vqs"))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small counts (a smoke run)")
    ap.add_argument("--json", default=os.path.join(C.HERE, "server_bench.json"),
                    help="JSON output (default bench/server_bench.json; '' for none)")
    args = ap.parse_args(argv)
    n, n_single, n_sqs = (20_000, 1_000, 200) if args.quick else (200_000, 5_000, 1_000)
    info = C.run_info("server_bench", argv, __file__)
    res = {"n": n, "n_single": n_single, "n_sqs": n_sqs,
           "durability": {"vqs": "flush=interval, flush_interval_ms=1000 (fsync within 1 s)",
                          "redis": "appendonly yes, appendfsync everysec",
                          "nats": "JetStream file storage, default sync_interval"}}
    with C.scratch_dir("vqs-server-bench-") as tmp:
        C.note("VQS server ...")
        with VQSServer(tmp) as srv:
            res["vqs"] = bench_vqs(srv.url, n, n_single)
            res["sqs"] = bench_sqs(srv.url, n_sqs)
        C.note("no-op HTTP server (the floor) ...")
        res["floor"] = bench_floor(n_single)
        C.note("Redis ...")
        res["redis"] = bench_redis(tmp, n, n_single)
        C.note("NATS ...")
        res["nats"] = bench_nats(tmp, n, n_single)
        C.note(f"one message a request, VQS and Redis interleaved ({ROUNDS} rounds) ...")
        res["rounds"] = one_message_rounds(tmp, n_single, ROUNDS)
    for peer in ("redis", "nats"):
        if "error" in res[peer]:
            C.note(f"{peer}: {res[peer]['error']}")
    print(f"## Server — bench/server_bench.py\n\n{C.run_header_md(info)}\n")
    print(f"{n:,} messages for batched workloads, {n_single:,} for batch-1, {n_sqs:,} for SQS. "
          f"Durability: VQS {res['durability']['vqs']}; Redis {res['durability']['redis']}; "
          f"NATS {res['durability']['nats']}.\n")
    print(table(res))
    print(f"\nOne message a request, vqs.Client and redis-py interleaved ({ROUNDS} rounds of {n_single:,} each, "
          "both servers up):\n")
    print(rounds_table(res))
    print("\nRatios against the bars:\n")
    print(C.bars_table(bars(res)))
    C.write_json(args.json, {**info, **res, "bars": bars(res), "figures": figures(res)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
