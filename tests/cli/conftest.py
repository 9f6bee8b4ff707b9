"""CLI test fixtures: a real server on 127.0.0.1 for the commands that work through one."""

from __future__ import annotations

import os
import sys

import pytest

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "server"))
from vqs_server_proc import ServerProcess


@pytest.fixture(scope="package")
def srv(tmp_path_factory):
    s = ServerProcess(tmp_path_factory.mktemp("cli") / "data").start()
    yield s
    s.stop()
