"""vqs.Client's lean transport: one persistent socket per thread, failures as ServerUnreachable."""

from __future__ import annotations

import socket
import threading

import pytest

import vqs
from vqs.errors import InvalidName, ServerUnreachable


def _one_shot_server(answers: list[bytes]):
    """A raw socket server on 127.0.0.1 answering each request of one connection with the
    next of ``answers`` (closing the connection after the last)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def run():
        conn, _ = srv.accept()
        with conn:
            for a in answers:
                buf = b""
                while b"\r\n\r\n" not in buf:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                conn.sendall(a)
        srv.close()

    threading.Thread(target=run, daemon=True).start()
    return f"http://127.0.0.1:{srv.getsockname()[1]}"


def test_threads_share_no_connection_and_scale(base_url, unique):
    with vqs.Client(base_url) as c:
        c.create_topic(unique, partitions=1)
        p = c.producer()
        out: list = []

        def w():
            out.extend(p.send(unique, b"x", partition=0).offset for _ in range(50))

        ts = [threading.Thread(target=w) for _ in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert sorted(out) == list(range(400))
        import gc

        gc.collect()
        t = c._transport
        pool = t._native._conns if t._native else t._lean._conns
        assert len(pool._all) <= 1  # the finished threads' connections are closed


def test_no_server_is_server_unreachable():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with vqs.Client(f"http://127.0.0.1:{port}", timeout=2) as c:
        with pytest.raises(ServerUnreachable) as ei:
            c.producer().send("t", b"x")
        assert f"127.0.0.1:{port}" in str(ei.value)
        with pytest.raises(ServerUnreachable):
            c.queue("q")


@pytest.mark.parametrize("answer", [b"garbage\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab", b""])
def test_broken_answer_is_server_unreachable(answer):
    url = _one_shot_server([answer])
    with vqs.Client(url, native=False, timeout=5) as c, pytest.raises(ServerUnreachable):
        c.topics()


def test_chunked_answer_then_reuse_then_bad_json():
    body = b'{"topics": ["a"]}'
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
    url = _one_shot_server([chunked, b"HTTP/1.1 200 OK\r\nContent-Length: 16\r\n\r\n" + b'{"topics": ["b"]}'[:16]])
    with vqs.Client(url, native=False, timeout=5) as c:
        assert c.topics() == ["a"]
        with pytest.raises(vqs.VQSError):  # the connection was reused; a 200 that is not JSON is refused
            c.topics()


def test_server_restart_between_requests(tmp_path):
    from vqs_server_proc import ServerProcess

    s = ServerProcess(tmp_path / "d").start()
    try:
        with vqs.Client(s.url, native=False) as c:
            c.create_topic("t")
            assert c.producer().send("t", b"1", partition=0).offset == 0
            s.stop()
            s.start()
            # the idle connection the old server closed is not written to: the send goes through
            assert c.producer().send("t", b"2", partition=0).offset == 1
    finally:
        s.stop()


def test_invalid_names_still_refused_before_sending(base_url):
    with vqs.Client(base_url) as c:
        with pytest.raises(InvalidName):
            c.producer().send("../x", b"x")
        with pytest.raises(InvalidName):
            c.queue("a b")


# ------------------------------------------------------------- the wire, scripted
class _Scripted:
    """A raw HTTP server on 127.0.0.1 playing ``script``: one list of actions per connection it
    accepts, in order. Each action follows one whole request read (head and Content-Length
    body): bytes are sent as the answer; ``HOLD`` answers nothing and waits for the client to
    close the connection. A connection is closed after its last action (``closed[i]`` is set
    then). ``requests`` records (connection number, request line, body) of each request."""

    HOLD = "hold"

    def __init__(self, script: list):
        self.script = script
        self.requests: list = []
        self.closed = [threading.Event() for _ in script]
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(4)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.srv.getsockname()[1]}"

    @staticmethod
    def _request(conn, buf: bytes):
        while b"\r\n\r\n" not in buf:
            chunk = conn.recv(65536)
            if not chunk:
                return None, None, b""
            buf += chunk
        head, _, buf = buf.partition(b"\r\n\r\n")
        n = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                n = int(v)
        while len(buf) < n:
            buf += conn.recv(65536)
        return head.split(b"\r\n")[0], buf[:n], buf[n:]

    def _run(self):
        for i, actions in enumerate(self.script):
            conn, _ = self.srv.accept()
            with conn:
                buf = b""
                for a in actions:
                    line, body, buf = self._request(conn, buf)
                    if line is None:
                        break
                    self.requests.append((i, line, body))
                    if a == self.HOLD:
                        while conn.recv(65536):  # until the client gives up and closes
                            pass
                        break
                    conn.sendall(a)
            self.closed[i].set()
        self.srv.close()


def _ok(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%s\r\n%s" % (
        len(body), extra, body)


_PRODUCED = b'{"count":1,"ranges":[{"partition":0,"base_offset":%d,"count":1}]}'


@pytest.fixture
def scripted():
    made = []

    def make(script):
        s = _Scripted(script)
        made.append(s)
        return s

    yield make
    for s in made:
        s.thread.join(10)
        if s.thread.is_alive():  # a test that failed before its script ended: wake the accept
            s.srv.shutdown(socket.SHUT_RDWR)


def test_answer_read_in_small_pieces(scripted, monkeypatch):
    """An answer that arrives a few bytes at a time (head, body, chunks, trailers) is read whole."""
    from vqs.client import lean

    monkeypatch.setattr(lean, "_READ", 5)
    body = b'{"topics": ["a", "b"]}'
    chunked = (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nx-extra: 1\r\n\r\n"
               + b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (body[:7], body[7:])) + b"0\r\nx-trailer: y\r\n\r\n")
    s = scripted([[_ok(_PRODUCED % 7), chunked, _ok(body)]])
    with vqs.Client(s.url, native=False, timeout=10) as c:
        assert c.producer().send("t", b"v").offset == 7
        assert c.topics() == ["a", "b"]
        assert c.topics() == ["a", "b"]
    assert [i for i, *_ in s.requests] == [0, 0, 0]  # one connection, kept


def test_connection_close_idle_close_and_stray_bytes_open_a_new_connection(scripted):
    """An answer with Connection: close, a connection the server closed while idle, and bytes
    after an answer that no request asked for: the next request goes on a new connection
    (never written to the old one)."""
    s = scripted([[_ok(_PRODUCED % 0, b"connection: close\r\n")],
                  [_ok(_PRODUCED % 1)],  # then closed by the server while idle
                  # stray bytes after the answer (the connection stays open: it must not be reused)
                  [_ok(_PRODUCED % 2) + b"HTTP/1.1 200 OK\r\n", _ok(_PRODUCED % 99)],
                  [_ok(_PRODUCED % 3)]])
    with vqs.Client(s.url, native=False, timeout=10) as c:
        p = c.producer()
        assert [p.send("t", b"v").offset for _ in range(2)] == [0, 1]
        assert s.closed[1].wait(10)
        assert [p.send("t", b"v").offset for _ in range(2)] == [2, 3]
    assert [i for i, *_ in s.requests] == [0, 1, 2, 3]


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n" + b"x" * 10,  # closed mid-body
    b"HTTP/1.1 200 OK\r\ncontent-le",  # closed mid-head
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nab",  # closed mid-chunk
])
def test_closed_mid_answer_is_server_unreachable_then_reconnects(scripted, answer):
    s = scripted([[answer], [_ok(_PRODUCED % 5)]])
    with vqs.Client(s.url, native=False, timeout=10) as c:
        p = c.producer()
        with pytest.raises(ServerUnreachable):
            p.send("t", b"v")
        assert p.send("t", b"v").offset == 5


def test_no_answer_within_the_timeout(scripted):
    s = scripted([[_Scripted.HOLD], [_ok(b'{"topics": []}')]])
    with vqs.Client(s.url, native=False, timeout=0.5) as c:
        with pytest.raises(ServerUnreachable, match="timed out"):
            c.producer().send("t", b"v")
        assert c.topics() == []  # the timed-out connection was dropped: a new one


@pytest.mark.parametrize("status,code", [(413, "body_too_large"), (429, "too_many_requests"),
                                         (503, "shutting_down")])
def test_refusals_on_the_lean_paths_are_remote_errors(scripted, status, code):
    """A 413/429/503 answer to a one-message produce, queue send, receive or delete raises
    RemoteError with the status and the server's code (never a transport error)."""
    from vqs.client.queues import RemoteQueue

    err = b'{"error": {"code": "%s", "message": "refused", "field": "body"}}' % code.encode()
    answer = b"HTTP/1.1 %d X\r\ncontent-type: application/json\r\ncontent-length: %d\r\nretry-after: 1\r\n\r\n%s" % (
        status, len(err), err)
    s = scripted([[answer] * 4])
    with vqs.Client(s.url, native=False, timeout=10) as c:
        q = RemoteQueue(c._transport, "q")
        for call in (lambda: c.producer().send("t", b"v"), lambda: q.send(b"v"), lambda: q.receive(1),
                     lambda: q.delete("handle")):
            with pytest.raises(vqs.errors.RemoteError) as ei:
                call()
            assert (ei.value.status, ei.value.code, ei.value.field) == (status, code, "body")
    assert [line.split()[1] for _, line, _ in s.requests] == [
        b"/topics/t/messages", b"/queues/q/messages", b"/queues/q/receive", b"/queues/q/delete"]


