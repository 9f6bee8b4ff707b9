"""Per-request cost of the server's hot routes, measured with ``wrk`` (issue 13, item 4).

    python bench/http_bench.py [--connections 32] [--duration 5] [--base-tree PATH] [--json out.json]

Starts a real ``vqs serve`` (through bench/_http_bench_server.py, which adds
``GET /bench/noop``: a bare ASGI answer in the same process, see there) on a
scratch data directory with the default durability (``--flush interval``,
100 ms), creates a topic and a queue, then drives each workload with ``wrk``
(one thread, ``--connections`` keep-alive connections, a Lua script that sets
the method, headers and body and prints the result as JSON): a warm-up of one
second, then ``--duration`` seconds measured. Workloads (100-byte values):

* ``noop``: the bare ASGI route, the floor of this server (a GET, no body);
* ``noop-post``: the same route, POSTed the body of ``produce-json-1`` with its
  headers, which it reads before answering: the floor of a request with a body
  (uvicorn parses and hands over the body; the answer is the same 12 bytes).
  The bar is against this one (the like-for-like floor); ``x noop`` stays
  against the GET noop;
* ``health``: ``GET /health`` through the whole app (FastAPI);
* ``produce-json-1`` / ``produce-json-100``: REST produce, one / 100 messages, JSON;
* ``produce-batch-1``: REST produce of one message as ``application/vnd.vqs.batch``;
* ``consume-json-1``: ``GET /topics/{t}/messages?offset=0&limit=1``;
* ``queue-send-1``: REST ``POST /queues/{q}/messages`` with one message;
* ``queue-receive-empty``: REST receive on an empty queue (no wait);
* ``sqs-send-json`` / ``sqs-send-query``: SQS SendMessage, AWS JSON 1.0 / query protocol;
* ``sqs-receive-json``: SQS ReceiveMessage (JSON) of one message with ``VisibilityTimeout: 0`` from a
  queue holding ten (the message is visible again at once: every request receives one);
* ``sqs-delete-json``: SQS DeleteMessage (JSON), each request with a receipt handle of its own
  (messages sent and received before the warm-up; the Lua script takes the next handle).

With ``--base-tree PATH`` (e.g. a git worktree of main) the same workloads
then run against a server whose ``vqs`` comes from PATH, in the same session,
so the before/after are side by side; each server's ratios are against its
own noop. Prints Markdown for bench/RESULTS.md (date, machine, command,
commit, ``uptime``, the table, the bars) and writes JSON (default
bench/http_bench.json) with ``figures`` for bench/ab.py.

Besides wrk's requests per second and latency, each row has the server's CPU
time per request (user + system of the server process, all threads, over the
measured window, from /proc): on a machine shared with other work, req/s
ratios move with whatever else runs at that moment (wrk and the server share
the cores), while CPU per request is the server's own cost; "x noop (CPU)" is
the req/s ratio the server would reach if it were the only bottleneck.

Bars (issue 13, item 4): one-message JSON produce at least 0.7x the noop's
requests per second, and its p99 at most 20 ms, at 32 connections. The ratio
is shown against both floors: ``noop-post`` (the same request, body read: the
like-for-like one) and the GET ``noop`` (stricter: it also charges the produce
for uvicorn's handling of a request body). Any
response other than 2xx, and any socket error, is counted and shown.
``--profile NAME`` samples the server with py-spy (``pip install py-spy``)
while NAME is measured and prints where the time went.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import _common as C  # before any vqs import: it decides which vqs is measured

free_port = C.free_port

HERE = os.path.dirname(os.path.abspath(__file__))
VALUE = "x" * 100
TOPIC = "bench"
QUEUE = "benchq"
EMPTY_QUEUE = "benchq-empty"
RECV_QUEUE = "benchq-recv"
DEL_QUEUE = "benchq-del"
HANDLES_PER_SECOND = 15_000  # receipt handles made ready per second of sqs-delete-json (warm-up included)
ACCOUNT = "123456789012"

_LUA = r"""
wrk.method = "%(method)s"
%(headers)s
local f = io.open("%(body_path)s", "rb")
local body = f:read("*a")
f:close()
if #body > 0 then wrk.body = body end
%(dynamic)s

