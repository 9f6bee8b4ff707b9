"""kill -9: no acknowledged record is lost, none comes back corrupted.

A child process appends with flush="always" and reports every acknowledged
offset on stdout (one os.write per line, after the append returned). The
parent SIGKILLs it at a random moment, several rounds in a row (sometimes the
next child recovers the log, sometimes the parent does), then reopens the log
and checks every acknowledged record. Values are derived from what the child
knew when it appended, so every record can be checked.

Also: lock contention across two processes, and the lock after kill -9.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
import zlib

import pytest

from vqs.errors import LogLockedError
from vqs.storage.log import Log

CHILD = textwrap.dedent(
    """
    import os, sys, threading, zlib
    from vqs.storage.log import Log
    path, mode, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])

    def val(i):  # single-writer modes: the value is a function of the offset
        body = b"o%d:" % i + bytes([i % 251]) * (i % 97)
        return body + b"|%08x" % zlib.crc32(body)

    def tval(t, s):  # threaded mode: offsets are assigned concurrently
        body = b"t%d.%d:" % (t, s) + bytes([s % 251]) * (s % 89)
        return body + b"|%08x" % zlib.crc32(body)

    def say(line):
        os.write(1, line.encode() + b"\\n")

    lg = Log.open(path, flush="always", segment_bytes=32 << 10)
    say("open %d" % lg.end_offset)
    if mode == "threads":
        def worker(t):
            s = 0
            while True:
                off = lg.append(tval(t, s))
                say("tack %d %d %d" % (off, t, s))
                s += 1
        for t in range(4):
            threading.Thread(target=worker, args=(t,), daemon=True).start()
        threading.Event().wait()
    k = seed
    while True:
        first = lg.end_offset
        if mode == "batch" or (mode == "mixed" and k % 3 == 0):
            n = 1 + k % 17
            got = lg.append_batch([val(i) for i in range(first, first + n)])
        else:
            n = 1
            got = lg.append(val(first))
        assert got == first, (got, first)
        say("ack %d %d" % (first, n))
        k += 1
    """
)


def val(i):
    body = b"o%d:" % i + bytes([i % 251]) * (i % 97)
    return body + b"|%08x" % zlib.crc32(body)


def tval(t, s):
    body = b"t%d.%d:" % (t, s) + bytes([s % 251]) * (s % 89)
    return body + b"|%08x" % zlib.crc32(body)


def well_formed(v: bytes) -> bool:
    body, _, crc = v.rpartition(b"|")
    return len(crc) == 8 and b"%08x" % zlib.crc32(body) == crc


def run_and_kill(d, mode, seed, rnd, env):
    """Start a writer, SIGKILL it at a random moment; return acknowledged
    {offset: value} and whether it got as far as opening the log."""
    p = subprocess.Popen([sys.executable, "-c", CHILD, d, mode, str(seed)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    lines: list[bytes] = []
    opened = threading.Event()

    def reader():
        for line in p.stdout:
            lines.append(line)
            if line.startswith(b"open"):
                opened.set()

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    if rnd.random() < 0.15:
        time.sleep(rnd.uniform(0.0, 0.15))  # possibly during open / recovery
    else:
        assert opened.wait(20), p.stderr.read1(4000) if p.poll() is not None else "child did not open"
        time.sleep(rnd.uniform(0.01, 0.4))
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    th.join(10)
    err = p.stderr.read().decode(errors="replace")
    p.stdout.close()
    p.stderr.close()
    assert p.returncode == -signal.SIGKILL, f"writer died on its own ({p.returncode}): {err[-3000:]}"
    acked = {}
    for line in lines:
        if not line.endswith(b"\n"):
            continue  # cut by the kill: not an acknowledgement
        f = line.split()
        if f[0] == b"ack":
            first, n = int(f[1]), int(f[2])
            for o in range(first, first + n):
                acked[o] = val(o)
        elif f[0] == b"tack":
            acked[int(f[1])] = tval(int(f[2]), int(f[3]))
    return acked, opened.is_set()


def verify(d, acked):
    """Reopen (recovering), check every acknowledged record and that no
    record at all is corrupted; return the end offset."""
    with Log.open(d) as lg:
        end = lg.end_offset
        if acked:
            assert end > max(acked), f"end offset {end} lost acknowledged offset {max(acked)}"
        off, seen = lg.start_offset, 0
        while off < end:
            recs = lg.read(off, max_records=5000, max_bytes=16 << 20)
            assert recs, f"read({off}) empty below end {end}"
            for r in recs:
                v = bytes(r.value)
                assert well_formed(v), f"corrupted record at offset {r.offset}: {v[:40]!r}"
                if r.offset in acked:
                    assert v == acked[r.offset], f"acknowledged record {r.offset} changed"
                elif v.startswith(b"o"):
                    assert v == val(r.offset), f"record {r.offset} holds another offset's value"
                seen += 1
            off = recs[-1].offset + 1
        missing = [o for o in acked if o >= end]
        assert not missing
        # every acknowledged offset was returned by the scan above (no gaps)
        assert seen == end - lg.start_offset
    return end


@pytest.mark.parametrize("mode", ["single", "batch", "mixed", "threads"])
def test_kill9_loses_no_acknowledged_record(tmp_path, child_env, mode):
    d = str(tmp_path / "log")
    rnd = random.Random(zlib.crc32(mode.encode()))
    acked: dict[int, bytes] = {}
    rounds = 4
    total_acks = 0
    for rnd_i in range(rounds):
        got, _ = run_and_kill(d, mode, rnd_i * 1000, rnd, child_env)
        for o, v in got.items():
            assert acked.get(o, v) == v, f"offset {o} acknowledged twice with different values"
        acked.update(got)
        total_acks += len(got)
        if rnd_i % 2 == 1 or rnd_i == rounds - 1:
            verify(d, acked)  # the parent recovers; otherwise the next child does
    assert total_acks > 50, "the writer barely ran: the test proves nothing"


def test_kill9_torn_tails_accumulate_nothing(tmp_path, child_env):
    """Many short rounds without a parent reopen in between: every child
    recovers the previous child's torn tail itself."""
    d = str(tmp_path / "log")
    rnd = random.Random(99)
    acked = {}
    for i in range(6):
        got, _ = run_and_kill(d, "mixed", i, rnd, child_env)
        acked.update(got)
    verify(d, acked)
    assert not os.path.exists(os.path.join(d, "quarantine")) or not os.listdir(os.path.join(d, "quarantine"))


