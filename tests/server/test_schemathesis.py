"""Property-based fuzzing of the REST API from its OpenAPI spec: no input may cause a 5xx.

Stateless phases (examples, fuzzing; coverage when slow tests run) and the stateful phase, which
follows the schema's OpenAPI links (create-topic -> produce -> consume/commit, create-queue ->
send -> receive -> delete/visibility -> delete-queue) with values from real answers. The server
caps long polls at 200 ms (``max_wait_ms``) so a generated ``wait_ms`` cannot eat the budget.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import httpx
import pytest
from vqs_server_proc import ServerProcess

pytest.importorskip("schemathesis")


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory):
    """Its own server: fuzzing creates many odd topics and queues (small partition limits)."""
    s = ServerProcess(tmp_path_factory.mktemp("fuzz") / "data", "--max-partitions-per-topic", "8",
                      "--max-total-partitions", "200", env={"VQS_MAX_WAIT_MS": "200"}).start()
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
        capture_output=True, text=True, cwd=tmp_path, timeout=480,  # under the per-test bound
    )
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-6000:]
    assert "passed" in out


_STATEFUL_CONFIG = """
[phases.stateful]
max-steps = 12

[phases.stateful.inference]
algorithms = []  # only the schema's own links (inferred ones from bodies without schemas never chain)
"""


def test_no_5xx_from_stateful_fuzzing_along_the_openapi_links(fuzz_server, tmp_path):
    """Reproducible (fixed seed, bounded scenarios): about 200 calls in chains along the links."""
    spec = httpx.get(f"{fuzz_server.url}/openapi.json").json()
    n_links = sum(len(r.get("links", {})) for ops in spec["paths"].values() for op in ops.values()
                  for r in op.get("responses", {}).values())
    assert n_links >= 20, "the schema lost its links"
    cfg = tmp_path / "schemathesis.toml"
    cfg.write_text(_STATEFUL_CONFIG)
    p = subprocess.run(
        [*_st(), "--config-file", str(cfg), "run", f"{fuzz_server.url}/openapi.json", "--checks",
         "not_a_server_error", "--phases", "stateful", "--mode", "positive", "--max-examples", "25",
         "--seed", "13", "--request-timeout", "30", "--continue-on-failure", "--no-color"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-6000:]
    m = re.search(r"API Links:\s+(\d+) covered", out)
    assert m and int(m.group(1)) >= 5, out[-3000:]  # the chains really ran
    assert "Traceback" not in fuzz_server.log()
