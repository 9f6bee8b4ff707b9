"""The server-wide request budget (``max_request_bytes_in_flight``, vqs/server/byte_budget.py),
against a real server: the bytes of every request being read or handled, on every front
together, authenticated or not. Past it an HTTP request is answered 503 before its body is
read, and a native or Kafka connection is not read until bytes come back; nothing is lost.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time

import httpx
from socket_reads import recv_exact
from vqs_server_proc import ServerProcess, free_port

from vqs.native_wire import decode_answer, hello, request_head
from vqs.server.kafka.codec import Reader, Writer
from vqs.server.kafka.records import encode_records

MIB = 1 << 20
LARGEST = MIB + (64 << 10)  # the largest single request with max_body_bytes = 1 MiB
BUDGET = 2 * LARGEST  # two large requests at once, and room for small ones only
BIG = MIB - (8 << 10)  # a large request's body


def _server(tmp_path, *args) -> ServerProcess:
    return ServerProcess(tmp_path / "data", *args, env={
        "VQS_MAX_BODY_BYTES": str(MIB), "VQS_KAFKA_MAX_FRAME_BYTES": str(MIB),
        "VQS_MAX_REQUEST_BYTES_IN_FLIGHT": str(BUDGET),
        # the held requests stay unfinished for the test's length
        "VQS_HTTP_HEADER_TIMEOUT_S": "60", "VQS_NATIVE_FRAME_TIMEOUT_S": "60", "VQS_KAFKA_FRAME_TIMEOUT_S": "60",
    }).start()


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def _http_holder(port: int) -> socket.socket:
    """A produce whose 1 MiB body is announced and only begun: its bytes are held."""
    c = _connect(port)
    c.sendall(b"POST /topics/t/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n{\"messages\": [" % BIG)
    return c


def _native_holder(port: int) -> socket.socket:
    c = _native(port)
    c.sendall(request_head("POST", "/topics/t/messages", "application/json", 0, BIG) + b"{")
    return c


def _frame(c: socket.socket) -> bytes:
    return recv_exact(c, struct.unpack(">I", recv_exact(c, 4))[0])


def _kafka_produce(port: int, topic: str, records: bytes) -> int:
    """A Produce v7 of ``records`` to partition 0 on a new connection: its error code."""
    c = _connect(port)
    c.settimeout(30)
    head = Writer().int16(0).int16(7).int32(1).string("budget-test")
    body = Writer().string(None).int16(-1).int32(10_000).array(1).string(topic).array(1).int32(0).bytes_(records)
    frame = bytes(head.b) + bytes(body.b)
    c.sendall(struct.pack(">i", len(frame)) + frame)
    r = Reader(_frame(c))
    c.close()
    assert r.int32() == 1 and r.int32() == 1
    r.string()
    assert r.int32() == 1
    r.int32()
    return r.int16()


def _native(port: int) -> socket.socket:
    """A native connection past its HELLO."""
    c = _connect(port)
    c.sendall(hello(b""))
    assert decode_answer(_frame(c))[0] == 200
    return c


def _native_produce_big(port: int) -> tuple:
    """A 1 MiB native produce on a new connection: (its answer, seconds it took)."""
    c = _native(port)
    body = _big_json()
    t0 = time.monotonic()
    c.sendall(request_head("POST", "/topics/t/messages", "application/json", 0, len(body)) + body)
    answer = decode_answer(_frame(c))
    c.close()
    return answer, time.monotonic() - t0


def _big_json() -> bytes:
    body = json.dumps({"messages": [{"value": "x" * (BIG - 64)}]}).encode()
    assert len(body) <= BIG
    return body


def _metric(url: str, reason: str) -> float:
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith(f'vqs_rejected_requests_total{{reason="{reason}"}}'):
            return float(line.split()[-1])
    return 0.0


def _until(fn, timeout: float = 10.0):
    end = time.monotonic() + timeout
    while True:
        out = fn()
        if out or time.monotonic() > end:
            return out
        time.sleep(0.05)


def test_http_requests_past_the_budget_are_refused_before_their_body_is_read(tmp_path):
    s = _server(tmp_path)
    try:
        httpx.post(s.url + "/topics", json={"name": "t"}).raise_for_status()
        holders = [_http_holder(s.port) for _ in range(2)]
        big = _big_json()
        with httpx.Client(base_url=s.url, timeout=10) as h:
            # the holders' bodies are held once their headers are read: the next large one is refused
            r = _until(lambda: (lambda r: r if r.status_code == 503 else None)(
                h.post("/topics/t/messages", content=big, headers={"content-type": "application/json"})))
            assert r is not None and r.status_code == 503, r
            assert r.headers["retry-after"] == "1"
            assert r.json()["error"]["code"] == "busy"
            assert "max_request_bytes_in_flight" in r.json()["error"]["message"]
            # both HTTP paths ask the same admission: the framework's route (a queue create) too
            r = h.post("/queues", content=b'{"name": "q"}' + b" " * BIG, headers={"content-type": "application/json"})
            assert r.status_code == 503, r.text
            # small requests still fit
            assert h.post("/topics/t/messages", json={"messages": [{"value": "small"}]}).status_code == 200
            assert _metric(s.url, "request_bytes") >= 2
            holders.pop().close()  # its bytes come back when the server sees it gone
            r = _until(lambda: (lambda r: r if r.status_code == 200 else None)(
                h.post("/topics/t/messages", content=big, headers={"content-type": "application/json"})))
            assert r is not None and r.status_code == 200, r
            got = h.get("/topics/t/messages", params={"offset": 0, "limit": 10}).json()["messages"]
            assert [len(m["value"]) for m in got] == [5, BIG - 64]  # nothing refused was written
        for c in holders:
            c.close()
    finally:
        s.stop()
    assert "max_request_bytes_in_flight" in s.log() and "request budget spent" in s.log()


def test_native_and_kafka_connections_wait_for_the_budget(tmp_path):
    kafka_port = free_port()
    native_port = free_port()
    s = _server(tmp_path, "--kafka-port", str(kafka_port), "--native-port", str(native_port))
    try:
        httpx.post(s.url + "/topics", json={"name": "t"}).raise_for_status()
        httpx.post(s.url + "/topics", json={"name": "k"}).raise_for_status()
        holders = [_native_holder(native_port), _http_holder(s.port)]
        time.sleep(0.2)  # (both holders' heads read: nothing to wait on from outside)

        # a native request of 1 MiB: its connection is not read until bytes come back
        done = {}

        def native_big():
            done["native"] = _native_produce_big(native_port)[0]

        # a Kafka Produce of ~1 MiB, likewise
        batch = encode_records(0, [b"k" * (BIG - 4096)], keys=[b"key"])

        def kafka_big():
            done["kafka"] = _kafka_produce(kafka_port, "k", batch)

        threads = [threading.Thread(target=native_big), threading.Thread(target=kafka_big)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        assert done == {}, done  # both wait: neither was answered, neither refused or closed
        # a small request on another connection is answered meanwhile
        assert httpx.post(s.url + "/topics/t/messages", json={"messages": [{"value": "s"}]}).status_code == 200
        for c in holders:
            c.close()
        for t in threads:
            t.join(20)
        assert done["native"][0] == 200, done["native"]
        assert done["kafka"] == 0, done["kafka"]
        got = httpx.get(s.url + "/topics/k/messages", params={"offset": 0, "encoding": "base64"}).json()["messages"]
        assert len(got) == 1
    finally:
        s.stop()


def test_a_native_request_holds_its_frame_until_it_ends_though_its_client_left(tmp_path):
    """A client that sends a request and hangs up does not give its frame's bytes back while the
    request still runs (its handler holds the body): a long poll with a 1 MiB body, its client
    gone, keeps them until the poll ends."""
    native_port = free_port()
    s = _server(tmp_path, "--native-port", str(native_port))
    try:
        httpx.post(s.url + "/topics", json={"name": "t"}).raise_for_status()
        for _ in range(2):  # two long polls of 3 s, each with a large body, their clients gone at once
            c = _native(native_port)
            c.sendall(request_head("GET", "/topics/t/messages?offset=0&wait_ms=3000", None, 0, BIG) + b"x" * BIG)
            c.close()
        time.sleep(0.3)  # (both frames read: nothing to wait on from outside)
        done = {}

        def native_big():
            done["answer"], done["waited"] = _native_produce_big(native_port)

        th = threading.Thread(target=native_big)
        th.start()
        th.join(20)
        assert done["answer"][0] == 200, done
        assert done["waited"] > 1.5, done  # it waited for the polls' bytes, not for nothing
    finally:
        s.stop()


def test_a_wait_for_the_budget_lasts_at_most_the_frame_time(tmp_path):
    """A client that holds the budget (two bodies announced, never sent) keeps a native or Kafka
    connection waiting no longer than that connection's frame time: then it is closed (its client
    retries), not held for ever."""
    kafka_port, native_port = free_port(), free_port()
    s = ServerProcess(tmp_path / "data", "--kafka-port", str(kafka_port), "--native-port", str(native_port), env={
        "VQS_MAX_BODY_BYTES": str(MIB), "VQS_KAFKA_MAX_FRAME_BYTES": str(MIB),
        "VQS_MAX_REQUEST_BYTES_IN_FLIGHT": str(BUDGET), "VQS_HTTP_HEADER_TIMEOUT_S": "60",
        "VQS_NATIVE_FRAME_TIMEOUT_S": "1", "VQS_KAFKA_FRAME_TIMEOUT_S": "1"}).start()
    try:
        httpx.post(s.url + "/topics", json={"name": "t"}).raise_for_status()
        holders = [_http_holder(s.port) for _ in range(2)]
        time.sleep(0.2)  # (their heads read)
        n = _native(native_port)
        n.sendall(request_head("POST", "/topics/t/messages", "application/json", 0, BIG) + b"{")
        k = _connect(kafka_port)
        k.sendall(struct.pack(">i", BIG) + b"\0" * 16)
        t0 = time.monotonic()
        for c in (n, k):
            c.settimeout(10)
            assert c.recv(1) == b""  # closed by the server
        assert time.monotonic() - t0 < 5
        assert "request budget" in s.log() or "budget stayed spent" in s.log()
        for c in holders + [n, k]:
            c.close()
    finally:
        s.stop()