HOLDER = textwrap.dedent(
    """
    import os, sys, threading
    from vqs.storage.log import Log
    lg = Log.open(sys.argv[1], flush="always")
    for i in range(100):
        lg.append(b"held-%d" % i)
    os.write(1, b"locked\\n")
    threading.Event().wait()
    """
)


def test_lock_contention_across_processes(tmp_path, child_env):
    d = str(tmp_path / "log")
    p = subprocess.Popen([sys.executable, "-c", HOLDER, d], stdout=subprocess.PIPE, env=child_env)
    try:
        assert p.stdout.readline() == b"locked\n"
        with pytest.raises(LogLockedError) as ei:
            Log.open(d)
        assert ei.value.holder_pid == p.pid
        assert f"pid {p.pid}" in str(ei.value)
        # a reader in another process needs no lock
        with Log.open(d, readonly=True) as ro:
            assert ro.end_offset == 100
            assert [bytes(r.value) for r in ro.read(98)] == [b"held-98", b"held-99"]
        # still locked after the failed attempt
        with pytest.raises(LogLockedError):
            Log.open(d)
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        p.stdout.close()
    # kill -9 released the lock (the kernel drops flock with the process)
    with Log.open(d) as lg:
        assert lg.end_offset == 100
        assert [bytes(r.value) for r in lg.read(0, max_records=1000)] == [b"held-%d" % i for i in range(100)]
        lg.append(b"after")
    with Log.open(d) as lg:
        assert lg.end_offset == 101


