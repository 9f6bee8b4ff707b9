"""Helpers of the Spark tests: topics made and read with the Broker."""

from __future__ import annotations

from vqs.broker import Broker


def make_topic(path, name, partitions=1, records=None, **settings):
    """Create ``name`` under data dir ``path`` and append ``records``:
    {partition: [(value, key, headers, timestamp_ms), ...]}."""
    with Broker(path) as b:
        b.create_topic(name, partitions=partitions, **settings)
        prod = b.producer()
        for p, recs in (records or {}).items():
            if not recs:
                continue
            prod.send_batch(
                name,
                [r[0] for r in recs],
                keys=[r[1] for r in recs],
                headers=[r[2] for r in recs],
                partition=p,
                timestamps_ms=[r[3] for r in recs],
            )


def append(path, name, partition, values, timestamp_ms=None):
    with Broker(path) as b:
        b.producer().send_batch(
            name, values, partition=partition,
            timestamps_ms=None if timestamp_ms is None else [timestamp_ms] * len(values),
        )


def log_contents(path, name):
    """Every record of topic ``name`` as (topic, partition, offset, ts_ms, key, value, headers)."""
    out = []
    with Broker(path) as b:
        t = b.topic(name)
        for p in range(t.partitions):
            lg = t.log(p)
            off = lg.start_offset
            while off < lg.end_offset:
                recs = lg.read(off, max_records=10_000)
                for r in recs:
                    out.append((name, p, r.offset, r.timestamp_ms, r.key, r.value, tuple(r.headers)))
                off = recs[-1].offset + 1
    return out


class Server:
    """``python -m vqs.server`` on a data dir, for url-mode tests (stopped by pid)."""

    def __init__(self, data_dir):
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.data_dir = str(data_dir)
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = None

    def start(self, timeout: float = 60.0) -> "Server":
        import os
        import subprocess
        import sys
        import time

        import httpx

        self._log = open(self.data_dir.rstrip("/") + ".server.log", "ab")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vqs.server", "--data-dir", self.data_dir, "--port", str(self.port),
             "--log-format", "text"],
            stdout=self._log, stderr=subprocess.STDOUT, env=env,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}")
            try:
                if httpx.get(self.url + "/health/ready", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError("server not ready")

    def stop(self) -> int:
        import signal
        import subprocess

        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode
