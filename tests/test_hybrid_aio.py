"""AsyncHybridQueue beyond what CPython's test_asyncio/test_queues.py checks
(tests/test_hybrid_cpython_asyncio_queues.py): what survives a restart and a
kill -9, that no durable fsync runs on the event loop's thread, shutdown's
items kept for the next open, close waking waiters, maxsize with durable
writes in flight."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import vqs
from vqs import AsyncHybridQueue, ConfigError, LogClosedError, QueueShutDown
from vqs.disk import fs

MODES = {
    "memory": {},
    "overflowing": {"memory_items": 1},
    "disk": {"memory_items": 0},
    "durable": {"durable": True},
}


@pytest.fixture(params=sorted(MODES))
def mode(request):
    return request.param


def run(coro):
    return asyncio.run(coro)


def test_exports_and_the_stdlib_class():
    assert issubclass(AsyncHybridQueue, asyncio.Queue)
    assert vqs.QueueShutDown is QueueShutDown
    if sys.version_info >= (3, 13):
        assert QueueShutDown is asyncio.QueueShutDown
    assert not issubclass(QueueShutDown, vqs.VQSError)


def test_items_survive_a_clean_close_and_count_as_tasks_at_open(tmp_path, mode):
    path = tmp_path / "q"

    async def first():
        async with AsyncHybridQueue(path, **MODES[mode]) as q:
            for i in range(5):
                await q.put({"n": i})
            assert await q.get() == {"n": 0}

    async def second():
        q = await AsyncHybridQueue.open(path, **MODES[mode])
        async with q:
            assert q.qsize() == 4
            join = asyncio.create_task(q.join())
            got = []
            while not q.empty():
                got.append((await q.get())["n"])
                await asyncio.sleep(0)
                assert not join.done()
                q.task_done()
            assert got == [1, 2, 3, 4]
            await join

    run(first())
    run(second())


def test_durable_puts_survive_kill_9(tmp_path, child_env):
    path = tmp_path / "q"
    code = textwrap.dedent("""
        import asyncio, os, signal, sys
        import vqs

        async def main():
            q = vqs.AsyncHybridQueue(sys.argv[1], durable=True)
            await asyncio.gather(*(q.put(i) for i in range(10)))
            for i in range(10, 20):
                await q.put(i)
            assert q.get_nowait() in range(10)  # one got: the consumed position is recorded
            print("put", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

        asyncio.run(main())
    """)
    p = subprocess.run([sys.executable, "-c", code, str(path)], env=child_env,
                       capture_output=True, text=True, timeout=60)
    assert p.stdout == "put\n", p.stderr
    assert p.returncode == -signal.SIGKILL

    async def reopen():
        async with AsyncHybridQueue(path, durable=True) as q:
            assert q.qsize() == 19
            got = [q.get_nowait() for _ in range(19)]
            # the ten concurrent puts in some order, less the one got; then the rest in order
            assert len(set(got[:9])) == 9 and set(got[:9]) < set(range(10))
            assert got[9:] == list(range(10, 20))

    run(reopen())


class _FsyncGate:
    """Rebinds the storage's fsync (vqs.disk.fs, the filesystem seam) to one
    that records the thread and file of each call, sets ``entered`` and, if
    ``closed``, holds the call until ``release`` (at most 5 s: a call held on
    the loop's thread then shows as a test failure, not a hang)."""

    def __init__(self, monkeypatch):
        self.calls: list[tuple[int, str]] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.closed = False
        real = fs.fsync

        def fsync(fd):
            self.calls.append((threading.get_ident(), os.readlink(f"/proc/self/fd/{fd}")))
            self.entered.set()
            if self.closed:
                self.release.wait(5)
            return real(fd)

        monkeypatch.setattr(fs, "fsync", fsync)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads /proc/self/fd")
def test_a_durable_put_fsyncs_off_the_loop_while_the_loop_runs(tmp_path, monkeypatch):
    async def main():
        async with AsyncHybridQueue(tmp_path / "q", durable=True) as q:
            gate = _FsyncGate(monkeypatch)
            gate.closed = True
            loop = asyncio.get_running_loop()
            put = asyncio.create_task(q.put("x"))
            ticks = 0

            async def ticker():
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0)

            tick = asyncio.create_task(ticker())
            # the put's fsync is held: the loop must still run (this very wait is on it)
            assert await loop.run_in_executor(None, gate.entered.wait, 5)
            before = ticks
            for _ in range(3):
                await asyncio.sleep(0)
            assert ticks > before and not put.done()
            assert q.qsize() == 0 and q.full() is False
            gate.release.set()
            await put
            tick.cancel()
            calls = list(gate.calls)  # the put's: none on the loop's thread
            assert calls and all(t != threading.get_ident() for t, _ in calls)
            assert q.qsize() == 1 and q.get_nowait() == "x"

    run(main())


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads /proc/self/fd")
def test_durable_gets_fsync_their_position_off_the_loop(tmp_path, monkeypatch):
    async def main():
        q = AsyncHybridQueue(tmp_path / "q", durable=True, checkpoint_fsync_s=1e-9)
        for i in range(20):
            await q.put(i)
        gate = _FsyncGate(monkeypatch)
        got = []
        while q.qsize() > 1:  # not the last: a get that drains the queue reclaims (docs/hybrid.md)
            got.append(q.get_nowait())
            await asyncio.sleep(0)
        assert got == list(range(19))
        # the consumed position's fsync was started, in the executor
        assert await asyncio.get_running_loop().run_in_executor(None, gate.entered.wait, 5)
        calls = list(gate.calls)
        assert calls and all(t != threading.get_ident() for t, _ in calls)
        assert all(f.endswith("hybrid.ckpt") for _, f in calls)
        await q.aclose()  # (waits for a checkpoint fsync still running)

    run(main())


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads /proc/self/fd")
@pytest.mark.parametrize("durable", [False, True])
def test_gets_reclaim_consumed_segments_off_the_loop(tmp_path, monkeypatch, durable):
    """Deleting consumed segments fsyncs (the log's recovery checkpoint, a
    roll): the gets that pass a reclaim point leave it to the executor."""
    async def main():
        q = AsyncHybridQueue(tmp_path / "q", durable=durable, memory_items=1,
                             segment_bytes=64 * 1024, checkpoint_fsync_s=3600)
        payload = b"x" * 1000
        for i in range(400):  # ~400 KB: several 64 KiB segments
            await q.put((i, payload))
        segments = lambda: len(list((tmp_path / "q").rglob("*.log")))  # noqa: E731
        before = segments()
        assert before > 3
        gate = _FsyncGate(monkeypatch)
        loop_thread = threading.get_ident()
        for i in range(400):
            assert q.get_nowait()[0] == i
            await asyncio.sleep(0)
        # the executor's reclaims (no event to wait on); they fsync, which a loaded machine delays
        # by seconds: the deadline bounds a hang, not the speed
        deadline = time.monotonic() + 60
        while segments() > 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert segments() <= 2  # the consumed segments went
        assert [f for t, f in gate.calls if t == loop_thread] == []
        await q.aclose()

    run(main())


def test_immediate_shutdown_counts_a_durable_put_written_but_not_yet_returned_once(tmp_path):
    """A durable put whose write landed (the item is in the HybridQueue) but
    whose bookkeeping has not run on the loop yet when shutdown(immediate=True)
    comes: the shutdown marks it done with the queued items, and its put's
    return does not mark it done a second time (which would let join() return
    while an item that was got is not done)."""
    async def main():
        q = AsyncHybridQueue(tmp_path / "q", durable=True)
        await q.put("got")
        assert await q.get() == "got"  # got, not task_done yet
        put = asyncio.create_task(q.put("in flight"))
        await asyncio.sleep(0)  # the put starts its write in the executor
        deadline = time.monotonic() + 10
        while q._hq.qsize() < 1 and time.monotonic() < deadline:  # the loop is held: no bookkeeping runs
            time.sleep(0.001)
        assert q._hq.qsize() == 1
        q.shutdown(immediate=True)
        await put
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(q.join(), 0.2)  # "got" is still not done
        q.task_done()
        await asyncio.wait_for(q.join(), 5)
        await q.aclose()

    run(main())


def test_durable_put_nowait_is_refused_with_what_to_do(tmp_path):
    async def main():
        async with AsyncHybridQueue(tmp_path / "q", durable=True) as q:
            with pytest.raises(ConfigError, match=r"await queue.put\(item\)"):
                q.put_nowait(1)
            assert q.qsize() == 0 and q._unfinished_tasks == 0
            q.shutdown()
            with pytest.raises(QueueShutDown):
                q.put_nowait(1)

    run(main())


class _GatedExecutor(concurrent.futures.ThreadPoolExecutor):
    """The loop's executor, its calls held until ``gate`` is set (writes kept in flight)."""

    def __init__(self, gate: threading.Event):
        super().__init__(max_workers=4)
        self.gate = gate

    def submit(self, fn, /, *args, **kwargs):
        def held():
            self.gate.wait()
            return fn(*args, **kwargs)
        return super().submit(held)


def test_durable_writes_in_flight_count_toward_maxsize(tmp_path):
    async def main():
        gate = threading.Event()
        asyncio.get_running_loop().set_default_executor(_GatedExecutor(gate))
        async with AsyncHybridQueue(tmp_path / "q", maxsize=2, durable=True) as q:
            puts = [asyncio.create_task(q.put(i)) for i in range(8)]
            while q._writing < 2:
                await asyncio.sleep(0)
            for _ in range(10):  # the six others stay waiting while both writes are held
                await asyncio.sleep(0)
            assert q._writing == 2 and q.qsize() == 0 and q.full()
            gate.set()
            got = []
            while len(got) < 8:
                assert q.qsize() <= 2
                got.append(await q.get())
                q.task_done()
            await asyncio.gather(*puts)
            assert sorted(got) == list(range(8))
            await q.join()

    run(main())


def test_a_cancelled_durable_put_whose_write_runs_is_still_put(tmp_path):
    async def main():
        async with AsyncHybridQueue(tmp_path / "q", durable=True) as q:
            put = asyncio.create_task(q.put("kept"))
            await asyncio.sleep(0)  # admitted, writing in the executor
            assert q._writing == 1
            put.cancel()
            with pytest.raises(asyncio.CancelledError):
                await put
            assert await q.get() == "kept"
            q.task_done()
            await q.join()

    run(main())


def test_immediate_shutdown_keeps_the_items_for_the_next_open(tmp_path, mode):
    path = tmp_path / "q"

    async def first():
        async with AsyncHybridQueue(path, **MODES[mode]) as q:
            for i in range(4):
                await q.put(i)
            assert await q.get() == 0
            join = asyncio.create_task(q.join())
            q.shutdown(immediate=True)
            assert q.qsize() == 0 and q.empty()
            with pytest.raises(QueueShutDown):
                q.get_nowait()
            with pytest.raises(QueueShutDown):
                await q.put(9)
            await asyncio.sleep(0)
            assert not join.done()  # the item got is not done yet
            q.task_done()
            await join
            with pytest.raises(ValueError):
                q.task_done()

    async def second():
        async with AsyncHybridQueue(path, **MODES[mode]) as q:
            assert [await q.get() for _ in range(3)] == [1, 2, 3]
            await q.put(4)  # shutting down is for one process: not recorded

    run(first())
    run(second())


def test_shutdown_wakes_waiters_and_lets_gets_drain(tmp_path, mode):
    async def main():
        async with AsyncHybridQueue(tmp_path / "q", maxsize=1, **MODES[mode]) as q:
            await q.put("a")
            putter = asyncio.create_task(q.put("b"))
            await asyncio.sleep(0)
            q.shutdown()
            with pytest.raises(QueueShutDown):
                await putter
            assert await q.get() == "a"
            getter = asyncio.create_task(q.get())
            await asyncio.sleep(0)
            assert getter.done()
            with pytest.raises(QueueShutDown):
                await getter

    run(main())


def test_close_wakes_waiters_with_log_closed(tmp_path, mode):
    async def main():
        q = AsyncHybridQueue(tmp_path / "q", **MODES[mode])
        getter = asyncio.create_task(q.get())
        await asyncio.sleep(0)
        await q.aclose()
        with pytest.raises(LogClosedError):
            await getter
        with pytest.raises(LogClosedError):
            await q.put(1)
        with pytest.raises(LogClosedError):
            q.get_nowait()
        q.close()  # idempotent
        assert q.closed

    run(main())


def test_repr_lists_a_bounded_head(tmp_path):
    async def main():
        async with AsyncHybridQueue(tmp_path / "q", memory_items=10) as q:
            for i in range(100):
                q.put_nowait(i)
            r = repr(q)
            assert r.startswith("<AsyncHybridQueue at ")
            assert "_queue=[0, 1, 2, " in r and ", 19, ...80 more]" in r and "tasks=100" in r

    run(main())


def test_byte_budgets_bound_it_as_full(tmp_path):
    async def main():
        async with AsyncHybridQueue(tmp_path / "q", memory_items=1, max_disk_bytes=0) as q:
            q.put_nowait("a")
            assert q.full()
            with pytest.raises(asyncio.QueueFull):
                q.put_nowait("b")
            putter = asyncio.create_task(q.put("b"))
            await asyncio.sleep(0)
            assert not putter.done()
            assert q.get_nowait() == "a"
            await putter
            assert q.get_nowait() == "b"

    run(main())


def test_options_are_checked(tmp_path):
    with pytest.raises(ConfigError, match="maxsize"):
        AsyncHybridQueue(tmp_path / "a", maxsize="3")
    with pytest.raises(ConfigError, match="checkpoint_fsync_s"):
        AsyncHybridQueue(tmp_path / "b", durable=True, checkpoint_fsync_s=-1)
    with pytest.raises(ConfigError, match="durable"):
        AsyncHybridQueue(tmp_path / "c", durable="yes")
