"""Each security rejection: bearer tokens, SigV4, non-loopback refusal, size limits, waiter limits."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest
from vqs_server_proc import ServerProcess, free_port

boto3 = pytest.importorskip("boto3")
from botocore.config import Config  # noqa: E402

TOKEN = "s3cret-token"
AKID, SECRET = "AKIDVQSTEST", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    d = tmp_path_factory.mktemp("vqs-secured") / "data"
    s = ServerProcess(d, "--token", TOKEN, "--sigv4-key", f"{AKID}:{SECRET}", "--max-body-bytes", "100000",
                      "--max-header-bytes", "4096", "--max-long-poll-waiters", "2").start()
    yield s
    assert s.stop() == 0, s.log()


def _sqs(url, akid=AKID, secret=SECRET, region="eu-central-1"):
    return boto3.client("sqs", endpoint_url=url, region_name=region, aws_access_key_id=akid,
                        aws_secret_access_key=secret, config=Config(retries={"max_attempts": 1}))


def test_rest_requires_a_bearer_token(secured):
    r = httpx.get(secured.url + "/topics")
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    assert r.headers["www-authenticate"].startswith("Bearer")
    r = httpx.get(secured.url + "/topics", headers={"authorization": "Bearer wrong"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
    r = httpx.get(secured.url + "/topics", headers={"authorization": "Basic abc"})
    assert r.status_code == 401
    r = httpx.get(secured.url + "/topics", headers={"authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200
    assert httpx.get(secured.url + "/metrics").status_code == 401
    assert httpx.get(secured.url + "/health").status_code == 200  # probes need no token


def test_the_root_page_is_admitted_as_every_request(secured):
    """Before: ``GET /`` skipped the admission (only its Host check ran): headers over
    max_header_bytes or over the count, a Content-Length over max_body_bytes were answered 200.
    It stays open (no token) and sends a browser to the console."""
    u = secured.url
    r = httpx.get(u + "/")
    assert r.status_code == 200 and r.json()["service"] == "vqs", r.text
    r = httpx.get(u + "/", headers={"accept": "text/html"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/console"
    r = httpx.get(u + "/", headers={"x-big": "a" * 5000})  # max_header_bytes 4096
    assert r.status_code == 431 and r.json()["error"]["code"] == "headers_too_large", r.text
    r = httpx.get(u + "/", headers={f"x-h{i}": "1" for i in range(120)})  # more than 100 headers
    assert r.status_code == 431, r.text
    r = httpx.request("GET", u + "/", content=b"x" * 100_001)  # max_body_bytes 100000
    assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large", r.text


def test_client_with_token(secured):
    import vqs.client as vc
    from vqs.errors import RemoteError

    with vc.Client(secured.url, token=TOKEN) as c:
        c.create_topic("secure-topic")
        assert "secure-topic" in c.topics()
    with vc.Client(secured.url) as c, pytest.raises(RemoteError) as ei:
        c.topics()
    assert ei.value.status == 401


def test_sqs_requires_a_valid_sigv4_signature(secured):
    good = _sqs(secured.url)
    url = good.create_queue(QueueName="secure-q")["QueueUrl"]
    good.send_message(QueueUrl=url, MessageBody="x")
    arn = good.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    assert arn.startswith("arn:aws:sqs:eu-central-1:")  # region from the signature's scope
    with pytest.raises(good.exceptions.ClientError) as ei:
        _sqs(secured.url, secret="wrong").list_queues()
    assert ei.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
    assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    with pytest.raises(good.exceptions.ClientError) as ei:
        _sqs(secured.url, akid="AKIDUNKNOWN").list_queues()
    assert ei.value.response["Error"]["Code"] == "InvalidClientTokenId"
    # unsigned
    r = httpx.post(secured.url + "/", content=b"{}", headers={"x-amz-target": "AmazonSQS.ListQueues",
                                                              "content-type": "application/x-amz-json-1.0"})
    assert r.status_code == 403 and r.json()["__type"].endswith("#MissingAuthenticationToken")
    # a bearer token is not an SQS credential
    r = httpx.post(secured.url + "/", content=b"{}", headers={"x-amz-target": "AmazonSQS.ListQueues",
                                                              "content-type": "application/x-amz-json-1.0",
                                                              "authorization": f"Bearer {TOKEN}"})
    assert r.status_code in (400, 403)


def test_tampered_body_is_rejected(secured):
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    body = b'{"QueueName":"secure-q"}'
    req = AWSRequest(method="POST", url=secured.url + "/", data=body,
                     headers={"x-amz-target": "AmazonSQS.GetQueueUrl",
                              "content-type": "application/x-amz-json-1.0"})
    SigV4Auth(Credentials(AKID, SECRET), "sqs", "us-east-1").add_auth(req)
    headers = dict(req.headers)
    r = httpx.post(secured.url + "/", content=body, headers=headers)
    assert r.status_code in (200, 400), r.text  # signed correctly (400 if the queue is missing)
    r = httpx.post(secured.url + "/", content=body.replace(b"secure", b"other"), headers=headers)
    assert r.status_code == 403 and r.json()["__type"].endswith("#SignatureDoesNotMatch")
    # an old signature (replay) is refused
    old = AWSRequest(method="POST", url=secured.url + "/", data=body,
                     headers={"x-amz-target": "AmazonSQS.GetQueueUrl", "content-type": "application/x-amz-json-1.0"})
    import datetime
    from unittest import mock

    with mock.patch("botocore.auth.get_current_datetime", return_value=datetime.datetime(2020, 1, 1)):
        SigV4Auth(Credentials(AKID, SECRET), "sqs", "us-east-1").add_auth(old)
    r = httpx.post(secured.url + "/", content=body, headers=dict(old.headers))
    assert r.status_code in (400, 403) and "RequestExpired" in r.json()["__type"]


def test_body_size_limit(secured):
    h = {"authorization": f"Bearer {TOKEN}"}
    httpx.post(secured.url + "/topics", json={"name": "big"}, headers=h)
    r = httpx.post(secured.url + "/topics/big/messages", json={"messages": [{"value": "x" * 200_000}]}, headers=h)
    assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large"

    def chunks():
        for _ in range(30):
            yield b"x" * 10_000

    r = httpx.post(secured.url + "/topics/big/messages", content=chunks(),
                   headers={**h, "content-type": "application/json"})
    assert r.status_code == 413


def test_a_chunked_body_over_the_limit_is_413_on_every_route(secured):
    """A chunked body crossing max_body_bytes as it is read is answered 413 on a framework
    route too (a body its model parses, one its handler reads), never 400 or 500."""
    h = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}

    def chunks():
        yield b'{"name": "'
        for _ in range(30):
            yield b"x" * 10_000

    for path in ("/topics", "/wait", "/queues"):
        r = httpx.post(secured.url + path, content=chunks(), headers=h)
        assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large", (path, r.text)


def test_a_client_leaving_mid_body_is_no_error(secured):
    """A client that leaves before its body is whole gets nothing and the server logs no failure
    (no traceback, no 500 line): on a framework route as on the fast path."""
    for path in ("/topics", "/topics/big/messages", "/queues"):
        with socket.create_connection(("127.0.0.1", secured.port)) as s:
            s.sendall(f"POST {path} HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\n"
                      "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"name\"".encode())
    # the server has seen the three closes once a request on a new connection is answered after them
    deadline = time.monotonic() + 10
    while "route=\"/queues\",status=\"500\"" not in httpx.get(secured.url + "/metrics", headers={
            "authorization": f"Bearer {TOKEN}"}).text:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    log = secured.log()
    assert "Traceback" not in log and "unhandled error" not in log and "rejected 500" not in log, log


def test_a_compressed_batch_inflates_to_no_more_than_a_body_may_hold(secured):
    """A binary produce's compressed batches are inflated to at most max_body_bytes (100 KB here),
    together, refused before decompressing past it: a 1 KB zstd body must not make the server
    hold (and append) 400 KB."""
    from vqs.record import codec_id, encode_batch

    h = {"authorization": f"Bearer {TOKEN}", "content-type": "application/vnd.vqs.batch"}
    httpx.post(secured.url + "/topics", json={"name": "zipped"}, headers={"authorization": f"Bearer {TOKEN}"})
    url = secured.url + "/topics/zipped/messages"
    bomb = bytes(encode_batch(0, [b"z" * 50_000] * 8, codec=codec_id("zstd")))
    assert len(bomb) < 2_000
    r = httpx.post(url, content=bomb, headers=h)
    assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large", r.text
    small = bytes(encode_batch(0, [b"z" * 30_000] * 2, codec=codec_id("zstd")))
    r = httpx.post(url, content=small + small, headers=h)  # 120 KB together: refused whole
    assert r.status_code == 413, r.text
    r = httpx.post(url, content=small, headers=h)
    assert r.status_code == 200 and r.json()["ranges"][0]["base_offset"] == 0, r.text


@pytest.fixture(scope="module")
def token_only(tmp_path_factory):
    s = ServerProcess(tmp_path_factory.mktemp("vqs-token-only") / "data", "--token", TOKEN).start()
    yield s
    assert s.stop() == 0, s.log()


@pytest.mark.parametrize("ctype,target", [("application/x-amz-json-1.0", "AmazonSQS.SendMessage"),
                                          ("application/x-www-form-urlencoded", None)])
def test_sqs_on_a_server_without_sigv4_keys_is_refused_before_its_body(token_only, ctype, target):
    """With tokens and no SigV4 key every SQS request is refused: on its headers, in its protocol,
    without waiting for (or holding) a body of up to 4 MiB first."""
    with socket.create_connection(("127.0.0.1", token_only.port)) as c:
        c.settimeout(5)  # the old code waited for the body: no answer before the client gave up
        c.sendall(f"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {ctype}\r\n".encode()
                  + (f"X-Amz-Target: {target}\r\n".encode() if target else b"")
                  + b"Authorization: AWS4-HMAC-SHA256 Credential=x/20240101/us-east-1/sqs/aws4_request, "
                    b"SignedHeaders=host, Signature=00\r\nContent-Length: 4000000\r\n\r\n")
        data = c.recv(65536)
    assert data.startswith(b"HTTP/1.1 403 ") and b"InvalidClientTokenId" in data, data
    assert (b"x-amz-json" in data) == bool(target)  # JSON for JSON, XML for the query protocol


def _sqs_head(port: int, source: str, length: int) -> socket.socket:
    """A connection from ``source`` that sent an SQS request's headers (signed-looking) and none
    of its ``length`` bytes of body."""
    c = socket.socket()
    c.bind((source, 0))
    c.connect(("127.0.0.1", port))
    c.settimeout(10)
    c.sendall(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-amz-json-1.0\r\n"
              b"X-Amz-Target: AmazonSQS.ListQueues\r\nAuthorization: AWS4-HMAC-SHA256 "
              b"Credential=x/20240101/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=00\r\n"
              + f"Content-Length: {length}\r\n\r\n".encode())
    return c


@pytest.mark.parametrize("fast", ["1", "0"])
def test_one_address_holds_at_most_64_mib_of_sqs_bodies_before_their_signatures(tmp_path, fast):
    """SQS bodies are read whole before their signature is checked: 16 unsigned 4 MB bodies
    from one address are all that address may have the server hold (64 MiB, not 256
    connections' ~1 GiB); its next SQS request is answered 503 at once, another address is
    served, and the allowance comes back as those requests end."""
    srv = ServerProcess(tmp_path / "data", "--sigv4-key", f"{AKID}:{SECRET}", env={"VQS_FAST_HTTP": fast}).start()
    try:
        held = [_sqs_head(srv.port, "127.0.0.1", 4_000_000) for _ in range(16)]
        over = _sqs_head(srv.port, "127.0.0.1", 4_000_000)
        data = over.recv(65536)
        assert data.startswith(b"HTTP/1.1 503 ") and b"ServiceUnavailable" in data, data
        over.close()
        other = _sqs_head(srv.port, "127.0.0.2", 2)
        other.sendall(b"{}")
        assert b"ServiceUnavailable" not in other.recv(65536)  # its own allowance (refused: bad signature)
        other.close()
        for c in held:
            c.close()
        deadline = time.monotonic() + 10
        while True:  # the server sees the closes, and gives their holds back
            c = _sqs_head(srv.port, "127.0.0.1", 2)
            c.sendall(b"{}")
            data = c.recv(65536)
            c.close()
            if b"ServiceUnavailable" not in data:
                break
            assert time.monotonic() < deadline, data
            time.sleep(0.05)
    finally:
        assert srv.stop() == 0, srv.log()


def test_header_size_limit(secured):
    r = httpx.get(secured.url + "/health", headers={"x-big": "a" * 8000})
    assert r.status_code == 431


def test_header_count_limit(secured):
    """At most 100 headers (small ones: within max_header_bytes, 4 KiB here), on every route."""
    many = {f"x-h{i}": "v" for i in range(101)}
    for path in ("/health", "/topics/big/messages?offset=0"):
        r = httpx.get(secured.url + path, headers={**many, "authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 431 and r.json()["error"]["code"] == "headers_too_large", r.text
    few = {f"x-h{i}": "v" for i in range(90)}
    assert httpx.get(secured.url + "/health", headers=few).status_code == 200


def test_long_poll_waiter_limit(secured):
    h = {"authorization": f"Bearer {TOKEN}"}
    httpx.post(secured.url + "/topics", json={"name": "waiters"}, headers=h)
    results = []

    def wait():
        r = httpx.get(secured.url + "/topics/waiters/messages", params={"offset": 0, "wait_ms": 3000},
                      headers=h, timeout=30)
        results.append(r.status_code)

    ths = [threading.Thread(target=wait) for _ in range(2)]
    for t in ths:
        t.start()
    time.sleep(0.5)
    r = httpx.get(secured.url + "/topics/waiters/messages", params={"offset": 0, "wait_ms": 3000}, headers=h)
    assert r.status_code == 503 and r.json()["error"]["code"] == "too_many_waiters"
    assert r.headers["retry-after"] == "1"
    # a record wakes the two waiting polls (not their 3 s timeout)
    httpx.post(secured.url + "/topics/waiters/messages", json={"messages": [{"value": "v"}]},
               headers=h).raise_for_status()
    for t in ths:
        t.join()
    assert results == [200, 200]


def test_refuses_non_loopback_without_credentials(tmp_path):
    port = free_port()
    p = subprocess.run([sys.executable, "-m", "vqs.server", "--data-dir", str(tmp_path / "d"), "--host", "0.0.0.0",
                        "--port", str(port)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert "refusing to listen on 0.0.0.0" in p.stderr
    assert not (tmp_path / "d").exists()


def test_non_loopback_with_insecure_or_credentials_starts(tmp_path):
    for args in (["--insecure"], ["--token", "t", "--sigv4-key", "A:B"]):
        s = ServerProcess(tmp_path / f"d{len(args)}", "--host", "0.0.0.0", *args).start()
        try:
            assert httpx.get(s.url + "/health").status_code == 200
        finally:
            assert s.stop() == 0


def test_data_dir_has_one_owner(secured, tmp_path):
    port = free_port()
    p = subprocess.run([sys.executable, "-m", "vqs.server", "--data-dir", secured.data_dir, "--port", str(port)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert "locked by pid" in p.stdout + p.stderr


def test_connection_limit(tmp_path):
    s = ServerProcess(tmp_path / "d", "--max-connections", "2").start()
    try:
        socks = []
        for _ in range(2):
            c = socket.create_connection(("127.0.0.1", s.port))
            c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            c.recv(4096)
            socks.append(c)
        statuses = set()
        for _ in range(3):
            statuses.add(httpx.get(s.url + "/health/live").status_code)
        for c in socks:
            c.close()
        assert 503 in statuses
    finally:
        s.stop()
