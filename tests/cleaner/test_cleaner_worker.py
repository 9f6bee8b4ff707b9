"""The log cleaner's worker process (clean_log(worker=True)): the files it leaves are the
in-process pass's, byte for byte; the worker SIGKILLed at every write, fsync and unlink it
makes leaves the log intact (no .cleaned file, every record as before or as cleaned) and
the next pass completes; a worker whose owner is SIGKILLed dies with it, and the log
opens and cleans."""

from __future__ import annotations

import json
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from vqs.cleaner import CompactionSettings, clean_log
from vqs.cleaner import worker as cleaner_worker
from vqs.cleaner.work import IoThrottle
from vqs.errors import CleanerWorkerError, ConfigError
from vqs.storage import Log

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SETTINGS = CompactionSettings(delete_retention_ms=0)

#: the worker's entry, its fs calls counted: the KILL_AT-th kills it (0: never)
KILLING_MAIN = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, sys.argv[2])
    sys.path.insert(0, os.path.join(sys.argv[2], "tests"))
    from fs_kill import kill_at_call
    kill_at_call(int(os.environ["KILL_AT"]), ("writev", "fsync", "unlink"))
    from vqs.cleaner.worker import main
    sys.exit(main(sys.argv[1:]))
""")


#: the worker's entry, its writes never finishing (a worker that gets no CPU)
HANGING_MAIN = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[2])
    from vqs.cleaner import work as cleaner_work
    cleaner_work.CleanWork.write = lambda self, *args: time.sleep(3600)
    from vqs.cleaner.worker import main
    sys.exit(main(sys.argv[1:]))
""")


