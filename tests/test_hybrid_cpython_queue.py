"""CPython's own test_queue.py (3.13.0, vendored in tests/third_party/) run
against HybridQueue as ``queue.Queue``, in every mode.

Each vendored test class (QueueTest, FailingQueueTest, BaseSimpleQueueTest)
runs with its ``queue`` module replaced by a namespace whose ``Queue`` is a
HybridQueue subclass named ``Queue`` (the tests look the expected order up by
class name) taking ``maxsize`` as its one argument, and whose ``ShutDown`` is
``vqs.ShutDown`` (``queue.ShutDown`` itself on 3.13+). Every queue a test
creates gets a fresh directory, closed and removed after the test. A test
HybridQueue cannot pass is skipped here with its reason, and listed in
docs/hybrid.md ("CPython's test_queue.py").
"""

from __future__ import annotations

import gc
import importlib.util
import os
import queue
import shutil
import sys
import tempfile
import types
import unittest

import pytest

import vqs
from vqs import HybridQueue

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "third_party")
pytestmark = pytest.mark.slow  # about a minute in all (durable mode: an fsync a put)


def _load(name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_load("cpython_test_support")
cp = _load("cpython_test_queue")


@pytest.fixture(autouse=True, scope="module")
def _frozen_heap():
    """The tests' ``gc_collect()`` walks the whole heap of the suite's process (test_references
    calls it 20 times): what exists before this module is frozen, so a collection walks what the
    tests made, as it would in a process of their own."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()

MODES = {
    "memory": {},
    "overflowing": {"memory_items": 1},
    "disk": {"memory_items": 0},
    "durable": {"durable": True},
}

#: Tests skipped per mode, with the reason (the same list is in docs/hybrid.md).
DIFFERENCES = {
    ("BaseSimpleQueueTest", "test_references"): (
        {"overflowing", "disk", "durable"},
        "an item that goes to disk is serialized (pickle by default); the test's items are "
        "instances of a class local to the test function, which pickle cannot serialize",
    ),
}


class _State:
    dir: str | None = None
    opened: list = []


def _queue_class(mode: str, options: dict) -> type:
    class Queue(HybridQueue):
        def __init__(self, maxsize=0):
            path = tempfile.mkdtemp(prefix="q", dir=_State.dir)
            super().__init__(path, maxsize=maxsize, **options)
            _State.opened.append(self)

    Queue.__qualname__ = f"Queue[{mode}]"
    return Queue


class _FreshDirectory:
    """A fresh directory per test; every queue opened in it is closed after."""

    def setUp(self):
        _State.dir = tempfile.mkdtemp(prefix="cpython-test-queue-")
        _State.opened = []
        self.addCleanup(self._close_all, _State.dir)
        super().setUp()
        skip = DIFFERENCES.get((self._vendored, self._testMethodName))
        if skip and self._mode in skip[0]:
            self.skipTest(skip[1])

    @staticmethod
    def _close_all(path):
        for q in _State.opened:
            q.close()
        _State.opened = []
        shutil.rmtree(path, ignore_errors=True)


def _make(mode: str, options: dict) -> dict:
    ns = types.SimpleNamespace(
        Queue=_queue_class(mode, options), Empty=queue.Empty, Full=queue.Full, ShutDown=vqs.ShutDown,
    )
    classes = {}
    for vendored in ("QueueTest", "FailingQueueTest", "BaseSimpleQueueTest"):
        base = getattr(cp, vendored)
        attrs = {"queue": ns, "_mode": mode, "_vendored": vendored}
        if vendored == "BaseSimpleQueueTest":
            def setUp(self):
                self.type2test = self.queue.Queue
                super(type(self), self).setUp()
            attrs["setUp"] = setUp
        name = f"Test{vendored.replace('Base', '')}_{mode}"
        cls = type(name, (_FreshDirectory, base, unittest.TestCase), attrs)
        cls.__module__ = __name__
        classes[name] = cls
    return classes


for _mode, _options in MODES.items():
    globals().update(_make(_mode, _options))
del _mode, _options
