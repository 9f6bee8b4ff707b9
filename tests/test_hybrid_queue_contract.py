"""HybridQueue against queue.Queue's contract: negative timeouts refused on
every path (fast paths included), in every mode."""
import queue

import pytest

from vqs import HybridQueue

MODES = {
    "memory": {},
    "overflowing": {"memory_items": 1},
    "disk": {"memory_items": 0},
    "durable": {"durable": True},
}


@pytest.fixture(params=sorted(MODES))
def q(request, tmp_path):
    hq = HybridQueue(tmp_path / "q", **MODES[request.param])
    yield hq
    hq.close()


def test_negative_timeout_refused_like_queue_queue(q):
    ref = queue.Queue(maxsize=10)  # unbounded queue.Queue skips the put check; HybridQueue is always bounded
    for target in (ref, q):
        with pytest.raises(ValueError):
            target.put(1, timeout=-1)
        target.put(1)
        target.put(2)
        with pytest.raises(ValueError):
            target.get(timeout=-1)  # items are there: the fast path must refuse too
        target.put(3, block=False, timeout=-1)  # non-blocking ignores timeout, as queue.Queue
        assert target.get(False, -1) == 1
    with pytest.raises(ValueError):
        q.put_batch([1], timeout=-1)
    with pytest.raises(ValueError):
        q.get_batch(1, timeout=-1)


def test_nonblocking_get_on_empty_raises_empty_then_sees_puts(q):
    with pytest.raises(queue.Empty):
        q.get(False)
    assert q.get_batch(5, block=False) == []
    q.put("a")
    assert q.get(False) == "a"
    with pytest.raises(queue.Empty):
        q.get_nowait()
