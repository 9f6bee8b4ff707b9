"""What each credential grants, and the no-credential mode kept safe from web pages.

Real servers on 127.0.0.1; real clients (httpx, boto3, botocore's signers, vqs.Client).
"""

from __future__ import annotations

import datetime
import subprocess
import sys

import httpx
import pytest
from vqs_server_proc import ServerProcess, free_port

boto3 = pytest.importorskip("boto3")
import botocore.auth  # noqa: E402
from botocore.awsrequest import AWSRequest  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.credentials import Credentials  # noqa: E402

AKID, SECRET = "AKIDSIGV4ONLY", "sigv4-only-secret"
JSON_SQS = "application/x-amz-json-1.0"


def _sqs(url, akid=AKID, secret=SECRET, region="us-east-1"):
    return boto3.client("sqs", endpoint_url=url, region_name=region, aws_access_key_id=akid,
                        aws_secret_access_key=secret, config=Config(retries={"max_attempts": 1}))


def _no_traceback(server) -> None:
    log = server.log()
    assert "Traceback" not in log, log


@pytest.fixture(scope="module")
def sigv4_only(tmp_path_factory):
    s = ServerProcess(tmp_path_factory.mktemp("sigv4-only") / "data", "--sigv4-key", f"{AKID}:{SECRET}").start()
    yield s
    assert s.stop() == 0, s.log()


@pytest.fixture(scope="module")
def open_server(tmp_path_factory):
    s = ServerProcess(tmp_path_factory.mktemp("open") / "data", "--allowed-host", "vqs.internal").start()
    yield s
    assert s.stop() == 0, s.log()


# ------------------------------------------------------------------ SigV4 keys grant SQS only
def test_sigv4_keys_do_not_open_rest_metrics_or_console(sigv4_only):
    u = sigv4_only.url
    for method, path, kw in (("GET", "/topics", {}), ("POST", "/topics", {"json": {"name": "t"}}),
                             ("POST", "/topics/t/messages", {"json": {"messages": [{"value": "x"}]}}),
                             ("DELETE", "/topics/t", {}), ("GET", "/metrics", {}), ("GET", "/queues", {})):
        r = httpx.request(method, u + path, **kw)
        assert r.status_code == 401, (method, path, r.text)
        assert r.json()["error"]["code"] == "unauthorized"
        assert "--token" in r.json()["error"]["message"]
    # a made-up bearer token is no better
    assert httpx.get(u + "/topics", headers={"authorization": "Bearer anything"}).status_code == 401
    assert httpx.get(u + "/console/topics").status_code == 403
    assert httpx.get(u + "/health").status_code == 200
    # what the keys grant: the SQS API, signed
    sqs = _sqs(u)
    q = sqs.create_queue(QueueName="signed")["QueueUrl"]
    sqs.send_message(QueueUrl=q, MessageBody="m")
    with pytest.raises(Exception) as ei:
        _sqs(u, secret="wrong").list_queues()
    assert "SignatureDoesNotMatch" in str(ei.value)


