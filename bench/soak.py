"""Soak: ``vqs serve`` under many concurrent clients for minutes; nothing lost, nothing leaks.

Over 500 lines: one script a reviewer runs alone; its five client kinds, its checks and its
chart are one story and share one result document.

    make soak SOAK_ARGS="--duration 120"     # installs wrk and the bench extra (matplotlib) first
    python bench/soak.py [--duration 150] [--json bench/soak.json] [--idle 1000] ...

Starts ``python -m vqs.server`` from this tree on a scratch data directory and
a free port, then, all at once for ``--duration`` seconds:

* REST producers (JSON produce, 10 messages a request, every value unique)
  and REST consumers (binary long polls ``wait_ms``, one per partition, a
  consumer group committing as it goes);
* SQS senders and receivers through boto3 (``SendMessageBatch``,
  ``ReceiveMessage`` with ``WaitTimeSeconds``, ``DeleteMessageBatch``), in a
  child process of their own (boto3 is synchronous);
* ``--idle`` idle long polls (raw HTTP/1.1 keep-alive sockets): half
  ``POST /queues/{q}/receive`` with ``wait_seconds=20`` on an empty queue,
  half ``GET /topics/{t}/messages?wait_ms=20000`` past the end of a topic;
* ``wrk`` on the HTTP fast paths: binary one-message produce, and ``/health``,
  in windows of ``--wrk-window`` seconds (one latency distribution a window).

The server's RSS, open file descriptors and threads are sampled every second
from ``/proc``. At the end every client stops, consumers drain, and the checks
run: no 5xx anywhere (clients, wrk, the server's own request counter); every
acknowledged REST produce is at its offset with its value, no value twice;
every acknowledged SQS send was delivered, none delivered after its delete
was acknowledged and none delivered twice; wrk's acknowledged produces all in
the log; the server stops cleanly (exit 0) and ``vqs inspect`` finds the data
directory clean; RSS and fds flat over the steady state (after the first
half of the run): a least-squares slope per minute and the growth.

``--visibility`` sets the SQS receivers' visibility timeout (300 s by default;
under ``--duration`` the leases' end is exercised within the run). ``--trace DIR``
runs the server under tracemalloc (bench/traced_server.py) to find what grows.

Prints Markdown (run header, throughput/latency table, resources, checks)
and writes JSON (default bench/soak.json) and a PNG chart next to it
(throughput, p99 and RSS over time; matplotlib from the ``bench`` extra).
Exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict

import _common as C  # before any vqs import: it decides which vqs is measured

_free_port = C.free_port

TOPIC, WRK_TOPIC, IDLE_TOPIC = "soak", "soak-wrk", "soak-idle"
QUEUE, IDLE_QUEUE, GROUP = "soak-q", "soak-idle-q", "soak-g"


# ----------------------------------------------------------------- measuring
class Stats:
    """Per-second bins of (count, latencies) per kind, on the wall clock (shared by processes)."""

    def __init__(self, t0: float):
        self.t0 = t0
        self.bins: dict = defaultdict(lambda: defaultdict(list))
        self.status: dict = defaultdict(lambda: defaultdict(int))
        self.lock = threading.Lock()

    def add(self, kind: str, started: float, status: int = 200) -> None:
        now = time.time()
        with self.lock:
            self.bins[kind][int(now - self.t0)].append(now - started)
            self.status[kind][str(status)] += 1

    def status_only(self, kind: str, status) -> None:
        with self.lock:
            self.status[kind][str(status)] += 1

    def dump(self) -> dict:
        return {"bins": {k: {str(s): v for s, v in b.items()} for k, b in self.bins.items()},
                "status": {k: dict(v) for k, v in self.status.items()}}


def pct(xs, q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def slope_per_min(points) -> float:
    """Least-squares slope of (seconds, value) points, per minute."""
    if len(points) < 2:
        return 0.0
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return 0.0 if den == 0 else 60 * sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den


def proc_sample(pid: int) -> dict | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            st = f.read()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    def kib(field):
        m = re.search(rf"^{field}:\s+(\d+)", st, re.M)
        return int(m.group(1)) if m else 0

    # RssAnon is the heap (a leak shows there); RssFile is mapped files (indexes), which grows with the data
    return {"rss_mib": round(kib("VmRSS") / 1024, 2), "rss_anon_mib": round(kib("RssAnon") / 1024, 2),
            "rss_file_mib": round(kib("RssFile") / 1024, 2), "fds": fds, "threads": kib("Threads")}


# ------------------------------------------------------------------ the server
class Server:
    def __init__(self, data: str, args: list[str], trace: str | None = None):
        self.port = _free_port()
        self.data = data
        self.log_path = data + ".log"
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [sys.executable, "-m", "vqs.server", "--data-dir", data, "--port", str(self.port),
               "--log-format", "json", *args]
        if trace:  # tracemalloc inside the server (bench/traced_server.py): where memory grows
            cmd[1:3] = [os.path.join(C.HERE, "traced_server.py"), "--trace-out", trace, "--"]
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=C.child_env(),
                                     cwd=C.vqs_home())
        import httpx

        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"the server exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                if httpx.get(self.url + "/health/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.proc.kill()  # not left running behind the failed run
                self.proc.wait()
                raise SystemExit("the server did not get ready in 60 s:\n" + self.tail())
            time.sleep(0.1)

    def tail(self, n: int = 4000) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")[-n:]

    def stop(self) -> int:
        C.stop_process(self.proc)
        self.log.close()
        return self.proc.returncode



# ------------------------------------------------------------------ REST (asyncio)
async def rest_producer(k: int, url: str, stop: asyncio.Event, stats: Stats, acked: list) -> None:
    import httpx

    async with httpx.AsyncClient(base_url=url, timeout=60) as h:
        i = 0
        while not stop.is_set():
            vals = [f"r{k}-{i}-{j}" for j in range(10)]
            t = time.time()
            try:
                r = await h.post(f"/topics/{TOPIC}/messages", json={"messages": [{"value": v} for v in vals]})
            except httpx.HTTPError as e:
                stats.status_only("rest_produce", type(e).__name__)
                await asyncio.sleep(0.1)
                continue
            stats.add("rest_produce", t, r.status_code)
            if r.status_code == 200:
                pos = 0
                for rg in r.json()["ranges"]:
                    for n in range(rg["count"]):
                        acked.append((rg["partition"], rg["base_offset"] + n, vals[pos]))
                        pos += 1
            i += 1


async def rest_consumer(p: int, url: str, stop: asyncio.Event, stats: Stats, seen: dict, errors: list) -> None:
    """Follows one partition with binary long polls from the group's position; commits after each read."""
    import httpx

    from vqs.wire import BATCH_CONTENT_TYPE, NEXT_OFFSET, decode_body

    async with httpx.AsyncClient(base_url=url, timeout=60) as h:
        off = 0
        while not stop.is_set():
            t = time.time()
            try:
                r = await h.get(f"/topics/{TOPIC}/messages", headers={"accept": BATCH_CONTENT_TYPE},
                                params={"partition": p, "offset": off, "limit": 1000, "wait_ms": 2000})
            except httpx.HTTPError as e:
                stats.status_only("rest_consume", type(e).__name__)
                await asyncio.sleep(0.1)
                continue
            stats.add("rest_consume", t, r.status_code)
            if r.status_code != 200:
                continue
            for b in decode_body(r.content, "response"):
                for n, v in enumerate(b.values()):
                    o = b.base_offset + n
                    if o != off:
                        errors.append(f"partition {p}: expected offset {off}, got {o}")
                    seen[(p, o)] = bytes(v).decode()
                    off = o + 1
            nxt = int(r.headers[NEXT_OFFSET])
            if nxt != off:
                errors.append(f"partition {p}: next offset {nxt}, records end at {off}")
                off = nxt
            t = time.time()
            c = await h.post(f"/groups/{GROUP}/offsets",
                             json={"offsets": [{"topic": TOPIC, "partition": p, "offset": off}]})
            stats.add("rest_commit", t, c.status_code)


