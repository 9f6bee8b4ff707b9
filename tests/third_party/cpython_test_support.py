"""The few ``test.support`` helpers cpython_test_queue.py uses, for an install
without the stdlib ``test`` package (same behaviour, minus CPython's own
bookkeeping: reference-leak hunting, environment checks)."""

from __future__ import annotations

import contextlib
import gc
import importlib
import types


def gc_collect() -> None:
    for _ in range(3):
        gc.collect()


def _import_fresh_module(name, fresh=(), blocked=()):
    # the adapter replaces the queue module under test; the stdlib one serves
    return importlib.import_module(name)


def _requires_working_threading(*, module=False):
    return None


def _join_thread(thread, timeout=30.0):
    thread.join(timeout)
    if thread.is_alive():
        raise AssertionError(f"failed to join the thread in {timeout:.1f} seconds")


@contextlib.contextmanager
def _start_threads(threads):
    threads = list(threads)
    started = []
    try:
        for t in threads:
            t.start()
            started.append(t)
        yield
    finally:
        for t in started:
            _join_thread(t, 60.0)


import_helper = types.SimpleNamespace(import_fresh_module=_import_fresh_module)
threading_helper = types.SimpleNamespace(
    requires_working_threading=_requires_working_threading,
    join_thread=_join_thread,
    start_threads=_start_threads,
)
