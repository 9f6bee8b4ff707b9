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

The demo (``make demo-cluster``, ``python -m vqs.pipelines.cluster``): one
master, two workers, a VQS server, the camera feed over HTTP, then the camera
job (vqs.pipelines.camera) with ``--master spark://...`` reading by ``url`` from
the executors on the workers (workers need not share the server's data dir;
only the Parquet output and checkpoints must be on a path every worker sees,
here the same machine's disk).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time

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


# ------------------------------------------------------------------ the demo
def main(argv=None) -> int:
    """``python -m vqs.pipelines.cluster`` (``make demo-cluster``): the camera job on a
    two-worker standalone cluster, reading by url; 0 when it finished."""
    ap = argparse.ArgumentParser(prog="python -m vqs.pipelines.cluster", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.path.join("demo-data", "cluster"), help="demo directory (recreated)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cameras", type=int, default=4)
    ap.add_argument("--seconds", type=int, default=60, help="seconds of video per camera")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=2000)
    args = ap.parse_args(argv)

    from . import camera

    root = os.path.abspath(args.dir)
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    data, out = os.path.join(root, "data"), os.path.join(root, "out")
    print(f"VQS on a Spark standalone cluster ({args.workers} workers) in {root}", flush=True)
    with StandaloneCluster(os.path.join(root, "spark"), workers=args.workers) as cluster:
        print(f"  master  {cluster.master_url}  (status {cluster.json_url})", flush=True)
        print(f"  workers {len(cluster.alive_workers())} ALIVE", flush=True)
        server = LocalServer(data, os.path.join(root, "server.log")).start()
        try:
            print(f"  server  {server.url}  (owns {data})", flush=True)
            st = camera.feed(url=server.url, cameras=args.cameras, seconds=args.seconds, partitions=4)
            print(f"  fed     {st.frames_sent:,} frames from {st.cameras} cameras into topic 'frames'", flush=True)
            code = camera.main(["run", "--master", cluster.master_url, "--url", server.url, "--out", out,
                                "--max-offsets-per-trigger", str(args.max_offsets_per_trigger)])
        finally:
            server.stop()
    print(f"  logs    {root}/spark/*.log, {root}/server.log", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
