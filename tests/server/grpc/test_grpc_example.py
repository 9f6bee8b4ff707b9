"""examples/grpc_client.py runs as written against a real server (with a bearer token)."""

from __future__ import annotations

import os
import subprocess
import sys

from grpc_server_proc import GrpcServer, wait_http

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "grpc_client.py")


def test_the_grpc_example_client_runs(tmp_path):
    s = GrpcServer(tmp_path / "data", "--token", "tok").start(wait=False)
    try:
        wait_http(s.url)
        r = subprocess.run([sys.executable, EXAMPLE, "--target", s.target, "--token", "tok"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        out = r.stdout
        assert "batch 3: 3 records at offsets 9..11" in out
        assert "offset 11: event 3-2" in out
        assert "group example: lag 0 after committing" in out
        assert "'resize image 42' (receive count 1)" in out
        assert "fetch past the end: OUT_OF_RANGE" in out
    finally:
        assert s.stop() == 0, s.log()