def test_lock_error_from_a_second_process(tmp_path, child_env):
    """The refused opener is itself another process (not the test process)."""
    d = str(tmp_path / "log")
    probe = textwrap.dedent(
        """
        import sys
        from vqs.errors import LogLockedError
        from vqs.storage.log import Log
        try:
            Log.open(sys.argv[1])
        except LogLockedError as e:
            print("locked", e.holder_pid, "|", e)
        else:
            print("opened")
        """
    )
    with Log.open(d) as lg:
        lg.append(b"x")
        out = subprocess.run([sys.executable, "-c", probe, d], capture_output=True, text=True,
                             env=child_env, timeout=30).stdout
        assert out.startswith(f"locked {os.getpid()} |"), out
        assert f"pid {os.getpid()}" in out
    out = subprocess.run([sys.executable, "-c", probe, d], capture_output=True, text=True,
                         env=child_env, timeout=30).stdout
    assert out.strip() == "opened"


INTERVAL_CHILD = textwrap.dedent(
    """
    import os, sys, zlib
    from vqs.storage.log import Log
    def val(i):
        body = b"o%d:" % i + bytes([i % 251]) * (i % 97)
        return body + b"|%08x" % zlib.crc32(body)
    lg = Log.open(sys.argv[1], flush=sys.argv[2], flush_interval_ms=20, segment_bytes=64 << 10)
    os.write(1, b"open\\n")
    k = 0
    while True:
        first = lg.end_offset
        if k % 4 == 0:
            lg.append_batch([val(i) for i in range(first, first + 1 + k % 13)])
        else:
            lg.append(val(first))
        k += 1
    """
)


@pytest.mark.parametrize("flush", ["interval", "never"])
def test_kill9_with_buffered_policies_loses_only_a_suffix(tmp_path, child_env, flush):
    """flush="interval"/"never" may lose the last appends, never a record in
    the middle: what survives is a prefix, every record intact."""
    d = str(tmp_path / "log")
    rnd = random.Random(5)
    ends = []
    for _ in range(3):
        p = subprocess.Popen([sys.executable, "-c", INTERVAL_CHILD, d, flush],
                             stdout=subprocess.PIPE, env=child_env)
        assert p.stdout.readline() == b"open\n"
        time.sleep(rnd.uniform(0.05, 0.25))
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        p.stdout.close()
        ends.append(verify(d, {}))  # contiguous, every value == val(offset)
    assert ends == sorted(ends) and ends[-1] > 0


SKIP_OPENER = textwrap.dedent(
    """
    import os, sys
    from vqs.storage.log import Log
    os.write(1, b"start\\n")
    with Log.open(sys.argv[1], recovery="skip") as lg:
        os.write(1, b"open\\n")
    """
)


def test_kill9_during_skip_recovery(tmp_path, child_env):
    """Quarantining a batch rewrites a segment (temp file, rename): a kill at
    any moment of it leaves a log that a later open still recovers to exactly
    'everything but the damaged batch'."""
    from vqs.record import scan_batches

    d = str(tmp_path / "log")
    with Log.open(d, flush="never") as lg:
        for i in range(0, 3000, 30):
            lg.append_batch([val(j) for j in range(i, i + 30)])
    os.unlink(os.path.join(d, "log.checkpoint"))  # full validation at the next open
    os.unlink(os.path.join(d, ".clean-shutdown"))
    (f,) = [os.path.join(d, x) for x in os.listdir(d) if x.endswith(".log")]
    with open(f, "rb") as fh:
        bs = list(scan_batches(fh.read()))
    pos, base, size = bs[40]
    with open(f, "r+b") as fh:
        fh.seek(pos + size // 2)
        b = fh.read(1)
        fh.seek(pos + size // 2)
        fh.write(bytes([b[0] ^ 0xFF]))
    damaged = set(range(base, base + 30))
    rnd = random.Random(11)
    for _ in range(6):
        p = subprocess.Popen([sys.executable, "-c", SKIP_OPENER, d], stdout=subprocess.PIPE, env=child_env)
        assert p.stdout.readline() == b"start\n"
        time.sleep(rnd.uniform(0.0, 0.08))
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        p.stdout.close()
    with Log.open(d, recovery="skip") as lg:
        assert lg.end_offset == 3000
        recs = []
        off = 0
        while off < lg.end_offset:
            got = lg.read(off, max_records=1000)
            recs += got
            off = got[-1].offset + 1
        assert all(bytes(r.value) == val(r.offset) for r in recs)
        assert [r.offset for r in recs] == [o for o in range(3000) if o not in damaged]
