"""``vqs produce``: typed lines go out as typed; an error or Ctrl-C says exactly what was sent,
nothing is half-sent, and ``--skip`` resumes (real processes against a real server)."""

from __future__ import annotations

import os
import pty
import re
import signal
import subprocess
import sys
import time

import httpx


def _end(srv, topic: str) -> int:
    r = httpx.get(f"{srv.url}/topics/{topic}/offsets")
    return sum(p["end_offset"] for p in r.json()["partitions"])


def _create(srv, topic: str) -> None:
    assert httpx.post(f"{srv.url}/topics", json={"name": topic, "partitions": 1}).status_code == 201


def _vqs(*args):
    return [sys.executable, "-m", "vqs.cli", *map(str, args)]


def _wait_for(cond, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_an_oversized_line_names_its_line_and_skip_resumes(srv, tmp_path):
    _create(srv, "big")
    f = tmp_path / "in.txt"
    lines = [f"m{i}".encode() for i in range(1, 1501)]
    lines[1200] = b"x" * (2 << 20)  # line 1,201
    f.write_bytes(b"\n".join(lines) + b"\n")
    p = subprocess.run(_vqs("produce", "big", "--file", f, "--url", srv.url), capture_output=True, timeout=120)
    assert p.returncode == 1
    err = p.stderr.decode()
    assert err.startswith("error: line 1201: ") and "sent 1200 message(s) to big" in err, err
    assert "--skip 1200" in err and "Traceback" not in err
    assert _end(srv, "big") == 1200  # everything before the bad line, nothing after it
    lines[1200] = b"fixed"
    f.write_bytes(b"\n".join(lines) + b"\n")
    p = subprocess.run(_vqs("produce", "big", "--file", f, "--url", srv.url, "--skip", 1200), capture_output=True,
                       timeout=120)
    assert p.returncode == 0 and b"sent 300 message(s)" in p.stderr
    got = subprocess.run(_vqs("consume", "big", "--url", srv.url), capture_output=True, timeout=120).stdout
    assert got.splitlines() == lines  # once each, in order


def test_typed_lines_are_sent_as_typed_and_ctrl_c_says_what_was_sent(srv):
    _create(srv, "typed")
    master, slave = pty.openpty()
    proc = subprocess.Popen(_vqs("produce", "typed", "--url", srv.url), stdin=slave, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    os.close(slave)
    try:
        for i in range(5):
            os.write(master, f"line {i}\n".encode())
        _wait_for(lambda: _end(srv, "typed") == 5)  # stored before any EOF or 500th line
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    finally:
        os.close(master)
    assert proc.returncode == 130
    assert "interrupted: sent 5 message(s) to typed; 0 read but not sent" in err.decode(), err


def test_ctrl_c_on_piped_input_says_exactly_what_is_stored(srv):
    _create(srv, "piped")
    proc = subprocess.Popen(_vqs("produce", "piped", "--url", srv.url, "--batch-size", 100), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for i in range(2620):
        proc.stdin.write(f"v{i}\n".encode())
    proc.stdin.flush()
    _wait_for(lambda: _end(srv, "piped") >= 2600)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    m = re.search(rb"interrupted: sent (\d+) message\(s\) to piped; (\d+) read but not sent", err)
    assert m, err
    sent, pending = int(m[1]), int(m[2])
    assert sent == _end(srv, "piped") and sent + pending <= 2620
