"""A Spark standalone cluster on loopback, from the pyspark wheel, and the demo on it.

The pyspark wheel ships the Spark jars and ``bin/spark-class`` but not
``sbin/start-master.sh``; :class:`StandaloneCluster` starts the daemons the way
those scripts do::

    spark-class org.apache.spark.deploy.master.Master --host 127.0.0.1 --port P --webui-port W
    spark-class org.apache.spark.deploy.worker.Worker spark://127.0.0.1:P --cores 1 --memory 1g ...

Invariants:

- Everything binds 127.0.0.1 on free ports; every daemon's log and work dir is
  under the cluster's directory, never inside the installed wheel.
- Readiness is an event, not a sleep: the master is up when its JSON page
  (``http://127.0.0.1:W/json/``) answers, the cluster when that page lists the
  expected number of ALIVE workers.
- Each worker runs in its own process group (session), and the executors it
  launches are its children in that group: :meth:`StandaloneCluster.kill_worker`
  SIGKILLs the group, which is what losing the machine looks like to the
  driver (the worker, its executor and their Python workers vanish at once,
  with the shuffle files and state-store caches they held).
- :meth:`StandaloneCluster.stop` kills only the processes it started.

The demo (``make demo-cluster``, ``python -m vqs.pipelines.cluster``): the
frame job (vqs.pipelines.frames) on one master and two workers, reading the
frame topic by ``url`` (the executors read through the VQS server; workers need
not share its data dir, only the Parquet output and checkpoints must be on a
path every worker sees, here the same machine's disk):

1. the edge (vqs.pipelines.edge) puts ``--cameras`` seeded synthetic cameras'
   frames (``--fast``: as fast as they render) into the topic ``frames``;
2. a clean run: the job in local mode, its own driver process (or, given
   ``clean_spark``, a caller's local SparkSession, left running), outputs under
   ``clean/`` and alerts to the topic ``alerts-clean``;
3. the same job on the cluster (its own driver, ``--master spark://...``),
   outputs under ``cluster/`` and alerts to ``alerts-cluster``; once its
   features query has committed a micro-batch, the worker running an
   executor is SIGKILLed with its executor (:meth:`StandaloneCluster.kill_worker`)
   and the job goes on with the other;
4. :func:`compare`: the rows each run's Parquet sinks committed (features and
   events, read through each sink's log, so a file a killed task left behind
   is not counted) and the records of each alerts topic, as multisets: equal,
   and none twice. Then the ground-truth table of the cluster run.

Both runs read the same topic with the same ``maxOffsetsPerTrigger``, and the
detector sees each camera's frames in offset order, so the outputs do not
depend on where a micro-batch ends or which executor ran it. The 1 s windows
(``OUT/windows``) are not compared: which windows a batch closes depends on
the order the window query's file stream lists the features files.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

from .demo import LocalServer, _free_port


def spark_home() -> str:
    """The installed pyspark package's directory (it holds ``bin/`` and ``jars/``)."""
    import pyspark

    return os.path.dirname(os.path.abspath(pyspark.__file__))


