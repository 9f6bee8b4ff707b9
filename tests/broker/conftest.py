"""Fixtures for the broker tests (topics, consumers, groups)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from vqs.broker import Broker
from vqs.broker.queue.registry import QueueRegistry

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class FakeClock:
    """An injectable clock (seconds, like time.time) that only moves when told."""

    def __init__(self, start: float | None = None):
        # Starts at the real time: the Log also applies retention on its own
        # (at a segment roll) against the wall clock.
        self.now = time.time() if start is None else start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


@pytest.fixture
def data_dir(tmp_path):
    return str(tmp_path / "data")


@pytest.fixture
def broker(data_dir):
    b = Broker(data_dir)
    yield b
    b.close()


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def qclock():
    """A fixed-start clock for queue tests (their retention and timers never
    meet a log's own wall-clock retention)."""
    return FakeClock(1_700_000_000.0)


@pytest.fixture
def reg(tmp_path, qclock):
    """A queue registry under tmp_path on the queue test clock (closed after the test)."""
    r = QueueRegistry(str(tmp_path / "queues"), clock=qclock)
    yield r
    r.close()


@pytest.fixture
def child_env() -> dict:
    """Environment for a child Python (sys.executable) that imports vqs from this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    return env
