"""A consumer group of three processes over the Kafka listener; one is SIGKILLed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

HERE = os.path.dirname(__file__)


class Member:
    def __init__(self, bootstrap, topic, group):
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "group_member.py"), bootstrap, topic,
                                      group], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.assigned: set[int] | None = None
        self.values: list[str] = []
        self.changed = threading.Event()
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self):
        for line in self.proc.stdout:
            kind, _, rest = line.strip().partition(" ")
            if kind == "assigned":
                self.assigned = {int(p) for p in rest.split(",") if p}
            elif kind == "revoked":
                self.assigned = set()
            elif kind == "msg":
                self.values.append(rest.split(" ", 2)[2])
            self.changed.set()

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _wait(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return time.monotonic()
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_three_members_sigkill_one_partitions_move_and_all_delivered(kafka_server):
    topic, group = f"grp-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_server.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=6, replication_factor=1)])[topic].result(10)
    p = ck.Producer({"bootstrap.servers": kafka_server.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(300):
        p.produce(topic, value=f"a{i}".encode(), key=f"{i}".encode())
    assert p.flush(10) == 0
    members = [Member(kafka_server.bootstrap, topic, group) for _ in range(3)]
    try:
        def balanced():
            a = [m.assigned for m in members]
            return all(x is not None and len(x) == 2 for x in a) and set().union(*a) == set(range(6))
        _wait(balanced, 30, "three members with two partitions each")
        victim = members[0]
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait()
        killed_at = time.monotonic()
        victim_parts = set(victim.assigned)
        for i in range(300):
            p.produce(topic, value=f"b{i}".encode(), key=f"{i}".encode())
        assert p.flush(10) == 0
        rest = members[1:]

        def moved():
            a = [m.assigned for m in rest]
            return all(x is not None for x in a) and set().union(*a) == set(range(6))
        moved_at = _wait(moved, 20, "the killed member's partitions to move")
        assert moved_at - killed_at < 3.0 + 5.0  # session timeout 3 s, plus the rejoin
        assert victim_parts <= set().union(*[m.assigned for m in rest])
        want = {f"a{i}" for i in range(300)} | {f"b{i}" for i in range(300)}
        _wait(lambda: want <= set(victim.values) | {v for m in rest for v in m.values}, 30,
              "every message delivered")
        # at least once: nothing is lost (a commit refused during a rebalance, or the victim's
        # uncommitted reads, are read again by the partition's next owner)
    finally:
        for m in members:
            m.stop()
    with __import__("vqs").Client(kafka_server.url) as client:
        committed = client.group_offsets(group)
        assert sum(committed.values()) == 600
