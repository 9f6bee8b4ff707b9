"""Server test fixtures: real server processes (uvicorn, subprocess) on 127.0.0.1."""

from __future__ import annotations

import os
import time

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from vqs_server_proc import ServerProcess, free_port  # noqa: E402,F401


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
