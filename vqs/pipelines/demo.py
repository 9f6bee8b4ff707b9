"""The end-to-end demo (``make demo``): cameras at the edge, a VQS server, the Spark frame job.

1. starts a local VQS server (embedded defaults, loopback) owning
   ``demo-data/pipeline/data``;
2. runs the edge (vqs.pipelines.edge): ``--cameras`` synthetic cameras
   (vqs.pipelines.scene) render and JPEG-encode ``--seconds`` of video at
   ``--resolution`` in real time, each into a HybridQueue of its own; a
   forwarder sends them to the topic ``frames`` with the idempotent producer.
   Mid-run the server is taken away for ``--outage`` seconds (SIGKILL, or
   SIGTERM with ``--outage-signal term``) and started again: frames pile up in
   the queues (memory, then disk) and drain in order when it is back. The topic
   is read back: nothing lost, nothing twice, each camera in order;
3. meanwhile Spark starts; then the frame job (vqs.pipelines.frames) reads the
   topic through the server (``url`` mode), decodes the frames in a pandas UDF,
   runs a detector per camera in Spark state, writes features and events to
   Parquet and publishes alerts to the topic ``alerts``;
4. writes the report (``out/report.html``: per camera the feature curves with
   the events marked, and a thumbnail of the frame at each event), prints the
   ground-truth table (every scripted event, found or not, its time error,
   false alarms), throughput per stage and end to end (frames/s, MB/s), where
   the outputs are, and stops the server.

Paths and commands are printed with plain ``print``, one per line, never
wrapped to the terminal's width, so they can be copied.

    python -m vqs.pipelines.demo [--cameras 4] [--seconds 40] [--resolution 640x360] [--fast]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServer:
    """``python -m vqs.server`` on a data dir, on a free loopback port."""

    def __init__(self, data_dir: str, log_path: str):
        self.data_dir = data_dir
        self.log_path = log_path
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> LocalServer:
        import httpx

        self._log = open(self.log_path, "ab")
        log_from = self._log.tell()  # this start's lines (a restart appends)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vqs.server", "--data-dir", self.data_dir, "--port", str(self.port),
             "--log-format", "text"],
            stdout=self._log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
        # Ready when this process says so, then answers: the port was free when picked, not
        # held, so another program may hold it a moment and answer in its place.
        mine = f"pid {self.proc.pid},".encode()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"the VQS server exited ({self.proc.returncode}); see {self.log_path}")
            with open(self.log_path, "rb") as f:
                f.seek(log_from)
                said = mine in f.read()
            try:
                if said and httpx.get(self.url + "/health/ready", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise SystemExit(f"the VQS server did not become ready in {timeout:.0f} s; see {self.log_path}")

    def kill(self) -> int | None:
        """SIGKILL: the server vanishes as in a crash (no drain, no flush); ``start()``
        brings it back on the same port and data dir."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.kill()
        self.proc.wait()
        if getattr(self, "_log", None):
            self._log.close()
            self._log = None
        return self.proc.returncode

    def stop(self) -> int | None:
        """SIGTERM (the server drains, flushes and closes), then wait; returns
        the exit code (0 after a clean shutdown), None if it never started."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "_log", None):
            self._log.close()
            self._log = None
        return self.proc.returncode


def main(argv=None) -> int:
    """``python -m vqs.pipelines.demo`` and ``vqs pipeline demo``: run it; 0 when done."""
    got = run(argv)
    return 0 if got["ok"] else 1


def _mb(n: float) -> float:
    return n / 1e6


def run(argv=None) -> dict:
    """The demo; returns what it measured and wrote (for tests): the edge's stats and
    check, the job's result, the ground-truth score, throughput and the demo directory."""
    ap = argparse.ArgumentParser(prog="python -m vqs.pipelines.demo", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.path.join("demo-data", "pipeline"), help="demo directory (recreated)")
    ap.add_argument("--cameras", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=40, help="seconds of video per camera (default 40)")
    ap.add_argument("--resolution", default="640x360", help="WIDTHxHEIGHT, 320x180 .. 1920x1080 (default 640x360)")
    ap.add_argument("--fps", type=int, default=25)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--outage", type=float, default=4.0, help="seconds without the server mid-run (0: none)")
    ap.add_argument("--outage-signal", choices=("kill", "term"), default="kill",
                    help="how the server is taken away: SIGKILL (a crash, default) or SIGTERM")
    ap.add_argument("--fast", action="store_true", help="cameras render as fast as they can, not in real time")
    ap.add_argument("--edge-memory-mb", type=float, default=4.0, help="each camera's HybridQueue memory tier")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=400)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args(argv)

    from rich.console import Console

    from . import frames, scene
    from .edge import Edge, verify
    from .report import write_report

    console = Console(soft_wrap=True, highlight=False)
    cams = scene.cameras(args.cameras, seed=args.seed, resolution=args.resolution, fps=args.fps,
                         seconds=args.seconds, start_ms=int(time.time() * 1000))
    root = os.path.abspath(args.dir)
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    data, out = os.path.join(root, "data"), os.path.join(root, "out")
    t_start = time.perf_counter()

    console.print("[bold]VQS pipeline demo[/bold]: cameras -> HybridQueue at the edge -> VQS -> Spark Structured "
                  "Streaming")
    server = LocalServer(data, os.path.join(root, "server.log")).start()
    console.print(f"  server  {server.url}  (owns {data})")
    from pyspark.sql import SparkSession

    # Asked here, in the main thread: Spark's active session is per thread, and a
    # caller's session (a test suite's) must be left running.
    spark_box: dict = {"had": SparkSession.getActiveSession() is not None}

    def start_spark():  # JVM start-up overlaps the cameras
        try:
            t = time.perf_counter()
            spark_box["spark"] = _session(args.master)
            spark_box["s"] = time.perf_counter() - t
        except BaseException as e:  # reported in the main thread
            spark_box["error"] = e

    try:
        console.print(f"  edge    {args.cameras} cameras x {args.seconds:g} s at {args.resolution}, {args.fps} fps"
                      f"{' (as fast as they render)' if args.fast else ' (real time)'}; "
                      f"HybridQueue memory tier {args.edge_memory_mb:g} MB each")
        edge = Edge(cams, server.url, os.path.join(root, "edge"), partitions=min(4, args.cameras),
                    memory_bytes=int(args.edge_memory_mb * (1 << 20)), realtime=not args.fast)
        spark_thread = threading.Thread(target=start_spark, daemon=True)
        try:
            edge.start()
            spark_thread.start()
            if args.outage > 0:
                at = 0.0 if args.fast else args.seconds * 0.35
                while (edge.stats.sent == 0 or time.monotonic() - edge.t_start < at) and edge.running:
                    time.sleep(0.05)
                how = {"kill": "SIGKILL", "term": "SIGTERM"}[args.outage_signal]
                if args.outage_signal == "kill":
                    server.kill()
                else:
                    server.stop()
                console.print(f"  outage  server stopped ({how}) at {time.monotonic() - edge.t_start:.1f} s; "
                              f"{edge.stats.sent:,} frames forwarded so far")
                t_out = time.monotonic()
                peak = {"memory_items": 0, "disk_items": 0}
                while time.monotonic() - t_out < args.outage:
                    b = edge.backlog()
                    peak = {k: max(peak[k], b[k]) for k in peak}
                    time.sleep(0.1)
                server.start()
                console.print(f"  outage  server back after {time.monotonic() - t_out:.1f} s; backlog at the edge "
                              f"peaked at {peak['memory_items']:,} frames in memory + {peak['disk_items']:,} on disk")
            st = edge.wait()
        finally:
            edge.close()
        t_edge = time.monotonic() - edge.t_start
        check = verify(server.url, edge.topic, st.delivered)
        console.print(f"  edge    {st.frames:,} frames ({_mb(st.bytes):,.1f} MB) put in {t_edge:.1f} s; "
                      f"{st.sent:,} forwarded in {st.requests:,} requests, {st.retries:,} retried; "
                      f"spilled to disk {st.spilled:,}, read back {st.disk_reads:,}; peak backlog "
                      f"{st.peak_memory_items:,} in memory, {st.peak_disk_items:,} on disk "
                      f"({_mb(st.peak_disk_bytes):.1f} MB)")
        ok_edge = check["missing"] == check["duplicates"] == check["out_of_order"] == 0 and check["records"] == st.frames
        console.print(f"  topic   {check['records']:,} frames in 'frames': {check['missing']} missing, "
                      f"{check['duplicates']} twice, {check['out_of_order']} cameras out of order"
                      f"{'' if ok_edge else '  [bold red]MISMATCH[/bold red]'}")

        spark_thread.join()
        if "error" in spark_box:
            raise spark_box["error"]
        spark = spark_box["spark"]
        console.print(f"  spark   ready ({args.master}, started in {spark_box['s']:.0f} s, beside the cameras); "
                      "running the frame job")
        try:
            def progress(name, p):
                if p["numInputRows"] and name == "frame_features":
                    console.print(f"  spark   batch {p['batchId']:>2}: {p['numInputRows']:>5,} frames "
                                  f"({p.get('processedRowsPerSecond') or 0:>6,.0f}/s)", markup=False)

            res = frames.run(spark, url=server.url, out=out, max_offsets=args.max_offsets_per_trigger,
                             on_progress=progress)
            detected = frames.events_of(spark, out)
            sc = frames.ground_truth(cams, detected)
            page = write_report(os.path.join(out, "report.html"), frames.curves_of(spark, out), detected, sc,
                                frames.thumbnails_of({"url": server.url}, edge.topic, detected),
                                subtitle=f"{args.cameras} cameras x {args.seconds:g} s at {args.resolution}, "
                                f"{args.fps} fps; {res.frames:,} frames, {res.events} events")
        finally:
            if not spark_box.get("had"):
                spark.stop()
    finally:
        server.stop()
    t_total = time.perf_counter() - t_start

    console.print("\n[bold]ground truth[/bold] (every scripted event; the detection nearest in time within 1 s)")
    for line in frames.format_truth(sc):
        print("  " + line)
    fps_job, mbs_job = res.frames / res.seconds, _mb(res.bytes) / res.seconds
    e2e = t_edge + res.total_seconds
    put_rate = st.frames / st.put_s if st.put_s else 0.0
    rates = {
        "edge put (HybridQueue.put)": (put_rate, _mb(st.bytes) / st.put_s if st.put_s else 0.0),
        "edge forward (send_batch to the server, no retry)": (
            st.send_frames / st.send_s if st.send_s else 0.0, _mb(st.send_bytes) / st.send_s if st.send_s else 0.0),
        "Spark job (read, decode, detect, write)": (fps_job, mbs_job),
        "end to end (first frame put to last event written)": (res.frames / e2e, _mb(res.bytes) / e2e),
    }
    console.print("\n[bold]throughput[/bold]")
    for name, (f, m) in rates.items():
        print(f"  {name:<52} {f:>9,.0f} frames/s  {m:>8,.1f} MB/s")
    if not args.fast:
        print(f"  (the cameras deliver in real time: {st.frames / t_edge:,.0f} frames/s over {t_edge:.0f} s; "
              "--fast renders as fast as it can)")
    console.print(f"\n[bold]done[/bold] in {t_total:.0f} s: {res.frames:,} frames ({_mb(res.bytes):,.1f} MB) in "
                  f"{res.batches} micro-batches; {res.events} events, {res.alerts} alerts, {res.windows} windows.")
    vqs_cmd = os.path.join(os.path.dirname(sys.executable), "vqs")
    if not os.path.exists(vqs_cmd):
        vqs_cmd = "vqs"
    elif vqs_cmd.startswith(os.getcwd() + os.sep):
        vqs_cmd = os.path.relpath(vqs_cmd)
    print(f"  report (open in a browser) {page}")
    print(f"  features (Parquet)         {os.path.join(out, 'frames')}")
    print(f"  events (Parquet)           {os.path.join(out, 'events')}")
    print(f"  1 s windows (Parquet)      {os.path.join(out, 'windows')}")
    print(f"  alerts (VQS topic)         '{res.alerts_topic}' in {data}")
    print(f"  checkpoints                {os.path.join(out, 'checkpoints')}")
    print(f"  edge queues                {os.path.join(root, 'edge')}")
    print(f"  server log                 {os.path.join(root, 'server.log')}")
    print("Read the alerts again:")
    print(f"  {vqs_cmd} consume {res.alerts_topic} --data-dir {data}")
    sys.stdout.flush()
    ok = ok_edge and sc["missed"] == 0 and not sc["false_alarms"]
    return {"ok": ok, "edge": st, "check": check, "result": res, "score": sc, "detected": detected,
            "rates": rates, "root": root, "seconds": t_total, "report": page}


def _session(master: str):
    from .camera import make_session

    return make_session(master, "vqs-pipeline-demo")


if __name__ == "__main__":
    sys.exit(main())
