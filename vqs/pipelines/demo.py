"""The end-to-end demo: a VQS server, camera frame events, the Spark pipeline.

1. starts a local VQS server (embedded defaults, loopback) owning
   ``demo-data/pipeline/data``;
2. feeds video-frame events from several cameras (with dropped and late frames)
   into the topic ``frames`` over HTTP;
3. runs the Structured Streaming job through the server (``url`` mode):
   ``maxOffsetsPerTrigger`` micro-batches, per-camera windowed statistics with a
   watermark -> Parquet, alerts -> the VQS topic ``camera-alerts``;
4. prints a summary and where the outputs are, writes a chart of the windows
   and alerts (``out/camera-stats.html``, a self-contained page), and stops the
   server.

Paths and commands are printed with plain ``print``, one per line, never
wrapped to the terminal's width, so they can be copied.

    python -m vqs.pipelines.demo [--cameras 8] [--seconds 120]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
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
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vqs.server", "--data-dir", self.data_dir, "--port", str(self.port),
             "--log-format", "text"],
            stdout=self._log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"the VQS server exited ({self.proc.returncode}); see {self.log_path}")
            try:
                if httpx.get(self.url + "/health/ready", timeout=1.0).status_code == 200:
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
    run(argv)
    return 0


def run(argv=None) -> dict:
    """The demo; returns what it measured and wrote (for tests): frames fed and read,
    windows, alerts, the summary, the demo directory and the chart's path."""
    ap = argparse.ArgumentParser(prog="python -m vqs.pipelines.demo", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.path.join("demo-data", "pipeline"), help="demo directory (recreated)")
    ap.add_argument("--cameras", type=int, default=8)
    ap.add_argument("--seconds", type=int, default=120, help="seconds of video per camera")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=4000)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args(argv)

    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn
    from rich.table import Table

    from . import camera

    console = Console(soft_wrap=True)  # lines are never wrapped to the width: they stay copyable
    root = os.path.abspath(args.dir)
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    data, out = os.path.join(root, "data"), os.path.join(root, "out")
    t_start = time.perf_counter()

    console.print("[bold]VQS pipeline demo[/bold]: camera frames -> VQS topic -> Spark Structured Streaming")
    server = LocalServer(data, os.path.join(root, "server.log")).start()
    console.print(f"  server  {server.url}  (owns {data})")
    try:
        expect = sum(int(args.seconds * (30 if c % 3 == 0 else 25)) for c in range(args.cameras))
        with Progress(TextColumn("  feed   "), BarColumn(), TextColumn("{task.completed:,} frames"),
                      console=console, transient=True) as prog:
            task = prog.add_task("feed", total=expect)
            st = camera.feed(url=server.url, cameras=args.cameras, seconds=args.seconds, partitions=4,
                             on_progress=lambda n: prog.update(task, completed=n))
        console.print(f"  fed     {st.frames_sent:,} frames from {st.cameras} cameras into topic 'frames' "
                      f"({st.frames_dropped:,} dropped by the network, {st.frames_late:,} delivered late)")

        from pyspark.sql import SparkSession

        had_session = SparkSession.getActiveSession() is not None
        console.print(f"  spark   starting Spark ({args.master}; usually 15-40 s) ...", highlight=False)
        t_spark = time.perf_counter()
        spark = camera.make_session(args.master, "vqs-pipeline-demo")
        console.print(f"  spark   ready in {time.perf_counter() - t_spark:.0f} s; running the streaming job",
                      highlight=False)
        try:
            def progress(name, p):
                if p["numInputRows"] or name == "camera_stats":
                    wm = p.get("eventTime", {}).get("watermark", "-")
                    label = "stats " if name == "camera_stats" else "alerts"
                    console.print(f"  {label}  batch {p['batchId']:>2}: {p['numInputRows']:>6,} records "
                                  f"({p.get('processedRowsPerSecond') or 0:>8,.0f}/s)  watermark {wm}",
                                  markup=False, highlight=False)

            res = camera.run(spark, url=server.url, out=out, max_offsets=args.max_offsets_per_trigger,
                             on_progress=progress)
            summary = camera.summarize(spark, res, url=server.url)
        finally:
            if not had_session:
                spark.stop()
    finally:
        server.stop()

    table = Table(title="per-camera statistics (10 s windows)")
    for col in ("camera", "windows", "avg fps", "avg MB/s", "dropped", "late"):
        table.add_column(col, justify="right" if col != "camera" else "left")
    for c in summary["cameras"]:
        table.add_row(c["camera"], str(c["windows"]), f"{c['avg_fps']}", f"{c['avg_MBps']}",
                      str(c["dropped"]), str(c["late"]))
    console.print(table)
    if summary["alerts"]:
        shown = len(summary["alerts"])
        more = f", the latest {shown}" if shown < res.alerts else ""
        console.print(f"[bold]alerts[/bold] ({res.alerts} in topic '{res.alerts_topic}'{more}, latest first):")
        for a in summary["alerts"]:
            console.print(f"  {a['camera']}  {a['window_start']}  {a['reason']:<15} fps {a['fps']:.1f}  "
                          f"dropped {a['dropped']}", highlight=False)
    chart = camera.write_chart(summary, out, subtitle=f"{st.cameras} cameras, {st.frames_sent:,} frames fed, "
                               f"{res.windows} windows, {res.alerts} alerts")
    console.print(
        f"\n[bold]done[/bold] in {time.perf_counter() - t_start:.0f} s: {res.frames_read:,} records read in "
        f"{res.batches} micro-batches (the {st.frames_sent:,} frames fed and {st.cameras} end-of-stream markers, "
        f"one per camera); {res.windows} windows, {res.alerts} alerts.", highlight=False)
    # Plain print: one line each, whatever the terminal's width (rich would wrap them).
    vqs_cmd = os.path.join(os.path.dirname(sys.executable), "vqs")
    if not os.path.exists(vqs_cmd):
        vqs_cmd = "vqs"
    elif vqs_cmd.startswith(os.getcwd() + os.sep):
        vqs_cmd = os.path.relpath(vqs_cmd)
    print(f"  chart (open in a browser)  {chart}")
    print(f"  windows (Parquet)          {res.stats_path}")
    print(f"  alerts (VQS topic)         '{res.alerts_topic}' in {data}")
    print(f"  checkpoints                {os.path.join(out, 'checkpoints')}")
    print(f"  server log                 {os.path.join(root, 'server.log')}")
    print("Read the alerts again:")
    print(f"  {vqs_cmd} consume {res.alerts_topic} --data-dir {data}")
    sys.stdout.flush()
    return {"frames_fed": st.frames_sent, "frames_read": res.frames_read, "windows": res.windows,
            "alerts": res.alerts, "summary": summary, "root": root, "chart": chart}


if __name__ == "__main__":
    sys.exit(main())