def test_one_message_requests_are_the_general_paths_documents(scripted):
    """The one-message shortcuts send what the general path sends (the same JSON documents,
    the same binary batch) and read the answers alike."""
    import json

    from vqs.client.queues import RemoteQueue
    from vqs.client.topics import batch_body, produce_columns

    s = scripted([[_ok(_PRODUCED % 3), _ok(b'{"message_ids": ["m1"]}'), _ok(b'{"message_ids": ["m2"]}'),
                   _ok(b'{"messages": []}'), _ok(b'{"deleted": 1, "failed": []}'), _ok(b"not json")]])
    with vqs.Client(s.url, native=False, timeout=10) as c:
        md = c.producer().send("t", b"v", partition=0)
        assert (md.topic, md.partition, md.offset) == ("t", 0, 3)
        q = RemoteQueue(c._transport, "q")
        assert q.send(b"\x00\xff") == "m1"
        assert q.send('t\u00e9xt "q"') == "m2"
        assert q.receive(3) == []
        q.delete('h"1')
        with pytest.raises(vqs.errors.RemoteError, match="not a produce answer"):
            c.producer().send("t", b"v")
    assert s.requests[0][1:] == (b"POST /topics/t/messages?partition=0 HTTP/1.1",
                                 batch_body(*produce_columns([b"v"], None, None, None)))
    assert [json.loads(b) for _, _, b in s.requests[1:5]] == [
        {"messages": [{"body_b64": "AP8="}]}, {"messages": [{"body": 't\u00e9xt "q"'}]},
        {"max_messages": 3}, {"receipt_handles": ['h"1']}]


def test_a_server_without_a_native_port_is_asked_once(scripted):
    """The Client asks /health for a native port at its first request, once: an answer without
    one (or one that is not VQS's) leaves every request on HTTP."""
    s = scripted([[_ok(b'{"status": "ok"}'), _ok(_PRODUCED % 0), _ok(_PRODUCED % 1)]])
    with vqs.Client(s.url, timeout=10) as c:
        assert [c.producer().send("t", b"v").offset for _ in range(2)] == [0, 1]
        assert c._transport._native is False
    assert [line.split()[:2] for _, line, _ in s.requests] == [
        [b"GET", b"/health"], [b"POST", b"/topics/t/messages"], [b"POST", b"/topics/t/messages"]]
    s2 = scripted([[_ok(b"[not json"), _ok(_PRODUCED % 5)]])
    with vqs.Client(s2.url, timeout=10) as c:
        assert c.producer().send("t", b"v").offset == 5
        assert c._transport._native is False
