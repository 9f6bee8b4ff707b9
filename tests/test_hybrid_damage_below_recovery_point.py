"""HybridQueue(recovery=...) on a disk tier of several segments damaged in an
early segment, below the log's recovery point (so the log's recovery at open
never scans it): after a kill -9 the backlog scan at open meets it, after a
clean close the read-ahead of a get does. Same meaning as ``Log.open``'s:
``fail`` raises naming the file and position, ``skip`` quarantines exactly
the damaged batch (once), ``truncate`` cuts the disk tier there (everything
after it goes)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import textwrap

import pytest
from batch_damage import flip_batch_byte

from vqs.errors import CorruptRecordError
from vqs.hybrid import HybridQueue
from vqs.storage.log_dir import QUARANTINE_DIR, read_checkpoint

N = 400
GOT = 20  # consumed before the crash

CHILD = textwrap.dedent(
    f"""
    import os, signal, sys
    from vqs.hybrid import HybridQueue
    q = HybridQueue(sys.argv[1], memory_items=0, durable=True, segment_bytes=4096)
    for i in range({N}):
        q.put(i)
    for _ in range({GOT}):
        q.get()
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def _flip(logdir: str, seg_index: int = 2, batch_index: int = 3) -> tuple[str, int, int]:
    """Flip a byte of one batch; (segment path, position, base offset = the item)."""
    segs = sorted(f for f in os.listdir(logdir) if f.endswith(".log"))
    seg = os.path.join(logdir, segs[seg_index])
    pos, base, _, _ = flip_batch_byte(seg, batch_index)
    return seg, pos, base


@pytest.fixture(scope="module")
def crashed(tmp_path_factory, python_exe=None):
    """A durable queue killed with SIGKILL after N puts (one batch each) and
    GOT gets, then damaged in its third segment: (dir, segment, position, item)."""
    import sys

    from tests.conftest import ROOT

    d = tmp_path_factory.mktemp("crashed")
    q = str(d / "q")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-c", CHILD, q], env=env, capture_output=True, timeout=120)
    assert p.returncode == -signal.SIGKILL, p.stderr.decode()
    logdir = os.path.join(q, "log")
    assert len([f for f in os.listdir(logdir) if f.endswith(".log")]) > 5
    seg, pos, item = _flip(logdir)
    assert GOT < item < read_checkpoint(logdir)[0]  # below the recovery point
    return q, seg, pos, item


def _copy(crashed, tmp_path):
    q, seg, pos, item = crashed
    dst = str(tmp_path / "q")
    shutil.copytree(q, dst)
    return dst, seg.replace(q, dst), pos, item


def _drain(q) -> list:
    out = []
    while True:
        got = q.get_batch(1000, block=False)
        if not got:
            return out
        out.extend(got)


def _quarantine(q) -> list[str]:
    d = os.path.join(q, "log", QUARANTINE_DIR)
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def test_after_a_crash_fail_refuses_naming_file_and_position(crashed, tmp_path):
    q, seg, pos, _ = _copy(crashed, tmp_path)
    for _ in range(2):  # the directory lock was released
        with pytest.raises(CorruptRecordError) as ei:
            HybridQueue(q, recovery="fail")
        assert ei.value.path == seg and ei.value.position == pos
    assert _quarantine(q) == []


def test_after_a_crash_skip_quarantines_exactly_the_damaged_item(crashed, tmp_path):
    q, seg, pos, item = _copy(crashed, tmp_path)
    expect = [i for i in range(GOT, N) if i != item]
    with HybridQueue(q, recovery="skip") as hq:
        assert hq.qsize() == len(expect)
        assert len(_quarantine(q)) == 1
        assert _drain(hq) == expect
        hq.put("new")
    assert _quarantine(q) == [f"{os.path.basename(seg)[:-4]}-{pos}-{item}-{item + 1}.bad"]
    with HybridQueue(q, recovery="fail") as hq:  # the damage is gone: even fail opens
        assert _drain(hq) == ["new"]
    assert len(_quarantine(q)) == 1


