"""Server test fixtures: real server processes (uvicorn, subprocess) on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """``python -m vqs.server`` on a data dir; started, waited for, stopped by pid."""

    def __init__(self, data_dir, *args: str, env: dict | None = None, port: int | None = None):
        self.data_dir = str(data_dir)
        self.port = port or free_port()
        self.args = list(args)
        self.env = dict(os.environ, **(env or {}))
        self.env.setdefault("PYTHONUNBUFFERED", "1")
        self.proc: subprocess.Popen | None = None
        self.log_path = os.path.join(os.path.dirname(self.data_dir.rstrip("/")) or ".",
                                     f"server-{self.port}.log")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, wait: bool = True, timeout: float = 30.0) -> "ServerProcess":
        self._log = open(self.log_path, "ab")
        cmd = [sys.executable, "-m", "vqs.server", "--data-dir", self.data_dir, "--port", str(self.port),
               "--log-format", "text", *self.args]
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=self.env)
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log()}")
            try:
                r = httpx.get(self.url + "/health/ready", timeout=1.0)
                if r.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"server not ready after {timeout}s:\n{self.log()}")

    def log(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")[-5000:]
        except OSError:
            return ""

    def stop(self, timeout: float = 30.0) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self._log.close()


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """One server for the session (flush=interval, no auth, loopback)."""
    d = tmp_path_factory.mktemp("vqs-server") / "data"
    s = ServerProcess(d).start()
    yield s
    rc = s.stop()
    assert rc == 0, s.log()


@pytest.fixture(scope="session")
def base_url(server) -> str:
    return server.url


@pytest.fixture
def http(base_url):
    with httpx.Client(base_url=base_url, timeout=30) as c:
        yield c


@pytest.fixture
def unique(request):
    """A name unique to the test (topics and queues are shared by the session's server)."""
    import re

    n = re.sub(r"[^A-Za-z0-9_-]", "-", request.node.name)[-60:]
    return f"{n}-{os.getpid() % 1000}-{time.monotonic_ns() % 100000}"
