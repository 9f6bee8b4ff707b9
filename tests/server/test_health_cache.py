"""``/health``'s storage answer is cached (``health_cache_ms``) and still right:
a log that finds no space shows at the next answer; a filesystem that fills
shows within the interval and ``ok`` comes back as soon as space does; a topic
created shows within the interval (vqs/server/health.py, ``StorageHealth``).
Real broker, real logs, a real 3 MiB tmpfs; only the clock is a test's."""

from __future__ import annotations

import os

import pytest

import vqs
from vqs.errors import DiskFullError
from vqs.server.health import StorageHealth, storage_health


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_full_log_shows_at_once_and_new_topics_within_the_interval(private_disk):
    data = os.path.join(private_disk.path, "data")  # (its free space moves only with this test's writes)
    clock = Clock()
    with vqs.Broker(data) as b:
        b.create_topic("t", partitions=2)
        sh = StorageHealth(b, data, 0, 1.0, clock=clock)
        first = sh.answer()
        assert first["reasons"] == [] and first["problems"] == []
        assert first == storage_health(b, data, 0)

        lg = b.topic("t").log(1)
        lg.min_free_bytes = 1 << 62  # every append refused from now on: the log is disk_full
        with pytest.raises(DiskFullError):
            lg.append(b"x")
        got = sh.answer()  # no time passed: still shown
        assert got["reasons"] == ["disk_full"]
        assert got["problems"] == [{"kind": "topic", "name": "t", "partition": 1, "problem": "disk_full",
                                    "detail": got["problems"][0]["detail"]}]
        lg.min_free_bytes = 0
        lg.append(b"y")
        lg.flush()  # written now: the free space does not move under the comparisons below
        assert sh.answer()["reasons"] == []

        b.create_topic("new")
        nl = b.topic("new").log(0)
        nl.min_free_bytes = 1 << 62
        with pytest.raises(DiskFullError):
            nl.append(b"x")
        clock.now += 0.5
        assert sh.answer()["problems"] == []  # its list of logs is from before "new"
        clock.now += 0.5
        assert [p["name"] for p in sh.answer()["problems"]] == ["new"]
        assert sh.answer() == storage_health(b, data, 0)
        nl.min_free_bytes = 0


def test_a_filling_disk_shows_within_the_interval_and_ok_comes_back_at_once(small_disk):
    data = os.path.join(small_disk.path, "data")
    clock = Clock()
    with vqs.Broker(data) as b:
        b.create_queue("q")
        sh = StorageHealth(b, data, 1 << 20, 1.0, clock=clock)
        assert sh.answer()["reasons"] == []
        small_disk.fill(small_disk_free(data) - (512 << 10))  # under min_free_bytes now
        clock.now += 0.9
        assert sh.answer()["reasons"] == []  # the free space read 0.9 s ago
        clock.now += 0.1
        got = sh.answer()
        assert got["reasons"] == ["disk_full"] and got["disk"]["free_bytes"] < 1 << 20
        small_disk.free()
        assert sh.answer()["reasons"] == []  # a short disk is read at every answer
        assert sh.answer()["disk"]["free_bytes"] > 1 << 20


def test_no_cache_reads_everything_each_time(tmp_path):
    data = str(tmp_path / "data")
    with vqs.Broker(data) as b:
        sh = StorageHealth(b, data, 0, 0.0)
        b.create_topic("t")
        lg = b.topic("t").log(0)
        lg.min_free_bytes = 1 << 62
        with pytest.raises(DiskFullError):
            lg.append(b"x")
        assert [p["name"] for p in sh.answer()["problems"]] == ["t"]
        lg.min_free_bytes = 0


def small_disk_free(path: str) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize
