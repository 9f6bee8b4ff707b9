"""Names that are not UTF-8 on the command line (a shell passes bytes; Python decodes them with
surrogates): refused as invalid names in one line, against a server and a data dir, and
nothing is created for them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

BAD = b"t\xff"  # not UTF-8: argv carries it as 't\udcff'
COMMANDS = [
    [b"topic", b"create", BAD],
    [b"produce", BAD],
    [b"consume", BAD, b"--max", b"1"],
    [b"queue", b"send", BAD, b"hello"],
    [b"queue", b"create", BAD],
    [b"group", b"describe", BAD],
]
IDS = ["topic-create", "produce", "consume", "queue-send", "queue-create", "group-describe"]


def _vqs(args: list[bytes], stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable.encode(), b"-m", b"vqs.cli", *args], input=stdin, capture_output=True,
                          env={**os.environ, "COLUMNS": "200"}, timeout=120)


def _one_error_line(p: subprocess.CompletedProcess) -> str:
    assert p.returncode in (1, 2), (p.returncode, p.stderr)
    lines = p.stderr.decode(errors="replace").splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    assert b"Traceback" not in p.stderr and b"UnicodeEncodeError" not in p.stderr
    return lines[0]


@pytest.mark.parametrize("args", COMMANDS, ids=IDS)
def test_against_a_server(srv, args):
    line = _one_error_line(_vqs([*args, b"--url", srv.url.encode()], stdin=b"v\n"))
    assert "invalid" in line


@pytest.mark.parametrize("args", COMMANDS, ids=IDS)
def test_on_a_data_dir_that_does_not_exist_yet(tmp_path, args):
    d = tmp_path / "data"
    line = _one_error_line(_vqs([*args, b"--data-dir", str(d).encode()], stdin=b"v\n"))
    assert "invalid" in line or "does not exist" in line  # a command that only reads needs the dir first
    assert not d.exists()  # a refused name leaves no new, empty data dir behind


def test_other_arguments_that_are_not_utf8(srv):
    """A key is bytes: the argument's own bytes are the key. A queue body or a receipt handle is
    text: refused in one line as the embedded queue refuses it (no traceback, no JSON error)."""
    import httpx

    url = srv.url.encode()
    httpx.post(srv.url + "/topics", json={"name": "keyed"}).raise_for_status()
    httpx.post(srv.url + "/queues", json={"name": "texts"}).raise_for_status()
    p = _vqs([b"produce", b"keyed", b"--key", BAD, b"--url", url], stdin=b"v\n")
    assert p.returncode == 0, p.stderr
    p = _vqs([b"consume", b"keyed", b"--framing", b"json", b"--max", b"1", b"--url", url])
    assert b'"key_b64": "dP8="' in p.stdout, p.stdout  # t\xff
    line = _one_error_line(_vqs([b"queue", b"send", b"texts", BAD, b"--url", url]))
    assert "Invalid characters found" in line
    line = _one_error_line(_vqs([b"queue", b"delete-message", b"texts", BAD, b"--url", url]))
    assert "is not a valid receipt handle" in line
    line = _one_error_line(_vqs([b"topic", b"list", b"--url", url, b"--token", BAD]))
    assert "token must be printable ASCII" in line
    line = _one_error_line(_vqs([b"topic", b"list", b"--url", url + b"/" + BAD]))
    assert "is not valid text" in line