async def idle_poller(k: int, port: int, stop: asyncio.Event, stats: Stats) -> None:
    """One keep-alive connection doing 20 s long polls that find nothing, over and over."""
    if k % 2:
        body = b'{"wait_seconds":20}'
        req = (f"POST /queues/{IDLE_QUEUE}/receive HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body
        kind = "idle_receive"
    else:
        req = (f"GET /topics/{IDLE_TOPIC}/messages?offset=0&wait_ms=20000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").encode()
        kind = "idle_consume"
    await asyncio.sleep(random.random() * 5)  # connect over 5 s, not in one burst
    writer = None
    try:
        while not stop.is_set():
            if writer is None:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            t = time.time()
            writer.write(req)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            m = re.search(rb"(?i)content-length:\s*(\d+)", head)
            data = await reader.readexactly(int(m.group(1))) if m else b""
            stats.add(kind, t, status)
            if status != 200 or (b'"messages":[]' not in data):
                stats.status_only(kind + "_unexpected", status)
            if re.search(rb"(?i)connection:\s*close", head):
                writer.close()
                writer = None
    except (OSError, asyncio.IncompleteReadError) as e:
        if not stop.is_set():
            stats.status_only(kind, type(e).__name__)
    finally:
        if writer is not None:
            writer.close()


# ------------------------------------------------------------------ SQS (boto3, a child process)
def sqs_worker_main(url: str, t0: float, n_send: int, n_recv: int, stop_ev, out_path: str,
                    visibility: int = 300, backlog: int = 5000) -> None:
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError

    cfg = Config(retries={"total_max_attempts": 1}, read_timeout=60, max_pool_connections=64)

    def client():
        return boto3.client("sqs", endpoint_url=url, region_name="us-east-1", aws_access_key_id="x",
                            aws_secret_access_key="y", config=cfg)

    qurl = client().get_queue_url(QueueName=QUEUE)["QueueUrl"]
    stats = Stats(t0)
    sent: list = []
    delivered: list = []      # (body, time)
    deleted: dict = {}        # body -> time the delete was acknowledged
    lock = threading.Lock()
    draining = threading.Event()
    drain_deadline = [0.0]

    def call(kind, fn, **kw):
        t = time.time()
        try:
            out = fn(**kw)
        except ClientError as e:
            stats.add(kind, t, e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
            return None
        except Exception as e:  # a connection error: no answer
            stats.status_only(kind, type(e).__name__)
            return None
        stats.add(kind, t, out["ResponseMetadata"]["HTTPStatusCode"])
        return out

    def sender(k):
        c = client()
        i = 0
        while not stop_ev.is_set():
            with lock:  # a closed loop: a steady state, not a queue growing for the whole run
                ahead = len(sent) - len(deleted)
            if ahead >= backlog:
                stop_ev.wait(0.02)
                continue
            bodies = [f"s{k}-{i}-{j}" for j in range(10)]
            out = call("sqs_send", c.send_message_batch, QueueUrl=qurl,
                       Entries=[{"Id": str(j), "MessageBody": b} for j, b in enumerate(bodies)])
            if out:
                ok = {e["Id"] for e in out.get("Successful", [])}
                with lock:
                    sent.extend(b for j, b in enumerate(bodies) if str(j) in ok)
            i += 1

    def receiver():
        c = client()
        empty = 0
        while True:
            if draining.is_set() and (empty >= 2 or time.time() > drain_deadline[0]):
                return
            out = call("sqs_receive", c.receive_message, QueueUrl=qurl, MaxNumberOfMessages=10,
                       WaitTimeSeconds=1 if draining.is_set() else 5, VisibilityTimeout=visibility)
            if out is None:  # an error answer (counted): try again
                time.sleep(0.05)
                continue
            ms = out.get("Messages", [])
            empty = 0 if ms else empty + 1
            if not ms:
                continue
            now = time.time()
            with lock:
                delivered.extend((m["Body"], now) for m in ms)
            d = call("sqs_delete", c.delete_message_batch, QueueUrl=qurl,
                     Entries=[{"Id": str(j), "ReceiptHandle": m["ReceiptHandle"]} for j, m in enumerate(ms)])
            if d:
                now = time.time()
                ok = {e["Id"] for e in d.get("Successful", [])}
                with lock:
                    for j, m in enumerate(ms):
                        if str(j) in ok:
                            deleted.setdefault(m["Body"], now)

    senders = [threading.Thread(target=sender, args=(k,)) for k in range(n_send)]
    receivers = [threading.Thread(target=receiver) for _ in range(n_recv)]
    for th in senders + receivers:
        th.start()
    for th in senders:
        th.join()
    drain_deadline[0] = time.time() + 120
    draining.set()
    for th in receivers:
        th.join()
    attrs = client().get_queue_attributes(QueueUrl=qurl, AttributeNames=["All"])["Attributes"]
    with open(out_path, "w") as f:
        json.dump({"stats": stats.dump(), "sent": sent, "delivered": delivered, "deleted": deleted,
                   "attributes": attrs}, f)


# ------------------------------------------------------------------ wrk
WRK_LUA = r"""
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args)
  s2 = 0; s4 = 0; s5 = 0
  local f = os.getenv("SOAK_BODY")
  if f then
    local h = io.open(f, "rb"); wrk.body = h:read("*a"); h:close()
    wrk.method = "POST"
    wrk.headers["Content-Type"] = "application/vnd.vqs.batch"
  end
end
function response(status, headers, body)
  if status < 300 then s2 = s2 + 1 elseif status < 500 then s4 = s4 + 1 else s5 = s5 + 1 end
end
function done(summary, latency, requests)
  local a, b, c = 0, 0, 0
  for _, t in ipairs(threads) do a = a + t:get("s2"); b = b + t:get("s4"); c = c + t:get("s5") end
  io.write(string.format("STATUS %d %d %d\n", a, b, c))
  io.write(string.format("LAT %d %d %d\n", latency:percentile(50), latency:percentile(99), latency.max))
  io.write(string.format("REQS %d ERRS %d %d %d %d\n", summary.requests, summary.errors.connect,
                         summary.errors.read, summary.errors.write, summary.errors.timeout))
end
"""


def wrk_loop(name: str, url: str, conns: int, window: int, stop: threading.Event, t0: float, rows: list,
             script: str, body_path: str | None) -> None:
    env = dict(os.environ)
    if body_path:
        env["SOAK_BODY"] = body_path
    while not stop.is_set():
        start = time.time()
        p = subprocess.run(["wrk", "-t1", f"-c{conns}", f"-d{window}s", "--timeout", "30s", "-s", script, url],
                           capture_output=True, text=True, env=env)
        end = time.time()
        m_s = re.search(r"STATUS (\d+) (\d+) (\d+)", p.stdout)
        m_l = re.search(r"LAT (\d+) (\d+) (\d+)", p.stdout)
        m_r = re.search(r"REQS (\d+) ERRS (\d+) (\d+) (\d+) (\d+)", p.stdout)
        if not (m_s and m_l and m_r):
            rows.append({"name": name, "t": start - t0, "error": (p.stdout + p.stderr)[-500:]})
            continue
        s2, s4, s5 = map(int, m_s.groups())
        rows.append({"name": name, "t": start - t0, "t_end": end - t0, "ok": s2, "4xx": s4, "5xx": s5,
                     "rps": s2 / max(end - start, 1e-9), "p50_ms": int(m_l.group(1)) / 1000,
                     "p99_ms": int(m_l.group(2)) / 1000, "max_ms": int(m_l.group(3)) / 1000,
                     "socket_errors": sum(map(int, m_r.groups()[1:]))})


# ------------------------------------------------------------------ the run
def setup_resources(url: str, partitions: int) -> None:
    import httpx

    with httpx.Client(base_url=url, timeout=30) as h:
        for name, n in ((TOPIC, partitions), (WRK_TOPIC, 2), (IDLE_TOPIC, 1)):
            r = h.post("/topics", json={"name": name, "partitions": n})
            assert r.status_code == 201, r.text
        for q in (QUEUE, IDLE_QUEUE):
            r = h.post("/queues", json={"name": q})
            assert r.status_code == 201, r.text


def read_back(url: str, topic: str, partitions: int) -> dict:
    """Every record of ``topic``: {(partition, offset): value}."""
    import httpx

    from vqs.wire import BATCH_CONTENT_TYPE, NEXT_OFFSET, decode_body

    out = {}
    with httpx.Client(base_url=url, timeout=60) as h:
        for p in range(partitions):
            off = 0
            while True:
                r = h.get(f"/topics/{topic}/messages", headers={"accept": BATCH_CONTENT_TYPE},
                          params={"partition": p, "offset": off, "limit": 10_000})
                r.raise_for_status()
                n0 = len(out)
                for b in decode_body(r.content, "response"):
                    for n, v in enumerate(b.values()):
                        out[(p, b.base_offset + n)] = bytes(v).decode()
                off = int(r.headers[NEXT_OFFSET])
                if len(out) == n0:
                    break
    return out


def server_5xx(url: str) -> int:
    import httpx

    text = httpx.get(url + "/metrics", timeout=30).text
    n = 0
    for m in re.finditer(r'^vqs_http_requests_total\{([^}]*)\} (\S+)$', text, re.M):
        st = re.search(r'status="(\d+)"', m.group(1))
        if st and st.group(1).startswith("5"):
            n += int(float(m.group(2)))
    return n


async def drive(args, srv: Server, t0: float, stats: Stats, acked: list, seen: dict, errors: list) -> None:
    stop = asyncio.Event()
    idle_stop = asyncio.Event()
    tasks = [asyncio.create_task(rest_producer(k, srv.url, stop, stats, acked)) for k in range(args.rest_producers)]
    cons_stop = asyncio.Event()
    cons = [asyncio.create_task(rest_consumer(p, srv.url, cons_stop, stats, seen, errors))
            for p in range(args.partitions)]
    idle = [asyncio.create_task(idle_poller(k, srv.port, idle_stop, stats)) for k in range(args.idle)]
    await asyncio.sleep(args.duration)
    stop.set()
    await asyncio.gather(*tasks)
    # consumers drain to the end of what was acknowledged
    ends: dict = defaultdict(int)
    for p, o, _ in acked:
        ends[p] = max(ends[p], o + 1)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any((p, ends[p] - 1) not in seen for p in ends):
        await asyncio.sleep(0.2)
    cons_stop.set()
    idle_stop.set()
    await asyncio.gather(*cons)
    for t in idle:
        t.cancel()
    await asyncio.gather(*idle, return_exceptions=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=150, help="seconds of load (default 150)")
    ap.add_argument("--json", default=os.path.join(C.HERE, "soak.json"),
                    help="JSON output; the PNG chart goes next to it (default bench/soak.json)")
    ap.add_argument("--idle", type=int, default=1000, help="idle long-poll connections (default 1000)")
    ap.add_argument("--rest-producers", type=int, default=4)
    ap.add_argument("--partitions", type=int, default=4, help="partitions of the REST topic (one consumer each)")
    ap.add_argument("--sqs-senders", type=int, default=4)
    ap.add_argument("--sqs-receivers", type=int, default=4)
    ap.add_argument("--sqs-backlog", type=int, default=5000,
                    help="senders wait while this many acknowledged sends are not yet deleted (a steady "
                         "state: receive+delete is two calls to send's one, so open-loop senders outrun "
                         "the receivers and the queue, and the server's memory with it, grows all run)")
    ap.add_argument("--wrk-connections", type=int, default=4, help="connections of each wrk (produce, health)")
    ap.add_argument("--wrk-window", type=int, default=10, help="seconds per wrk run (one latency sample)")
    ap.add_argument("--flush", default="interval", help="the server's --flush (default interval)")
    ap.add_argument("--server-arg", action="append", default=[], help="more `vqs serve` options (repeat)")
    ap.add_argument("--dir", default=None, help="parent of the scratch data directory")
    ap.add_argument("--visibility", type=int, default=300,
                    help="the SQS receivers' VisibilityTimeout (s); under --duration, leases end within the run")
    ap.add_argument("--trace", default=None,
                    help="run the server under tracemalloc, growth reports in this directory "
                         "(bench/traced_server.py; slows the server: not for figures)")
    args = ap.parse_args(argv)

    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = args.idle + 512
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(need, soft)), hard))

    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    info = C.run_info("soak", argv, __file__)
    with C.scratch_dir("vqs-soak-", args.dir) as scratch:
        data = os.path.join(scratch, "data")
        # the defaults (256 waiters, 1,024 connections, 256 from one address: every client here is
        # 127.0.0.1) are below the idle polls asked for: raised as an operator would
        server_args = ["--flush", args.flush, "--max-long-poll-waiters", str(args.idle + 256),
                       "--max-connections", str(args.idle + 1024),
                       "--max-connections-per-client", str(args.idle + 1024), *args.server_arg]
        srv = Server(data, server_args, args.trace)
        C.note(f"server pid {srv.proc.pid} on {srv.url}; load for {args.duration:g} s")
        try:
            doc = run(args, srv, scratch, info, server_args)
        finally:
            rc = srv.stop()
        doc["server_exit_code"] = rc
        ins = subprocess.run([sys.executable, "-m", "vqs.cli", "inspect", data], capture_output=True, text=True,
                             env=C.child_env(), cwd=C.vqs_home())
        doc["inspect_exit_code"] = ins.returncode
        doc["checks"].append({"bar": "server stops cleanly (SIGTERM, exit 0)", "value": rc, "target": "0",
                              "ok": rc == 0})
        doc["checks"].append({"bar": "`vqs inspect` of the data dir afterwards", "value": ins.returncode,
                              "target": "exit 0", "ok": ins.returncode == 0})
        if rc != 0 or ins.returncode != 0:
            doc["server_log_tail"] = srv.tail()
            doc["inspect_output"] = (ins.stdout + ins.stderr)[-3000:]
    png = os.path.splitext(args.json)[0] + ".png"
    doc["chart"] = os.path.relpath(png)
    C.write_json(args.json, doc)
    chart(doc, png)
    print(report_md(doc))
    return 0 if all(c["ok"] for c in doc["checks"]) else 1


