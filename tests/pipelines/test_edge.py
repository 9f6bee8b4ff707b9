"""The edge (vqs.pipelines.edge): cameras -> a HybridQueue each -> the idempotent producer
-> a VQS topic, with the server SIGKILLed (or stopped) mid-run and started again: frames pile up in
memory and on disk, then drain; nothing lost, nothing twice, each camera in order."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("PIL")
pytest.importorskip("httpx")

from vqs.pipelines import scene
from vqs.pipelines.demo import LocalServer
from vqs.pipelines.edge import Edge, verify


def _until(cond, what, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_a_server_gone_mid_run_loses_nothing_and_sends_nothing_twice(tmp_path, how):
    """``kill``: SIGKILL (a crash); ``stop``: SIGTERM (the server drains and exits)."""
    server = LocalServer(str(tmp_path / "data"), str(tmp_path / "server.log")).start()
    cams = scene.cameras(2, seconds=6, resolution="320x180", fps=25)
    edge = Edge(cams, server.url, str(tmp_path / "edge"), partitions=2, memory_bytes=64 << 10)
    try:
        edge.start()
        _until(lambda: edge.stats.sent > 0, "nothing was forwarded")
        getattr(server, how)()
        # the cameras go on: their frames overflow the 64 KiB memory tier to disk
        _until(lambda: edge.backlog()["disk_items"] > 20, "no frame went to disk while the server was away")
        server.start()
        st = edge.wait(timeout=120)
    finally:
        edge.close()
    try:
        got = verify(server.url, "frames", st.delivered)
    finally:
        server.stop()
    want = sum(1 for c in cams for _ in c.frames())
    assert st.frames == st.sent == want
    assert got == {"records": want, "missing": 0, "duplicates": 0, "out_of_order": 0}
    assert st.spilled > 0 and st.disk_reads > 0 and st.peak_disk_items > 20
    assert st.retries > 0 and st.failed_sends == 0
