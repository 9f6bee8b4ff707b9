"""How the vqs command fails: one line in CLI words on stderr, no traceback, the documented exit code.

The codes (vqs/cli/failures.py, docs/cli.md, ``vqs --help``): 0 ok, 1 error,
2 usage, 3 unavailable (server unreachable, a data dir or port held by
another process), 4 corrupt data, 130 interrupted.
"""

from __future__ import annotations

import os
import re

from cli_helpers import run_vqs as vqs
from cli_helpers import run_vqs_process

from vqs.cli import failures
from vqs.server import run

PYTHON_HINTS = re.compile(rb"Traceback|create_topic|create_queue|readonly=True|Error:|\w+Error\b")


def one_error_line(p, code: int) -> str:
    """The command failed with ``code`` and said why on exactly one stderr line, in CLI words."""
    assert p.returncode == code, (p.returncode, p.stderr)
    lines = p.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    assert not PYTHON_HINTS.search(p.stderr), p.stderr
    return lines[0]


def test_the_exit_codes_are_documented_and_serve_uses_the_same():
    assert (failures.EXIT_OK, failures.EXIT_ERROR, failures.EXIT_USAGE, failures.EXIT_UNAVAILABLE,
            failures.EXIT_CORRUPT, failures.EXIT_INTERRUPTED) == (0, 1, 2, 3, 4, 130)
    assert (run.EXIT_ERROR, run.EXIT_SETTINGS, run.EXIT_UNAVAILABLE, run.EXIT_CORRUPT) == (1, 2, 3, 4)
    p = vqs("--help", columns=80)
    text = " ".join(p.stdout.decode().split())
    assert p.returncode == 0
    for words in ("0 success", "1 error", "2 bad usage", "3 unavailable", "4 corrupt data", "130 interrupted"):
        assert words in text
    docs = open(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "docs", "cli.md")).read()
    for code in ("`0`", "`1`", "`2`", "`3`", "`4`", "`130`"):
        assert code in docs


def test_remote_consume_of_a_partition_that_does_not_exist(srv, tmp_path):
    u = ("--url", srv.url)
    assert vqs("topic", "create", "twoparts", "-p", "2", *u).returncode == 0
    line = one_error_line(vqs("consume", "twoparts", "--partition", "9", *u), 1)
    assert "topic 'twoparts' has 2 partition(s)" in line and "no partition 9" in line
    d = tmp_path / "d"
    assert vqs("topic", "create", "twoparts", "-p", "2", "--data-dir", d).returncode == 0
    assert one_error_line(vqs("consume", "twoparts", "--partition", "9", "--data-dir", d), 1) == line


def test_missing_things_are_named_with_the_command_that_makes_them(srv, tmp_path):
    u = ("--url", srv.url)
    line = one_error_line(vqs("topic", "describe", "nosuchtopic", *u), 1)
    assert line == "error: topic 'nosuchtopic' does not exist (create it with `vqs topic create nosuchtopic`)"
    line = one_error_line(vqs("queue", "receive", "nosuchqueue", *u), 1)
    assert line == "error: queue 'nosuchqueue' does not exist (create it with `vqs queue create nosuchqueue`)"
    d = tmp_path / "d"
    assert vqs("topic", "create", "x", "--data-dir", d).returncode == 0
    line = one_error_line(vqs("consume", "nosuchtopic", "--data-dir", d), 1)
    assert "`vqs topic create nosuchtopic`" in line
    line = one_error_line(vqs("queue", "purge", "nosuchqueue", "--data-dir", d), 1)
    assert "`vqs queue create nosuchqueue`" in line
    line = one_error_line(vqs("topic", "create", "x", "--data-dir", d), 1)
    assert "already exists" in line
    line = one_error_line(vqs("consume", "x", "--offset", "5", "--data-dir", d), 1)
    assert line == ("error: offset 5 of x[0] is out of range: valid offsets are 0..0 (start..end; give --offset in "
                    "that range, or use --from-end)")
    assert vqs("topic", "create", "x", *u).returncode == 0
    line = one_error_line(vqs("consume", "x", "--offset", "5", *u), 1)
    assert "offset 5 is out of range: valid offsets are 0..0" in line


def test_a_mistyped_data_dir_is_refused_and_not_created(tmp_path):
    missing = tmp_path / "typo"
    for args in (("topic", "list"), ("topic", "describe", "t"), ("consume", "t"), ("group", "list"),
                 ("queue", "list"), ("produce", "t")):
        line = one_error_line(vqs(*args, "--data-dir", missing, input=b"x\n"), 1)
        assert f"data dir {missing} does not exist" in line
        assert not missing.exists()
    other = tmp_path / "photos"
    other.mkdir()
    (other / "cat.jpg").write_bytes(b"meow")
    line = one_error_line(vqs("topic", "list", "--data-dir", other), 1)
    assert "is not a VQS data dir" in line and sorted(os.listdir(other)) == ["cat.jpg"]
    # commands that make data may make the directory
    assert vqs("topic", "create", "t", "--data-dir", missing).returncode == 0
    assert vqs("topic", "list", "--data-dir", missing).stdout == b"t\n"


def test_a_data_dir_a_server_owns_is_unavailable(srv):
    """A real process: the exit status the shell sees, and the lock held by another process."""
    line = one_error_line(run_vqs_process("topic", "list", "--data-dir", srv.data_dir), 3)
    assert f"is locked by pid {srv.proc.pid}" in line and "--url" in line


