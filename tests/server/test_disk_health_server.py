"""A real server with ``--min-free-bytes`` on a real small filesystem (a 3 MiB
tmpfs, tests/conftest.py): writes are refused with 507 ``disk_full`` before
the disk is full, ``/health`` stays 200 and says ``degraded`` (why, and which
topic or queue), ``/metrics`` exports the filesystem's free bytes and the
queues' disk gauges; receives and deletes go on, and once space is freed
writes work and health is ``ok`` again, without a restart."""

from __future__ import annotations

import os
import re

import pytest

httpx = pytest.importorskip("httpx")
from vqs_server_proc import ServerProcess  # noqa: E402


def _gauge(text: str, name: str, labels: str = "") -> float:
    m = re.search(rf"^{name}{re.escape(labels)} (\S+)$", text, re.M)
    assert m, f"{name}{labels} not in /metrics"
    return float(m.group(1))


def test_min_free_bytes_health_and_metrics(small_disk):
    srv = ServerProcess(os.path.join(small_disk.path, "data"), "--min-free-bytes", str(1 << 20)).start()
    try:
        with httpx.Client(base_url=srv.url, timeout=30) as http:
            assert http.post("/queues", json={"name": "q"}).status_code == 201
            assert http.post("/topics", json={"name": "t"}).status_code == 201
            h = http.get("/health").json()
            assert h["status"] == "ok" and h["storage"]["reasons"] == []
            m = http.get("/metrics").text
            assert _gauge(m, "vqs_disk_total_bytes") == 3 << 20
            assert _gauge(m, "vqs_disk_bytes", '{kind="queue",name="q"}') >= 0
            assert _gauge(m, "vqs_segments", '{kind="queue",name="q"}') == 2  # messages + state
            assert _gauge(m, "vqs_log_disk_full", '{kind="queue",name="q"}') == 0

            small_disk.fill(1 << 20)
            sent = 0
            while True:
                r = http.post("/queues/q/messages", json={"messages": [{"body": "m" * 1000}] * 10})
                if r.status_code != 200:
                    break
                sent += 10
                assert sent < 5000
            assert r.status_code == 507 and r.json()["error"]["code"] == "disk_full", r.text
            assert not small_disk.is_full()  # refused before the disk filled up

            h = http.get("/health")
            assert h.status_code == 200
            body = h.json()
            assert body["status"] == "degraded" and body["ready"] is True
            assert body["storage"]["reasons"] == ["disk_full"]
            assert body["storage"]["disk"]["free_bytes"] < 2 << 20  # within a batch of the limit
            assert {"kind": "queue", "name": "q", "log": "messages", "problem": "disk_full"}.items() <= \
                body["storage"]["problems"][0].items()
            assert small_disk.path not in h.text
            m = http.get("/metrics").text
            assert _gauge(m, "vqs_disk_free_bytes") < 2 << 20
            assert _gauge(m, "vqs_log_disk_full", '{kind="queue",name="q"}') == 1
            assert _gauge(m, "vqs_log_disk_full", '{kind="topic",name="t"}') == 0
            assert _gauge(m, "vqs_disk_bytes", '{kind="queue",name="q"}') > sent * 1000

            got = 0  # receives and deletes go on under min_free_bytes
            while True:
                ms = http.post("/queues/q/receive", json={"max_messages": 10}).json()["messages"]
                if not ms:
                    break
                d = http.post("/queues/q/delete", json={"receipt_handles": [x["receipt_handle"] for x in ms]})
                assert d.status_code == 200 and d.json()["failed"] == []
                got += len(ms)
            assert got >= sent

            small_disk.free()
            r = http.post("/queues/q/messages", json={"messages": [{"body": "after"}]})
            assert r.status_code == 200, srv.log()[-2000:]
            assert http.get("/health").json()["status"] == "ok"
    finally:
        rc = srv.stop()
    assert rc == 0, srv.log()[-3000:]
