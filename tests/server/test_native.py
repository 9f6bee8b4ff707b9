"""The native protocol (``--native-port``, docs/native.md): vqs.Client over it, the same answers as
HTTP, its token, and its bounds against clients that misbehave, with raw sockets on a real server.

The session server has a native port too (conftest.py), so every vqs.Client test against it goes
over the native protocol; this file checks what only the native port has.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time

import httpx
import pytest
from socket_reads import recv_exact
from vqs_server_proc import ServerProcess, free_port

import vqs
from vqs import native_wire as W
from vqs.errors import QueueDoesNotExist, RemoteError


def _connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def _answer(s: socket.socket):
    head = recv_exact(s, 4)
    body = None if head is None else recv_exact(s, W.LENGTH.unpack(head)[0])
    return None if body is None else W.decode_answer(body)


def _closed(s: socket.socket, within: float) -> bool:
    """The server closed ``s`` within ``within`` seconds (whatever it sent first is read)."""
    s.settimeout(within)
    try:
        while s.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _request(s, method, target, ctype=None, body=b"", accept=W.ACCEPT_JSON):
    s.sendall(W.request_head(method, target, ctype, accept, len(body)) + body)
    return _answer(s)


def _native_requests(url: str) -> float:
    text = httpx.get(url + "/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vqs_http_requests_total{") and 'api="native"' in line)


def test_client_goes_native_and_gets_what_http_gets(server, unique):
    before = _native_requests(server.url)
    answers = {}
    for native in (True, False):
        topic, queue = f"{unique}-t{int(native)}", f"{unique}-q{int(native)}"
        with vqs.Client(server.url, native=native) as c:
            c.create_topic(topic, partitions=2)
            p = c.producer()
            offsets = [p.send(topic, b"v%d" % i, partition=0).offset for i in range(3)]
            p.send_batch(topic, [b"a", b"b"], keys=[b"k1", b"k2"])
            batches, nxt, _ = c.read_batches(topic, 0, 0, max_records=10)
            q = c.create_queue(queue)
            q.send(b"hello")
            got = q.receive(1)
            q.delete(got[0].receipt_handle)
            with pytest.raises(QueueDoesNotExist):
                c.queue(f"{unique}-none")
            answers[native] = (offsets, nxt, [r.value for b in batches for r in b.records()],
                               [m.body for m in got], sorted(t for t in c.topics() if t.startswith(unique)))
            assert (c._transport._native.__class__.__name__ == "NativeClient") is native
    assert answers[True][:4] == answers[False][:4] == ([0, 1, 2], 3, [b"v0", b"v1", b"v2"], [b"hello"])
    assert _native_requests(server.url) - before >= 12  # the native Client's requests, counted


def test_native_answers_as_http_for_errors_and_the_frameworks_checks(server, unique):
    """A body the hot route's lean checks hand to the framework, and an unknown route's 404:
    the status and body HTTP answers."""
    port = int(httpx.get(server.url + "/health").json()["native_port"])
    with httpx.Client(base_url=server.url, headers={"x-vqs-client": "t"}) as http:
        http.post("/queues", json={"name": unique}).raise_for_status()
        bad = b'{"messages": 5}'
        h = http.post(f"/queues/{unique}/messages", content=bad, headers={"content-type": "application/json"})
        missing = http.get(f"/topics/{unique}-none")
    s = _connect(port)
    s.sendall(W.hello(b""))
    assert _answer(s)[0] == 200
    status, headers, body = _request(s, "POST", f"/queues/{unique}/messages", "application/json", bad)
    assert (status, json.loads(body)) == (h.status_code, h.json())
    status, _, body = _request(s, "GET", f"/topics/{unique}-none")
    assert (status, json.loads(body)) == (missing.status_code, missing.json())
    status, _, body = _request(s, "GET", "/console")  # HTTP's alone
    assert status == 404 and b"native protocol" in body
    s.close()


def test_queue_requests_answered_directly_answer_as_http(server, unique):
    """The native port answers a plain queue send, a receive that would not wait and a
    one-handle delete without a task (native_requests.direct_queue): status and body as HTTP's,
    errors and the requests it leaves to the task (a long poll, the framework's checks)
    included, each counted."""
    port = int(httpx.get(server.url + "/health").json()["native_port"])
    requests = [
        ("POST", f"/queues/{unique}/messages", b'{"messages": [{"body": "a"}]}'),
        ("POST", f"/queues/{unique}/messages", b'{"messages": [{"body_b64": "**"}]}'),  # 400, the core's
        ("POST", f"/queues/{unique}/messages", b'{"messages": [{"body": "a", "nope": 1}]}'),  # the framework's
        ("POST", f"/queues/{unique}-none/messages", b'{"messages": [{"body": "a"}]}'),  # 404
        ("POST", f"/queues/{unique}/delete", b'{"receipt_handles": ["not-a-handle"]}'),  # 200, failed
        ("POST", f"/queues/{unique}/delete", b'{"receipt_handles": []}'),  # the framework's
        ("POST", f"/queues/{unique}-empty/receive", b'{"max_messages": 1}'),  # would not wait: direct
        ("POST", f"/queues/{unique}-empty/receive", b'{"max_messages": 1, "wait_seconds": 0.2}'),  # a long poll
        ("POST", f"/queues/{unique}-none/receive", b'{"max_messages": 1}'),  # 404
        ("POST", f"/queues/{unique}/receive", b'{"max_messages": 0}'),  # the framework's
    ]
    with httpx.Client(base_url=server.url, headers={"x-vqs-client": "t"}) as http:
        http.post("/queues", json={"name": unique}).raise_for_status()
        http.post("/queues", json={"name": f"{unique}-empty"}).raise_for_status()
        want = [http.post(t, content=b, headers={"content-type": "application/json"}) for _, t, b in requests]
    before = _native_requests(server.url)
    s = _connect(port)
    s.sendall(W.hello(b""))
    assert _answer(s)[0] == 200
    for (method, target, body), h in zip(requests, want):
        status, _, got = _request(s, method, target, "application/json", body)
        doc, hdoc = json.loads(got), h.json()
        if "message_ids" in hdoc:  # (a new id each)
            doc, hdoc = len(doc["message_ids"]), len(hdoc["message_ids"])
        assert (status, doc) == (h.status_code, hdoc), (target, body)
    with vqs.Client(server.url, native=False) as c:
        m = c.queue(unique).receive(1)[0]
    status, _, got = _request(s, "POST", f"/queues/{unique}/delete", "application/json",
                              json.dumps({"receipt_handles": [m.receipt_handle]}).encode())
    assert (status, json.loads(got)) == (200, {"deleted": 1, "failed": []})
    s.close()
    assert _native_requests(server.url) - before == len(requests) + 1


def test_a_batch_whose_offsets_go_back_is_refused_over_native_too(server, unique):
    """The direct produce (no task, the coalescer) checks a body as HTTP does: a batch that would
    read as far more values than it holds is 400 ``corrupt_batch``, nothing appended."""
    from test_rest import amplifying_batch

    port = int(httpx.get(server.url + "/health").json()["native_port"])
    httpx.post(server.url + "/topics", json={"name": unique}, headers={"x-vqs-client": "t"}).raise_for_status()
    s = _connect(port)
    s.sendall(W.hello(b""))
    assert _answer(s)[0] == 200
    status, _, body = _request(s, "POST", f"/topics/{unique}/messages", "application/vnd.vqs.batch",
                               amplifying_batch())
    assert status == 400 and json.loads(body)["error"]["code"] == "corrupt_batch", body
    status, _, body = _request(s, "GET", f"/topics/{unique}")
    assert json.loads(body)["partition_info"][0]["end_offset"] == 0
    s.close()


@pytest.fixture(scope="module")
def strict(tmp_path_factory):
    """A server with a token, a small body limit and short native deadlines."""
    d = tmp_path_factory.mktemp("native-strict") / "data"
    s = ServerProcess(d, "--token", "s3cret", "--native-port", str(free_port()),
                      env={"VQS_HTTP_HEADER_TIMEOUT_S": "1", "VQS_NATIVE_FRAME_TIMEOUT_S": "1",
                           "VQS_NATIVE_IDLE_TIMEOUT_S": "2", "VQS_MAX_BODY_BYTES": "100000"}).start()
    s.native_port = int(httpx.get(s.url + "/health").json()["native_port"])
    yield s
    assert s.stop() == 0, s.log()


def _hello(port: int, token: bytes = b"s3cret") -> socket.socket:
    s = _connect(port)
    s.sendall(W.hello(token))
    assert _answer(s)[0] == 200
    return s


def test_token_is_checked_at_hello(strict):
    with vqs.Client(strict.url, "s3cret") as c:
        c.create_topic("tok")
        assert c.producer().send("tok", b"x").offset == 0
        assert c._transport._native.__class__.__name__ == "NativeClient"
    with vqs.Client(strict.url, "wrong") as c, pytest.raises(RemoteError) as ei:
        c.producer().send("tok", b"x")
    assert (ei.value.status, ei.value.code) == (403, "forbidden")  # as HTTP answers it
    for token in (b"", b"wrong"):
        s = _connect(strict.native_port)
        s.sendall(W.hello(token))
        status, _, body = _answer(s)
        assert status in (401, 403) and b"s3cret" not in body
        assert _closed(s, 5)  # each guess costs a connection
    s = _connect(strict.native_port)  # a request before the HELLO: closed, unanswered
    s.sendall(W.request_head("GET", "/topics", None, 0, 0))
    assert _closed(s, 5)
    with vqs.Client(strict.url) as c, pytest.raises(RemoteError) as ei:
        c.topics()
    assert (ei.value.status, ei.value.code) == (401, "unauthorized")


@pytest.mark.parametrize("first", [
    struct.pack(">I", W.LENGTH.size + 2000) + b"\x01",  # a HELLO past the pre-auth bound
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",                 # HTTP on the native port (a huge length)
    struct.pack(">I", 0),                                 # an empty frame
    struct.pack(">I", 3) + b"\x07\x00\x00",               # an unknown kind
])
def test_bad_first_frames_close_the_connection(strict, first):
    s = _connect(strict.native_port)
    s.sendall(first)
    assert _closed(s, 5)


def test_deadlines_close_silent_and_slow_clients(strict):
    quiet = _connect(strict.native_port)  # says nothing: closed after the HELLO's deadline (1 s)
    t0 = time.monotonic()
    assert _closed(quiet, 10) and time.monotonic() - t0 < 5
    slow = _hello(strict.native_port)  # a frame begun and never finished (1 s)
    slow.sendall(struct.pack(">I", 100) + b"\x02")
    t0 = time.monotonic()
    assert _closed(slow, 10) and time.monotonic() - t0 < 5
    idle = _hello(strict.native_port)  # idle past native_idle_timeout_s (2 s)
    t0 = time.monotonic()
    assert _closed(idle, 10) and 1.5 < time.monotonic() - t0 < 6


def test_frames_past_the_body_limit_close_and_bad_requests_close(strict):
    s = _hello(strict.native_port)
    s.sendall(struct.pack(">I", 100_000 + W.MAX_TARGET + 100) + b"\x02")  # announced past max_body_bytes
    assert _closed(s, 5)
    s = _hello(strict.native_port)
    s.sendall(struct.pack(">I", 7) + b"\x02\x09\x00\x00\x00\x00\x00")  # an unknown method code
    assert _closed(s, 5)
    s = _hello(strict.native_port)
    s.sendall(struct.pack(">I", 7) + b"\x02\x00\x00\x00\x10\x00\x00")  # a target past the frame's end
    assert _closed(s, 5)
    with vqs.Client(strict.url, "s3cret") as c:  # a body past the frames goes over HTTP: its 413
        c.create_topic("big")
        with pytest.raises(vqs.VQSError) as ei:
            c.producer().send("big", b"x" * 200_000)
        assert "body" in str(ei.value) or "413" in str(ei.value) or "large" in str(ei.value)


def test_a_client_that_never_reads_its_answer_is_cut_off(strict):
    """An 8 MiB answer a client does not read: the server stops reading its requests and,
    after http_header_timeout_s (1 s here) without the client reading any of it, aborts the
    connection, so the answer's memory and the connection's slot are not held (the idle
    timeout's close waited for the buffer to drain: held until the client went away)."""
    with vqs.Client(strict.url, "s3cret") as c:
        c.create_topic("unread")
        p = c.producer()
        for _ in range(128):
            p.send_batch("unread", [b"x" * 1000] * 64)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect(("127.0.0.1", strict.native_port))
    s.sendall(W.hello(b"s3cret"))
    assert _answer(s)[0] == 200
    s.sendall(W.request_head("GET", "/topics/unread/messages?partition=0&offset=0&limit=100000"
                                    "&max_bytes=16777216", None, W.ACCEPT_BATCH, 0))
    time.sleep(4)  # reads nothing: past the 1 s deadline and a sweep, with room to spare
    got = 0
    try:
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            got += len(chunk)
    except ConnectionResetError:
        pass
    assert got < 4 << 20, got  # cut off: not the whole answer
    s.close()


def test_requests_sent_ahead_are_answered_in_order(strict):
    """A client that writes many requests before reading: answered one by one, in order."""
    s = _hello(strict.native_port)
    with vqs.Client(strict.url, "s3cret") as c:
        c.create_topic("ahead")
    body = json.dumps({"messages": [{"value": "m"}]}).encode()
    frames = b"".join(W.request_head("POST", "/topics/ahead/messages", "application/json", 0, len(body)) + body
                      for _ in range(2000))
    sender = threading.Thread(target=s.sendall, args=(frames,))
    sender.start()
    offsets = [json.loads(_answer(s)[2])["ranges"][0]["base_offset"] for _ in range(2000)]
    sender.join()
    assert offsets == list(range(2000))
    s.close()


def test_server_stops_with_native_clients_connected(tmp_path):
    s = ServerProcess(tmp_path / "d", "--native-port", str(free_port())).start()
    try:
        port = int(httpx.get(s.url + "/health").json()["native_port"])
        idle = _connect(port)
        idle.sendall(W.hello(b""))
        assert _answer(idle)[0] == 200
        with vqs.Client(s.url) as c:
            c.create_topic("t")
            c.producer().send("t", b"x")
            assert s.stop() == 0, s.log()
        assert _closed(idle, 5)
    finally:
        s.stop()


def test_native_port_settings_are_checked(tmp_path):
    from vqs.errors import ConfigError
    from vqs.server.settings import load_settings

    for over in ({"native_port": 70000}, {"native_port": 9000, "port": 9000},
                 {"native_port": 9001, "native_idle_timeout_s": 0}):
        with pytest.raises(ConfigError, match="native"):
            load_settings({"data_dir": str(tmp_path), **over}, env={}).check()


def test_many_failing_requests_sent_ahead_are_each_answered(strict):
    """Requests answered at once (a refused produce) behind one another: each answered, no
    recursion through the ones behind."""
    s = _hello(strict.native_port)
    body = b"not a batch"
    frames = b"".join(W.request_head("POST", "/topics/none/messages", "application/vnd.vqs.batch", 0, len(body))
                      + body for _ in range(3000))
    sender = threading.Thread(target=s.sendall, args=(frames,))
    sender.start()
    statuses = {_answer(s)[0] for _ in range(3000)}
    sender.join()
    assert statuses == {404}
    s.close()


def test_a_server_restarted_without_its_native_port_is_spoken_to_over_http(tmp_path):
    s = ServerProcess(tmp_path / "d", "--native-port", str(free_port())).start()
    try:
        with vqs.Client(s.url) as c:
            c.create_topic("t")
            assert c.producer().send("t", b"1", partition=0).offset == 0
            assert c._transport._native.__class__.__name__ == "NativeClient"
            assert s.stop() == 0
            s.args = []  # the same HTTP port, no native one
            s.start()
            assert c.producer().send("t", b"2", partition=0).offset == 1  # nothing lost, nothing sent twice
            assert c._transport._native is False
            assert c.producer().send("t", b"3", partition=0).offset == 2
    finally:
        s.stop()


def test_an_escaped_path_is_read_as_http_reads_it(server, unique):
    port = int(httpx.get(server.url + "/health").json()["native_port"])
    with vqs.Client(server.url) as c:
        c.create_topic(unique)
    escaped = "/topics/%" + format(ord(unique[0]), "02x") + unique[1:]
    h = httpx.get(server.url + escaped)
    s = _connect(port)
    s.sendall(W.hello(b""))
    assert _answer(s)[0] == 200
    status, _, body = _request(s, "GET", escaped)
    assert (status, json.loads(body)["name"]) == (h.status_code, h.json()["name"]) == (200, unique)
    s.close()


def test_a_large_answer_arrives_whole(server, unique):
    """An answer of many receives (a consume of 400 KB) read whole over the native port."""
    with vqs.Client(server.url) as c:
        c.create_topic(unique)
        values = [bytes([i]) * 100_000 for i in range(4)]
        c.producer().send_batch(unique, values, partition=0)
        batches, nxt, _ = c.read_batches(unique, 0, 0, max_bytes=1 << 20)
        assert [r.value for b in batches for r in b.records()] == values and nxt == 4
        assert c._transport._native.__class__.__name__ == "NativeClient"


def test_refused_connections_are_logged_a_line_a_minute_per_reason(caplog):
    """The reason's numbers (a frame's size) do not make new reasons: a client sending frames of
    every size cannot flood the log, or grow what the listener remembers."""
    from types import SimpleNamespace

    from vqs.server.native import NativeListener

    listener = SimpleNamespace(_logged={})
    with caplog.at_level("WARNING", logger="vqs.server.native"):
        for n in range(1000):
            NativeListener.bad(listener, ("127.0.0.1", n), f"a frame of {n} bytes (the limit is 1024)")
        NativeListener.bad(listener, ("127.0.0.1", 1), "no HELLO in time")
    assert len(caplog.records) == 2 and len(listener._logged) == 2


def test_a_request_the_frames_cannot_carry_goes_over_http(server, unique):
    """A target longer than a frame's bound (8 KiB; HTTP takes 16 KiB of head): sent over HTTP,
    which answers it, never the codec's error."""
    with vqs.Client(server.url) as c:
        c.create_topic(unique)
        assert c._transport._native.__class__.__name__ == "NativeClient"
        doc = c._transport.json("GET", "/topics", params={"all": "true", "x": "y" * 9000})
        assert unique in [t["name"] if isinstance(t, dict) else t for t in doc["topics"]]
        assert c._transport._native.__class__.__name__ == "NativeClient"  # still used for the rest


def test_connections_past_the_per_client_cap_are_closed_at_accept(tmp_path):
    s = ServerProcess(tmp_path / "d", "--native-port", str(free_port()),
                      env={"VQS_MAX_CONNECTIONS_PER_CLIENT": "2"}).start()
    try:
        port = int(httpx.get(s.url + "/health").json()["native_port"])
        held = [_hello(port, b"") for _ in range(2)]
        third = _connect(port)
        assert _closed(third, 5)  # refused before anything of it is read
        held[0].close()
        deadline = time.monotonic() + 5
        while True:  # a slot is free again once the server has seen the close
            again = _connect(port)
            again.sendall(W.hello(b""))
            answer = _answer(again)
            if answer is not None or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert answer is not None and answer[0] == 200
    finally:
        s.stop()
