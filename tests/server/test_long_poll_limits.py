"""Long polls against a real server (issue #13, found by fuzzing): a receive
waiting on a queue that is deleted answers as for a queue that does not exist
(REST 404, the SQS front QueueDoesNotExist), never 503 ``closing``; and a long
poll waits at most 20 s (SQS's cap): the schema says so and refuses more."""

from __future__ import annotations

import re
import threading
import time

import pytest

boto3 = pytest.importorskip("boto3")
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402


def _waiters(http) -> int:
    m = re.search(r"^vqs_long_poll_waiters (\S+)$", http.get("/metrics").text, re.M)
    return int(float(m.group(1))) if m else 0


def _wait_until_polling(http, done: threading.Event) -> None:
    """Until the server counts a waiting long poll (its own gauge, not a sleep)."""
    deadline = time.monotonic() + 10
    while _waiters(http) < 1:
        assert not done.is_set(), "the long poll returned before it was seen waiting"
        assert time.monotonic() < deadline, "the long poll never started waiting"


def _in_thread(fn):
    out: dict = {}
    done = threading.Event()

    def run():
        try:
            out["r"] = fn()
        except BaseException as e:  # handed to the test
            out["e"] = e
        finally:
            done.set()

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th, done, out


def test_rest_receive_on_a_queue_deleted_meanwhile_is_404(http, base_url, unique, server):
    import httpx

    assert http.post("/queues", json={"name": unique}).status_code == 201
    missing = http.post(f"/queues/{unique}-missing/receive", json={"wait_seconds": 0})
    assert missing.status_code == 404
    with httpx.Client(base_url=base_url, timeout=30) as c:
        th, done, out = _in_thread(lambda: c.post(f"/queues/{unique}/receive", json={"wait_seconds": 20}))
        _wait_until_polling(http, done)
        t0 = time.monotonic()
        assert http.delete(f"/queues/{unique}").status_code == 204
        th.join(25)
    assert "e" not in out, out.get("e")
    r = out["r"]
    assert r.status_code == 404, r.text + server.log()[-3000:]
    assert time.monotonic() - t0 < 10  # answered when the queue went, not at the end of the wait
    body, want = r.json()["error"], missing.json()["error"]
    assert body["code"] == want["code"] == "queue_not_found"
    assert body["message"] == want["message"] and body.get("type") == want.get("type")


def test_sqs_receive_on_a_queue_deleted_meanwhile_is_queue_does_not_exist(http, base_url, unique):
    def client():
        return boto3.client("sqs", endpoint_url=base_url, region_name="eu-west-1", aws_access_key_id="x",
                            aws_secret_access_key="y",
                            config=Config(retries={"max_attempts": 1}, read_timeout=30))

    sqs = client()
    url = sqs.create_queue(QueueName=unique)["QueueUrl"]
    poller = client()
    th, done, out = _in_thread(lambda: poller.receive_message(QueueUrl=url, WaitTimeSeconds=20))
    _wait_until_polling(http, done)
    sqs.delete_queue(QueueUrl=url)
    th.join(25)
    e = out.get("e")
    assert isinstance(e, ClientError), out
    assert e.response["Error"]["Code"] in ("QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue")
    assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    with pytest.raises(ClientError) as missing:
        sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)
    assert missing.value.response["Error"] == e.response["Error"]


@pytest.mark.parametrize("req", [
    ("post", "/wait", {"json": {"partitions": [{"topic": "t", "partition": 0, "offset": 0}],
                                "wait_ms": 3_600_000}}),
    ("get", "/topics/t/messages", {"params": {"wait_ms": 20_001}}),
    ("post", "/queues/q/receive", {"json": {"wait_seconds": 21}}),
])
def test_long_polls_above_20_s_are_refused(http, req):
    method, path, kw = req
    r = getattr(http, method)(path, **kw)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "invalid_argument"