def run(args, srv: Server, scratch: str, info: dict, server_args: list) -> dict:
    from vqs.record import encode_batch_parts

    setup_resources(srv.url, args.partitions)
    t0 = time.time()
    stats = Stats(t0)
    samples: list = []
    sampling = threading.Event()

    def sampler():
        while not sampling.wait(1.0):
            s = proc_sample(srv.proc.pid)
            if s:
                s["t"] = round(time.time() - t0, 2)
                samples.append(s)

    threading.Thread(target=sampler, daemon=True).start()
    # SQS in a child process
    sqs_out = os.path.join(scratch, "sqs.json")
    mp = multiprocessing.get_context("spawn")
    sqs_stop = mp.Event()
    sqs_proc = mp.Process(target=sqs_worker_main,
                          args=(srv.url, t0, args.sqs_senders, args.sqs_receivers, sqs_stop, sqs_out,
                                args.visibility, args.sqs_backlog))
    sqs_proc.start()
    # wrk
    lua = os.path.join(scratch, "soak.lua")
    with open(lua, "w") as f:
        f.write(WRK_LUA)
    body = os.path.join(scratch, "one.batch")
    with open(body, "wb") as f:
        f.write(b"".join(encode_batch_parts(0, [b"w" * 100])))
    wrk_rows: list = []
    wrk_stop = threading.Event()
    wrks = [threading.Thread(target=wrk_loop, args=("wrk_produce", f"{srv.url}/topics/{WRK_TOPIC}/messages",
                                                     args.wrk_connections, args.wrk_window, wrk_stop, t0,
                                                     wrk_rows, lua, body)),
            threading.Thread(target=wrk_loop, args=("wrk_health", f"{srv.url}/health", args.wrk_connections,
                                                     args.wrk_window, wrk_stop, t0, wrk_rows, lua, None))]
    for th in wrks:
        th.start()
    acked: list = []
    seen: dict = {}
    errors: list = []
    # the SQS senders and wrk stop with the REST producers; receivers and consumers then drain
    timer = threading.Timer(args.duration, lambda: (sqs_stop.set(), wrk_stop.set()))
    timer.start()
    asyncio.run(drive(args, srv, t0, stats, acked, seen, errors))
    for th in wrks:
        th.join()
    sqs_proc.join(180)
    if sqs_proc.is_alive():
        sqs_proc.terminate()
        errors.append("the SQS worker did not finish in 180 s after the load stopped")
    sampling.set()
    t_load_end = time.time() - t0
    try:
        with open(sqs_out) as f:
            sq = json.load(f)
    except OSError:
        sq = {"stats": {"bins": {}, "status": {}}, "sent": [], "delivered": [], "deleted": {}, "attributes": {}}
        errors.append("the SQS worker wrote no results")
    return evaluate(args, srv, info, server_args, stats.dump(), sq, acked, seen, errors, wrk_rows, samples,
                    t_load_end)


