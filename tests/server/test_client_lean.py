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
        assert len(c._transport._lean._all) == 1  # the finished threads' connections are closed


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
    with vqs.Client(url, timeout=5) as c, pytest.raises(ServerUnreachable):
        c.topics()


def test_chunked_answer_then_reuse_then_bad_json():
    body = b'{"topics": ["a"]}'
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
    url = _one_shot_server([chunked, b"HTTP/1.1 200 OK\r\nContent-Length: 16\r\n\r\n" + b'{"topics": ["b"]}'[:16]])
    with vqs.Client(url, timeout=5) as c:
        assert c.topics() == ["a"]
        with pytest.raises(vqs.VQSError):  # the connection was reused; a 200 that is not JSON is refused
            c.topics()


def test_server_restart_between_requests(tmp_path):
    from vqs_server_proc import ServerProcess

    s = ServerProcess(tmp_path / "d").start()
    try:
        with vqs.Client(s.url) as c:
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
