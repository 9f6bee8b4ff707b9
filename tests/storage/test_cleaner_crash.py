"""The log cleaner killed (SIGKILL, a real process) at every step of a pass that touches
the disk's namespace or durability (each fsync, rename and unlink): the log reopens with
either the old segments or the cleaned ones, never a lost latest value, never an offset
that reads differently from what was appended; a later pass still cleans it. The same with
the pass's reading and writing in a worker process: the owner's steps are the same, and
its worker dies with it."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

from vqs.storage import CompactionSettings, Log, clean_log

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = textwrap.dedent("""
    import sys
    from fs_kill import kill_at_call
    from vqs.storage import Log, CompactionSettings, clean_log
    path, kill_at, worker = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "worker"
    log = Log.open(path, segment_bytes=4000, flush="always", batch_max_records=3)
    calls = kill_at_call(kill_at, ("fsync", "rename", "unlink"))
    if worker:  # the worker's pid, for the test to see it gone before it opens the log
        import subprocess
        real_popen = subprocess.Popen
        def popen(*a, **k):
            p = real_popen(*a, **k)
            with open(path + ".worker", "w") as f:
                f.write(str(p.pid))
            return p
        subprocess.Popen = popen
    clean_log(log, CompactionSettings(delete_retention_ms=0), force=True, worker=worker)
    print(calls[0])
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


@pytest.mark.parametrize("mode", ["here", "worker"])
def test_cleaner_killed_at_every_step(tmp_path, mode):
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
    env = dict(os.environ, PYTHONPATH=os.pathsep.join((REPO, os.path.join(REPO, "tests"),
                                                       os.environ.get("PYTHONPATH", ""))))
    kills = 0
    for n in range(1, 400):
        path = str(tmp_path / f"run{n}")
        shutil.copytree(pristine, path)
        proc = subprocess.run([sys.executable, "-c", CHILD, path, str(n), mode], env=env, capture_output=True,
                              timeout=120)
        _wait_gone(path + ".worker")  # (it holds the log's lock while it lives)
        _check(path, produced, old, new)
        if proc.returncode == -signal.SIGKILL:
            kills += 1
            # the next owner's pass cleans what the killed one left
            log = Log.open(path, segment_bytes=700, flush="always")
            clean_log(log, CompactionSettings(delete_retention_ms=0), force=True)
            log.close()
            assert _check(path, produced, old, new) == new
            shutil.rmtree(path)
            continue
        assert proc.returncode == 0, proc.stderr.decode()
        assert int(proc.stdout) == n - 1  # the pass made n-1 such calls: every one was a kill point
        break
    else:
        raise AssertionError("the pass never finished")
    assert kills >= 5