def _populate(path, compression=None):
    """Batches of up to 8 records over 150 keys (half updates): cleaning keeps runs of a
    few records, some crossing batches; headers, tombstones, keyless records, timestamps
    that differ within a batch."""
    rng = random.Random(31)
    log = Log.open(path, segment_bytes=2000, flush="always", batch_max_records=8, compression=compression)
    i = 0
    while i < 900:
        n = rng.randrange(1, 9)
        log.append_batch(
            [None if k % 29 == 0 else b"value-%d" % k for k in range(i, i + n)],
            keys=[None if k % 37 == 5 else b"k%d" % rng.randrange(150) for k in range(i, i + n)],
            headers=[[("h", b"%d" % k)] if k % 7 < 3 and i % 3 else None for k in range(i, i + n)],
            timestamps_ms=[1000 + k // 3 for k in range(i, i + n)])
        i += n
    # one pass first: the next also meets cleaned segments (bit 4) and old tombstones
    clean_log(log, CompactionSettings(delete_retention_ms=10**12), now_ms=10**6, force=True)
    for i in range(900, 1100):
        log.append(b"value-%d" % i, key=b"k%d" % rng.randrange(60), timestamp_ms=2000 + i)
    log.close()


def _open(path, compression=None):
    return Log.open(path, segment_bytes=8000, flush="always", compression=compression)


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
    with _open(pristine, compression) as log:
        old = _records(log)
        active = log._segs.all[-1].base_offset
    with open(os.path.join(pristine, "cleaner.checkpoint"), "rb") as f:
        clean_point = json.loads(f.read())["clean_point"]
    latest = {k: o for o, k, *_ in old if o < active and k is not None}
    # kept: the uncleaned tail; else the latest of its key, and not a tombstone below the clean point
    model = [r for r in old if r[0] >= active or (
        r[1] is not None and latest[r[1]] == r[0] and not (r[2] is None and r[0] < clean_point))]
    results = {}
    for mode in ("here", "worker"):
        path = str(tmp_path / mode)
        shutil.copytree(pristine, path)
        with _open(path, compression) as log:
            stats = clean_log(log, SETTINGS, now_ms=10**7, force=True, worker=mode == "worker")
            results[mode] = (vars(stats), _records(log), _files(path))
    assert results["worker"][0]["records_removed"] > 0
    assert results["here"][1] == model
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
    from vqs.cleaner import CompactionSettings, clean_log
    from vqs.cleaner import worker as cleaner_worker
    from vqs.storage import Log
    cleaner_worker._MAIN = '''
    import os, signal, sys
    sys.path.insert(0, sys.argv[2])
    from vqs.disk import fs
    real = fs.writev
    def announce(*a, **k):
        with open(os.environ["WORKER_FIFO"], "w") as f:
            f.write(str(os.getpid()))
        signal.pause()
    fs.writev = announce
    from vqs.cleaner.worker import main
    sys.exit(main(sys.argv[1:]))
    '''
    log = Log.open(sys.argv[1], segment_bytes=8000, flush="always")
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
        deadline = time.monotonic() + 120
        while reader.is_alive() and owner.poll() is None and time.monotonic() < deadline:
            reader.join(0.2)  # (a failed owner never opens the FIFO's other end)
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


@pytest.mark.parametrize("codec", [0, 1])
def test_a_run_across_batches_keeps_every_column(codec):
    from vqs.cleaner.work import _encode_run
    from vqs.record import decode_batch, encode_batch

    a = decode_batch(encode_batch(10, [b"a0", None, b"a2", b"a3"], keys=[b"x", b"y", b"z", b"w"],
                                  headers=[None, [("h", b"1")], None, [("g", None)]],
                                  timestamps=[5, 6, 7, 8], nulls=True))
    b = decode_batch(encode_batch(14, [b"b0", b"b1", b"b2"], keys=[b"p", b"q", b"r"], timestamps=9))
    c = decode_batch(encode_batch(17, [b"c0", b"c1", b"c2", b""], keys=[b"s", b"tt", b"", b"v"],
                                  timestamps=[4, 3, 3, 3]))
    # across batches; one piece of a batch without headers or nulls, from its start or within
    for pieces in ([(a, 1, 4), (b, 0, 2)], [(b, 1, 3), (a, 0, 2)], [(b, 0, 3)], [(b, 1, 2)],
                   [(c, 0, 2)], [(c, 1, 4)], [(c, 2, 3)], [(a, 0, 4)]):
        base = pieces[0][0].base_offset + pieces[0][1]
        got = decode_batch(b"".join(_encode_run(base, pieces, codec, True)))
        want = [r for x, i, j in pieces for r in x.records(i, j)]
        assert [r[1:] for r in got.records()] == [r[1:] for r in want]
        assert got.base_offset == base and got.count == len(want)


def test_the_io_bound_paces_a_pass(tmp_path):
    path = str(tmp_path / "log")
    _populate(path)
    rate = 100_000
    with _open(path) as log:
        t0 = time.monotonic()
        stats = clean_log(log, SETTINGS, force=True, worker=True, io_max_bytes_per_s=rate)
        took = time.monotonic() - t0
    # every byte in is read at least once, every byte out written once
    assert took >= (stats.bytes_in + stats.bytes_out) / rate > 0.2
    for bad in (0, -1, float("nan"), "1", True):
        with pytest.raises(ConfigError, match="io_max_bytes_per_s"):
            clean_log(log, SETTINGS, io_max_bytes_per_s=bad)


def test_an_io_throttle_sleeps_while_ahead():
    now, slept = [0.0], []

    def sleep(s):
        slept.append(s)
        now[0] += s

    t = IoThrottle(1000, clock=lambda: now[0], sleep=sleep)
    t.took(500)
    assert slept == [0.5]
    now[0] += 2.0  # slower than the bound: no sleep
    t.took(1000)
    assert slept == [0.5]
    t.took(2000)  # 3.5 s of bytes at 2.5 s: one second ahead
    assert slept == [0.5, 1.0]


def test_the_worker_runs_this_code_whatever_the_working_directory(tmp_path, monkeypatch):
    path = str(tmp_path / "log")
    _populate(path)
    elsewhere = tmp_path / "cwd"
    (elsewhere / "vqs").mkdir(parents=True)
    (elsewhere / "vqs" / "__init__.py").write_text("raise ImportError('another vqs')\n")
    monkeypatch.chdir(elsewhere)
    with _open(path) as log:
        assert clean_log(log, SETTINGS, force=True, worker=True).records_removed > 0


def test_the_worker_runs_below_its_owners_cpu_priority(tmp_path):
    path = str(tmp_path / "log")
    _populate(path)
    with _open(path) as log:
        segs = log._segs.all[:-1]
        w = cleaner_worker.Worker(log, segs)
        try:  # (answered "open": its main has set its priority)
            assert (os.getpriority(os.PRIO_PROCESS, w.proc.pid)
                    == min(19, os.getpriority(os.PRIO_PROCESS, 0) + cleaner_worker.WORKER_NICE))
        finally:
            w.close()


def test_a_stopped_pass_ends_without_waiting_for_its_worker(tmp_path, monkeypatch):
    """A stop asked while the worker is busy with a group (here: never done) ends the pass
    within a fraction of a second: the worker is killed, the group abandoned, the log as it was."""
    path = str(tmp_path / "log")
    _populate(path)
    monkeypatch.setattr(cleaner_worker, "_MAIN", HANGING_MAIN)
    with _open(path) as log:
        old = _records(log)
        stopping = threading.Event()
        timer = threading.Timer(0.5, stopping.set)
        timer.start()
        t0 = time.monotonic()
        stats = clean_log(log, SETTINGS, force=True, worker=True, stop=stopping.is_set)
        took = time.monotonic() - t0
        timer.join()
        assert took < 0.5 + 2 * cleaner_worker.STOP_POLL_S + 1.5, took
        assert stats.segments_out == 0 and not _scratch(path)
        assert _records(log) == old
