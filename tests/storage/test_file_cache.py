"""The process-wide file cache (vqs/storage/file_cache.py): segments open their
files on demand, at most ``max_open_files`` stay open, idle logs hold none,
and a clean reopen with ``defer_clean_marker`` changes no file."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from vqs.errors import ConfigError
from vqs.storage.file_cache import CACHE, set_max_open_files
from vqs.storage.log import CHECKPOINT, CLEAN_MARKER, Log

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def small_cache():
    before = CACHE._configured
    set_max_open_files(8)
    try:
        yield CACHE
    finally:
        CACHE.configure(before)


def test_reads_and_appends_across_many_segments_and_logs_stay_under_the_cap(tmp_path, small_cache):
    base = open_fds()
    logs = [Log.open(str(tmp_path / f"l{i}"), segment_bytes=1024, flush="never") for i in range(6)]
    locks = 6  # each standalone log holds its directory lock (a broker's partitions share one)
    try:
        for r in range(40):  # many segments per log (1 KiB each)
            for i, lg in enumerate(logs):
                lg.append_batch([b"%d-%d-%s" % (i, r, b"v" * 100)])
            assert small_cache.open_files <= 8
            assert open_fds() <= base + locks + 8 + 2  # + files in use by the flusher thread, a dir fsync
        for i, lg in enumerate(logs):
            assert lg.segment_count >= 8
            got = [rec.value for rec in lg.read(0, max_records=1000)]
            assert got == [b"%d-%d-%s" % (i, r, b"v" * 100) for r in range(40)]
            assert small_cache.open_files <= 8
        # offsets by time and a lookup in the middle of an evicted segment
        assert logs[0].read(17, max_records=1)[0].value.startswith(b"0-17-")
    finally:
        for lg in logs:
            lg.close()
    assert open_fds() <= base


def test_an_idle_log_holds_no_descriptor_and_reopens_on_use(tmp_path):
    with Log.open(str(tmp_path / "l"), segment_bytes=4096, flush="never") as lg:
        base = open_fds()  # the directory lock included
        for r in range(100):
            lg.append(b"%04d" % r + b"x" * 200)
        lg.flush()
        assert open_fds() > base
        CACHE.sweep_idle()  # clears the "used" flags
        CACHE.sweep_idle()  # nothing used since: closed
        assert open_fds() == base
        assert [r.value[:4] for r in lg.read(0, max_records=100)] == [b"%04d" % r for r in range(100)]
        lg.append(b"after")
        assert lg.read(100)[0].value == b"after"
    assert open_fds() == base - 1


def test_a_clean_reopen_with_defer_clean_marker_changes_no_file(tmp_path, fsyncs):
    path = str(tmp_path / "l")
    with Log.open(path, segment_bytes=1024, flush="never") as lg:
        for r in range(50):
            lg.append(b"%03d" % r * 20)
    before = {n: os.stat(os.path.join(path, n)) for n in os.listdir(path)}
    calls = fsyncs.calls
    base = open_fds()
    lg = Log.open(path, segment_bytes=1024, flush="never", defer_clean_marker=True)
    assert open_fds() == base + 1  # the directory lock; the loader's files were given back
    assert lg.read(10)[0].value == b"010" * 20
    lg.close()
    after = {n: os.stat(os.path.join(path, n)) for n in os.listdir(path)}
    assert fsyncs.calls == calls  # no fsync at open, read or close
    assert sorted(after) == sorted(before)
    for n, st in before.items():
        if n == ".lock":
            continue  # the directory lock names its holder's pid
        assert (after[n].st_mtime_ns, after[n].st_size) == (st.st_mtime_ns, st.st_size), n
    # The first write removes the marker before anything else changes.
    with Log.open(path, segment_bytes=1024, flush="never", defer_clean_marker=True) as lg:
        assert os.path.exists(os.path.join(path, CLEAN_MARKER))
        lg.append(b"new")
        assert not os.path.exists(os.path.join(path, CLEAN_MARKER))
    with Log.open(path) as lg:
        assert lg.end_offset == 51 and lg.read(50)[0].value == b"new"


CRASH_CHILD = textwrap.dedent(
    """
    import os, sys
    sys.path.insert(0, %r)
    from vqs.storage.file_cache import set_max_open_files
    from vqs.storage.log import Log
    set_max_open_files(4)
    d = sys.argv[1]
    # Reopened clean (the marker stays until the first write), then appended
    # under flush="always" while 6 logs share a cache of 4 files: every append
    # may land on a descriptor opened after the previous one was evicted.
    logs = [Log.open(os.path.join(d, str(i)), flush="always", segment_bytes=512,
                     defer_clean_marker=True) for i in range(6)]
    for r in range(30):
        for i, lg in enumerate(logs):
            lg.append(b"%%d-%%d" %% (i, r))
    print("acked", flush=True)
    os._exit(0)  # no close: a crash
    """
) % ROOT


def test_appends_acknowledged_under_eviction_survive_a_crash_after_a_clean_reopen(tmp_path):
    d = str(tmp_path)
    for i in range(6):  # closed cleanly once: the next open defers the marker
        with Log.open(os.path.join(d, str(i)), flush="always", segment_bytes=512) as lg:
            lg.append(b"first")
    out = subprocess.run([sys.executable, "-c", CRASH_CHILD, d], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "acked", out.stderr
    for i in range(6):
        path = os.path.join(d, str(i))
        assert not os.path.exists(os.path.join(path, CLEAN_MARKER))  # recovery will run
        assert os.path.exists(os.path.join(path, CHECKPOINT))
        with Log.open(path) as lg:
            got = [r.value for r in lg.read(0, max_records=100)]
        assert got == [b"first"] + [b"%d-%d" % (i, r) for r in range(30)]


def test_max_open_files_is_validated():
    with pytest.raises(ConfigError, match="max_open_files"):
        set_max_open_files(2)
    with pytest.raises(ConfigError, match="RLIMIT_NOFILE"):
        set_max_open_files(1 << 40)


def test_an_idle_interval_log_leaves_the_flusher_and_its_next_append_is_flushed(tmp_path):
    """10,000 idle partitions must cost the flusher thread nothing: a log with
    nothing to write for an interval leaves it; its next write rejoins."""
    with Log.open(str(tmp_path / "l"), flush="interval", flush_interval_ms=20, checkpoint_interval_ms=50) as lg:
        deadline = time.monotonic() + 10
        while not lg._flush_idle:  # the first tick finds nothing to do
            assert time.monotonic() < deadline, "the log never went idle"
            time.sleep(0.01)
        off = lg.append(b"after idle")
        assert not lg._flush_idle
        while lg._sync.durable_end <= off:  # fsynced by the flusher within an interval or so
            assert time.monotonic() < deadline, "the append after idle was never flushed"
            time.sleep(0.01)
        while not lg._flush_idle:  # and, once the checkpoint caught up, idle again
            assert time.monotonic() < deadline + 10, "the log never went idle again"
            time.sleep(0.01)
        assert lg.read(off)[0].value == b"after idle"



_ABANDON = textwrap.dedent("""
    import os, sys
    import vqs.storage.file_cache as file_cache
    from vqs.storage.log import Log

    def opened(path):
        lg = Log.open(path, segment_bytes=4096)
        for _ in range(100):
            lg.append(b"x" * 100)
        lg.flush()
        assert len(lg.read(0, max_records=5)) == 5  # its segments' log files are open
        return lg

    fds = lambda: len(os.listdir("/proc/self/fd"))
    os.KEEP = opened(sys.argv[1] + "/c")  # never closed: left to the real exit
    logs = [opened(sys.argv[1] + "/" + name) for name in "ab"]
    handles = [s.handle() for lg in logs for s in lg._segs.all]
    for lg in logs:
        for s in lg._segs.all:
            s.release_files()  # the segment lets go; the handle is ours alone now
    before, n = fds(), len(handles)
    # What interpreter exit does to a module whose objects outlive the exit's collection (held
    # from another module, a cycle it leaves): every global of file_cache is set to None; then
    # the last references to the handles go.
    for name in list(vars(file_cache)):
        if not name.startswith("__"):
            setattr(file_cache, name, None)
    del handles
    assert fds() == before - n, (fds(), before, n)  # every one closed, none leaked
""")


def test_logs_abandoned_until_exit_close_quietly(tmp_path, child_env):
    p = subprocess.run([sys.executable, "-c", _ABANDON, str(tmp_path)], env=child_env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "Exception ignored" not in p.stderr and "Error" not in p.stderr, p.stderr
