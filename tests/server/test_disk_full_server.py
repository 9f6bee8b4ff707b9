"""A real server on a real full filesystem (a 3 MiB tmpfs, and an xfs with
3 MiB free: ENOSPC; tests/conftest.py):
a REST write answers 507 ``disk_full`` (no server path in it), the SQS front
ServiceUnavailable (HTTP 503); receives and deletes (control writes, which
the space governor keeps room for) go on, so the queue drains;
once space is freed, sends work again without a restart."""

from __future__ import annotations

import os
import time

import pytest

httpx = pytest.importorskip("httpx")
boto3 = pytest.importorskip("boto3")
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402
from vqs_server_proc import ServerProcess  # noqa: E402


def test_full_disk_answers_507_and_503_and_drains(enospc_disk):
    full_disk = enospc_disk
    # (xfs: 3 MiB free of a larger filesystem, under the default floor of 5 %)
    srv = ServerProcess(os.path.join(full_disk.path, "data"), "--min-free-bytes", str(256 << 10)).start()
    try:
        with httpx.Client(base_url=srv.url, timeout=30) as http:
            assert http.post("/queues", json={"name": "q"}).status_code == 201
            full_disk.fill(1 << 20)
            sent = 0
            body = "m" * 1000
            while True:
                r = http.post("/queues/q/messages", json={"messages": [{"body": body}] * 10})
                if r.status_code != 200:
                    break
                sent += 10
                assert sent < 10_000
            assert r.status_code == 507, r.text
            err = r.json()["error"]
            assert err["code"] == "disk_full" and full_disk.path not in r.text
            assert "this write was refused" in err["message"] and "once space is freed" in err["message"]
            sqs = boto3.client("sqs", endpoint_url=srv.url, region_name="eu-west-1", aws_access_key_id="x",
                               aws_secret_access_key="y", config=Config(retries={"max_attempts": 1}))
            url = sqs.get_queue_url(QueueName="q")["QueueUrl"]
            with pytest.raises(ClientError) as ei:  # (refused under min_free_bytes, vqs.disk.space)
                for _ in range(100):  # a few single sends may fit where a batch of 10 did not
                    sqs.send_message(QueueUrl=url, MessageBody=body)
            assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
            assert ei.value.response["Error"]["Code"] == "ServiceUnavailable"
            h = http.get("/health")
            assert h.status_code == 200 and h.json()["status"] == "degraded", h.text
            assert "disk_full" in h.json()["storage"]["reasons"] and full_disk.path not in h.text

            got = 0
            while True:
                rr = http.post("/queues/q/receive", json={"max_messages": 10})
                assert rr.status_code == 200, rr.text + srv.log()[-3000:]
                ms = rr.json()["messages"]
                if not ms:
                    break
                d = http.post("/queues/q/delete", json={"receipt_handles": [m["receipt_handle"] for m in ms]})
                assert d.status_code == 200 and d.json()["failed"] == [], srv.log()[-4000:]
                got += len(ms)
            assert got >= sent

            full_disk.free()
            r = http.post("/queues/q/messages", json={"messages": [{"body": "after"}]})
            assert r.status_code == 200, r.text
            # ok again once the queue's logs wrote (the send is flushed within
            # flush_interval_ms; under a quota only a write can tell, health.py)
            deadline = time.monotonic() + 10
            while (h := http.get("/health").json())["status"] != "ok" and time.monotonic() < deadline:
                time.sleep(0.05)
            assert h["status"] == "ok", h["storage"]
    finally:
        rc = srv.stop()
    assert rc == 0, srv.log()[-3000:]
