"""``vqs queue send NAME`` with lines on stdin: typed lines go out as typed, piped ones in batches;
an error names the line and what was sent before it, Ctrl-C says what was sent and what was read
but not sent (real processes against a real server)."""

from __future__ import annotations

import os
import pty
import re
import signal
import subprocess
import sys
import time

import httpx


def _visible(srv, queue: str) -> int:
    r = httpx.get(f"{srv.url}/queues/{queue}")
    return int(r.json()["attributes"]["ApproximateNumberOfMessages"])


def _create(srv, queue: str) -> None:
    assert httpx.post(f"{srv.url}/queues", json={"name": queue}).status_code in (200, 201)


def _vqs(*args):
    return [sys.executable, "-m", "vqs.cli", *map(str, args)]


def _wait_for(cond, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_typed_lines_are_sent_as_typed_and_ctrl_c_says_what_was_sent(srv):
    _create(srv, "typed-q")
    master, slave = pty.openpty()
    proc = subprocess.Popen(_vqs("queue", "send", "typed-q", "--url", srv.url), stdin=slave, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    os.close(slave)
    try:
        for i in range(3):
            os.write(master, f"job {i}\n".encode())
        _wait_for(lambda: _visible(srv, "typed-q") == 3)  # sent before any EOF
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        os.close(master)
    assert proc.returncode == 130
    assert "interrupted: sent 3 message(s) to typed-q; 0 read but not sent" in err.decode(), err
    assert len(out.splitlines()) == 3  # a message id per message sent


def test_ctrl_c_on_piped_input_says_exactly_what_is_stored(srv):
    _create(srv, "piped-q")
    proc = subprocess.Popen(_vqs("queue", "send", "piped-q", "--url", srv.url), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for i in range(205):
        proc.stdin.write(f"v{i}\n".encode())
    proc.stdin.flush()
    _wait_for(lambda: _visible(srv, "piped-q") >= 200)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    m = re.search(rb"interrupted: sent (\d+) message\(s\) to piped-q; (\d+) read but not sent", err)
    assert m, err
    sent, pending = int(m[1]), int(m[2])
    assert sent == _visible(srv, "piped-q") == len(out.splitlines()) and sent + pending <= 205


def test_a_refused_line_is_named_with_what_was_sent_before_it(srv, tmp_path):
    _create(srv, "lines-q")
    lines = [f"m{i}".encode() for i in range(1, 30)]
    lines[14] = b"y" * 1_100_000  # line 15: over the queue's 1 MiB
    f = tmp_path / "in.txt"
    f.write_bytes(b"\n".join(lines) + b"\n")
    with open(f, "rb") as stdin:
        p = subprocess.run(_vqs("queue", "send", "lines-q", "--url", srv.url), stdin=stdin, capture_output=True,
                           timeout=120)
    assert p.returncode == 1
    err = p.stderr.decode()
    assert err.startswith("error: line 15: ") and err.rstrip().endswith("sent 14 message(s) to lines-q before it")
    assert "Traceback" not in err and ".;" not in err
    assert _visible(srv, "lines-q") == 14 == len(p.stdout.splitlines())
    p = subprocess.run(_vqs("queue", "send", "lines-q", "--url", srv.url), input=b"ok\n\xff\xfe\nafter\n",
                       capture_output=True, timeout=120)
    assert p.returncode == 1 and p.stderr.decode().startswith("error: line 2: not UTF-8 text"), p.stderr
    assert b"sent 1 message(s) to lines-q before it" in p.stderr


def test_a_ctrl_c_during_a_request_is_raised_after_what_it_stored_is_counted():
    """The deferral itself (stream.Interrupt), in process: a SIGINT that comes while a request is
    in flight waits until the caller has recorded the request's result; one that comes while
    nothing is sent is raised at once."""
    import pytest

    from vqs.cli.stream import Interrupt

    recorded = []

    def request():
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the request is in flight
        return ["id-1", "id-2"]

    with Interrupt() as intr:
        with pytest.raises(KeyboardInterrupt):
            intr.send(request, recorded.extend)
        assert recorded == ["id-1", "id-2"]  # counted before the interrupt went up
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)  # nothing in flight: at once
            time.sleep(5)
