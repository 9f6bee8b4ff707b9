"""Receipt handles across crashes (SQS's rule: every handle ever issued for a
message stays usable on a standard queue, and acts on that message only).

Under a relaxed flush policy a crash can lose messages that were already
received; their offsets are then reused by new messages. A handle of a lost
message must never delete or change the message that reuses its offset (the
receipt epochs of vqs.broker.queue.leases), while a handle of a message that
survived the crash deletes it even if its lease record was lost.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from vqs.broker.queue.registry import QueueRegistry
from vqs.errors import MessageNotAvailable

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = r"""
import os, signal, sys
from vqs.broker.queue.registry import QueueRegistry
reg = QueueRegistry(sys.argv[1], defaults={"flush": "interval", "flush_interval_ms": 600000})
q = reg.create("q")
q.send(b"a")
q.flush()                        # "a" is on disk; nothing after this is
(a,) = q.receive()               # its lease record: buffered only
q.send(b"b")                     # buffered only: lost by the kill
(b,) = q.receive()
print(a.receipt_handle, b.receipt_handle, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""

OPTS = {"flush": "interval", "flush_interval_ms": 600000}


def _crash(data: str) -> tuple[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-c", CHILD, data], capture_output=True, env=env, timeout=60)
    assert p.returncode == -signal.SIGKILL, p.stderr.decode(errors="replace")
    ha, hb = p.stdout.decode().split()
    return ha, hb


def test_a_lost_messages_handle_never_acts_on_the_message_reusing_its_offset(tmp_path):
    data = str(tmp_path / "data")
    ha, hb = _crash(data)
    reg = QueueRegistry(data, defaults=OPTS)
    try:
        q = reg.get("q")
        assert q.counts() == {"visible": 1, "in_flight": 0, "delayed": 0}  # "b" was lost
        q.send(b"c")  # takes the offset "b" had
        got = q.receive(10, visibility_timeout=60)
        assert [m.body for m in got] == [b"a", b"c"]
        c = got[1]
        assert c.offset == 1  # the offset "b" had
        q.delete(hb)  # SQS: a handle of a deleted message: success, and nothing happens
        with pytest.raises(MessageNotAvailable):
            q.change_visibility(hb, 0)
        q.delete_batch([hb])
        assert q.counts()["in_flight"] == 2  # "c" untouched
        # after a clean reopen too: the epoch is part of the persisted lease state
        reg.close()
        reg = QueueRegistry(data, defaults=OPTS)
        q = reg.get("q")
        q.delete(hb)
        with pytest.raises(MessageNotAvailable):
            q.change_visibility(hb, 0)
        assert q.counts()["in_flight"] == 2
        q.delete(c.receipt_handle)
        q.delete(ha)  # "a"'s handle from before the crash still deletes it
        assert q.counts() == {"visible": 0, "in_flight": 0, "delayed": 0}
    finally:
        reg.close()


def test_a_handle_whose_lease_record_was_lost_still_deletes_its_message(tmp_path):
    data = str(tmp_path / "data")
    ha, _ = _crash(data)
    reg = QueueRegistry(data, defaults=OPTS)
    try:
        q = reg.get("q")
        q.change_visibility(ha, 30)  # not in flight (its lease was lost): success, no change
        assert q.counts()["visible"] == 1
        q.delete(ha)
        assert q.counts() == {"visible": 0, "in_flight": 0, "delayed": 0}
        q.send(b"d")
        assert [m.body for m in q.receive(10)] == [b"d"]
    finally:
        reg.close()


def test_handles_stay_usable_across_a_clean_reopen(tmp_path):
    data = str(tmp_path / "data")
    reg = QueueRegistry(data)
    q = reg.create("q")
    q.send_batch([b"x", b"y"])
    first = q.receive(2, visibility_timeout=0)
    second = q.receive(2, visibility_timeout=60)
    reg.close()
    reg = QueueRegistry(data)
    try:
        q = reg.get("q")
        q.change_visibility(first[0].receipt_handle, 0)  # an older handle ends the current lease
        assert q.counts() == {"visible": 1, "in_flight": 1, "delayed": 0}
        q.delete_batch([first[0].receipt_handle, first[1].receipt_handle])
        assert q.counts() == {"visible": 0, "in_flight": 0, "delayed": 0}
        with pytest.raises(MessageNotAvailable):
            q.change_visibility(second[1].receipt_handle, 0)
    finally:
        reg.close()
