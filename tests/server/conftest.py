"""Server test fixtures: real server processes (uvicorn, subprocess) on 127.0.0.1."""

from __future__ import annotations

import os
import time

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from vqs_server_proc import TLS, ServerProcess, free_port  # noqa: E402


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """One server for the session (flush=interval, no auth, loopback), with a native port: the
    vqs.Client tests against it go over the native protocol (docs/native.md); HTTP's own tests
    (httpx, boto3, the fast path's) stay on HTTP."""
    d = tmp_path_factory.mktemp("vqs-server") / "data"
    s = ServerProcess(d, "--native-port", str(free_port())).start()
    yield s
    rc = s.stop()
    assert rc == 0, s.log()


@pytest.fixture(scope="session")
def base_url(server) -> str:
    return server.url


@pytest.fixture
def http(base_url):
    # X-VQS-Client: what a script sends (vqs.Client does); a credential-less server refuses a POST
    # a web page could send cross-site (docs/security.md; tests/server/test_security_http.py)
    with httpx.Client(base_url=base_url, timeout=30, headers={"x-vqs-client": "test"}, verify=TLS) as c:
        yield c


@pytest.fixture
def unique(request):
    """A name unique to the test (topics and queues are shared by the session's server)."""
    import re

    n = re.sub(r"[^A-Za-z0-9_-]", "-", request.node.name)[-60:]
    return f"{n}-{os.getpid() % 1000}-{time.monotonic_ns() % 100000}"


@pytest.fixture
def fsynced_in(monkeypatch) -> list:
    """The thread ident of every fsync from now (os.fsync and storage's seam, vqs.disk.fs)."""
    import threading

    from vqs.disk import fs

    seen: list = []
    real = os.fsync

    def spy(fd):
        seen.append(threading.get_ident())
        return real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    monkeypatch.setattr(fs, "fsync", spy)
    return seen