def test_sigv4_keys_alone_do_not_start_off_loopback(tmp_path):
    p = subprocess.run([sys.executable, "-m", "vqs.server", "--data-dir", str(tmp_path / "d"), "--host", "0.0.0.0",
                        "--port", str(free_port()), "--sigv4-key", "A:S"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    assert "without bearer tokens" in p.stderr


# ----------------------------------------------------- no credentials: the Host check
def test_only_loopback_and_allowed_host_names_are_answered(open_server):
    u = open_server.url
    port = open_server.port
    # (an IP address cannot be DNS-rebound: a container's or pod's address is answered)
    for host in (f"127.0.0.1:{port}", "localhost", f"localhost:{port}", f"[::1]:{port}", "vqs.internal:80",
                 "VQS.Internal", "10.1.2.3:8642", "[fd00::1]"):
        assert httpx.get(u + "/topics", headers={"host": host}).status_code == 200, host
    for host in (f"attacker.example:{port}", "localhost.attacker.example", "127.0.0.1.nip.io"):
        r = httpx.get(u + "/topics", headers={"host": host})
        assert r.status_code == 403, host
        assert r.json()["error"]["code"] == "host_not_allowed"
        assert "--allowed-host" in r.json()["error"]["message"]
        r = httpx.get(u + "/console/topics", headers={"host": host})
        assert r.status_code == 403
        r = httpx.post(u + "/", headers={"host": host, "x-amz-target": "AmazonSQS.ListQueues",
                                         "content-type": JSON_SQS}, content=b"{}")
        assert r.status_code == 403 and "AccessDenied" in r.json()["__type"]
    # the hot (lean, fast-path) routes too
    httpx.post(u + "/topics", json={"name": "rebind"}).raise_for_status()
    r = httpx.post(u + "/topics/rebind/messages", json={"messages": [{"value": "x"}]},
                   headers={"host": "attacker.example"})
    assert r.status_code == 403
    r = httpx.get(u + "/topics/rebind/messages?partition=0&offset=0", headers={"host": "attacker.example"})
    assert r.status_code == 403
    assert httpx.get(u + "/topics/rebind").json()["partition_info"][0]["end_offset"] == 0


# ------------------------------------------ no credentials: what a web page can send cross-site
def test_a_cross_site_form_post_changes_nothing_over_rest(open_server):
    u = open_server.url
    httpx.post(u + "/queues", json={"name": "csrf-q"}).raise_for_status()
    httpx.post(u + "/queues/csrf-q/messages", json={"messages": [{"body": "keep"}]}).raise_for_status()
    # what <form method=post> and fetch(mode: no-cors) can send: form, multipart, text/plain, no type
    for headers, content in (({"content-type": "application/x-www-form-urlencoded"}, b"a=b"),
                             ({"content-type": "text/plain;charset=UTF-8"}, b'{"messages":[{"body":"x"}]}'),
                             ({"content-type": "multipart/form-data; boundary=x"}, b"--x--"),
                             ({}, b"")):
        for path in ("/queues/csrf-q/purge", "/queues/csrf-q/messages", "/topics"):
            r = httpx.post(u + path, headers=headers, content=content)
            assert r.status_code == 403, (path, headers, r.text)
            assert r.json()["error"]["code"] == "cross_site"
    attrs = httpx.get(u + "/queues/csrf-q").json()["attributes"]
    assert attrs["ApproximateNumberOfMessages"] == "1"
    # a page from another site, as the browser marks it (Sec-Fetch-Site is the browser's, not the page's)
    r = httpx.post(u + "/queues/csrf-q/purge", headers={"sec-fetch-site": "cross-site", "origin": "http://a.example"})
    assert r.status_code == 403
    # what a script sends: JSON, or a custom header; the server's own pages (the docs' "Try it out")
    assert httpx.post(u + "/queues/csrf-q/purge", headers={"x-vqs-client": "curl"}).status_code == 204
    assert httpx.post(u + "/producers", headers={"sec-fetch-site": "same-origin"}).status_code == 201
    assert httpx.post(u + "/queues/csrf-q/messages", json={"messages": [{"body": "again"}]}).status_code == 200


def test_an_sqs_get_or_unsigned_form_post_changes_nothing(open_server):
    u = open_server.url
    sqs = _sqs(u, akid="dummy", secret="dummy")  # boto3 signs even with made-up keys
    q = sqs.create_queue(QueueName="img-get")["QueueUrl"]
    sqs.send_message(QueueUrl=q, MessageBody="keep")
    for action in ("DeleteQueue", "PurgeQueue", "ReceiveMessage", "SendMessage"):
        # <img src="http://127.0.0.1:8642/?Action=DeleteQueue&QueueUrl=...">
        r = httpx.get(u + "/", params={"Action": action, "QueueUrl": q, "MessageBody": "x"})
        assert r.status_code == 403 and "AccessDenied" in r.text, (action, r.text)
        # <form method=post action="http://127.0.0.1:8642/"> (no Authorization, no X-Amz-Target)
        r = httpx.post(u + "/", data={"Action": action, "QueueUrl": q, "MessageBody": "x"})
        assert r.status_code == 403 and "AccessDenied" in r.text, (action, r.text)
        r = httpx.get(q, params={"Action": action})
        assert r.status_code == 403, (action, r.text)
    attrs = sqs.get_queue_attributes(QueueUrl=q, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
    assert attrs == {"ApproximateNumberOfMessages": "1"}
    # reads stay open to curl: a GET of a read-only action
    r = httpx.get(u + "/", params={"Action": "ListQueues"})
    assert r.status_code == 200 and "img-get" in r.text
    # the clients: boto3's JSON, the query protocol with an Authorization header, vqs.Client
    assert sqs.receive_message(QueueUrl=q)["Messages"][0]["Body"] == "keep"
    r = httpx.post(u + "/", data={"Action": "PurgeQueue", "QueueUrl": q},
                   headers={"authorization": "AWS4-HMAC-SHA256 Credential=x/20240101/us-east-1/sqs/aws4_request, "
                                             "SignedHeaders=host, Signature=00"})
    assert r.status_code == 200, r.text
    import vqs.client as vc

    with vc.Client(u) as c:
        c.create_topic("client-topic")
        c.delete_topic("client-topic")
        qq = c.create_queue("client-q")
        qq.send("m")
        qq.purge()
        c.delete_queue("client-q")
    sqs.delete_queue(QueueUrl=q)


# --------------------------------------------------------------------- SigV4 presigned URLs
def _signed_json(url, action, body, *, service="sqs", sign_target=True):
    """A header-signed JSON 1.0 request, signed by botocore."""
    headers = {"content-type": JSON_SQS}
    if sign_target:
        headers["x-amz-target"] = f"AmazonSQS.{action}"
    req = AWSRequest(method="POST", url=url + "/", data=body, headers=headers)
    botocore.auth.SigV4Auth(Credentials(AKID, SECRET), service, "us-east-1").add_auth(req)
    hs = dict(req.headers.items())
    if not sign_target:
        hs["x-amz-target"] = f"AmazonSQS.{action}"
    return httpx.post(url + "/", content=body, headers=hs)


def _presign(url: str, query: str, expires: int = 300, unsigned_payload: bool = False) -> str:
    """A presigned query-protocol URL, made by botocore's presigner (SigV4QueryAuth; its S3
    variant signs ``UNSIGNED-PAYLOAD``, as S3-style presigners do)."""
    req = AWSRequest(method="GET", url=f"{url}/?{query}")
    signer = botocore.auth.S3SigV4QueryAuth if unsigned_payload else botocore.auth.SigV4QueryAuth
    signer(Credentials(AKID, SECRET), "sqs", "us-east-1", expires=expires).add_auth(req)
    return req.url


def test_presigned_url_parameters_are_the_signed_ones(sigv4_only):
    u = sigv4_only.url
    sqs = _sqs(u)
    q = sqs.create_queue(QueueName="presigned")["QueueUrl"]
    url = _presign(u, "Action=GetQueueUrl&QueueName=presigned")
    r = httpx.get(url)
    assert r.status_code == 200 and "presigned" in r.text, r.text
    # the same URL with a body naming another action: the body is not signed
    r = httpx.post(url, data={"Action": "DeleteQueue", "QueueUrl": q})
    assert r.status_code == 403, r.text
    assert sqs.get_queue_url(QueueName="presigned")["QueueUrl"] == q
    # signed with UNSIGNED-PAYLOAD: good without a body, and a body never counts
    url = _presign(u, "Action=GetQueueUrl&QueueName=presigned", unsigned_payload=True)
    assert httpx.get(url).status_code == 200
    r = httpx.post(url, data={"Action": "DeleteQueue", "QueueUrl": q})
    assert r.status_code == 403, r.text
    assert sqs.get_queue_url(QueueName="presigned")["QueueUrl"] == q
    # X-Amz-Expires over AWS's 7 days
    r = httpx.get(_presign(u, "Action=GetQueueUrl&QueueName=presigned", expires=604801))
    assert r.status_code == 400 and "X-Amz-Expires" in r.text
    assert httpx.get(_presign(u, "Action=GetQueueUrl&QueueName=presigned", expires=604800)).status_code == 200


def test_presigned_url_dated_in_the_future_is_refused(sigv4_only, monkeypatch):
    _sqs(sigv4_only.url).create_queue(QueueName="future")
    assert httpx.get(_presign(sigv4_only.url, "Action=GetQueueUrl&QueueName=future")).status_code == 200
    ahead = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) + datetime.timedelta(days=365)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: ahead)  # the client's clock, a year ahead
    url = _presign(sigv4_only.url, "Action=GetQueueUrl&QueueName=future", expires=60)
    monkeypatch.undo()
    r = httpx.get(url)
    assert r.status_code == 403 and "RequestExpired" in r.text, r.text


def test_signature_scoped_to_another_service_is_refused(sigv4_only):
    r = _signed_json(sigv4_only.url, "ListQueues", b"{}")
    assert r.status_code == 200, r.text
    for service in ("s3", "kafka"):
        r = _signed_json(sigv4_only.url, "ListQueues", b"{}", service=service)
        assert r.status_code == 403 and "scoped to correct service" in r.text, r.text


def test_the_action_header_must_be_signed(sigv4_only):
    sqs = _sqs(sigv4_only.url)
    q = sqs.create_queue(QueueName="unsigned-target")["QueueUrl"]
    body = ('{"QueueUrl": "%s"}' % q).encode()
    r = _signed_json(sigv4_only.url, "DeleteQueue", body, sign_target=False)
    assert r.status_code == 403 and "x-amz-target" in r.text, r.text
    assert sqs.get_queue_url(QueueName="unsigned-target")["QueueUrl"] == q
    _no_traceback(sigv4_only)


# --------------------------------------------------------- malformed input: 400, no traceback
def test_deep_json_and_lone_surrogates_answer_400(open_server):
    u = open_server.url
    deep = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
    httpx.post(u + "/topics", json={"name": "malformed"}).raise_for_status()
    httpx.post(u + "/queues", json={"name": "malformed-q"}).raise_for_status()
    json_h = {"content-type": "application/json"}
    sqs_h = {"content-type": JSON_SQS}
    for path, body, headers in (
            ("/topics/malformed/messages", deep, json_h),
            ("/topics/malformed/messages", b'{"messages":[{"value":"\\ud800"}]}', json_h),
            ("/topics", deep, json_h),
            ("/", deep, dict(sqs_h, **{"x-amz-target": "AmazonSQS.ListQueues"})),
            ("/", b'{"QueueName":"q","Attributes":{"\\udc00":"1"}}',
             dict(sqs_h, **{"x-amz-target": "AmazonSQS.CreateQueue"}))):
        r = httpx.post(u + path, content=body, headers=headers)
        assert r.status_code == 400, (path, body[:40], r.text)
    r = httpx.put(u + "/queues/malformed-q/tags", content=b'{"tags":{"\\ud800":"x"}}', headers=json_h)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json", r.text
    assert httpx.get(u + "/queues/malformed-q/tags").json() == {"tags": {}}
    _no_traceback(open_server)


def test_query_parameters_are_bounded_before_parsing(open_server):
    u = open_server.url
    auth = {"authorization": "AWS4-HMAC-SHA256 Credential=x/20240101/us-east-1/sqs/aws4_request, "
                             "SignedHeaders=host, Signature=00"}
    r = httpx.post(u + "/", content=b"Action=ListQueues&A" + b".1" * 5000 + b"=1", headers=auth)
    assert r.status_code == 400 and "dotted parts" in r.text, r.text
    r = httpx.post(u + "/", content=b"Action=ListQueues&" + b"&".join(b"a%d=1" % i for i in range(5000)),
                   headers=auth)
    assert r.status_code == 400 and "parameters" in r.text, r.text
    r = httpx.get(u + "/?Action=ListQueues&" + "&".join(f"a{i}=1" for i in range(1500)))  # < max_header_bytes
    assert r.status_code == 400 and "parameters" in r.text, r.text
    # a request line past max_header_bytes: 431, whether its head arrived in one read or in several
    r = httpx.get(u + "/?Action=ListQueues&" + "&".join(f"a{i}=1" for i in range(5000)))
    assert r.status_code == 431, r.text
    _no_traceback(open_server)


def test_failed_authentications_are_logged_with_client_and_front_without_secrets(sigv4_only):
    u = sigv4_only.url
    with pytest.raises(Exception):
        _sqs(u, secret="guessed-secret-1").list_queues()
    assert httpx.get(u + "/topics", headers={"authorization": "Bearer guessed-token-2"}).status_code == 401
    assert httpx.get(u + "/console/topics", headers={"authorization": "Bearer guessed-token-3"}).status_code == 403
    log = sigv4_only.wait_log("authentication failed: sqs SignatureDoesNotMatch from 127.0.0.1:",
                              "rejected 401 GET /topics", "(client 127.0.0.1:", ", rest)", ", console)")
    for secret in ("guessed-secret-1", "guessed-token-2", "guessed-token-3", SECRET):
        assert secret not in log
