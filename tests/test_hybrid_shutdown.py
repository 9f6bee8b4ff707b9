"""HybridQueue.shutdown(), maxsize and the queue.Queue subclass hooks, beyond
what CPython's test_queue.py checks (tests/test_hybrid_cpython_queue.py):
what a durable queue keeps after an immediate shutdown, items counted across
both tiers, hooks that keep their own items or wrap the tiers."""

import heapq
import os
import queue
import subprocess
import sys
import textwrap
import threading

import pytest

import vqs
from vqs import ConfigError, HybridQueue, MessageTooLarge, ShutDown

MODES = {
    "memory": {},
    "overflowing": {"memory_items": 1},
    "disk": {"memory_items": 0},
    "durable": {"durable": True},
}


@pytest.fixture(params=sorted(MODES))
def mode(request):
    return request.param


def test_shutdown_is_the_stdlib_class_where_there_is_one():
    assert vqs.ShutDown is vqs.hybrid.ShutDown
    if sys.version_info >= (3, 13):
        assert ShutDown is queue.ShutDown
    assert issubclass(ShutDown, Exception) and not issubclass(ShutDown, vqs.VQSError)


def test_immediate_shutdown_keeps_every_item_for_the_next_open(tmp_path, mode):
    path = tmp_path / "q"
    with HybridQueue(path, **MODES[mode]) as q:
        for i in range(10):
            q.put(i)
        assert q.get() == 0
        q.shutdown(immediate=True)
        assert q.qsize() == 0 and q.empty() and not q.full()
        assert q.unfinished_tasks == 1  # the item got, not yet done
        with pytest.raises(ShutDown):
            q.get()
        with pytest.raises(ShutDown):
            q.get_batch(5)
        assert q.peek_batch(5) == []
        with pytest.raises(ShutDown):
            q.put(99)
        with pytest.raises(ShutDown):
            q.put_batch([99])
        q.task_done()
        q.join()
    with HybridQueue(path, **MODES[mode]) as q:  # shutting down is not recorded
        assert [q.get() for _ in range(9)] == list(range(1, 10))
        q.put(10)
        assert q.get() == 10


