"""CPython's own test_asyncio/test_queues.py (3.13.0, vendored in tests/third_party/)
run against AsyncHybridQueue as ``asyncio.Queue``, in every mode.

Its Queue test classes (not LifoQueue/PriorityQueue: AsyncHybridQueue is
FIFO) run once per mode, each mode with its own copy of the vendored module
whose ``asyncio`` is asyncio itself but for ``Queue``: an AsyncHybridQueue
subclass named ``Queue`` (the repr tests look for ``<Queue``) taking
``maxsize`` as its one argument, and ``QueueShutDown``: ``vqs.QueueShutDown``
(``asyncio.QueueShutDown`` itself on 3.13+). Every queue a test creates gets a
fresh directory, closed and removed after the test. A test AsyncHybridQueue
cannot pass is skipped here with its reason, and listed in docs/hybrid.md
("CPython's test_asyncio/test_queues.py").
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import sys
import tempfile
import types
import unittest

import vqs
from vqs import AsyncHybridQueue

VENDORED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "third_party",
                        "cpython_test_asyncio_queues.py")

MODES = {
    "memory": {},
    "overflowing": {"memory_items": 1},
    "disk": {"memory_items": 0},
    "durable": {"durable": True},
}

_PUT_NOWAIT = ("durable=True: put_nowait() raises ConfigError (it would write and fsync on the "
               "event loop; `await put()` writes in an executor), and this test calls it")
_STEPS = ("durable=True: `await put()` returns after its write and fsync in an executor, so it "
          "takes more loop iterations than the test's `await asyncio.sleep(0)` steps allow")

#: (class, test) -> (modes, reason): tests skipped, the same list as in docs/hybrid.md.
DIFFERENCES = {
    ("QueueBasicTests", "test_repr"): ({"durable"}, _PUT_NOWAIT),
    ("QueueBasicTests", "test_str"): ({"durable"}, _PUT_NOWAIT),
    ("QueueBasicTests", "test_maxsize"): ({"durable"}, _STEPS),
    ("QueueGetTests", "test_blocking_get"): ({"durable"}, _PUT_NOWAIT),
    ("QueueGetTests", "test_blocking_get_wait"): ({"durable"}, _PUT_NOWAIT),
    ("QueueGetTests", "test_nonblocking_get"): ({"durable"}, _PUT_NOWAIT),
    ("QueuePutTests", "test_blocking_put_wait"): (
        {"durable"}, _STEPS + " (its get_nowait, 10 ms later, can come before the first put lands)"),
    ("QueuePutTests", "test_nonblocking_put"): ({"durable"}, _PUT_NOWAIT),
    ("QueuePutTests", "test_get_cancel_drop_one_pending_reader"): ({"durable"}, _PUT_NOWAIT),
    ("QueuePutTests", "test_get_cancel_drop_many_pending_readers"): ({"durable"}, _PUT_NOWAIT),
    ("QueuePutTests", "test_put_cancel_drop"): ({"durable"}, _PUT_NOWAIT),
    ("QueuePutTests", "test_nonblocking_put_exception"): ({"durable"}, _PUT_NOWAIT),
    ("QueuePutTests", "test_float_maxsize"): ({"durable"}, _PUT_NOWAIT),
    ("QueuePutTests", "test_put_cancelled_race"): ({"durable"}, _STEPS),
    ("QueuePutTests", "test_why_are_putters_waiting"): (
        {"durable"}, _STEPS + " (its getter takes what is queued after one step, the putters wait on)"),
    ("QueuePutTests", "test_cancelled_puts_not_being_held_in_self_putters"): ({"durable"}, _PUT_NOWAIT),
    ("QueuePutTests", "test_cancelled_put_silence_value_error_exception"): ({"durable"}, _PUT_NOWAIT),
    ("QueueJoinTests", "test_task_done"): ({"durable"}, _PUT_NOWAIT),
    ("QueueShutdownTests", "test_shutdown_nonempty"): ({"durable"}, _PUT_NOWAIT),
    ("QueueShutdownTests", "test_shutdown_immediate"): ({"durable"}, _PUT_NOWAIT),
    ("QueueShutdownTests", "test_shutdown_immediate_with_unfinished"): ({"durable"}, _PUT_NOWAIT),
}

VENDORED_CLASSES = ("QueueBasicTests", "QueueGetTests", "QueuePutTests", "QueueJoinTests",
                    "QueueShutdownTests")


class _State:
    dir: str | None = None
    opened: list = []


def _queue_class(mode: str, options: dict) -> type:
    class Queue(AsyncHybridQueue):
        def __init__(self, maxsize=0):
            path = tempfile.mkdtemp(prefix="q", dir=_State.dir)
            super().__init__(path, maxsize=maxsize, **options)
            _State.opened.append(self)

    Queue.__qualname__ = f"Queue[{mode}]"
    return Queue


class _Asyncio(types.SimpleNamespace):
    """asyncio, but for the names set on it."""

    def __getattr__(self, name):
        return getattr(asyncio, name)


def _load(mode: str) -> types.ModuleType:
    """A copy of the vendored module of its own (its globals are per mode)."""
    name = f"cpython_test_asyncio_queues_{mode}"
    spec = importlib.util.spec_from_file_location(name, VENDORED)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class _FreshDirectory:
    """A fresh directory per test; every queue opened in it is closed after."""

    def setUp(self):
        skip = DIFFERENCES.get((self._vendored, self._testMethodName))
        if skip and self._mode in skip[0]:
            self.skipTest(skip[1])
        _State.dir = tempfile.mkdtemp(prefix="cpython-test-asyncio-queues-")
        _State.opened = []
        self.addCleanup(self._close_all, _State.dir)
        super().setUp()

    @staticmethod
    def _close_all(path):
        for q in _State.opened:
            q.close()
        _State.opened = []
        shutil.rmtree(path, ignore_errors=True)


def _make(mode: str, options: dict) -> dict:
    module = _load(mode)
    queue_class = _queue_class(mode, options)
    module.asyncio = _Asyncio(Queue=queue_class, QueueShutDown=vqs.QueueShutDown)
    classes = {}
    for vendored in VENDORED_CLASSES:
        base = getattr(module, vendored)
        attrs = {"_mode": mode, "_vendored": vendored}
        if hasattr(base, "q_class"):
            attrs["q_class"] = queue_class  # set at the vendored module's import: asyncio.Queue
        name = f"Test{vendored}_{mode}"
        cls = type(name, (_FreshDirectory, base), attrs)
        cls.__module__ = __name__
        classes[name] = cls
    return classes


for _mode, _options in MODES.items():
    globals().update(_make(_mode, _options))
del _mode, _options


def tearDownModule():
    asyncio.set_event_loop_policy(None)


if __name__ == "__main__":
    unittest.main()
