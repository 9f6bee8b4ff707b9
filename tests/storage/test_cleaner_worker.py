"""The log cleaner's worker process (clean_log(worker=True)): the files it leaves are the
in-process pass's, byte for byte; the worker SIGKILLed at every write, fsync and unlink it
makes leaves the log intact (no .cleaned file, every record as before or as cleaned) and
the next pass completes; a worker whose owner is SIGKILLed dies with it, and the log
opens and cleans."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from vqs.errors import CleanerWorkerError
from vqs.storage import CompactionSettings, Log, clean_log, cleaner_worker

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SETTINGS = CompactionSettings(delete_retention_ms=0)

#: the worker's entry, its fs calls counted: the KILL_AT-th kills it (0: never)
KILLING_MAIN = textwrap.dedent("""
    import os, signal, sys
    from vqs.storage import fs
    kill_at, calls = int(os.environ["KILL_AT"]), [0]
    def counted(real):
        def f(*a, **k):
            calls[0] += 1
            if calls[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*a, **k)
        return f
    for name in ("writev", "fsync", "unlink"):
        setattr(fs, name, counted(getattr(fs, name)))
    from vqs.storage.cleaner_worker import main
    sys.exit(main(sys.argv[1:]))
""")


def _populate(path, compression=None):
    log = Log.open(path, segment_bytes=900, flush="always", batch_max_records=4, compression=compression)
    for i in range(300):
        key = None if i % 37 == 5 else b"k%d" % (i % 13)
        value = None if i % 29 == 0 else b"value-%d" % i
        headers = [("h", b"%d" % i)] if i % 7 == 0 else None
        log.append(value, key=key, timestamp_ms=1000 + i // 3, headers=headers)
    # one pass first: the next also meets cleaned segments (bit 4) and old tombstones
    clean_log(log, CompactionSettings(delete_retention_ms=10**12), now_ms=10**6, force=True)
    for i in range(300, 420):
        log.append(b"value-%d" % i, key=b"k%d" % (i % 17), timestamp_ms=2000 + i)
    log.close()


def _open(path, compression=None):
    return Log.open(path, segment_bytes=4000, flush="always", compression=compression)


def _records(log):
    return [(r.offset, r.key, r.value, r.headers, r.timestamp_ms) for r in log.read(0, max_records=100_000)]


def _files(path):
    out = {}
    for name in sorted(os.listdir(path)):
        if name.endswith(".log") or name == "cleaner.checkpoint":
            with open(os.path.join(path, name), "rb") as f:
                out[name] = f.read()
    return out


def _scratch(path):
    return [n for n in os.listdir(path) if n.endswith((".cleaned", ".swap"))]


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_the_worker_writes_what_the_pass_in_process_writes(tmp_path, compression):
    pristine = str(tmp_path / "pristine")
    _populate(pristine, compression)
    results = {}
    for mode in ("here", "worker"):
        path = str(tmp_path / mode)
        shutil.copytree(pristine, path)
        with _open(path, compression) as log:
            stats = clean_log(log, SETTINGS, now_ms=10**7, force=True, worker=mode == "worker")
            results[mode] = (vars(stats), _records(log), _files(path))
    assert results["worker"][0]["records_removed"] > 0
    assert results["worker"] == results["here"]


def test_a_worker_killed_at_every_step_leaves_the_log_intact(tmp_path, monkeypatch):
    pristine = str(tmp_path / "pristine")
    _populate(pristine)
    with _open(pristine) as log:
        old = _records(log)
    reference = str(tmp_path / "reference")
    shutil.copytree(pristine, reference)
    with _open(reference) as log:
        clean_log(log, SETTINGS, force=True)
        new = _records(log)
    assert len(new) < len(old)
    monkeypatch.setattr(cleaner_worker, "_MAIN", KILLING_MAIN)
    kills = 0
    for n in range(1, 400):
        path = str(tmp_path / f"run{n}")
        shutil.copytree(pristine, path)
        monkeypatch.setenv("KILL_AT", str(n))
        with _open(path) as log:
            try:
                clean_log(log, SETTINGS, force=True, worker=True)
            except CleanerWorkerError:
                kills += 1
            else:
                assert _records(log) == new
                break
            assert not _scratch(path)  # the owner deleted what the worker left
            got = _records(log)
            # groups already swapped are cleaned, the rest as before
            assert set(got) <= set(old) and set(new) <= set(got)
            monkeypatch.setenv("KILL_AT", "0")
            clean_log(log, SETTINGS, force=True, worker=True)
            assert _records(log) == new
        with _open(path) as log:
            assert _records(log) == new
        shutil.rmtree(path)
    else:
        raise AssertionError("the pass never finished")
    assert kills >= 5


#: the owner: a pass whose worker announces its pid on a FIFO at its first write, then waits
OWNER = textwrap.dedent("""
    import sys
    from vqs.storage import CompactionSettings, Log, clean_log, cleaner_worker
    cleaner_worker._MAIN = '''
    import os, signal, sys
    from vqs.storage import fs
    real = fs.writev
    def announce(*a, **k):
        with open(os.environ["WORKER_FIFO"], "w") as f:
            f.write(str(os.getpid()))
        signal.pause()
    fs.writev = announce
    from vqs.storage.cleaner_worker import main
    sys.exit(main(sys.argv[1:]))
    '''
    log = Log.open(sys.argv[1], segment_bytes=4000, flush="always")
    clean_log(log, CompactionSettings(delete_retention_ms=0), force=True, worker=True)
""")


def test_a_worker_dies_with_its_owner(tmp_path):
    path = str(tmp_path / "log")
    _populate(path)
    reference = str(tmp_path / "reference")
    shutil.copytree(path, reference)
    with _open(reference) as log:
        clean_log(log, SETTINGS, force=True)
        new = _records(log)
    with _open(path) as log:
        old = _records(log)
    fifo = str(tmp_path / "worker.fifo")
    os.mkfifo(fifo)
    env = dict(os.environ, WORKER_FIFO=fifo,
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    owner = subprocess.Popen([sys.executable, "-c", OWNER, path], env=env)
    pidfd = None
    try:
        said: list[str] = []
        reader = threading.Thread(target=lambda: said.append(open(fifo).read()), daemon=True)
        reader.start()
        reader.join(120)
        assert said, "the worker never wrote"
        pidfd = os.pidfd_open(int(said[0]))  # (taken while it lives: its pid is not reused)
        assert [n for n in os.listdir(path) if n.endswith(".cleaned")]
        owner.kill()
        owner.wait(60)
        assert select.select([pidfd], [], [], 60)[0], "the worker outlived its owner"
    finally:
        owner.kill()
        owner.wait()
        if pidfd is not None:
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)  # (a failed run's survivor)
            except ProcessLookupError:
                pass
            os.close(pidfd)
    with _open(path) as log:  # the lock is free; the open deletes the .cleaned file
        assert not _scratch(path)
        got = _records(log)  # groups swapped before the worker's first write are cleaned
        assert set(got) <= set(old) and set(new) <= set(got)
        assert clean_log(log, SETTINGS, force=True, worker=True).records_removed > 0
        assert _records(log) == new