def evaluate(args, srv, info, server_args, st, sq, acked, seen, errors, wrk_rows, samples, t_load_end) -> dict:
    # merge the two processes' stats
    bins = {k: {int(s): v for s, v in b.items()} for k, b in st["bins"].items()}
    status = {k: dict(v) for k, v in st["status"].items()}
    for k, b in sq["stats"]["bins"].items():
        bins[k] = {int(s): v for s, v in b.items()}
    status.update(sq["stats"]["status"])
    checks = []

    def check(bar, value, target, ok):
        checks.append({"bar": bar, "value": value, "target": target, "ok": bool(ok)})

    # 5xx and connection errors
    client_5xx = sum(n for kind in status.values() for s, n in kind.items() if s.isdigit() and s.startswith("5"))
    no_answer = sum(n for kind in status.values() for s, n in kind.items() if not s.isdigit())
    wrk_5xx = sum(r.get("5xx", 0) for r in wrk_rows)
    wrk_sock = sum(r.get("socket_errors", 0) for r in wrk_rows)
    s5 = server_5xx(srv.url)
    check("5xx answers seen by clients (Python + wrk)", client_5xx + wrk_5xx, "0", client_5xx + wrk_5xx == 0)
    check("5xx counted by the server (vqs_http_requests_total)", s5, "0", s5 == 0)
    check("requests without an answer (connection errors)", no_answer, "0", no_answer == 0)
    check("wrk socket errors (connect/read/write/timeout)", wrk_sock, "0", wrk_sock == 0)
    unexpected = sum(sum(v.values()) for k, v in status.items() if k.endswith("_unexpected"))
    check("idle long polls answered other than 200 and empty", unexpected, "0", unexpected == 0)
    idle_done = sum(sum(status.get(k, {}).values()) for k in ("idle_receive", "idle_consume"))
    check("idle long polls completed (20 s each)", idle_done, f">= {args.idle} (each held ~20 s)",
          idle_done >= args.idle * (1 if args.duration >= 30 else 0))
    # REST topic: every acknowledged produce at its offset, nothing twice, nothing extra
    log = read_back(srv.url, TOPIC, args.partitions)
    lost = [(p, o, v) for p, o, v in acked if log.get((p, o)) != v]
    vals = list(log.values())
    dups = len(vals) - len(set(vals))
    check("REST produces acknowledged", len(acked), "> 0", len(acked) > 0)
    check("acknowledged REST produces missing or changed at their offset", len(lost), "0", not lost)
    check("values stored twice in the REST topic", dups, "0", dups == 0)
    check("records in the REST topic beyond those acknowledged", len(log) - len(acked), "0",
          len(log) == len(acked))
    missed = [k for k in log if k not in seen]
    check("REST consumer: records not seen / order errors", f"{len(missed)} / {len(errors)}", "0 / 0",
          not missed and not errors)
    # wrk produce: every acknowledged one is in the log (in-flight ones at a window's end may be extra)
    wrk_ok = sum(r.get("ok", 0) for r in wrk_rows if r["name"] == "wrk_produce")
    wlog = len(read_back(srv.url, WRK_TOPIC, 2))
    windows = sum(1 for r in wrk_rows if r["name"] == "wrk_produce")
    check("wrk produces acknowledged vs records in the log", f"{wrk_ok} / {wlog}",
          f"ok <= log <= ok + {args.wrk_connections}/window", wrk_ok <= wlog <= wrk_ok + args.wrk_connections * windows)
    # SQS: every acknowledged send delivered; none after its acknowledged delete; none twice
    sent = set(sq["sent"])
    times: dict = defaultdict(list)
    for b, t in sq["delivered"]:
        times[b].append(t)
    undelivered = sent - set(times)
    redelivered = sum(1 for ts in times.values() if len(ts) > 1)
    after_delete = sum(1 for b, ts in times.items() if b in sq["deleted"] and max(ts) > sq["deleted"][b])
    check("SQS sends acknowledged", len(sent), "> 0", len(sent) > 0)
    check("acknowledged SQS sends never delivered", len(undelivered), "0", not undelivered)
    check("SQS messages delivered again after an acknowledged delete", after_delete, "0", after_delete == 0)
    check(f"SQS messages delivered twice (visibility {args.visibility} s)", redelivered, "0", redelivered == 0)
    a = sq.get("attributes", {})
    left = int(a.get("ApproximateNumberOfMessages", -1)) + int(a.get("ApproximateNumberOfMessagesNotVisible", -1))
    check("SQS queue empty after the drain (visible + in flight)", left, "0", left == 0)
    # resources over the steady state
    steady = [s for s in samples if args.duration * 0.5 <= s["t"] <= args.duration]
    res = {}
    for key, unit in (("rss_mib", "MiB"), ("rss_anon_mib", "MiB"), ("rss_file_mib", "MiB"), ("fds", "fds"),
                      ("threads", "threads")):
        pts = [(s["t"], s[key]) for s in steady if key in s]
        allv = [s[key] for s in samples if key in s]
        res[key] = {"start": allv[0] if allv else None, "steady_start": pts[0][1] if pts else None,
                    "end": allv[-1] if allv else None, "max": max(allv) if allv else None,
                    "steady_slope_per_min": round(slope_per_min(pts), 3), "unit": unit}
    rss = res["rss_mib"]
    if steady:
        growth = rss["end"] - rss["steady_start"]
        check("RSS slope over the steady state (MiB/min)", rss["steady_slope_per_min"], "<= 2% of RSS per min",
              rss["steady_slope_per_min"] <= 0.02 * rss["steady_start"])
        check("RSS growth over the steady state (MiB)", round(growth, 1), "<= 10% of RSS",
              growth <= 0.10 * rss["steady_start"])
        fd = res["fds"]
        check("open fds: growth over the steady state", fd["end"] - fd["steady_start"], "<= 16",
              fd["end"] - fd["steady_start"] <= 16)
    # latency and throughput per kind over time
    kinds = {}
    dur = max(args.duration, 1)
    for k, b in sorted(bins.items()):
        lat = [x for v in b.values() for x in v]
        per_s = []
        for s in range(int(t_load_end) + 1):
            v = b.get(s, [])
            per_s.append({"t": s, "n": len(v), "p50_ms": _ms(pct(v, 0.5)), "p99_ms": _ms(pct(v, 0.99))})
        kinds[k] = {"ops": len(lat), "ops_per_s": round(sum(len(v) for s, v in b.items() if s < dur) / dur, 1),
                    "p50_ms": _ms(pct(lat, 0.5)), "p99_ms": _ms(pct(lat, 0.99)), "max_ms": _ms(max(lat, default=None)),
                    "status": status.get(k, {}), "per_second": per_s}
    return {**info, "params": dict(vars(args)), "server_args": server_args,
            "uptime": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
            "kinds": kinds, "wrk": wrk_rows, "samples": samples, "resources": res, "checks": checks,
            "errors": errors[:50], "lost_examples": lost[:10], "undelivered_examples": sorted(undelivered)[:10]}


