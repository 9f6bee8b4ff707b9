"""Warnings about a full disk are bounded in rate (vqs/log_throttle.py): a
log left on a real full filesystem (a 3 MiB tmpfs, tests/conftest.py) under
flush="interval" meets the full disk at every flush tick (10 a second), and
logs it once, not once a tick; the throttle itself, on a moved clock."""

from __future__ import annotations

import logging
import os
import time

import pytest

import vqs
from vqs import DiskFullError
from vqs.log_throttle import MAX_KEYS, Throttle


def test_throttle_logs_the_first_then_one_line_per_period_with_the_count(caplog):
    now = [0.0]
    t = Throttle(logging.getLogger("vqs.test"), every_s=60, clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="vqs.test"):
        assert t.warn("/a", "full: %s", "/a")
        assert not t.warn("/a", "full: %s", "/a") and not t.warn("/a", "full: %s", "/a")
        assert t.warn("/b", "full: %s", "/b")  # another file: its own first line
        now[0] = 61
        assert t.warn("/a", "full: %s", "/a")
        t.clear("/a", "%s: written again", "/a")
        t.clear("/never", "not logged")
        assert t.warn("/a", "full: %s", "/a")  # a new episode starts with a line at once
    assert [r.getMessage() for r in caplog.records] == [
        "full: /a", "full: /b", "full: /a (2 more like it since the last such line)",
        "/a: written again", "full: /a"]
    for i in range(MAX_KEYS + 10):  # bounded
        t.warn(f"/k{i}", "x")
    assert len(t._keys) == MAX_KEYS


def test_a_full_disk_under_flush_interval_does_not_flood_the_log(small_disk, caplog):
    small_disk.fill(2 << 20)
    path = os.path.join(small_disk.path, "log")
    with caplog.at_level(logging.WARNING, logger="vqs.storage"):
        log = vqs.Log.open(path, flush="interval", flush_interval_ms=50)
        try:
            with pytest.raises(DiskFullError):
                for _ in range(10_000):
                    log.append(b"x" * 4000)
            time.sleep(1.0)  # 20 flush ticks, each meeting the full disk
        finally:
            small_disk.free()
            try:
                log.close()
            except DiskFullError:
                pass
    lines = [r.getMessage() for r in caplog.records]
    assert len([m for m in lines if "checkpoint not written" in m]) <= 1, lines
    assert len([m for m in lines if "background flush waits" in m]) <= 1, lines
