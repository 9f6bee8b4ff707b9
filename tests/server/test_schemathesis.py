"""Property-based fuzzing of the REST API from its OpenAPI spec: no input may cause a 5xx."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from vqs_server_proc import ServerProcess

pytest.importorskip("schemathesis")


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory):
    """Its own server: fuzzing creates many odd topics and queues (small partition limits)."""
    s = ServerProcess(tmp_path_factory.mktemp("fuzz") / "data", "--max-partitions-per-topic", "8",
                      "--max-total-partitions", "200").start()
    yield s
    assert s.stop() == 0, s.log()


def _st() -> list[str]:
    exe = os.path.join(os.path.dirname(sys.executable), "schemathesis")
    if os.path.exists(exe):
        return [exe]
    found = shutil.which("schemathesis")
    if not found:
        pytest.skip("the schemathesis command is not installed")
    return [found]


@pytest.mark.parametrize("phases,examples", [("examples,fuzzing", "25"),
                                             pytest.param("coverage", "10", marks=pytest.mark.slow)])
def test_no_5xx_from_openapi_fuzzing(fuzz_server, tmp_path, phases, examples):
    base_url = fuzz_server.url
    p = subprocess.run(
        [*_st(), "run", f"{base_url}/openapi.json", "--checks", "not_a_server_error", "--phases", phases,
         "--max-examples", examples, "--request-timeout", "30", "--continue-on-failure",
         "--generation-deterministic", "--no-color"],
        capture_output=True, text=True, cwd=tmp_path, timeout=900,
    )
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-6000:]
    assert "passed" in out