def _ms(x):
    return None if x is None else round(x * 1000, 2)


# ------------------------------------------------------------------ output
def report_md(doc: dict) -> str:
    out = [C.run_header_md(doc), f"- uptime at the end: `{doc['uptime']}`",
           f"- server: `vqs serve {' '.join(doc['server_args'])}`; chart: `{doc['chart']}`", ""]
    rows = []
    for k, v in doc["kinds"].items():
        if k.endswith("_unexpected"):
            continue
        p99s = [x["p99_ms"] for x in v["per_second"] if x["p99_ms"] is not None and x["n"] >= 5]
        rows.append([k, C.fmt_num(v["ops"]), C.fmt_num(v["ops_per_s"], 1), v["p50_ms"], v["p99_ms"],
                     max(p99s, default="-"), ", ".join(f"{s}: {n}" for s, n in sorted(v["status"].items()))])
    for name in ("wrk_produce", "wrk_health"):
        ws = [r for r in doc["wrk"] if r["name"] == name and "ok" in r]
        if ws:
            n = sum(r["ok"] for r in ws)
            secs = sum(r["t_end"] - r["t"] for r in ws)
            rows.append([name, C.fmt_num(n), C.fmt_num(n / secs, 1), f"{statistics.median(r['p50_ms'] for r in ws):g}",
                         f"{max(r['p99_ms'] for r in ws):g}*", f"{max(r['p99_ms'] for r in ws):g}",
                         f"2xx: {n}, 4xx: {sum(r['4xx'] for r in ws)}, 5xx: {sum(r['5xx'] for r in ws)}"])
    out.append(C.markdown_table(["client", "ops", "ops/s", "p50 ms", "p99 ms", "worst 1-s p99 ms", "answers"],
                                rows, right=[1, 2, 3, 4, 5]))
    out.append("\n(wrk: median of the windows' p50, worst window's p99, per " f"{doc['params']['wrk_window']} s window)\n")
    rrows = []
    for k, r in doc["resources"].items():
        rrows.append([k, r["start"], r["steady_start"], r["end"], r["max"], r["steady_slope_per_min"]])
    out.append(C.markdown_table(["server", "start", "steady start (50%)", "end", "max", "steady slope /min"], rrows,
                                right=[1, 2, 3, 4, 5]))
    out.append("")
    out.append(C.markdown_table(["check", "value", "bar", "result"],
                                [[c["bar"], c["value"], c["target"], "pass" if c["ok"] else "**fail**"]
                                 for c in doc["checks"]], right=[1]))
    return "\n".join(out)