class StandaloneCluster:
    """One master and ``workers`` workers (``cores`` each, ``memory`` each) on 127.0.0.1."""

    def __init__(self, root: str, *, workers: int = 2, cores: int = 1, memory: str = "1g"):
        self.root = os.path.abspath(root)
        self.n_workers = workers
        self.cores = cores
        self.memory = memory
        self.port = _free_port()
        self.webui_port = _free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.json_url = f"http://127.0.0.1:{self.webui_port}/json/"
        self.master: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []
        self._logs: list = []
        self._killed: set = set()  # workers killed on purpose (kill_worker): not a failure

    # -------------------------------------------------------------- processes
    def _env(self) -> dict:
        home = spark_home()
        return dict(os.environ, SPARK_HOME=home, SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=self.root,
                    # Executors start Python workers with the driver's spark.pyspark.python;
                    # this is the fallback for anything that does not pass one.
                    PYSPARK_PYTHON=os.environ.get("PYSPARK_PYTHON", sys.executable))

    def _spawn(self, name: str, cls: str, *args: str) -> subprocess.Popen:
        log = open(os.path.join(self.root, f"{name}.log"), "ab")
        self._logs.append(log)
        cmd = [os.path.join(spark_home(), "bin", "spark-class"), cls, *args]
        # start_new_session: the daemon and its children (executors) form one group to kill.
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self._env(),
                                start_new_session=True)

    def start(self, timeout: float = 90.0) -> StandaloneCluster:
        """Start the master, wait for its JSON page, start the workers, wait until all are ALIVE."""
        os.makedirs(self.root, exist_ok=True)
        self.master = self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                  "--port", str(self.port), "--webui-port", str(self.webui_port))
        try:
            self.wait_alive(0, timeout)
            for i in range(self.n_workers):
                work = os.path.join(self.root, f"worker-{i}")
                os.makedirs(work, exist_ok=True)
                self.workers.append(self._spawn(
                    f"worker-{i}", "org.apache.spark.deploy.worker.Worker", self.master_url,
                    "--host", "127.0.0.1", "--port", str(_free_port()), "--webui-port", str(_free_port()),
                    "--cores", str(self.cores), "--memory", self.memory, "--work-dir", work))
            self.wait_alive(self.n_workers, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def state(self) -> dict | None:
        """The master's JSON status (workers, apps), or None while it does not answer."""
        import httpx

        try:
            r = httpx.get(self.json_url, timeout=2.0)
            return r.json() if r.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None

    def alive_workers(self, st: dict | None = None) -> list[dict]:
        st = self.state() if st is None else st
        return [w for w in (st or {}).get("workers", []) if w.get("state") == "ALIVE"]

    def wait_alive(self, n: int, timeout: float = 90.0) -> dict:
        """Poll the master's JSON until it answers with at least ``n`` ALIVE workers."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for p in [self.master, *self.workers]:
                if p is not None and p not in self._killed and p.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited ({p.returncode}); see the logs in {self.root}")
            st = self.state()
            if st is not None and len(self.alive_workers(st)) >= n:
                return st
            time.sleep(0.2)
        raise TimeoutError(f"the Spark master at {self.json_url} did not show {n} ALIVE workers "
                           f"in {timeout:.0f} s; see the logs in {self.root}")

    def kill_worker(self, index: int) -> None:
        """SIGKILL worker ``index`` with its executors (its whole process group)."""
        p = self.workers[index]
        self._killed.add(p)
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()

    def busy_worker(self) -> int | None:
        """The index of a live worker running an executor (cores in use), if any."""
        by_port = {int(w["webuiaddress"].rsplit(":", 1)[1]): w for w in self.alive_workers()
                   if w.get("coresused", 0) > 0}
        for i, p in enumerate(self.workers):
            if p in self._killed or p.poll() is not None:
                continue
            args = p.args  # the master names a worker by its web UI address: match on that port
            port = int(args[args.index("--webui-port") + 1])
            if port in by_port:
                return i
        return None

    def stop(self) -> None:
        """SIGTERM every daemon group it started (workers first), SIGKILL stragglers."""
        procs = [*self.workers, self.master]
        for p in procs:
            if p is not None and p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in procs:
            if p is None:
                continue
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        for log in self._logs:
            log.close()
        self._logs = []

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# ---------------------------------------------------------------- the outputs
def committed_files(sink_dir: str) -> list[str]:
    """The data files a Spark file sink committed: the adds minus the deletes of its
    log (``_spark_metadata/N`` and ``N.compact``: a version line, then one JSON entry a
    line). A task that died with its executor may leave a file the log never names;
    this skips it, as Spark's own readers do."""
    log = os.path.join(sink_dir, "_spark_metadata")
    if not os.path.isdir(log):
        return []
    live: dict[str, bool] = {}
    names = [n for n in os.listdir(log) if n.split(".")[0].isdigit() and n.count(".") <= 1]
    for n in sorted(names, key=lambda n: int(n.split(".")[0])):
        with open(os.path.join(log, n), encoding="utf-8") as f:
            lines = f.read().splitlines()[1:]
        for line in lines:
            if not line.strip():
                continue
            e = json.loads(line)
            path = urllib.parse.unquote(urllib.parse.urlparse(e["path"]).path)
            if e.get("action") == "delete":
                live.pop(path, None)
            else:
                live[path] = True
    return sorted(live)


def _norm(v):
    return "nan" if isinstance(v, float) and v != v else v  # NaN == NaN, for set equality


def sink_rows(sink_dir: str, columns: list[str]) -> list[tuple]:
    """Every committed row of a Parquet sink (timestamps as epoch milliseconds)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    rows: list[tuple] = []
    for f in committed_files(sink_dir):
        t = pq.read_table(f, columns=columns)
        cols = []
        for c in columns:
            a = t.column(c)
            if pa.types.is_timestamp(a.type):
                a = pc.cast(pc.cast(a, pa.timestamp("ms"), safe=False), pa.int64())
            cols.append([_norm(v) for v in a.to_pylist()])
        rows.extend(zip(*cols))
    return rows


def stray_files(sink_dir: str) -> int:
    """Parquet files in the sink's directory that its log does not name."""
    if not os.path.isdir(sink_dir):
        return 0
    on_disk = {os.path.join(sink_dir, n) for n in os.listdir(sink_dir) if n.endswith(".parquet")}
    return len(on_disk - set(committed_files(sink_dir)))


def topic_records(url: str, topic: str) -> list[tuple]:
    """Every record of a topic as (partition, key, value), read through the server."""
    from ..client import Client

    out: list[tuple] = []
    with Client(url) as c:
        for row in c.offsets(topic):
            p, off, end = row["partition"], row["start_offset"], row["end_offset"]
            while off < end:
                batches, off, _ = c.read_stored_batches(topic, p, off, max_bytes=8 << 20)
                for b in batches:
                    out.extend((p, r.key, r.value) for r in b.records())
    return out


def _same(a: list, b: list) -> dict:
    return {"clean": len(a), "cluster": len(b), "twice": len(b) - len(set(b)),
            "equal": sorted(a, key=repr) == sorted(b, key=repr)}


def compare(clean_out: str, cluster_out: str, url: str, clean_topic: str, cluster_topic: str) -> dict:
    """The two runs' outputs as multisets: ``features`` (every row of ``OUT/frames``, the
    per-frame features and the event rows, all columns), ``events`` (``OUT/events``),
    ``alerts`` (the alerts topics' records: partition, key, value). Each: the counts,
    ``twice`` (rows of the cluster run present more than once) and ``equal``."""
    from .frames import _COLS

    ev_cols = ["camera", "kind", "frame", "ts", "partition", "offset"]
    got = {
        "features": _same(sink_rows(os.path.join(clean_out, "frames"), _COLS),
                          sink_rows(os.path.join(cluster_out, "frames"), _COLS)),
        "events": _same(sink_rows(os.path.join(clean_out, "events"), ev_cols),
                        sink_rows(os.path.join(cluster_out, "events"), ev_cols)),
        "alerts": _same(topic_records(url, clean_topic), topic_records(url, cluster_topic)),
    }
    got["stray_files"] = sum(stray_files(os.path.join(cluster_out, d)) for d in ("frames", "events"))
    got["ok"] = all(got[k]["equal"] and got[k]["twice"] == 0 and got[k]["cluster"] > 0
                    for k in ("features", "events", "alerts"))
    return got


def detected_events(out: str) -> list[dict]:
    """``OUT/events`` as the dicts :func:`vqs.pipelines.frames.ground_truth` takes."""
    rows = sink_rows(os.path.join(out, "events"), ["camera", "kind", "frame", "ts"])
    return [{"camera": c, "kind": k, "frame": f, "ts_ms": t} for c, k, f, t in sorted(rows, key=lambda r: (r[0], r[3]))]


def _commits(out: str) -> list[int]:
    d = os.path.join(out, "checkpoints", "frames", "commits")
    return sorted(int(n) for n in os.listdir(d) if n.isdigit()) if os.path.isdir(d) else []


def _job(master: str, url: str, out: str, alerts_topic: str, max_offsets: int, log_path: str) -> subprocess.Popen:
    """The frame job in a driver process of its own (a process holds one SparkSession)."""
    log = open(log_path, "wb")
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "vqs.pipelines.frames", "--master", master, "--url", url, "--out", out,
             "--alerts-topic", alerts_topic, "--max-offsets-per-trigger", str(max_offsets)],
            stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    finally:
        log.close()  # the child holds its own descriptor


