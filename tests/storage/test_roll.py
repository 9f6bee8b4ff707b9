"""Rolling a segment: the fsync of the sealed segment runs in the background.

The appender that rolls does not wait for that fsync (the shared flusher thread
does it), but nothing may claim durability past an unsynced segment: the
checkpoint's recovery point stays below it, and ``flush()`` or an acknowledged
``flush="always"`` append returns only after it was fsynced. ``os.fsync`` is
observed (see conftest.FsyncObserver), never replaced.
"""
from __future__ import annotations

import json
import os
import threading

import pytest

from vqs import Log, VQSError
from vqs.storage.log import CHECKPOINT
from vqs.storage.segment import LOG_SUFFIX

VALUE = b"x" * 200


def segments(d: str) -> list[str]:
    return sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(LOG_SUFFIX))


def recovery_point(d: str) -> int:
    with open(os.path.join(d, CHECKPOINT), "rb") as f:
        return json.loads(f.read())["recovery_point"]


def roll_once(lg: Log, d: str) -> str:
    """Append until the log has two segments; the path of the sealed one."""
    while len(segments(d)) < 2:
        lg.append_batch([VALUE] * 5)
    return segments(d)[0]


@pytest.mark.parametrize("flush", ["never", "interval"])  # "always": the acknowledging fsync covers it
def test_the_rolling_thread_does_not_fsync_the_sealed_segment(tmp_path, fsyncs, flush):
    d = str(tmp_path / "log")
    with Log.open(d, flush=flush, segment_bytes=4096) as lg:
        sealed = roll_once(lg, d)
        st = os.stat(sealed)
        # the background fsync happens without any further call
        assert fsyncs.wait_covered(st.st_ino, st.st_size), "the sealed segment was never fsynced"
        who = fsyncs.threads[st.st_ino]
        assert threading.current_thread().name not in who, who
        assert who == {"vqs-flusher"}


def test_the_recovery_point_passes_a_sealed_segment_only_after_its_fsync(tmp_path, fsyncs):
    d = str(tmp_path / "log")
    with Log.open(d, flush="never", segment_bytes=4096) as lg:
        first = segments(d)[0]
        gate = threading.Event()
        fsyncs.hold[os.stat(first).st_ino] = gate  # the background fsync waits
        sealed = roll_once(lg, d)
        assert sealed == first
        base_of_next = int(os.path.basename(segments(d)[1])[:20])
        lg.append_batch([VALUE] * 5)
        assert recovery_point(d) < base_of_next  # not durable yet: recovery rescans it
        gate.set()
        lg.flush()  # waits for the background fsync, or does it itself
        assert recovery_point(d) >= base_of_next


def test_flush_covers_every_sealed_segment(tmp_path, fsyncs):
    """flush() returns only after the segments sealed before it were fsynced,
    even while their background fsync is held up."""
    d = str(tmp_path / "log")
    with Log.open(d, flush="never", segment_bytes=4096) as lg:
        sealed, gates = [], []
        for _ in range(3):
            seg = segments(d)[-1]
            gates.append(threading.Event())
            fsyncs.hold[os.stat(seg).st_ino] = gates[-1]
            while segments(d)[-1] == seg:
                lg.append_batch([VALUE] * 5)
            sealed.append(seg)
        done = threading.Event()
        t = threading.Thread(target=lambda: (lg.flush(), done.set()))
        t.start()
        done.wait(0.1)  # flush may be waiting for the held background fsync
        for g in gates:
            g.set()
        t.join(30)
        assert done.is_set()
        for seg in sealed:
            st = os.stat(seg)
            assert fsyncs.covered(st.st_ino) >= st.st_size, f"{seg} not fsynced before flush() returned"


def test_an_acknowledged_always_append_covers_the_segment_it_sealed(tmp_path, fsyncs):
    d = str(tmp_path / "log")
    with Log.open(d, flush="always", segment_bytes=4096) as lg:
        for _ in range(3):
            seg = segments(d)[-1]
            gate = threading.Event()
            fsyncs.hold[os.stat(seg).st_ino] = gate
            acked = []

            def roll(seg=seg, acked=acked):
                while segments(d)[-1] == seg:
                    lg.append_batch([VALUE] * 5)
                st = os.stat(seg)  # the append that sealed it has returned
                acked.append(fsyncs.covered(st.st_ino) >= st.st_size)

            t = threading.Thread(target=roll)
            t.start()
            t.join(0.05)  # the appender may be waiting for the held background fsync
            gate.set()
            t.join(30)
            assert acked == [True], f"{seg} not fsynced when the append that sealed it returned"


def test_close_fsyncs_sealed_segments_and_reopens_clean(tmp_path, fsyncs):
    d = str(tmp_path / "log")
    lg = Log.open(d, flush="never", segment_bytes=4096)
    for _ in range(40):
        lg.append_batch([VALUE] * 5)
    end = lg.end_offset
    lg.close()
    for seg in segments(d):
        st = os.stat(seg)
        assert fsyncs.covered(st.st_ino) >= st.st_size, seg
    assert recovery_point(d) == end
    with Log.open(d) as lg:
        assert lg.end_offset == end
        assert [bytes(r.value) for r in lg.read(0, max_records=200)] == [VALUE] * 200


def test_a_failed_background_fsync_fails_the_log(tmp_path, fsyncs):
    """An fsync error may have dropped dirty pages: the log refuses writes and
    says why, as when the flusher's own fsync fails."""
    d = str(tmp_path / "log")
    lg = Log.open(d, flush="never", segment_bytes=4096)
    first = segments(d)[0]
    fsyncs.fail_inodes.add(os.stat(first).st_ino)
    roll_once(lg, d)
    with pytest.raises(VQSError, match=f"fsync of {first} failed"):
        lg.flush()  # fails itself, or finds the log failed by the background fsync
    with pytest.raises(VQSError, match="accepts no writes"):
        lg.append(b"after the failure")
    fsyncs.fail_inodes.clear()
    lg.close()
