"""The camera pipeline on a two-worker standalone cluster, one worker SIGKILLed mid-stream.

Lives beside the other Spark tests (not in tests/pipelines) because the clean
run that states the expected output uses the suite's one local SparkSession
(tests/spark/conftest.py); the cluster job needs its own driver, so it runs in
a subprocess (``vqs pipeline run --master spark://...``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import vqs.spark
from vqs.pipelines import camera
from vqs.pipelines.cluster import StandaloneCluster
from vqs.pipelines.demo import LocalServer

MAX_OFFSETS = 150  # ~800 frames: 6 micro-batches, so a kill after the first leaves most to do


def _commits(out: str) -> set[int]:
    d = os.path.join(out, "checkpoints", "stats", "commits")
    return {int(n) for n in os.listdir(d) if n.isdigit()} if os.path.isdir(d) else set()


def _rows(spark, out: str) -> list:
    return sorted(tuple(r) for r in spark.read.parquet(os.path.join(out, "stats")).collect())


def _alerts(spark, url: str, topic: str) -> list:
    df = spark.read.format("vqs").option("url", url).option("topic", topic).load()
    return sorted((bytes(r.key), json.loads(bytes(r.value))["window_start"], bytes(r.value))
                  for r in df.select("key", "value").collect())


def test_lost_worker_mid_stream_keeps_exactly_once(spark, tmp_path, child_env):
    pool = ThreadPoolExecutor(1)
    cluster = StandaloneCluster(str(tmp_path / "spark"), workers=2)
    starting = pool.submit(cluster.start)  # the daemons boot while the clean run goes on
    server = LocalServer(str(tmp_path / "data"), str(tmp_path / "server.log")).start()
    proc = None
    try:
        st = camera.feed(url=server.url, cameras=3, seconds=10, partitions=2, start_ms=1_700_000_000_000)

        # The expected output: a clean run (local mode, same input, same batches).
        clean_out = str(tmp_path / "clean")
        clean = camera.run(spark, url=server.url, out=clean_out, alerts_topic="alerts-clean",
                           max_offsets=MAX_OFFSETS)
        assert clean.frames_read == st.frames_sent + 3 and clean.batches >= 5 and clean.alerts >= 1

        starting.result(timeout=120)
        out = str(tmp_path / "cluster")
        log = open(tmp_path / "driver.log", "wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "vqs.cli", "pipeline", "run", "--master", cluster.master_url,
             "--url", server.url, "--out", out, "--alerts-topic", "alerts-cluster",
             "--max-offsets-per-trigger", str(MAX_OFFSETS)],
            stdout=log, stderr=subprocess.STDOUT, env=child_env)

        # Kill a worker running an executor once the first micro-batch has committed.
        deadline = time.monotonic() + 300  # generous: a loaded 2-core CI box starts 4 JVMs here
        victim = None
        while victim is None:
            assert proc.poll() is None, (tmp_path / "driver.log").read_text()
            assert time.monotonic() < deadline, "no micro-batch committed on the cluster"
            if _commits(out):
                victim = cluster.busy_worker()
            if victim is None:
                time.sleep(0.1)
        before = _commits(out)
        cluster.kill_worker(victim)

        try:
            rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise AssertionError("the cluster job did not finish in time:\n"
                                 + (tmp_path / "driver.log").read_text()) from None
        log.close()
        driver = (tmp_path / "driver.log").read_text()
        assert rc == 0, driver
        if vqs.spark.jvm_reader_loaded(spark):  # the jar is built here: the job reads with it, on the executors
            assert "with the JVM reader on spark://" in driver, driver
        after = _commits(out)
        assert max(after) > max(before), f"the query ended before the kill: {sorted(before)}"
        assert len(cluster.alive_workers()) == 1  # the query went on with the other worker

        # Exactly once: the same windows and the same alerts as the clean run, none twice.
        assert _rows(spark, out) == _rows(spark, clean_out)
        got = _alerts(spark, server.url, "alerts-cluster")
        assert got == _alerts(spark, server.url, "alerts-clean") and len(got) == clean.alerts
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
