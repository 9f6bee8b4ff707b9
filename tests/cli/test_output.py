"""What the vqs command prints: names and paths whole at 80 columns (also into a pipe),
ISO-8601 times (``--utc``), epoch numbers only in JSON, progress only on a terminal."""

from __future__ import annotations

import json
import os
import re
from datetime import datetime

from cli_helpers import run_vqs as vqs
from cli_helpers import run_vqs_process

LONG = "camera-feeds.north-entrance.building-7.frames-per-second-statistics-v2"  # 71 characters


def whole(p, *names: str) -> str:
    """The command succeeded and printed every name unbroken, nothing cut with an ellipsis."""
    assert p.returncode == 0, p.stderr
    text = p.stdout.decode()
    assert "…" not in text and "..." not in text.replace("[ARGS]...", ""), text
    for n in names:
        assert n in text, (n, text)
    return text


def test_names_and_paths_are_never_cut_at_80_columns(tmp_path):
    d = tmp_path / "data-directory-with-a-rather-long-name-so-paths-outgrow-the-screen"
    assert vqs("topic", "create", LONG, "-p", "2", "--data-dir", d).returncode == 0
    assert vqs("produce", LONG, "--data-dir", d, "--no-progress", input=b"a\nb\nc\n").returncode == 0
    assert vqs("consume", LONG, "--group", LONG + ".group", "--max", "1", "--data-dir", d).returncode == 0
    assert vqs("queue", "create", LONG + ".jobs", "--data-dir", d).returncode == 0

    whole(vqs("topic", "list", "--data-dir", d, columns=80), LONG)
    whole(vqs("topic", "describe", LONG, "--data-dir", d, columns=80), LONG)
    whole(vqs("group", "list", "--data-dir", d, columns=80), LONG + ".group")
    text = whole(vqs("group", "describe", LONG + ".group", "--data-dir", d, columns=80), LONG + ".group", LONG)
    assert re.search(rf"{re.escape(LONG)}\s*│\s*0\s*│\s*1\s*│", text), text  # the topic's row, committed 1
    whole(vqs("queue", "list", "--data-dir", d, columns=80), LONG + ".jobs")
    text = whole(vqs("queue", "describe", LONG + ".jobs", "--data-dir", d, columns=80), LONG + ".jobs",
                 "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed")
    seg = os.path.join("topics", LONG, "0", "00000000000000000000.log")
    text = whole(vqs("inspect", d, columns=80), str(d), seg, os.path.join("topics", LONG, "1",
                                                                          "00000000000000000000.log"))
    assert "all CRCs verified" in text


def test_help_never_cuts_an_option_or_a_command(tmp_path):
    for cmd in ((), ("queue",), ("queue", "create"), ("serve",), ("consume",), ("produce",), ("inspect",),
                ("topic",), ("topic", "create"), ("group", "describe"), ("pipeline",)):
        text = whole(vqs(*cmd, "--help", columns=80), "--help")
        if cmd == ("queue", "create"):
            assert "--content-based-deduplication" in text and "--receive-wait-seconds" in text
        if cmd == ("serve",):
            assert "--max-long-poll-waiters" in text and "--max-partitions-per-topic" in text


def _iso(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


def test_times_are_iso_8601_local_or_utc_and_epoch_only_in_json(tmp_path):
    d = tmp_path / "d"
    assert vqs("topic", "create", "t", "--data-dir", d).returncode == 0
    assert vqs("produce", "t", "--data-dir", d, "--no-progress", input=b"a\n").returncode == 0
    env = {"TZ": "America/New_York"}
    # a process reads TZ when it starts: run real ones
    local = run_vqs_process("inspect", d, "--batches", env=env).stdout.decode()
    utc = run_vqs_process("inspect", d, "--batches", "--utc", env=env).stdout.decode()
    iso = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}"
    (lt,) = set(re.findall(iso + r"[-+]\d\d:\d\d", local))
    (ut,) = set(re.findall(iso + "Z", utc))
    assert lt.endswith(("-05:00", "-04:00")) and _iso(lt) == _iso(ut)
    assert not re.search(r"\b1\d{12}\b", local + utc)  # no epoch milliseconds
    rec = vqs("inspect", d, "--records", "--utc").stdout.decode()
    assert f"time={ut}" in rec and "timestamp_ms" not in rec
    batch = json.loads(vqs("inspect", d, "--batches", "--json").stdout)["segments"][0]["batch_list"][0]
    assert abs(batch["first_timestamp_ms"] - _iso(ut).timestamp() * 1000) < 1

    assert vqs("queue", "create", "q", "--data-dir", d).returncode == 0
    text = vqs("queue", "describe", "q", "--utc", "--data-dir", d).stdout.decode()
    created = re.search(r"CreatedTimestamp\s*│\s*(\S+)", text).group(1)
    raw = json.loads(vqs("queue", "describe", "q", "--json", "--data-dir", d).stdout)["CreatedTimestamp"]
    assert created.endswith("Z") and _iso(created).timestamp() == int(raw)


def test_progress_is_only_for_a_terminal(tmp_path):
    d = tmp_path / "d"
    assert vqs("topic", "create", "t", "--data-dir", d).returncode == 0
    src = tmp_path / "in.txt"
    src.write_bytes(b"".join(b"message %d\n" % i for i in range(5000)))
    p = vqs("produce", "t", "--file", src, "--data-dir", d)
    assert p.returncode == 0 and p.stderr == b"sent 5000 message(s) to t\n"  # no bar, no escape codes
    p = vqs("inspect", d)
    assert p.returncode == 0 and p.stderr == b""


def test_progress_on_a_terminal(tmp_path):
    """stderr a terminal (a pty): produce from a file draws its bar there, then clears it."""
    import pty
    import select
    import subprocess
    import sys

    d = tmp_path / "d"
    assert vqs("topic", "create", "t", "--data-dir", d).returncode == 0
    src = tmp_path / "in.txt"
    src.write_bytes(b"".join(b"message %d\n" % i for i in range(20000)))
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "vqs.cli", "produce", "t", "--file", str(src), "--data-dir",
                             str(d)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    seen = b""
    try:
        while True:
            if select.select([master], [], [], 1.0)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed the pty
                    break
                if not chunk:
                    break
                seen += chunk
            elif proc.poll() is not None:
                break
    finally:
        assert proc.wait(60) == 0
        os.close(master)
    raw = seen.decode(errors="replace")
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw)
    assert "20000 messages" in text and "sent 20000 message(s) to t" in text
    assert "\x1b[" in raw  # drawn with terminal control codes, which a pipe never gets


def test_a_reader_that_leaves_is_not_an_error(tmp_path):
    """`vqs consume t | head -2`: the consumer stops quietly, exit status 0."""
    import subprocess
    import sys

    d = tmp_path / "d"
    assert vqs("topic", "create", "t", "--data-dir", d).returncode == 0
    assert vqs("produce", "t", "--data-dir", d, input=b"".join(b"%d\n" % i for i in range(100000))).returncode == 0
    proc = subprocess.Popen([sys.executable, "-m", "vqs.cli", "consume", "t", "--data-dir", str(d)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline() == b"0\n"
    proc.stdout.close()  # the reader leaves
    assert proc.wait(60) == 0
    assert proc.stderr.read() == b""
