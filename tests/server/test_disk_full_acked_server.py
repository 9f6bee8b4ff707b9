"""``vqs serve`` with the default flush (``interval``) on a real small filesystem
(a 3 MiB tmpfs, tests/conftest.py): topic produces and queue sends (REST and
SQS) go on until the disk is full (507 / 503), the server is stopped with
SIGTERM (exit 0), the filler is removed and the server restarted: every
record and message a 2xx acknowledged is there. (Queue sends are kept by the
queue before its log writes them: their space is reserved when they are
acknowledged, vqs/broker/queue/send_buffer.py.)"""

from __future__ import annotations

import os

import pytest

httpx = pytest.importorskip("httpx")
from vqs_server_proc import ServerProcess  # noqa: E402


def _produce(http, i: int) -> tuple[int, list[str]]:
    vals = [f"t{i + k:07d}" + "t" * 200 for k in range(4)]
    r = http.post("/topics/t/messages", json={"messages": [{"value": v} for v in vals]})
    return r.status_code, vals


def _send(http, i: int) -> tuple[int, list[str]]:
    vals = [f"q{i + k:07d}" + "q" * 992 for k in range(5)]
    r = http.post("/queues/q/messages", json={"messages": [{"body": v} for v in vals]})
    return r.status_code, vals


def test_every_acknowledged_write_survives_a_full_disk_and_a_restart(small_disk):
    data = os.path.join(small_disk.path, "data")
    srv = ServerProcess(data).start()
    topic_acked, queue_acked = [], []
    try:
        with httpx.Client(base_url=srv.url, timeout=30) as http:
            assert http.post("/topics", json={"name": "t", "partitions": 1}).status_code == 201
            assert http.post("/queues", json={"name": "q"}).status_code == 201
            small_disk.fill(1 << 20)
            # queue sends first (kept by the queue before its log writes them), then
            # topic produces (written before they are answered) on what is left
            for write, acked in ((_send, queue_acked), (_produce, topic_acked)):
                i = 0
                while True:
                    status, vals = write(http, i)
                    if status != 200:
                        assert status == 507, status
                        break
                    acked.extend(vals)
                    i += 5
                    assert i < 20_000
    finally:
        rc = srv.stop()
    assert rc == 0, srv.log()[-3000:]
    assert len(queue_acked) > 200
    small_disk.free()
    srv = ServerProcess(data).start()
    try:
        with httpx.Client(base_url=srv.url, timeout=30) as http:
            got_t, off = [], 0
            while True:
                r = http.get("/topics/t/messages", params={"partition": 0, "offset": off, "limit": 500})
                ms = r.json()["messages"]
                if not ms:
                    break
                got_t += [m["value"] for m in ms]
                off = ms[-1]["offset"] + 1
            got_q = []
            while True:
                ms = http.post("/queues/q/receive", json={"max_messages": 10}).json()["messages"]
                if not ms:
                    break
                got_q += [m["body"] for m in ms]
    finally:
        rc = srv.stop()
    assert rc == 0, srv.log()[-3000:]
    assert set(topic_acked) <= set(got_t)
    missing = set(queue_acked) - set(got_q)
    assert not missing, f"{len(missing)} of {len(queue_acked)} acknowledged sends lost"
