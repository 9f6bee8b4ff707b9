"""Fixtures shared by the storage tests."""
from __future__ import annotations

import errno
import os
import threading

import pytest

from vqs.disk import fs


class FsyncObserver:
    """Wraps ``os.fsync`` to observe it (the real fsync still runs): records,
    for each fsync that returned, the file size when it was called and the
    thread that called it. ``fail_after`` (a call count) and ``fail_inodes``
    inject EIO; ``hold`` (an inode ->
    Event map) makes the background flusher thread's fsync of that file wait
    for the event first (other threads' fsyncs are never held)."""

    def __init__(self, real):
        self.real = real
        self.lock = threading.Lock()
        self.synced: dict[int, int] = {}  # inode -> largest size covered by a finished fsync
        self.threads: dict[int, set[str]] = {}  # inode -> names of threads that fsynced it
        self.done = threading.Condition(self.lock)
        self.calls = 0
        self.fail_after: int | None = None
        self.fail_inodes: set[int] = set()
        self.hold: dict[int, threading.Event] = {}

    def __call__(self, fd):
        st = os.fstat(fd)
        with self.lock:
            self.calls += 1
            if (self.fail_after is not None and self.calls > self.fail_after) or st.st_ino in self.fail_inodes:
                raise OSError(errno.EIO, "injected fsync failure")
            gate = self.hold.get(st.st_ino) if threading.current_thread().name == "vqs-flusher" else None
        if gate is not None:
            assert gate.wait(30), "a held fsync was never released"
        self.real(fd)
        with self.lock:
            if st.st_size > self.synced.get(st.st_ino, -1):
                self.synced[st.st_ino] = st.st_size
            self.threads.setdefault(st.st_ino, set()).add(threading.current_thread().name)
            self.done.notify_all()

    def wait_covered(self, ino: int, size: int, timeout: float = 30) -> bool:
        """Block until a finished fsync of ``ino`` covered ``size`` bytes."""
        with self.lock:
            return self.done.wait_for(lambda: self.synced.get(ino, -1) >= size, timeout)

    def covered(self, ino: int) -> int:
        with self.lock:
            return self.synced.get(ino, -1)


@pytest.fixture
def fsyncs(monkeypatch):
    obs = FsyncObserver(os.fsync)
    monkeypatch.setattr(os, "fsync", obs)
    monkeypatch.setattr(fs, "fsync", obs)  # (storage calls it through its filesystem seam)
    return obs


