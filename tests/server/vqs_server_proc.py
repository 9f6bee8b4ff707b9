"""A real VQS server process for tests (``python -m vqs.server``)."""

from __future__ import annotations

import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import time

import httpx

#: The Authorization header boto3 and the AWS CLI send even with made-up keys: a server without
#: credentials runs an SQS action that changes state only for a POST that has one (or
#: X-Amz-Target), which a web page cannot send cross-site. Unchecked there, so any will do.
SIGV4_ANY = {"authorization": "AWS4-HMAC-SHA256 Credential=test/20240101/us-east-1/sqs/aws4_request, "
                              "SignedHeaders=host, Signature=00"}


#: One TLS context for every test client (pass as ``verify=``): a default httpx client builds its
#: own and loads the CA bundle, 33 ms of CPU each, and the tests make some thousand of them.
TLS = ssl.create_default_context()
#: The readiness probe of a server started with ``--tls-cert``: that certificate is the test's own
#: (no CA bundle holds it), and the process's own "ready" line in its log says it is this server.
_PROBE_TLS = ssl.create_default_context()
_PROBE_TLS.check_hostname = False
_PROBE_TLS.verify_mode = ssl.CERT_NONE


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """``python -m vqs.server`` on a data dir; started, waited for, stopped by pid."""

    def __init__(self, data_dir, *args: str, env: dict | None = None, port: int | None = None, preexec_fn=None):
        self.data_dir = str(data_dir)
        self.port = port or free_port()
        self.args = list(args)
        self._log = None
        self._started = port is not None  # once ready (or a port given), a restart keeps the ports
        self.env = dict(os.environ, **(env or {}))
        self.env.setdefault("PYTHONUNBUFFERED", "1")
        self.preexec_fn = preexec_fn  # run in the child before exec (e.g. setrlimit)
        self.proc: subprocess.Popen | None = None
        self.log_path = os.path.join(os.path.dirname(self.data_dir.rstrip("/")) or ".",
                                     f"server-{self.port}.log")

    @property
    def tls(self) -> bool:
        """Started with ``--tls-cert``: its HTTP front speaks HTTPS."""
        return "--tls-cert" in self.args

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def start(self, wait: bool = True, timeout: float = 30.0) -> ServerProcess:
        """Start (or restart, on the same ports) and wait until ready. ``free_port`` does not hold
        the port it found: on a first start, a server that says its port is taken (by another
        test's process meanwhile) is started again on fresh ports, at most twice."""
        for attempt in range(3):
            if self._log is not None and not self._log.closed:
                self._log.close()
            self._log = open(self.log_path, "ab")
            self._log_from = self._log.tell()  # this start's lines begin here (a restart appends)
            cmd = [sys.executable, "-m", "vqs.server", "--data-dir", self.data_dir, "--port", str(self.port),
                   "--log-format", "text", *self.args]
            self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=self.env,
                                         preexec_fn=self.preexec_fn)
            if not wait:
                return self
            try:
                self.wait_ready(timeout)
            except RuntimeError:
                if self._started or attempt == 2 or self.proc.returncode != 3 or "is in use" not in self.log():
                    self.stop(5)  # (one that never got ready is not left running)
                    raise
                self.fresh_ports()
                continue
            self._started = True
            return self
        raise AssertionError("unreachable")

    def fresh_ports(self) -> None:
        """New ports for a first start whose port was taken (subclasses add theirs)."""
        self.port = free_port()
        if "--native-port" in self.args:
            self.fresh_option_port("--native-port")

    def fresh_option_port(self, option: str) -> int:
        """A new free port as the value of ``option`` in the server's arguments (for fresh_ports)."""
        port = free_port()
        self.args[self.args.index(option) + 1] = str(port)
        return port

    def _said_ready(self) -> bool:
        """This process's own "ready" line is in its log (text or JSON format)."""
        with open(self.log_path, "rb") as f:
            f.seek(self._log_from)
            text = f.read().decode("utf-8", "replace")
        return re.search(rf'ready.*(pid {self.proc.pid}\b|"pid": ?{self.proc.pid}\b)', text) is not None

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until this process says it is ready, then answers /health/ready. The probe alone is
        not enough: ``free_port`` picks a port without holding it, so another test's server
        may hold the same one for a moment and answer in this one's place."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log()}")
            try:
                verify = _PROBE_TLS if self.tls else TLS
                if self._said_ready() and httpx.get(self.url + "/health/ready", timeout=1.0, verify=verify).status_code == 200:
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

    def wait_log(self, *texts: str, timeout: float = 10.0) -> str:
        """The log once it holds every one of ``texts`` (a request's line is written after its
        answer is sent, so a client can see the answer first); AssertionError after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            log = self.log()
            if all(t in log for t in texts):
                return log
            if time.monotonic() > deadline:
                raise AssertionError(f"not in the server's log after {timeout}s: "
                                     f"{[t for t in texts if t not in log]}\n{log}")
            time.sleep(0.02)

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


