"""A queue's counts (SQS's ApproximateNumberOfMessages, ...NotVisible,
...Delayed) are exact as soon as it reopens, after a clean close and after a
kill -9, before any receive reaches the delayed messages."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from vqs.broker.queue.registry import QueueRegistry

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SETUP = r"""
import os, signal, sys
from vqs.broker.queue.registry import QueueRegistry
reg = QueueRegistry(sys.argv[1], defaults={"flush": "always"})
q = reg.create("q")
q.send_batch([b"v0", b"v1", b"v2", b"v3"])
q.receive(2, visibility_timeout=600)
q.send_batch([{"body": b"d%d" % i, "delay_seconds": 600} for i in range(3)])
q.send(b"soon", delay_seconds=900)
dq = reg.create("dq", delay_seconds=600)
dq.send_batch([b"x", b"y"])
if sys.argv[2] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
reg.close()
"""

EXPECT = ({"visible": 2, "in_flight": 2, "delayed": 4}, {"visible": 0, "in_flight": 0, "delayed": 2})


@pytest.mark.parametrize("how", ["close", "kill"])
def test_counts_are_exact_right_after_a_reopen(tmp_path, how):
    data = str(tmp_path / "data")
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-c", SETUP, data, how], capture_output=True, env=env, timeout=60)
    assert p.returncode == (-signal.SIGKILL if how == "kill" else 0), p.stderr.decode(errors="replace")
    reg = QueueRegistry(data)
    try:
        q, dq = reg.get("q"), reg.get("dq")
        assert (q.counts(), dq.counts()) == EXPECT
        assert q.get_attributes()["ApproximateNumberOfMessagesDelayed"] == "4"
        assert sorted(m.body for m in q.receive(10)) == [b"v2", b"v3"]
        assert dq.receive(10) == []
        reg.close()
        reg = QueueRegistry(data)  # and again after a clean reopen
        assert reg.get("q").counts() == {"visible": 0, "in_flight": 4, "delayed": 4}
        assert reg.get("dq").counts() == EXPECT[1]
    finally:
        reg.close()
