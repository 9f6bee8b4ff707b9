"""Destructive commands ask on a terminal and act without asking in a script (docs/cli.md)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

from vqs import Broker


def _on_a_terminal(args: list[str], answer: bytes) -> int:
    """Run ``vqs ARGS`` with a pseudo-terminal on stdin, answer its question, return the exit code."""
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen([sys.executable, "-m", "vqs.cli", *args], stdin=slave, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        os.close(slave)
        os.write(master, answer)
        p.communicate(timeout=60)
        return p.returncode
    finally:
        os.close(master)


@pytest.mark.parametrize("args", [["topic", "delete", "t"], ["queue", "delete", "q"], ["queue", "purge", "q"]],
                         ids=["topic-delete", "queue-delete", "queue-purge"])
def test_a_terminal_is_asked_and_a_no_keeps_the_data(tmp_path, args):
    d = str(tmp_path / "data")
    with Broker(d) as b:
        b.create_topic("t")
        b.create_queue("q").send("m")
    assert _on_a_terminal([*args, "--data-dir", d], b"n\n") == 1
    with Broker(d) as b:
        assert "t" in b.topics() and b.queue("q").receive(wait_seconds=0)
    assert _on_a_terminal([*args, "--data-dir", d], b"y\n") == 0
    p = subprocess.run([sys.executable, "-m", "vqs.cli", *args, "--data-dir", d], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=60)  # a script: no question (queue purge: again, fine)
    assert p.returncode in (0, 1) and b"?" not in p.stderr