done = function(summary, latency, requests)
  io.write(string.format(
    "WRKJSON {\"requests\":%%d,\"duration_us\":%%d,\"p50_us\":%%d,\"p99_us\":%%d,\"max_us\":%%d," ..
    "\"status_errors\":%%d,\"connect_errors\":%%d,\"read_errors\":%%d,\"write_errors\":%%d,\"timeouts\":%%d}\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), latency.max,
    summary.errors.status, summary.errors.connect, summary.errors.read, summary.errors.write,
    summary.errors.timeout))
end
"""


# sqs-delete-json: each request's body is the template with the next receipt handle in it
_LUA_HANDLES = r"""
local handles = {}
for line in io.lines("%(handles_path)s") do handles[#handles + 1] = line end
local head, tail = body:match("^(.*)@HANDLE@(.*)$")
local i = 0
request = function()
  i = i + 1
  return wrk.format(nil, nil, nil, head .. handles[(i - 1) %% #handles + 1] .. tail)
end
"""


def one_batch_body() -> bytes:
    from vqs.record import encode_batch

    return bytes(encode_batch(0, [VALUE.encode()]))


def workloads(port: int) -> list[dict]:
    """(name, method, path, headers, body) of every workload, in run order."""
    qurl = f"http://127.0.0.1:{port}/{ACCOUNT}/{QUEUE}"
    sqs_json = {"Content-Type": "application/x-amz-json-1.0"}
    one = json.dumps({"messages": [{"value": VALUE}]}).encode()
    hundred = json.dumps({"messages": [{"value": VALUE}] * 100}).encode()
    js = {"Content-Type": "application/json"}
    from urllib.parse import urlencode

    return [
        {"name": "noop", "method": "GET", "path": "/bench/noop", "headers": {}, "body": b""},
        {"name": "noop-post", "method": "POST", "path": "/bench/noop", "headers": js, "body": one},
        {"name": "health", "method": "GET", "path": "/health", "headers": {}, "body": b""},
        {"name": "produce-json-1", "method": "POST", "path": f"/topics/{TOPIC}/messages", "headers": js,
         "body": one},
        {"name": "produce-batch-1", "method": "POST", "path": f"/topics/{TOPIC}/messages",
         "headers": {"Content-Type": "application/vnd.vqs.batch"}, "body": one_batch_body()},
        {"name": "produce-json-100", "method": "POST", "path": f"/topics/{TOPIC}/messages", "headers": js,
         "body": hundred, "messages": 100},
        {"name": "consume-json-1", "method": "GET", "path": f"/topics/{TOPIC}/messages?offset=0&limit=1",
         "headers": {}, "body": b""},
        {"name": "queue-send-1", "method": "POST", "path": f"/queues/{QUEUE}/messages", "headers": js,
         "body": json.dumps({"messages": [{"body": VALUE}]}).encode()},
        {"name": "queue-receive-empty", "method": "POST", "path": f"/queues/{EMPTY_QUEUE}/receive",
         "headers": js, "body": b'{"max_messages":1,"wait_seconds":0}'},
        {"name": "sqs-send-json", "method": "POST", "path": "/",
         "headers": {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.SendMessage"},
         "body": json.dumps({"QueueUrl": qurl, "MessageBody": VALUE}).encode()},
        {"name": "sqs-receive-json", "method": "POST", "path": "/",
         "headers": {**sqs_json, "X-Amz-Target": "AmazonSQS.ReceiveMessage"},
         "body": json.dumps({"QueueUrl": qurl.replace(QUEUE, RECV_QUEUE), "MaxNumberOfMessages": 1,
                             "VisibilityTimeout": 0, "WaitTimeSeconds": 0}).encode()},
        {"name": "sqs-delete-json", "method": "POST", "path": "/",
         "headers": {**sqs_json, "X-Amz-Target": "AmazonSQS.DeleteMessage"},
         "body": json.dumps({"QueueUrl": qurl.replace(QUEUE, DEL_QUEUE), "ReceiptHandle": "@HANDLE@"}).encode(),
         "handles": DEL_QUEUE},
        {"name": "sqs-send-query", "method": "POST", "path": "/",
         # (an Authorization header, as SDKs send even with made-up keys: a credential-less server
         # runs a state-changing SQS action only with one or X-Amz-Target)
         "headers": {"Content-Type": "application/x-www-form-urlencoded",
                     "Authorization": "AWS4-HMAC-SHA256 Credential=bench/20240101/us-east-1/sqs/aws4_request, "
                                      "SignedHeaders=host, Signature=00"},
         "body": urlencode({"Action": "SendMessage", "QueueUrl": qurl, "MessageBody": VALUE}).encode()},
    ]


class Server:
    """The bench server process (bench/_http_bench_server.py) on a scratch data dir."""

    def __init__(self, tmp: str, tree: str | None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data = os.path.join(tmp, "data")
        self.log_path = os.path.join(tmp, "server.log")
        env = C.child_env()
        if tree:
            env["PYTHONPATH"] = tree
        self.env = env
        self.cwd = tree or C.vqs_home()

    def __enter__(self):
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "_http_bench_server.py"), "--data-dir", self.data,
             "--port", str(self.port), "--log-level", "warning", "--log-format", "json"],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=self.cwd, env=self.env)
        import httpx

        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}: {self.tail()}")
            try:
                if httpx.get(self.url + "/health/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"server not ready: {self.tail()}")
            time.sleep(0.1)
        with httpx.Client(base_url=self.url, timeout=30) as c:
            c.post("/topics", json={"name": TOPIC}).raise_for_status()
            c.post(f"/topics/{TOPIC}/messages", json={"messages": [{"value": VALUE}]}).raise_for_status()
            for q in (QUEUE, EMPTY_QUEUE, RECV_QUEUE, DEL_QUEUE):
                c.post("/queues", json={"name": q}).raise_for_status()
            c.post(f"/queues/{RECV_QUEUE}/messages",
                   json={"messages": [{"body": VALUE}] * 10}).raise_for_status()
            self.pid = self.proc.pid
            assert c.get("/bench/noop").status_code == 200
        return self

    def receipt_handles(self, queue: str, n: int) -> list[str]:
        """``n`` receipt handles of messages sent to ``queue`` and received (leased for 12 hours)."""
        import httpx

        out: list[str] = []
        with httpx.Client(base_url=self.url, timeout=60) as c:
            while len(out) < n:
                k = min(1000, n - len(out))
                c.post(f"/queues/{queue}/messages", json={"messages": [{"body": VALUE}] * k}).raise_for_status()
                r = c.post(f"/queues/{queue}/receive",
                           json={"max_messages": k, "wait_seconds": 0, "visibility_timeout": 43200})
                r.raise_for_status()
                out += [m["receipt_handle"] for m in r.json()["messages"]]
        return out

    def tail(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read()[-3000:].decode("utf-8", "replace")

    def __exit__(self, *exc):
        C.stop_process(self.proc)
        self.log.close()


def run_wrk(url: str, w: dict, connections: int, seconds: float, tmp: str) -> dict:
    body_path = os.path.join(tmp, w["name"] + ".body")
    with open(body_path, "wb") as f:
        f.write(w["body"])
    headers = "\n".join(f'wrk.headers["{k}"] = "{v}"' for k, v in w["headers"].items())
    dynamic = ""
    if w.get("handles_path"):
        dynamic = _LUA_HANDLES % {"handles_path": w["handles_path"]}
    script = os.path.join(tmp, w["name"] + ".lua")
    with open(script, "w") as f:
        f.write(_LUA % {"method": w["method"], "headers": headers, "body_path": body_path, "dynamic": dynamic})
    cmd = ["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "--timeout", "10s", "-s", script, url + w["path"]]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60)
    for line in p.stdout.splitlines():
        if line.startswith("WRKJSON "):
            return json.loads(line[8:])
    raise RuntimeError(f"wrk gave no result ({p.returncode}): {p.stdout[-2000:]} {p.stderr[-2000:]}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, all its threads (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_profile(pid: int, name: str, args) -> subprocess.Popen:
    """py-spy sampling the server for the measured window (collapsed stacks)."""
    exe = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    os.makedirs(args.profile_dir, exist_ok=True)
    out = os.path.join(args.profile_dir, f"http_bench.{name}.collapsed")
    return subprocess.Popen([exe, "record", "-p", str(pid), "-d", str(max(1, int(args.duration) - 1)), "-r", "250",
                             "-f", "raw", "-o", out, "--nonblocking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def finish_profile(spy: subprocess.Popen, label: str, name: str, args) -> None:
    spy.wait(60)
    path = os.path.join(args.profile_dir, f"http_bench.{name}.collapsed")
    final = os.path.join(args.profile_dir, f"http_bench.{label}.{name}.collapsed")
    os.replace(path, final)
    C.note(f"profile of {label} {name}: {os.path.relpath(final)}")
    C.note(summarize_profile(final))


def summarize_profile(path: str, top: int = 25) -> str:
    """Inclusive share of the samples per function (the event-loop thread's stacks)."""
    incl: dict[str, int] = {}
    total = 0
    with open(path) as f:
        for line in f:
            stack, _, n = line.rstrip().rpartition(" ")
            total += int(n)
            seen = set()
            for fr in stack.split(";"):
                fn = re.sub(r" \((.*?/)?([^/]*?):\d+\)$", r" (\2)", fr)
                if fn not in seen:
                    seen.add(fn)
                    incl[fn] = incl.get(fn, 0) + int(n)
    rows = sorted(incl.items(), key=lambda kv: -kv[1])[:top]
    return "\n".join(f"{100 * n / max(total, 1):5.1f}%  {fn}" for fn, n in rows)


def bench_tree(label: str, tree: str | None, names: list[str] | None, args) -> list[dict]:
    rows = []
    with C.scratch_dir("vqs-http-bench-") as tmp, Server(tmp, tree) as srv:
        for w in workloads(srv.port):
            if names and w["name"] not in names and w["name"] not in ("noop", "noop-post"):
                continue
            C.note(f"{label}: {w['name']} ...")
            if w.get("handles"):  # one receipt handle per request, warm-up and measured window
                w["handles_path"] = os.path.join(tmp, w["name"] + ".handles")
                hs = srv.receipt_handles(w["handles"], int(HANDLES_PER_SECOND * (args.duration + 1)))
                with open(w["handles_path"], "w") as f:
                    f.write("\n".join(hs) + "\n")
            run_wrk(srv.url, w, args.connections, 1, tmp)  # warm-up
            spy = start_profile(srv.proc.pid, w["name"], args) if w["name"] in args.profile else None
            cpu0 = cpu_seconds(srv.proc.pid)
            r = run_wrk(srv.url, w, args.connections, args.duration, tmp)
            cpu = cpu_seconds(srv.proc.pid) - cpu0
            if spy is not None:
                finish_profile(spy, label, w["name"], args)
            secs = r["duration_us"] / 1e6
            errors = r["status_errors"] + r["connect_errors"] + r["read_errors"] + r["write_errors"] + r["timeouts"]
            rows.append({"tree": label, "workload": w["name"], "connections": args.connections,
                         "requests": r["requests"], "seconds": round(secs, 3),
                         "rps": r["requests"] / secs, "msg_per_s": r["requests"] * w.get("messages", 1) / secs,
                         "p50_ms": r["p50_us"] / 1000, "p99_ms": r["p99_us"] / 1000, "max_ms": r["max_us"] / 1000,
                         "cpu_us_per_req": cpu / max(r["requests"], 1) * 1e6, "errors": errors, "wrk": r})
        if srv.proc.poll() is not None:
            raise RuntimeError(f"the server died during the run: {srv.tail()}")
    noop = next(r for r in rows if r["workload"] == "noop")
    for r in rows:
        r["vs_noop"] = r["rps"] / noop["rps"]
        r["cpu_vs_noop"] = noop["cpu_us_per_req"] / r["cpu_us_per_req"] if r["cpu_us_per_req"] else None
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Run it under the bench lock: flock /work/wt/bench.lock python bench/http_bench.py")
    ap.add_argument("--connections", type=int, default=32, help="wrk connections (default 32)")
    ap.add_argument("--duration", type=float, default=5, help="seconds measured per workload (default 5)")
    ap.add_argument("--only", default="", help="comma-separated workloads (noop and noop-post always run)")
    ap.add_argument("--base-tree", default=None,
                    help="also measure a server whose vqs comes from this tree (e.g. a worktree of main), first")
    ap.add_argument("--profile", default="", help="comma-separated workloads to sample with py-spy (installed "
                                                  "separately) while measured; collapsed stacks to --profile-dir")
    ap.add_argument("--profile-dir", default=tempfile.gettempdir(), help="where profiles go (default: the temp dir)")
    ap.add_argument("--json", default=os.path.join(HERE, "http_bench.json"), help="JSON output ('' for none)")
    args = ap.parse_args(argv)
    if not shutil.which("wrk"):
        print("wrk is not installed (Debian: apt-get install wrk)", file=sys.stderr)
        return 2
    names = [n for n in args.only.split(",") if n] or None
    args.profile = [n for n in args.profile.split(",") if n]
    info = C.run_info("http_bench", argv, __file__)
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    rows = []
    if args.base_tree:
        rows += bench_tree("base", os.path.abspath(args.base_tree), names, args)
        info["base_git"] = C.git_state(os.path.abspath(args.base_tree))
    rows += bench_tree("new", None, names, args)
    uptime_end = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()

    new = {r["workload"]: r for r in rows if r["tree"] == "new"}
    bars = []
    if "produce-json-1" in new:
        p = new["produce-json-1"]
        post = p["rps"] / new["noop-post"]["rps"]
        bars = [
            {"bar": f"produce-json-1 req/s / noop-post req/s ({args.connections} connections)", "value": post,
             "target": ">= 0.7", "ok": post >= 0.7},
            {"bar": f"produce-json-1 req/s / noop (GET) req/s ({args.connections} connections)",
             "value": p["vs_noop"], "target": ">= 0.7", "ok": p["vs_noop"] >= 0.7},
            {"bar": f"produce-json-1 p99 ms ({args.connections} connections)", "value": p["p99_ms"],
             "target": "<= 20", "ok": p["p99_ms"] <= 20},
        ]
    figures = [C.figure(f"{r['workload']} req/s", r["rps"], "req/s") for r in rows if r["tree"] == "new"]
    figures += [C.figure(f"{r['workload']} p99", r["p99_ms"], "ms", better="lower") for r in rows if r["tree"] == "new"]
    doc = {**info, "uptime_start": uptime, "uptime_end": uptime_end, "rows": rows, "bars": bars, "figures": figures}
    C.write_json(args.json, doc)

    print(C.run_header_md(info))
    if args.base_tree:
        print(f"- base tree: `{args.base_tree}` at {C.commit_text(info['base_git'])}")
    print(f"- uptime at start: `{uptime}`")
    print(f"- uptime at end: `{uptime_end}`")
    print()
    print(C.markdown_table(
        ["tree", "workload", "req/s", "x noop", "msg/s", "p50 ms", "p99 ms", "max ms", "server CPU us/req",
         "x noop (CPU)", "errors"],
        [[r["tree"], r["workload"], C.fmt_num(r["rps"]), C.fmt_ratio(r["vs_noop"]), C.fmt_num(r["msg_per_s"]),
          f"{r['p50_ms']:.2f}", f"{r['p99_ms']:.2f}", f"{r['max_ms']:.1f}", C.fmt_num(r["cpu_us_per_req"]),
          C.fmt_ratio(r["cpu_vs_noop"]), r["errors"]] for r in rows],
        right=[2, 3, 4, 5, 6, 7, 8, 9, 10]))
    if bars:
        print()
        print(C.bars_table(bars))
    return 0


if __name__ == "__main__":
    sys.exit(main())
