"""A server that dies of a fatal signal (a crash in a C extension, SIGBUS past a truncated
mapping) leaves every thread's Python stack in its log: the faulthandler is on."""

from __future__ import annotations

import os
import signal

from vqs_server_proc import ServerProcess


def test_a_fatal_signal_writes_the_stacks_to_the_log(tmp_path):
    s = ServerProcess(tmp_path / "data").start()
    os.kill(s.proc.pid, signal.SIGSEGV)
    assert s.proc.wait(30) == -signal.SIGSEGV
    s.stop()
    with open(s.log_path, encoding="utf-8", errors="replace") as f:
        log = f.read()  # (whole: s.log() keeps the last 5,000 characters, less than a dump of every thread)
    assert "Fatal Python error: Segmentation fault" in log and 'File "' in log, log[-2000:]
