"""The HTTP fast path (vqs/server/fast_http.py) answers byte for byte as the ASGI path does.

Two real servers with the same settings (a bearer token, ``max_connections``,
a small ``max_body_bytes``, ``flush = always``: writes in worker threads), one with the fast path (the default) and one with
it off (``VQS_FAST_HTTP=0``: the same requests through ASGI and FastAPI), get the same raw HTTP/1.1 bytes over plain sockets: produces that
succeed and fail (unknown topic, bad JSON, an unsupported media type, a value
over ``max_message_bytes``, a body over ``max_body_bytes``, no or a wrong
token), several requests on one keep-alive connection, pipelined requests,
``Connection: close``, HTTP/1.0, ``Expect: 100-continue``, a chunked body, a
client that leaves mid-body, the concurrency limit; and consumes (JSON,
base64, binary, a long poll, errors, parameters the framework answers), queue
sends, receives and deletes (bodies the framework answers are handed to it
after the fast path read them, also pipelined between fast requests). Every answer must be the
same bytes but for the Date header; then both servers' request counters and
log lines must match, and both stop cleanly (exit 0) with an idle keep-alive connection open.

The SQS endpoint likewise (SigV4-signed requests, the same bytes sent to both): the JSON
protocol's SendMessage (with attributes, too large for the queue), SendMessageBatch (an entry
failing alone), ReceiveMessage (a long poll woken by a send on another connection, one that
times out), DeleteMessage(Batch) (a good and a forged receipt handle), and its errors
(malformed JSON, an unknown queue, no or an unknown X-Amz-Target, an unsigned request, a bad
signature), keep-alive, pipelining, a chunked body; the query protocol (form body, XML answers). Masked
are only the ids, receipt handles and timestamps each server makes its own; and the fast
server's ``vqs_fast_http_requests_total`` says it answered them itself.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import time

import pytest
from vqs_server_proc import ServerProcess

TOKEN = "s3cret"
AKID, SECRET = "AKIDFAST", "fast-secret"
AUTH = f"Authorization: Bearer {TOKEN}\r\n"
_DATE = re.compile(rb"\r\ndate: [^\r]*\r\n", re.IGNORECASE)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """(fast, through ASGI): the same settings, the fast path on and off."""
    args = ("--token", TOKEN, "--max-connections", "6", "--max-body-bytes", "4096", "--flush", "always",
            "--max-message-bytes", "600", "--log-format", "json", "--sigv4-key", f"{AKID}:{SECRET}")
    fast = ServerProcess(tmp_path_factory.mktemp("fast") / "data", *args)
    slow = ServerProcess(tmp_path_factory.mktemp("asgi") / "data", *args, env={"VQS_FAST_HTTP": "0"})
    fast.start(wait=False)
    slow.start(wait=False)
    try:
        fast.wait_ready()
        slow.wait_ready()
        yield fast, slow
    finally:
        rcs = (fast.stop(), slow.stop())
    assert rcs == (0, 0), fast.log() + slow.log()


def _post(path: str, body: bytes, extra: str = "", auth: str = AUTH, ctype: str = "application/json") -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: t\r\n{auth}"
    if ctype:
        head += f"Content-Type: {ctype}\r\n"
    return (head + f"Content-Length: {len(body)}\r\n{extra}\r\n").encode() + body


def _one(value: str = "v") -> bytes:
    return json.dumps({"messages": [{"value": value}]}).encode()


def _read_answers(sock: socket.socket, n: int) -> list[bytes]:
    """``n`` whole answers (Content-Length framed; the Date header removed), then any rest."""
    buf = b""
    out = []
    sock.settimeout(10)
    while len(out) < n:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            head = buf[:end + 4]
            m = re.search(rb"\r\ncontent-length: (\d+)\r\n", head, re.IGNORECASE)
            size = int(m.group(1)) if m else 0
            if len(buf) >= end + 4 + size:
                out.append(_DATE.sub(b"\r\n", head) + buf[end + 4:end + 4 + size])
                buf = buf[end + 4 + size:]
                continue
        chunk = sock.recv(65536)
        if not chunk:
            out.append(b"<closed>" + buf)
            break
        buf += chunk
    return out


def _exchange(port: int, data: bytes, n: int, then_closed: bool = False) -> list[bytes]:
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(data)
        out = _read_answers(s, n)
        if then_closed:  # the server closes the connection after its answer(s)
            s.settimeout(10)
            out.append(b"closed" if s.recv(1) == b"" else b"open")
    return out


def _metrics(port: int) -> list[str]:
    data = _exchange(port, f"GET /metrics HTTP/1.1\r\nHost: t\r\n{AUTH}Connection: close\r\n\r\n".encode(), 1)[0]
    return sorted(line for line in data.decode().splitlines()
                  if line.startswith("vqs_http_requests_total{") and "/metrics" not in line
                  and "/health" not in line)


def _scenario(port: int) -> list:
    out = []
    ex = _exchange
    ex(port, _post("/topics", b'{"name":"t"}'), 1)
    p = "/topics/t/messages"
    out += ex(port, _post(p, _one("first")), 1)  # the fast path
    out += ex(port, _post("/topics/nope/messages", _one()), 1)  # unknown topic
    out += ex(port, _post(p, b'{"messages":'), 1)  # bad JSON
    out += ex(port, _post(p, b'{"messages":[]}'), 1)
    out += ex(port, _post(p, b"x", ctype="text/plain"), 1)  # 415
    out += ex(port, _post(p, _one("y" * 700)), 1)  # over max_message_bytes: the core's 413
    out += ex(port, _post(p, _one("z" * 5000)), 1)  # over max_body_bytes: the middleware's 413
    out += ex(port, _post(p, _one(), auth=""), 1)  # no token: 401
    out += ex(port, _post(p, _one(), auth="Authorization: Bearer wrong\r\n"), 1)  # 403
    out += ex(port, _post(p, _one(), ctype=""), 1)  # no Content-Type: JSON
    out += ex(port, _post(p + "?partition=0", _one("q")), 1)
    # several requests, one keep-alive connection, each sent after the answer before
    with socket.create_connection(("127.0.0.1", port)) as s:
        for i in range(3):
            s.sendall(_post(p, _one(f"ka{i}")))
            out += _read_answers(s, 1)
        s.sendall(_post("/topics/nope/messages", _one()))
        out += _read_answers(s, 1)
        s.sendall(_post(p, _one("after-error")))
        out += _read_answers(s, 1)
    # pipelined: four requests in one write (a produce, an error, a framework route, a produce)
    out += ex(port, _post(p, _one("pipe0")) + _post(p, b"{") + f"GET /topics/t HTTP/1.1\r\nHost: t\r\n{AUTH}\r\n".encode()
              + _post(p, _one("pipe1")), 4)
    out += ex(port, _post(p, _one("close"), extra="Connection: close\r\n"), 1, then_closed=True)
    http10 = _post(p, _one("http10")).replace(b"HTTP/1.1", b"HTTP/1.0", 1)
    out += ex(port, http10, 1, then_closed=True)
    out += ex(port, _post(p, _one("expect"), extra="Expect: 100-continue\r\n"), 2)  # 100 Continue, then 200
    chunked = _one("chunked")
    out += ex(port, (f"POST {p} HTTP/1.1\r\nHost: t\r\n{AUTH}Content-Type: application/json\r\n"
                     f"Transfer-Encoding: chunked\r\n\r\n{len(chunked):x}\r\n").encode() + chunked + b"\r\n0\r\n\r\n", 1)
    # a client that leaves mid-body: no answer; the next request is served
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(_post(p, _one("never"))[:-5])
    time.sleep(0.2)  # the server sees the close (nothing to wait on from outside)
    # the connection cap (--max-connections 6): with 6 connections just opened, the next one
    # is answered 503 when accepted (vqs/server/http_bounds.py)
    held = [socket.create_connection(("127.0.0.1", port)) for _ in range(6)]
    try:
        out += ex(port, _post(p, _one("limited")), 1)
    finally:
        for s in held:
            s.close()
    time.sleep(0.2)
    # consume: valid (JSON, base64, binary, a short long poll past the end), unknown topic, the framework's
    for qs, extra in (("?offset=0&limit=2", ""), ("?offset=1&encoding=base64", ""), ("?offset=99", ""),
                      ("?offset=0&limit=1", "Accept: application/vnd.vqs.batch\r\n"), ("?limit=0", ""),
                      ("?offset=1&offset=2", ""), ("?group=g&offset=0&limit=1", "")):
        out += ex(port, f"GET {p}{qs} HTTP/1.1\r\nHost: t\r\n{AUTH}{extra}\r\n".encode(), 1)
    out += ex(port, f"GET /topics/nope/messages HTTP/1.1\r\nHost: t\r\n{AUTH}\r\n".encode(), 1)
    ex(port, _post("/topics", b'{"name":"w"}'), 1)
    out += ex(port, f"GET /topics/w/messages?offset=0&wait_ms=100 HTTP/1.1\r\nHost: t\r\n{AUTH}\r\n".encode(), 1)
    out += ex(port, f"GET {p}?offset=0 HTTP/1.1\r\nHost: t\r\n\r\n".encode(), 1)  # no token
    # queues: send, receive, delete (valid; and bodies the framework answers, replayed to it after the read)
    ex(port, _post("/queues", b'{"name":"q"}'), 1)
    qp = "/queues/q/"
    for body in (b'{"messages":[{"body":"m1"},{"body":"m2","delay_seconds":0}]}', b'{"messages":[]}',
                 b'{"messages":[{"body":"x","extra":1}]}', b'{"messages":[{"body":5}]}', b"{"):
        out += ex(port, _post(qp + "messages", body), 1)
    out += ex(port, _post("/queues/nope/messages", b'{"messages":[{"body":"m"}]}'), 1)
    got = ex(port, _post(qp + "receive", b'{"max_messages":1,"wait_seconds":0}'), 1)
    out += got
    handle = json.loads(got[0].partition(b"\r\n\r\n")[2])["messages"][0]["receipt_handle"]
    out += ex(port, _post(qp + "receive", b'{"max_messages":"x"}'), 1)
    out += ex(port, _post(qp + "receive", b'{"max_messages":1,"wait_seconds":0.1}'), 1)  # a short long poll
    out += ex(port, _post(qp + "delete", json.dumps({"receipt_handles": [handle]}).encode()), 1)
    out += ex(port, _post(qp + "delete", b'{"receipt_handles":"no"}'), 1)
    # a replayed request pipelined between fast ones
    out += ex(port, _post(qp + "messages", b'{"messages":[{"body":"p1"}]}') + _post(qp + "messages", b"{")
              + _post(qp + "messages", b'{"messages":[{"body":"p2"}]}'), 3)
    out += ex(port, f"GET {p}?offset=0&limit=100 HTTP/1.1\r\nHost: t\r\n{AUTH}\r\n".encode(), 1)  # all that was kept
    return out


def _log_lines(srv) -> list:
    """The server's request log lines, without their time and the client's address (its port
    is the connection's; the ASGI path names the client and front of a refused request)."""
    out = []
    with open(srv.log_path) as f:
        for line in f:
            if line.startswith("{"):
                rec = json.loads(line)
                if rec.get("logger") == "vqs.server" and rec.get("msg") in ("request", "rejected"):
                    out.append({k: v for k, v in rec.items() if k not in ("ts", "ms", "client", "front")})
    assert out
    return out


_RANDOM = {"message_ids", "id", "receipt_handle", "sent_timestamp_ms", "first_receive_timestamp_ms"}


def _mask(doc):
    if isinstance(doc, dict):
        return {k: "*" if k in _RANDOM else _mask(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_mask(x) for x in doc]
    return doc


def _masked(answer: bytes):
    """An answer without what differs between two servers: the records' timestamps; the
    queue messages' ids, receipt handles and times (and so the length of such a body)."""
    head, sep, body = answer.partition(b"\r\n\r\n")
    if b"content-type: application/vnd.vqs.batch" in head:  # record batches: their length
        return head + sep + str(len(body)).encode()
    if re.search(rb'"(receipt_handle|message_ids|id)"', body):
        return re.sub(rb"content-length: \d+", b"", head), _mask(json.loads(body))
    return re.sub(rb'"timestamp_ms":\d+', b"", answer)


def test_fast_path_answers_as_the_asgi_path(pair):
    fast, slow = pair
    a = _scenario(fast.port)
    b = _scenario(slow.port)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert _masked(x) == _masked(y)
    joined = b"\n".join(a)
    assert joined.count(b"HTTP/1.1 200 OK") >= 12 and b"503 Service Unavailable" in joined
    assert b'"value":"never"' not in a[-1] and b'"value":"pipe1"' in a[-1]
    assert _metrics(fast.port) == _metrics(slow.port)
    assert _log_lines(fast) == _log_lines(slow)  # the same "rejected" lines (level, status, error)
    assert 'route="/topics/{topic}/messages",status="500"' in "\n".join(_metrics(fast.port))  # the client that left


def test_fast_path_engaged_with_the_pinned_uvicorn(pair, tmp_path, monkeypatch, caplog):
    """The pinned uvicorn passes the start-up check, and the server says it runs the fast path."""
    import uvicorn
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from vqs.server.app import create_app
    from vqs.server.fast_http import fast_protocol, unsupported_reason
    from vqs.server.settings import Settings

    app = create_app(Settings(data_dir=str(tmp_path / "d")))
    config = uvicorn.Config(app, http="httptools")
    assert unsupported_reason(config) is None, uvicorn.__version__
    assert issubclass(fast_protocol(app, config), HttpToolsProtocol)
    assert fast_protocol(app, uvicorn.Config(app, root_path="/x")) is None  # the check refuses what it can't do
    monkeypatch.setattr(uvicorn, "__version__", "0.99.0")  # internals it was not written against: off, said
    assert fast_protocol(app, config) is None
    assert "the HTTP fast path is off: uvicorn 0.99.0 is outside the supported range" in caplog.text
    monkeypatch.undo()
    fast, slow = pair

    def ready(srv) -> dict:
        with open(srv.log_path) as f:
            for line in f:
                if line.startswith("{") and json.loads(line).get("msg") == "ready":
                    return json.loads(line)
        raise AssertionError(srv.log())

    assert ready(fast)["fast_http"] is True
    assert ready(slow)["fast_http"] is False


# ------------------------------------------------------------------------------------------- SQS
def _signed(target: str | None, doc, ctype: str = "application/x-amz-json-1.0", secret: str = SECRET,
            extra: str = "") -> bytes:
    """A raw SQS request (JSON protocol: ``target`` and ``doc``; query protocol: ``target`` None and
    ``doc`` the form body), SigV4-signed for Host ``t`` as boto3 signs (the same bytes go to both servers)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    body = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    headers = {"Host": "t", "Content-Type": ctype}
    if target is not None:
        headers["X-Amz-Target"] = target
    req = AWSRequest(method="POST", url="http://t/", data=body, headers=headers)
    SigV4Auth(Credentials(AKID, secret), "sqs", "eu-west-1").add_auth(req)
    head = "POST / HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in req.headers.items())
    return (head + f"Content-Length: {len(body)}\r\n{extra}\r\n").encode() + body


def _sqs(action: str, doc, **kw) -> bytes:
    return _signed(f"AmazonSQS.{action}", doc, **kw)


def _sqs_body(answer: bytes) -> dict:
    return json.loads(answer.partition(b"\r\n\r\n")[2])


def _sqs_scenario(port: int) -> list:
    out = []
    ex = _exchange
    url = "http://t/123456789012/sq"
    out += ex(port, _sqs("CreateQueue", {"QueueName": "sq"}), 1)
    out += ex(port, _sqs("CreateQueue", {"QueueName": "small", "Attributes": {"MaximumMessageSize": "1024"}}), 1)
    out += ex(port, _sqs("SendMessage", {"QueueUrl": url, "MessageBody": "one"}), 1)
    out += ex(port, _sqs("SendMessage", {"QueueUrl": url, "MessageBody": "two", "MessageAttributes": {
        "a": {"DataType": "String", "StringValue": "x"}, "b": {"DataType": "Binary", "BinaryValue": "AAE="}}}), 1)
    out += ex(port, _sqs("SendMessage", {"QueueUrl": url.replace("sq", "small"), "MessageBody": "z" * 2000}), 1)
    out += ex(port, _sqs("SendMessageBatch", {"QueueUrl": url, "Entries": [
        {"Id": "ok", "MessageBody": "three"}, {"Id": "bad", "MessageBody": ""}]}), 1)
    out += ex(port, _sqs("SendMessage", {"QueueUrl": url.replace("sq", "nope"), "MessageBody": "m"}), 1)
    out += ex(port, _signed("AmazonSQS.SendMessage", b'{"QueueUrl":'), 1)  # malformed JSON
    out += ex(port, _signed(None, {"QueueUrl": url, "MessageBody": "m"}), 1)  # no X-Amz-Target
    out += ex(port, _sqs("Nope", {}), 1)  # an unknown action
    out += ex(port, _sqs("SendMessage", {"QueueUrl": url, "MessageBody": "m"}, secret="wrong"), 1)
    out += ex(port, _sqs("SendMessage", {"QueueUrl": url, "MessageBody": "m"}).replace(b"Authorization", b"X-No"), 1)
    out += ex(port, _sqs("SendMessage", {"QueueUrl": url, "MessageBody": "y" * 5000}), 1)  # over max_body_bytes
    head, _, body = _sqs("SendMessage", {"QueueUrl": url + "x", "MessageBody": "chunked"}).partition(b"\r\n\r\n")
    head = re.sub(rb"Content-Length: \d+\r\n$", b"", head + b"\r\n")  # chunked: through ASGI
    out += ex(port, head + b"Transfer-Encoding: chunked\r\n\r\n" + f"{len(body):x}\r\n".encode() + body
              + b"\r\n0\r\n\r\n", 1)
    got = ex(port, _sqs("ReceiveMessage", {"QueueUrl": url, "MaxNumberOfMessages": 10, "AttributeNames": ["All"],
                                           "MessageAttributeNames": ["All"], "VisibilityTimeout": 60}), 1)
    out += got
    handles = [m["ReceiptHandle"] for m in _sqs_body(got[0])["Messages"]]
    assert len(handles) == 3, got
    out += ex(port, _sqs("DeleteMessage", {"QueueUrl": url, "ReceiptHandle": handles[0]}), 1)
    out += ex(port, _sqs("DeleteMessage", {"QueueUrl": url, "ReceiptHandle": "forged"}), 1)
    out += ex(port, _sqs("DeleteMessage", {"QueueUrl": url}), 1)
    out += ex(port, _sqs("DeleteMessageBatch", {"QueueUrl": url, "Entries": [
        {"Id": "a", "ReceiptHandle": handles[1]}, {"Id": "b", "ReceiptHandle": "forged"}]}), 1)
    # keep-alive and pipelined: a delete, an error, a send, in one write
    out += ex(port, _sqs("DeleteMessage", {"QueueUrl": url, "ReceiptHandle": handles[2]}) + _signed(
        "AmazonSQS.SendMessage", b"[") + _sqs("SendMessage", {"QueueUrl": url, "MessageBody": "piped"}), 3)
    out += ex(port, _sqs("ReceiveMessage", {"QueueUrl": url, "VisibilityTimeout": 0}), 1)
    out += ex(port, _sqs("PurgeQueue", {"QueueUrl": url}), 1)
    # a long poll that times out, and one woken by a send on another connection while it waits
    out += ex(port, _sqs("ReceiveMessage", {"QueueUrl": url, "WaitTimeSeconds": 1}), 1)
    with socket.create_connection(("127.0.0.1", port)) as waiting:
        waiting.sendall(_sqs("ReceiveMessage", {"QueueUrl": url, "WaitTimeSeconds": 10}))
        time.sleep(0.3)  # the receive is waiting (nothing to wait on from outside)
        t0 = time.monotonic()
        out += ex(port, _sqs("SendMessage", {"QueueUrl": url, "MessageBody": "wake"}), 1)  # served meanwhile
        out += _read_answers(waiting, 1)
        assert time.monotonic() - t0 < 5 and b'"Body":"wake"' in out[-1], out[-1]
    # the query protocol: a send and an error (XML)
    form = f"Action=SendMessage&QueueUrl={url}&MessageBody=q&Version=2012-11-05".encode()
    out += ex(port, _signed(None, form, ctype="application/x-www-form-urlencoded"), 1)
    out += ex(port, _signed(None, form.replace(b"&MessageBody=q", b""), ctype="application/x-www-form-urlencoded"), 1)
    out += ex(port, b"GET /123456789012/sq?Action=GetQueueAttributes HTTP/1.1\r\nHost: t\r\n\r\n", 1)  # unsigned
    return out


_SQS_RANDOM = re.compile(rb'("(MessageId|ReceiptHandle|SentTimestamp|ApproximateFirstReceiveTimestamp)":"[^"]*"'
                         rb"|x-amzn-requestid: [^\r]*|<(MessageId|RequestId)>[^<]*</(MessageId|RequestId)>"
                         rb"|content-length: \d+)")


def test_fast_path_answers_sqs_as_the_asgi_path(pair):
    fast, slow = pair

    def fast_served(port: int) -> float:
        for line in _exchange(port, f"GET /metrics HTTP/1.1\r\nHost: t\r\n{AUTH}\r\n".encode(), 1)[0].splitlines():
            if line.startswith(b'vqs_fast_http_requests_total{api="sqs"}'):
                return float(line.split()[-1])
        raise AssertionError("no vqs_fast_http_requests_total")

    before = fast_served(fast.port), fast_served(slow.port)
    a = _sqs_scenario(fast.port)
    b = _sqs_scenario(slow.port)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert _SQS_RANDOM.sub(b"*", x) == _SQS_RANDOM.sub(b"*", y)
    joined = b"\n".join(a)
    for code in (b"MD5OfMessageAttributes", b"InvalidParameterValue", b"QueueDoesNotExist", b"SerializationException",
                 b"InvalidAction", b"SignatureDoesNotMatch", b"ReceiptHandleIsInvalid", b"<SendMessageResponse",
                 b"MissingParameter", b'"Failed"'):
        assert code in joined, code
    assert _metrics(fast.port) == _metrics(slow.port)
    assert _log_lines(fast) == _log_lines(slow)
    after = fast_served(fast.port), fast_served(slow.port)
    # every SQS request was the fast path's but the one over max_body_bytes (the middleware's 413), the
    # chunked one and the two pipelined behind a fast one (uvicorn queues them as ASGI cycles)
    assert (after[0] - before[0], after[1] - before[1]) == (len(a) - 4, 0)


def test_sqs_long_poll_waiting_at_stop_is_answered(pair):
    """A ReceiveMessage long poll waiting when the server is told to stop is answered (no
    messages; the connection then closes) within about a second, the same on both paths, and
    the server exits 0 (the pair's teardown checks it). Runs last: it stops the pair."""
    answers = []
    for srv in pair:
        _exchange(srv.port, _sqs("CreateQueue", {"QueueName": "lp"}), 1)
        with socket.create_connection(("127.0.0.1", srv.port)) as s:
            s.sendall(_sqs("ReceiveMessage", {"QueueUrl": "http://t/123456789012/lp", "WaitTimeSeconds": 20}))
            time.sleep(0.3)  # the receive is waiting (nothing to wait on from outside)
            t0 = time.monotonic()
            srv.proc.send_signal(signal.SIGTERM)
            answers += _read_answers(s, 1)
            assert time.monotonic() - t0 < 5, answers
        srv.proc.wait(30)
    assert answers[0].startswith(b"HTTP/1.1 200 OK") and answers[0].endswith(b"\r\n\r\n{}"), answers[0]
    assert _SQS_RANDOM.sub(b"*", answers[0]) == _SQS_RANDOM.sub(b"*", answers[1])