def test_an_unreachable_server_is_unavailable(tmp_path):
    from vqs_server_proc import free_port

    url = f"http://127.0.0.1:{free_port()}"
    line = one_error_line(vqs("topic", "list", "--url", url), 3)
    assert f"cannot reach the server at {url}" in line and "vqs serve" in line
    # so do the commands that send stdin's lines and count what they sent (3, not 1)
    for cmd in (("produce", "t"), ("queue", "send", "q")):
        line = one_error_line(vqs(*cmd, "--url", url, input=b"a\nb\n"), 3)
        assert f"cannot reach the server at {url}" in line, line


def test_usage_errors_exit_2(tmp_path):
    p = run_vqs_process("topic", "list", "--no-such-option")  # the status a shell sees, from a real process
    assert p.returncode == 2 and b"No such option" in p.stderr and b"Traceback" not in p.stderr
    one_error_line(vqs("topic", "list", "--url", "http://x", "--data-dir", tmp_path), 2)
    one_error_line(vqs("consume", "t", "--framing", "xml", "--data-dir", tmp_path), 2)


def test_unreadable_input_file_is_one_line(tmp_path):
    d = tmp_path / "d"
    assert vqs("topic", "create", "t", "--data-dir", d).returncode == 0
    line = one_error_line(vqs("produce", "t", "--file", tmp_path / "nope.txt", "--data-dir", d), 1)
    assert "nope.txt" in line and "No such file" in line


def test_inspect_exit_codes(tmp_path):
    line = one_error_line(vqs("inspect", tmp_path / "nothing-here"), 1)
    assert "nothing-here: no such file or directory" in line


def test_version_and_completion():
    from vqs import __version__

    p = vqs("--version")
    assert p.returncode == 0 and p.stdout.decode().strip() == f"vqs {__version__}"
    p = vqs("--help")
    assert b"--install-completion" in p.stdout and b"--show-completion" in p.stdout
    # completion looks at the real process (its argv and environment): run one
    p = run_vqs_process("--show-completion", "bash", env={"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert p.returncode == 0 and b"_VQS_COMPLETE=complete_bash" in p.stdout
    assert p.stdout.rstrip().endswith(b" vqs")  # `complete ... vqs`: completes the vqs command


def test_a_url_without_a_scheme_is_taken_as_http(srv):
    p = vqs("topic", "list", "--url", srv.url.removeprefix("http://"))
    assert p.returncode == 0, p.stderr


def test_wording_of_bounds_and_paths(srv, tmp_path):
    p = vqs("queue", "receive", "q", "--wait", "60", "--url", srv.url)
    assert p.returncode == 2 and b"Invalid value for '--wait': must be at most 20, not 60" in p.stderr, p.stderr
    assert b"wait_seconds" not in p.stderr and b"Traceback" not in p.stderr
    # every option's bound and type in the REST API's words, not pydantic's ("Input should be ...")
    for args, said in ((("queue", "receive", "q", "--wait", "-1"), b"must be at least 0, not -1"),
                       (("queue", "receive", "q", "--wait", "soon"), b"must be a whole number, not 'soon'"),
                       (("consume", "t", "-n", "ten"), b"must be a whole number, not 'ten'"),
                       (("produce", "t", "--skip", "-3"), b"must be at least 0, not -3")):
        p = vqs(*args, "--url", srv.url)
        assert p.returncode == 2 and said in p.stderr and b"Input should" not in p.stderr, (args, p.stderr)
    f = tmp_path / "afile"
    f.write_text("x")
    line = one_error_line(vqs("topic", "create", "t", "--data-dir", f), 1)
    assert line == f"error: data dir {f} is a file, not a directory"
    line = one_error_line(vqs("queue", "create", "q.x y"), 1)
    assert "not a valid name" in line or "invalid queue name" in line


def test_the_rest_api_words_validation_errors_as_its_own_checks(srv):
    import httpx

    r = httpx.post(srv.url + "/topics", json={"name": "a b"})
    assert r.status_code == 400
    assert r.json()["error"]["message"] == "name 'a b' is not a valid name: use 1-200 characters from [A-Za-z0-9._-]"
    r = httpx.post(srv.url + "/topics", json={"name": "t-bounds", "partitions": 100_000})
    assert r.status_code == 400 and "must be at most" in r.json()["error"]["message"], r.text
    # lengths, types, missing and unknown fields too: no pydantic phrase, the field named whole
    httpx.post(srv.url + "/queues", json={"name": "wordsq"}).raise_for_status()
    for path, body, field, said in (
            ("/queues/wordsq/messages", {"messages": [{"body": "y" * 1_100_000}]}, "messages.0.body",
             "messages.0.body must be at most 1048576 characters, not 1100000"),
            ("/queues/wordsq/messages", {"messages": []}, "messages", "messages must hold at least 1 item(s), not 0"),
            ("/queues/wordsq/messages", {"messages": [{"body": "x", "delay_seconds": "soon"}]},
             "messages.0.delay_seconds", "messages.0.delay_seconds must be a whole number, not 'soon'"),
            ("/queues/wordsq/messages", {"messages": [{"body": "x", "bogus": 1}]}, "messages.0.bogus",
             "messages.0.bogus is not a field of this request"),
            ("/topics", {"partitions": 1}, "name", "name is required"),
            ("/topics", {"name": "y" * 300}, "name", None)):
        r = httpx.post(srv.url + path, json=body)
        err = r.json()["error"]
        assert r.status_code == 400 and err["field"] == field, r.text
        assert (said is None or err["message"] == said) and len(err["message"]) < 200, r.text
        for phrase in ("Input should", "should have", "Field required", "Extra inputs", "after validation"):
            assert phrase not in err["message"], r.text