def test_the_schema_states_the_20_s_cap(http):
    spec = http.get("/openapi.json").json()
    wait = spec["components"]["schemas"]["WaitRequest"]["properties"]["wait_ms"]
    assert wait["maximum"] == 20_000
    params = spec["paths"]["/topics/{topic}/messages"]["get"]["parameters"]
    (wait_ms,) = [p for p in params if p["name"] == "wait_ms"]
    assert wait_ms["schema"]["maximum"] == 20_000
    recv = spec["components"]["schemas"]["QueueReceive"]["properties"]["wait_seconds"]
    assert any(a.get("maximum") == 20 for a in recv.get("anyOf", [recv]))


def test_wait_at_the_cap_is_accepted(http, unique):
    http.post("/topics", json={"name": unique})
    r = http.post("/wait", json={"partitions": [{"topic": unique, "partition": 0, "offset": 0}],
                                 "wait_ms": 1})
    assert r.status_code == 200, r.text


def test_long_polls_past_max_long_poll_waiters_are_503_on_both_fronts(tmp_path):
    """Past ``max_long_poll_waiters`` a long poll is refused: REST 503 ``too_many_waiters``, the SQS
    front 503 ``ServiceUnavailable`` (found by bench/soak.py: it was a 500 InternalFailure)."""
    import httpx
    from vqs_server_proc import ServerProcess

    s = ServerProcess(tmp_path / "data", "--max-long-poll-waiters", "1").start()
    try:
        with httpx.Client(base_url=s.url, timeout=30) as http:
            assert http.post("/queues", json={"name": "q"}).status_code == 201
            th, done, out = _in_thread(lambda: httpx.post(f"{s.url}/queues/q/receive", json={"wait_seconds": 3},
                                                          timeout=30))
            _wait_until_polling(http, done)
            r = http.post("/queues/q/receive", json={"wait_seconds": 1})
            assert r.status_code == 503 and r.json()["error"]["code"] == "too_many_waiters", r.text
            sqs = boto3.client("sqs", endpoint_url=s.url, region_name="us-east-1", aws_access_key_id="x",
                               aws_secret_access_key="y", config=Config(retries={"total_max_attempts": 1}))
            with pytest.raises(ClientError) as e:
                sqs.receive_message(QueueUrl=f"{s.url}/123456789012/q", WaitTimeSeconds=1)
            assert e.value.response["Error"]["Code"] == "ServiceUnavailable"
            assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
            http.post("/queues/q/messages", json={"messages": [{"body": "wake"}]}).raise_for_status()
            th.join(10)  # the waiting poll takes the message (not its 3 s timeout)
            assert out["r"].status_code == 200 and len(out["r"].json()["messages"]) == 1
    finally:
        assert s.stop() == 0
    assert "Traceback" not in s.log()


def test_max_wait_ms_shortens_every_rest_long_poll(tmp_path):
    """The setting lowers the cap of all three REST long polls (the queue receive included)."""
    import httpx
    from vqs_server_proc import ServerProcess

    s = ServerProcess(tmp_path / "data", env={"VQS_MAX_WAIT_MS": "300"}).start()
    try:
        with httpx.Client(base_url=s.url, timeout=30) as h:
            assert h.post("/queues", json={"name": "q"}).status_code == 201
            assert h.post("/topics", json={"name": "t"}).status_code == 201
            for method, path, kw in (
                    ("post", "/queues/q/receive", {"json": {"wait_seconds": 20}}),
                    ("get", "/topics/t/messages", {"params": {"wait_ms": 20_000}}),
                    ("post", "/wait", {"json": {"partitions": [{"topic": "t", "partition": 0, "offset": 0}],
                                                "wait_ms": 20_000}})):
                t0 = time.monotonic()
                r = getattr(h, method)(path, **kw)
                assert r.status_code == 200, r.text
                assert 0.25 < time.monotonic() - t0 < 5, path
    finally:
        assert s.stop() == 0