def _finish(proc: subprocess.Popen, log_path: str, deadline: float, what: str) -> None:
    try:
        rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"the {what} did not finish in time; see {log_path}") from None
    if rc != 0:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            tail = f.read()[-3000:]
        raise RuntimeError(f"the {what} exited with {rc}; see {log_path}:\n{tail}")


# ------------------------------------------------------------------ the demo
def main(argv=None) -> int:
    """``python -m vqs.pipelines.cluster`` (``make demo-cluster``); 0 when the cluster
    run's outputs equal the clean run's."""
    return 0 if run(argv)["compare"]["ok"] else 1


def run(argv=None, *, clean_spark=None) -> dict:
    """The demo (see the module doc); returns what it measured (for tests).
    ``clean_spark``: a local SparkSession the clean run uses instead of a driver
    process of its own (a test suite's, started once for many tests; same job, same
    reader, same ``maxOffsetsPerTrigger``); the cluster run always has its own driver."""
    ap = argparse.ArgumentParser(prog="python -m vqs.pipelines.cluster", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.path.join("demo-data", "cluster"), help="demo directory (recreated)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cameras", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=11, help="seconds of video per camera (default 11)")
    ap.add_argument("--resolution", default="320x180")
    ap.add_argument("--fps", type=int, default=25)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--max-offsets-per-trigger", type=int, default=60)
    ap.add_argument("--timeout", type=float, default=900, help="seconds the whole demo may take")
    args = ap.parse_args(argv)

    from .. import spark as vqs_spark
    from . import frames, scene
    from .edge import Edge, verify

    deadline = time.monotonic() + args.timeout
    cams = scene.cameras(args.cameras, seed=args.seed, resolution=args.resolution, fps=args.fps,
                         seconds=args.seconds)  # a fixed start time: the same frames every run
    root = os.path.abspath(args.dir)
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    data = os.path.join(root, "data")
    clean_out, cluster_out = os.path.join(root, "clean"), os.path.join(root, "cluster")
    print(f"VQS frame job on a Spark standalone cluster ({args.workers} workers) in {root}", flush=True)
    cluster = StandaloneCluster(os.path.join(root, "spark"), workers=args.workers)
    pool = ThreadPoolExecutor(1)
    starting = pool.submit(cluster.start)  # the daemons boot beside the edge and the clean run
    server = LocalServer(data, os.path.join(root, "server.log")).start()
    proc = None
    try:
        print(f"  server  {server.url}  (owns {data})", flush=True)
        edge = Edge(cams, server.url, os.path.join(root, "edge"), partitions=min(4, args.cameras), realtime=False)
        try:
            edge.start()
            st = edge.wait()
        finally:
            edge.close()
        check = verify(server.url, edge.topic, st.delivered)
        print(f"  edge    {st.frames:,} frames ({st.bytes / 1e6:.1f} MB) from {args.cameras} cameras x "
              f"{args.seconds:g} s at {args.resolution}, seed {args.seed}: {check['records']:,} in 'frames', "
              f"{check['missing']} missing, {check['duplicates']} twice", flush=True)
        jar = vqs_spark.jar_path()
        print(f"  reader  {'the JVM reader (' + os.path.basename(jar) + ' on spark.jars)' if jar else 'the Python source (the JVM reader jar is not built)'}"
              f", url mode: executors read through the server", flush=True)

        t = time.monotonic()
        clean_log = os.path.join(root, "clean.log")
        if clean_spark is None:
            proc = _job("local[2]", server.url, clean_out, "alerts-clean", args.max_offsets_per_trigger, clean_log)
            _finish(proc, clean_log, deadline, "clean run (local[2])")
        else:
            frames.run(clean_spark, url=server.url, out=clean_out, alerts_topic="alerts-clean",
                       max_offsets=args.max_offsets_per_trigger, timeout_s=max(1.0, deadline - time.monotonic()))
        clean_s = time.monotonic() - t
        print(f"  clean   local[2]: {len(_commits(clean_out))} micro-batches in {clean_s:.0f} s -> {clean_out}",
              flush=True)

        starting.result(timeout=max(1.0, deadline - time.monotonic()))
        print(f"  cluster {cluster.master_url} (status {cluster.json_url}), "
              f"{len(cluster.alive_workers())} workers ALIVE", flush=True)
        t = time.monotonic()
        cluster_log = os.path.join(root, "cluster.log")
        proc = _job(cluster.master_url, server.url, cluster_out, "alerts-cluster", args.max_offsets_per_trigger,
                    cluster_log)
        victim = None
        while victim is None:  # once a micro-batch has committed, the worker running an executor
            if proc.poll() is not None:
                raise RuntimeError(f"the cluster run ended before a worker was killed; see {cluster_log}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no micro-batch committed on the cluster in time; see {cluster_log}")
            if _commits(cluster_out):
                victim = cluster.busy_worker()
            if victim is None:
                time.sleep(0.1)
        before = _commits(cluster_out)
        cluster.kill_worker(victim)
        print(f"  kill    worker-{victim} SIGKILLed with its executor after micro-batch {max(before)} "
              f"committed ({time.monotonic() - t:.0f} s in)", flush=True)
        _finish(proc, cluster_log, deadline, f"cluster run ({cluster.master_url})")
        after = _commits(cluster_out)
        cluster_s = time.monotonic() - t
        alive = len(cluster.alive_workers())
        with open(cluster_log, encoding="utf-8", errors="replace") as f:
            lost = sorted(set(re.findall(r"Lost executor (\d+)", f.read())))  # as the driver logged it
        print(f"  cluster {len(after)} micro-batches in {cluster_s:.0f} s (up to batch {max(after)} after the kill), "
              f"the driver lost executor {', '.join(lost) or 'none'}, {alive} worker ALIVE -> {cluster_out}",
              flush=True)

        cmp = compare(clean_out, cluster_out, server.url, "alerts-clean", "alerts-cluster")
        detected = detected_events(cluster_out)
        sc = frames.ground_truth(cams, detected)
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        server.stop()
        try:
            starting.result(timeout=120)  # never stop a cluster while it is still starting
        except Exception:
            pass
        cluster.stop()
        pool.shutdown()

    print("\nclean run vs cluster run (committed rows, as multisets)")
    for k, what in (("features", "OUT/frames (Parquet): every frame's features and every event row"),
                    ("events", "OUT/events (Parquet)"), ("alerts", "topics alerts-clean / alerts-cluster")):
        c = cmp[k]
        print(f"  {k:<9} {c['clean']:>6,} vs {c['cluster']:>6,} rows, {c['twice']} twice: "
              f"{'EQUAL' if c['equal'] else 'DIFFERENT'}   {what}")
    print(f"  ({cmp['stray_files']} Parquet files in the cluster run's sinks that their logs do not name, "
          "a killed task's partial output, which no reader reads)")
    print("\nground truth of the cluster run (every scripted event; the detection nearest in time within 1 s)")
    for line in frames.format_truth(sc):
        print("  " + line)
    print(f"\n{'OK' if cmp['ok'] else 'MISMATCH'}: the cluster run lost a worker and its outputs "
          f"{'equal' if cmp['ok'] else 'differ from'} the clean run's")
    print(f"  report      {os.path.join(cluster_out, 'report.html')}")
    print(f"  driver logs {os.path.join(root, 'clean.log')}, {os.path.join(root, 'cluster.log')}")
    print(f"  spark logs  {os.path.join(root, 'spark')}")
    sys.stdout.flush()
    return {"edge": st, "check": check, "compare": cmp, "score": sc, "victim": victim, "before": before,
            "after": after, "alive": alive, "lost_executors": lost, "clean_s": clean_s, "cluster_s": cluster_s, "root": root}


if __name__ == "__main__":
    sys.exit(main())