def chart(doc: dict, png: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        C.note("matplotlib is not installed: no chart (`make soak` installs it with the bench extra, "
               "or: pip install -e '.[bench]')")
        return
    fig, (a1, a2, a3) = plt.subplots(3, 1, figsize=(8, 7), sharex=True)
    for k, v in doc["kinds"].items():
        if k.endswith("_unexpected") or not v["ops"] or k.startswith("idle"):
            continue
        ps = v["per_second"]
        a1.plot([x["t"] for x in ps], [x["n"] for x in ps], label=k, lw=0.9)
        pts = [(x["t"], x["p99_ms"]) for x in ps if x["p99_ms"] is not None and x["n"] >= 5]
        if pts and not k.startswith("idle"):
            a2.plot(*zip(*pts), label=k, lw=0.9)
    for name, style in (("wrk_produce", "k-"), ("wrk_health", "k--")):
        ws = [r for r in doc["wrk"] if r["name"] == name and "ok" in r]
        if ws:
            a1.step([r["t"] for r in ws], [r["rps"] for r in ws], style, where="post", label=name, lw=1.2)
            a2.step([r["t"] for r in ws], [r["p99_ms"] for r in ws], style, where="post", label=name, lw=1.2)
    a1.set_ylabel("ops/s")
    a1.set_yscale("symlog", linthresh=10)
    a1.legend(fontsize=6, ncol=3, loc="upper right")
    a2.set_ylabel("p99 ms (per s)")
    a2.set_yscale("log")
    a2.legend(fontsize=6, ncol=3, loc="upper right")
    s = doc["samples"]
    a3.plot([x["t"] for x in s], [x["rss_mib"] for x in s], "b-", label="RSS MiB")
    a3.set_ylabel("RSS MiB", color="b")
    a3.set_ylim(bottom=0)
    a4 = a3.twinx()
    a4.plot([x["t"] for x in s], [x["fds"] for x in s], "r-", lw=0.8, label="open fds")
    a4.set_ylabel("open fds", color="r")
    a4.set_ylim(bottom=0)
    a3.set_xlabel("seconds")
    fig.suptitle(f"vqs soak: {doc['params']['idle']} idle long polls + REST, SQS, wrk; {doc['date']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(png, dpi=60)
    plt.close(fig)
    C.note(f"wrote {os.path.relpath(png)} ({os.path.getsize(png) // 1024} KiB)")


if __name__ == "__main__":
    sys.exit(main())
