"""The log cleaner killed (SIGKILL, a real process) at every step of a pass that touches
the disk's namespace or durability (each fsync, rename and unlink): the log reopens with
either the old segments or the cleaned ones, never a lost latest value, never an offset
that reads differently from what was appended; a later pass still cleans it. The same with
the pass's reading and writing in a worker process: the owner's steps are the same, and
its worker dies with it.

Each pass runs in a process forked for it from one that imported ``vqs`` once (and opened
nothing): a process of its own per kill point, without an interpreter's start each time."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

from vqs.cleaner import CompactionSettings, clean_log
from vqs.storage import Log

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Reads "PATH KILL_AT MODE" lines; for each, forks a child that runs one pass over PATH and
# SIGKILLs itself at its KILL_AT-th call (fs_kill.py; 0: never), and answers the child's exit
# code (-9: killed) and how many such calls its pass made.
FORK_SERVER = textwrap.dedent("""
    import os, subprocess, sys, traceback
    from fs_kill import kill_at_call
    from vqs.storage import Log
    from vqs.cleaner import CompactionSettings, clean_log

    def one_pass(path, kill_at, worker):
        log = Log.open(path, segment_bytes=4000, flush="always", batch_max_records=3)
        calls = kill_at_call(kill_at, ("fsync", "rename", "unlink"))
        if worker:  # the worker's pid, for the test to see it gone before it opens the log
            real_popen = subprocess.Popen
            def popen(*a, **k):
                p = real_popen(*a, **k)
                with open(path + ".worker", "w") as f:
                    f.write(str(p.pid))
                return p
            subprocess.Popen = popen
        clean_log(log, CompactionSettings(delete_retention_ms=0), force=True, worker=worker)
        with open(path + ".calls", "w") as f:
            f.write(str(calls[0]))

    for line in iter(sys.stdin.readline, ""):
        path, kill_at, mode = line.split()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                one_pass(path, int(kill_at), mode == "worker")
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stderr.flush()
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), flush=True)
""")


def _populate(path):
    log = Log.open(path, segment_bytes=700, flush="always", batch_max_records=3)
    produced = []
    for i in range(240):
        key = b"k%d" % (i % 9)
        value = None if i % 31 == 0 else b"value-%d" % i
        log.append(value, key=key, timestamp_ms=1000 + i)
        produced.append((i, key, value))
    # one pass first: the second (killed) pass also meets cleaned segments and tombstones
    clean_log(log, CompactionSettings(delete_retention_ms=10**12), now_ms=10**6, force=True)
    for i in range(240, 300):
        key = b"k%d" % (i % 11)
        log.append(b"value-%d" % i, key=key, timestamp_ms=1000 + i)
        produced.append((i, key, b"value-%d" % i))
    log.close()
    return produced


def _records(path):
    log = Log.open(path, segment_bytes=700, flush="always")
    try:
        assert not [n for n in os.listdir(path) if n.endswith((".cleaned", ".swap"))]
        return log.end_offset, [(r.offset, r.key, r.value) for r in log.read(0, max_records=100_000)]
    finally:
        log.close()


def _check(path, produced, old, new):
    """``old``: the log before the pass; ``new``: after a whole pass. A pass replaces groups
    of segments one at a time, so any state it leaves lies between: every record read is one
    of ``old``'s (as appended), and every record ``new`` kept is there."""
    end, got = _records(path)
    assert end == len(produced)
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(set(offsets))
    assert set(got) <= set(old)
    assert set(new) <= set(got), sorted(set(new) - set(got))[:5]
    return got


def _wait_gone(pid_file):
    """Until the worker named in ``pid_file`` (if any) has exited: its owner's death kills it."""
    try:
        with open(pid_file) as f:
            pidfd = os.pidfd_open(int(f.read()))
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return
    try:
        assert select.select([pidfd], [], [], 60)[0], "the worker outlived its owner"
    finally:
        os.close(pidfd)


class _ForkServer:
    """FORK_SERVER in a process of its own; ``run`` is one killed (or whole) pass."""

    def __init__(self, tmp_path):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join((REPO, os.path.join(REPO, "tests"),
                                                           os.environ.get("PYTHONPATH", ""))))
        self.stderr_path = tmp_path / "fork-server.stderr"
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-c", FORK_SERVER], env=env, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err, text=True)

    def run(self, path: str, kill_at: int, mode: str) -> int:
        self.proc.stdin.write(f"{path} {kill_at} {mode}\n")
        self.proc.stdin.flush()
        assert select.select([self.proc.stdout], [], [], 120)[0], "a pass took over 120 s"
        line = self.proc.stdout.readline()
        assert line, self.stderr_path.read_text()
        return int(line)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(30)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["here", "worker"])
def test_cleaner_killed_at_every_step(tmp_path, mode):
    """A pass killed at each of its fsyncs, renames and unlinks leaves a log that reopens with
    the old segments or the cleaned ones, and the next pass finishes the work. ``here``: at
    every one. ``worker``: the owner's calls are the swap steps ``here`` kills at already (the
    worker's reads and writes are test_cleaner_worker.py's); what the mode adds is the live
    worker that must die with its owner and give the log's lock back, whatever the step, so
    the first, middle and last steps are enough."""
    pristine = str(tmp_path / "pristine")
    produced = _populate(pristine)
    old = _records(pristine)[1]
    assert set(old) <= set(produced)
    reference = str(tmp_path / "reference")
    shutil.copytree(pristine, reference)
    log = Log.open(reference, segment_bytes=4000, flush="always")  # groups of several segments
    clean_log(log, CompactionSettings(delete_retention_ms=0), force=True)
    log.close()
    new = _records(reference)[1]
    assert len(new) < len(old)
    server = _ForkServer(tmp_path)
    try:
        whole = str(tmp_path / "whole")
        shutil.copytree(pristine, whole)
        assert server.run(whole, 0, mode) == 0, server.stderr_path.read_text()
        _wait_gone(whole + ".worker")
        assert _check(whole, produced, old, new) == new
        with open(whole + ".calls") as f:
            total = int(f.read())
        assert total >= 5
        steps = range(1, total + 1) if mode == "here" else sorted({1, (total + 1) // 2, total})
        for n in steps:
            path = str(tmp_path / f"run{n}")
            shutil.copytree(pristine, path)
            assert server.run(path, n, mode) == -signal.SIGKILL, server.stderr_path.read_text()
            _wait_gone(path + ".worker")  # (it holds the log's lock while it lives)
            _check(path, produced, old, new)
            # the next owner's pass cleans what the killed one left
            log = Log.open(path, segment_bytes=700, flush="always")
            clean_log(log, CompactionSettings(delete_retention_ms=0), force=True)
            log.close()
            assert _check(path, produced, old, new) == new
            shutil.rmtree(path)
    finally:
        server.close()