def test_after_a_crash_truncate_keeps_the_items_before_the_damage(crashed, tmp_path):
    q, seg, _, item = _copy(crashed, tmp_path)
    with HybridQueue(q, recovery="truncate") as hq:
        assert hq.qsize() == item - GOT
        assert hq.metrics.log_segments == 3  # the segments after the damaged one went
        assert _drain(hq) == list(range(GOT, item))  # (the drain reclaims: test_hybrid_drain_reclaims.py)
        hq.put("new")
    assert sorted(f for f in os.listdir(os.path.join(q, "log")) if f.endswith(".log"))[-1] == os.path.basename(seg)
    with HybridQueue(q, recovery="fail") as hq:
        assert _drain(hq) == ["new"]
    assert _quarantine(q) == []


def _closed_damaged(path, durable: bool) -> int:
    """A cleanly closed queue of N items over several segments, damaged in its
    third: opening reads nothing (the clean checkpoint), a get meets it."""
    with HybridQueue(path, memory_items=0, durable=durable, segment_bytes=4096) as q:
        for i in range(N):
            q.put(i)
    return _flip(os.path.join(path, "log"))[2]


@pytest.mark.parametrize("durable", [False, True])
def test_damage_met_by_a_get(tmp_path, durable):
    for policy in ("fail", "skip", "truncate"):
        q = str(tmp_path / policy)
        item = _closed_damaged(q, durable)
        with HybridQueue(q, recovery=policy, memory_items=10, durable=durable) as hq:
            assert hq.qsize() == N  # nothing read at open
            if policy == "fail":
                assert [hq.get() for _ in range(item)] == list(range(item))
                with pytest.raises(CorruptRecordError):
                    hq.get_batch(10, block=False)
                continue
            hq.put_batch(["m1", "m2"])
            got = _drain(hq)
            kept = [i for i in range(N) if i != item] if policy == "skip" else list(range(item))
            # durable: m1 and m2 were written to the log after the damage, so a
            # truncate drops them too; otherwise they wait in the memory tier
            tail = [] if durable and policy == "truncate" else ["m1", "m2"]
            assert got == kept + tail
            assert hq.qsize() == 0
            for _ in got:
                hq.task_done()
            assert hq.unfinished_tasks == 0
            hq.join()
            hq.put("after")
        with HybridQueue(q, recovery="fail") as hq:
            assert _drain(hq) == ["after"]


def test_truncate_while_durable_puts_are_in_flight(tmp_path):
    """Putters keep writing through while a get meets the damage: the cut waits
    for the puts in flight, new ones wait for the cut; every item comes out at
    most once, the count stays exact and the queue reopens as it was left."""
    import threading

    q = str(tmp_path / "q")
    item = _closed_damaged(q, durable=True)
    stop = threading.Event()
    with HybridQueue(q, recovery="truncate", durable=True) as hq:
        def produce(t):
            i = 0
            while not stop.is_set() and i < 300:
                hq.put(("p", t, i))
                i += 1

        threads = [threading.Thread(target=produce, args=(t,)) for t in range(3)]
        for th in threads:
            th.start()
        got = []
        while len(got) < item + 50:
            got += hq.get_batch(100, timeout=10)
        stop.set()
        for th in threads:
            th.join()
        got += _drain(hq)
        assert got[:item] == list(range(item))
        rest = got[item:]
        assert all(isinstance(x, tuple) for x in rest) and len(set(rest)) == len(rest)
        for t in range(3):  # each putter's surviving items in its order
            mine = [x[2] for x in rest if x[1] == t]
            assert mine == sorted(mine)
        assert hq.qsize() == 0 and hq.unfinished_tasks == len(got)
        hq.put("last")
    with HybridQueue(q) as hq:
        assert _drain(hq) == ["last"]


@pytest.mark.parametrize("durable", [False, True])
def test_truncate_met_by_get_one_at_a_time(tmp_path, durable):
    """``get()`` (not ``get_batch``) meets the damage under ``truncate``: it
    cuts the disk tier, and the queue goes on as it then stands, empty here:
    ``queue.Empty`` at the timeout (before: IndexError from the empty take)."""
    import queue

    q = str(tmp_path / "q")
    item = _closed_damaged(q, durable)
    with HybridQueue(q, recovery="truncate", memory_items=10, durable=durable) as hq:
        got = []
        with pytest.raises(queue.Empty):
            while True:
                got.append(hq.get(timeout=0.05))
        assert got == list(range(item))
        hq.put("after")
        assert hq.get(timeout=1) == "after"
