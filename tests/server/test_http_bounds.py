"""HTTP connection bounds (vqs/server/http_bounds.py), attacked with raw sockets on a real server.

Before: nothing timed out a request that never finished its headers, and
uvicorn's ``limit_concurrency`` counted idle connections, so ``max_connections``
idle or half-sent connections made every other client get 503, indefinitely.
"""

from __future__ import annotations

import socket
import time

import httpx
import pytest
from certs import needs_openssl, self_signed
from vqs_server_proc import ServerProcess


@pytest.fixture(scope="module")
def bounded(tmp_path_factory):
    d = tmp_path_factory.mktemp("vqs-bounds") / "data"
    s = ServerProcess(d, "--http-header-timeout-s", "1", "--max-connections", "30",
                      "--max-connections-per-client", "20").start()
    yield s
    assert s.stop() == 0, s.log()


def _connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    c = socket.socket()
    c.bind((source, 0))
    c.connect(("127.0.0.1", port))
    c.settimeout(10)
    return c


def _read_all(c: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            chunk = c.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        out += chunk
    return out


def test_half_sent_headers_get_408_and_are_closed(bounded):
    c = _connect(bounded.port)
    c.sendall(b"GET /topics HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: ")
    t0 = time.monotonic()
    data = _read_all(c)  # the server closes it
    assert time.monotonic() - t0 < 5
    assert data.startswith(b"HTTP/1.1 408 "), data
    c.close()


def _send_slowly(c: socket.socket, data: bytes, piece: int = 1024) -> None:
    """``data`` in pieces, each after the one before could be read (so none is left unread when
    the server closes: its answer is not lost to a reset)."""
    for i in range(0, len(data), piece):
        c.sendall(data[i:i + piece])
        time.sleep(0.002)


def test_a_head_that_never_ends_gets_431_before_the_deadline(bounded):
    """A header that goes on past max_header_bytes (16 KiB) is refused as it arrives: 431 and
    closed, long before the header deadline (1 s here); the parser would hold it whole."""
    c = _connect(bounded.port)
    t0 = time.monotonic()
    head = b"GET /topics HTTP/1.1\r\nhost: 127.0.0.1\r\nx-big: "
    _send_slowly(c, head + b"a" * ((16 << 10) + 100 - len(head)))  # nothing sent after the piece over it
    data = _read_all(c)
    assert data.startswith(b"HTTP/1.1 431 "), data
    assert b"max_header_bytes" in data and time.monotonic() - t0 < 0.9
    c.close()
    # a URL that never ends, likewise
    c = _connect(bounded.port)
    _send_slowly(c, b"GET /" + b"a" * ((16 << 10) + 100))
    assert _read_all(c).startswith(b"HTTP/1.1 431 ")
    c.close()


def test_a_head_behind_a_large_body_in_one_read_is_not_refused(bounded):
    """A request pipelined behind one with a body larger than max_header_bytes, sent in the same
    write, is served: only the head's own bytes count against the limit."""
    httpx.post(bounded.url + "/topics", json={"name": "piped"}).raise_for_status()
    body = b'{"messages":[{"value":"' + b"v" * (40 << 10) + b'"}]}'
    first = (b"POST /topics/piped/messages HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
             b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    c = _connect(bounded.port)
    c.sendall(first + b"GET /health/live HTTP/1.1\r\nHost: localhost\r\n")
    time.sleep(0.2)  # the server has read both: the second head is incomplete
    c.sendall(b"Connection: close\r\n\r\n")
    data = _read_all(c)
    assert data.count(b"HTTP/1.1 200 OK") == 2, data
    c.close()


def test_a_silent_connection_is_closed(bounded):
    c = _connect(bounded.port)
    t0 = time.monotonic()
    assert _read_all(c) == b""
    assert time.monotonic() - t0 < 5
    c.close()


def test_idle_connections_give_way_to_a_new_one(bounded):
    """20 silent connections from one address (its cap): a new one takes the place of the
    oldest once it is a second old, and a request from the same address is served."""
    idle = [_connect(bounded.port) for _ in range(20)]
    try:
        young = _connect(bounded.port)  # a burst does not close its own: refused
        assert _read_all(young).startswith(b"HTTP/1.1 503 ")
        young.close()
        time.sleep(1.1)  # old enough to give way (EVICT_AFTER_S)
        idle += [_connect(bounded.port) for _ in range(10)]
        for c in idle[:10]:  # the oldest, closed to make room, unanswered
            assert _read_all(c) == b""
        c = _connect(bounded.port)
        c.sendall(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
        assert _read_all(c).startswith(b"HTTP/1.1 200 ")
        c.close()
    finally:
        for c in idle:
            c.close()


def test_requests_in_progress_hold_their_places_and_another_address_is_served(bounded):
    """20 long polls from one address (cap 20): a 21st connection from it is 503 with
    Retry-After; another address is served."""
    assert httpx.post(bounded.url + "/topics", json={"name": "held"}).status_code in (201, 409)
    polls = []
    try:
        for _ in range(20):
            c = _connect(bounded.port)
            c.sendall(b"GET /topics/held/messages?offset=0&wait_ms=8000 HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
            polls.append(c)
        time.sleep(0.3)  # the polls are read and waiting (nothing to wait on from outside)
        c = _connect(bounded.port)
        data = _read_all(c)
        assert data.startswith(b"HTTP/1.1 503 ") and b"retry-after: 1" in data.lower(), data
        c.close()
        c = _connect(bounded.port, "127.0.0.2")
        c.sendall(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
        assert _read_all(c).startswith(b"HTTP/1.1 200 ")
        c.close()
    finally:
        for c in polls:
            c.close()


def test_a_complete_request_is_not_cut_by_the_deadline(bounded):
    """A keep-alive connection that sends whole requests is served past the header deadline."""
    c = _connect(bounded.port)
    for _ in range(3):
        c.sendall(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        data = b""
        while b"\r\n\r\n" not in data:
            data += c.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 "), data
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        while len(body) < length:
            body += c.recv(65536)
        time.sleep(0.6)
    c.close()


def _head_and_body(c: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = c.recv(65536)
        assert chunk, data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    while len(body) < length:
        body += c.recv(65536)
    return head, body


@pytest.mark.parametrize("target", [b"AmazonSQS.SendMessageBatch", None])
def test_an_sqs_body_over_the_largest_sqs_request_is_413_before_it_is_read(server, target):
    """Before: an SQS request (its signature not yet checked) could make the server hold
    max_body_bytes (64 MiB). Now 4.25 MiB at most, refused from the Content-Length."""
    c = _connect(server.port)
    extra = b"x-amz-target: " + target + b"\r\ncontent-type: application/x-amz-json-1.0\r\n" if target else \
        b"content-type: application/x-www-form-urlencoded\r\n"
    c.sendall(b"POST / HTTP/1.1\r\nhost: 127.0.0.1\r\n" + extra + b"content-length: 10485760\r\n\r\n")
    head, body = _head_and_body(c)
    assert head.startswith(b"HTTP/1.1 413 "), head
    assert b"x-amzn-query-error: RequestEntityTooLarge" in head
    assert b"RequestEntityTooLarge" in body
    c.close()


def test_a_chunked_sqs_body_is_counted_as_it_is_read(server):
    c = _connect(server.port)
    c.sendall(b"POST / HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/x-www-form-urlencoded\r\n"
              b"transfer-encoding: chunked\r\n\r\n")
    chunk = b"a" * (1 << 20)
    try:
        for _ in range(8):
            c.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass
    head, body = _head_and_body(c)
    assert head.startswith(b"HTTP/1.1 413 "), head
    assert b"RequestEntityTooLarge" in body
    c.close()


@needs_openssl
def test_a_tls_handshake_that_never_ends_is_closed(tmp_path):
    """Before: a connection that never finished its TLS handshake was held for asyncio's 60 s."""
    cert, key = self_signed(tmp_path)
    s = ServerProcess(tmp_path / "data", "--tls-cert", cert, "--tls-key", key, "--http-header-timeout-s", "1").start()
    try:
        c = _connect(s.port)
        c.sendall(b"\x16\x03\x01")  # the start of a ClientHello, never finished
        t0 = time.monotonic()
        assert _read_all(c) == b""
        assert time.monotonic() - t0 < 5
        c.close()
    finally:
        assert s.stop() == 0, s.log()


@pytest.mark.parametrize("path", [b"/topics/t/messages", b"/topics"])  # the fast path, the ASGI path
def test_a_body_that_stops_arriving_gets_408_and_is_closed(bounded, path):
    c = _connect(bounded.port)
    c.sendall(b"POST " + path + b" HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
              b"content-length: 100\r\n\r\n{\"mess")
    t0 = time.monotonic()
    data = _read_all(c)
    assert time.monotonic() - t0 < 6
    assert data.startswith(b"HTTP/1.1 408 "), data
    c.close()


@pytest.mark.parametrize("path,body,status", [
    (b"/topics", b'{"name": "slow-body-topic"}', b"201"),  # the ASGI path
    (b"/topics/slow-body-topic/messages", b'{"messages": [{"value": "v"}]}', b"200")])  # the fast path
def test_a_slow_body_that_keeps_arriving_is_served(bounded, path, body, status):
    c = _connect(bounded.port)
    c.sendall(b"POST " + path + b" HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
              b"content-length: %d\r\n\r\n" % len(body))
    for i in range(0, len(body), 9):  # 0.7 s a part: more than the 1 s deadline in all
        time.sleep(0.7)
        c.sendall(body[i:i + 9])
    head, _ = _head_and_body(c)
    assert head.startswith(b"HTTP/1.1 " + status), head
    c.close()


def test_a_stalled_body_is_cut_off_one_timeout_after_its_last_part(tmp_path):
    """The body deadline counts from the last part that came: a body that stalls after a part
    is 408 one timeout (and at most a sweep: half a second here) later. Counting by a "progress
    since the last check" flag gave it up to twice that (2 s here: a part just after a check
    was cut off 3.4 to 4.4 s after it)."""
    s = ServerProcess(tmp_path / "data", "--http-header-timeout-s", "2").start()
    try:
        c = _connect(s.port)
        c.sendall(b"POST /topics HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                  b"content-length: 100\r\n\r\n{")
        time.sleep(1.0)
        c.sendall(b'"')
        time.sleep(1.6)  # past the first check (2 to 2.5 s from the start), whenever it ran
        c.sendall(b"a")
        last = time.monotonic()
        data = _read_all(c)
        took = time.monotonic() - last
        assert data.startswith(b"HTTP/1.1 408 "), data
        assert 1.9 < took < 3.1, took
        c.close()
    finally:
        assert s.stop() == 0, s.log()