def test_durable_items_survive_a_crash_after_an_immediate_shutdown(tmp_path):
    path = tmp_path / "q"
    child = textwrap.dedent(f"""
        import os
        from vqs import HybridQueue
        q = HybridQueue({str(path)!r}, durable=True)
        for i in range(5):
            q.put(i)
        assert q.get() == 0
        q.shutdown(immediate=True)
        os._exit(0)   # no close(): as a crash
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    subprocess.run([sys.executable, "-c", child], check=True, env=env, timeout=60)
    with HybridQueue(path, durable=True) as q:
        assert q.qsize() == 4
        assert q.get_batch(10) == [1, 2, 3, 4]


def test_shutdown_serves_the_backlog_then_wakes_waiting_getters(tmp_path, mode):
    with HybridQueue(tmp_path / "q", **MODES[mode]) as q:
        q.put_batch(["a", "b"])
        q.shutdown()
        assert q.get_batch(10) == ["a", "b"]
        with pytest.raises(ShutDown):
            q.get_batch(1, timeout=5)
        with pytest.raises(ShutDown):
            q.get(False)
    with HybridQueue(tmp_path / "q2", **MODES[mode]) as q:
        errors = []
        started = threading.Event()

        def waiter():
            started.set()
            try:
                q.get()
            except ShutDown as e:
                errors.append(e)

        t = threading.Thread(target=waiter)
        t.start()
        started.wait()
        q.shutdown()
        t.join(10)
        assert not t.is_alive() and len(errors) == 1


def test_maxsize_counts_items_in_both_tiers(tmp_path, mode):
    with HybridQueue(tmp_path / "q", maxsize=3, **MODES[mode]) as q:
        assert q.maxsize == 3
        q.put_batch([1, 2])
        q.put(3)
        assert q.full()
        with pytest.raises(queue.Full):
            q.put(4, timeout=0.01)
        with pytest.raises(queue.Full):
            q.put_batch([4], block=False)
        with pytest.raises(MessageTooLarge, match="maxsize=3"):
            q.put_batch([4, 5, 6, 7])
        assert q.get() == 1
        q.put(4, block=False)
        q.maxsize = 0  # unbounded in items: the byte budgets alone
        q.put_batch(range(5, 20))
        assert q.qsize() == 18
        assert q.get_batch(100) == list(range(2, 20))


def test_a_reopened_backlog_over_maxsize_holds_puts_until_it_drains(tmp_path, mode):
    with HybridQueue(tmp_path / "q", **MODES[mode]) as q:
        q.put_batch(range(5))
    with HybridQueue(tmp_path / "q", maxsize=2, **MODES[mode]) as q:
        assert q.full()
        with pytest.raises(queue.Full):
            q.put(5, block=False)
        for _ in range(4):
            q.get()
        q.put(5, block=False)
        assert q.get_batch(5) == [4, 5]


@pytest.mark.parametrize("bad", [1.5, "3", True, None])
def test_maxsize_must_be_an_integer(tmp_path, bad):
    with pytest.raises(ConfigError, match="maxsize"):
        HybridQueue(tmp_path / "q", maxsize=bad)


def test_hooks_of_a_subclass_that_keeps_its_own_items(tmp_path):
    class Priority(HybridQueue):  # queue.PriorityQueue's hooks, as written in queue.py
        def _init(self, maxsize):
            self.queue = []

        def _qsize(self):
            return len(self.queue)

        def _put(self, item):
            heapq.heappush(self.queue, item)

        def _get(self):
            return heapq.heappop(self.queue)

    with Priority(tmp_path / "q", maxsize=3) as q:
        for x in (5, 1, 3):
            q.put(x)
        assert q.full() and q.qsize() == 3
        with pytest.raises(queue.Full):
            q.put_nowait(0)
        assert [q.get(), q.get_nowait()] == [1, 3]
        q.put(2)
        q.shutdown(immediate=True)  # items it keeps itself go through _get, as in queue.Queue
        assert q.queue == [] and q.unfinished_tasks == 2
        with pytest.raises(ShutDown):
            q.get()


def test_hooks_that_wrap_the_tiers_keep_them_durable(tmp_path):
    seen = []

    class Tagged(HybridQueue):
        def _put(self, item):
            super()._put(("tag", item))

        def _get(self):
            item = super()._get()
            seen.append(item)
            return item[1]

    with Tagged(tmp_path / "q", durable=True) as q:
        q.put("a")
        q.put("b")
        assert q.get() == "a"
    with HybridQueue(tmp_path / "q", durable=True) as q:  # stored as the hook put them
        assert q.get() == ("tag", "b")
    assert seen == [("tag", "a")]


def test_immediate_shutdown_racing_durable_writers_loses_and_counts_nothing(tmp_path):
    """Puts being written when the shutdown comes return normally and count as
    done at once; every put that returned is there at the next open."""
    path = tmp_path / "q"
    q = HybridQueue(path, durable=True)
    done = [0] * 4
    go = threading.Barrier(5)

    def writer(k):
        go.wait()
        try:
            while True:
                q.put(k)
                done[k] += 1
        except ShutDown:
            pass

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    go.wait()
    while sum(done) < 200:
        q.get()  # let some through (and stay unfinished), with writers in their group commit
    q.shutdown(immediate=True)
    for t in threads:
        t.join(30)
    assert q.qsize() == 0
    assert q.unfinished_tasks == q.metrics.gets  # only the items got remain to be done
    for _ in range(q.metrics.gets):
        q.task_done()
    joined = threading.Thread(target=q.join)
    joined.start()
    joined.join(10)
    assert not joined.is_alive()
    gets = q.metrics.gets
    q.close()
    with HybridQueue(path, durable=True) as q:
        assert q.qsize() == sum(done) - gets


def test_maxsize_holds_under_concurrent_durable_writers(tmp_path):
    """Durable puts write outside the lock and share fsyncs: the bound counts
    the puts being written, once each, whichever put's group commit moved the
    end past them."""
    with HybridQueue(tmp_path / "q", durable=True, maxsize=3) as q:
        seen_over = []
        per_writer = 60

        def writer(k):
            for i in range(per_writer):
                q.put((k, i), timeout=30)

        threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        got = []
        while len(got) < 4 * per_writer:
            n = q.qsize()
            if n > 3:
                seen_over.append(n)
            got.append(q.get(timeout=30))
        for t in threads:
            t.join(30)
        assert not seen_over
        assert sorted(got) == sorted((k, i) for k in range(4) for i in range(per_writer))
        # every put registered: the in-flight bookkeeping is back to nothing
        assert (q._inflight_items, q._covered_ahead) == (0, 0)
        q.put_batch([1, 2, 3], block=False)  # exactly maxsize fits again
        assert q.full()


def test_maxsize_counts_a_group_committed_put_once(tmp_path):
    """maxsize=4 and four non-blocking puts a round: all fit. Two start
    together (one's fsync may cover the other's record before that one
    registers), the other two the moment the first of them returns: a put
    counted both under the end and in flight would refuse the last one."""
    with HybridQueue(tmp_path / "q", durable=True, maxsize=4) as q:
        for _ in range(100):
            go = threading.Barrier(2)
            first_back = threading.Event()
            refused = []

            def writer(k, go=go, first_back=first_back, refused=refused):
                if k < 2:
                    go.wait()
                else:
                    first_back.wait(30)
                try:
                    q.put(k, block=False)
                except queue.Full:
                    refused.append(k)
                first_back.set()

            threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            assert not refused
            assert sorted(q.get_batch(4)) == [0, 1, 2, 3]
