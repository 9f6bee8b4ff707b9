"""A queue that crashed reopens on a still-full disk (a real 3 MiB tmpfs,
tests/conftest.py) and serves: its receipt epoch, which an open after a crash
makes durable before it issues a handle, goes to the state log as an "E"
record (the state log keeps space reserved) when the snapshot finds no space.
Handles from before the crash still delete their messages, a lost message's
handle never acts on the message that reuses its offset, and replay of the
"E" record forgets the lost offsets' state as the snapshot would have."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from vqs.broker.queue import lease_records, lease_state

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OPTS = {"flush": "interval", "flush_interval_ms": 600000}

CRASH = r"""
import os, signal, sys
from vqs.broker.queue.registry import QueueRegistry
reg = QueueRegistry(sys.argv[1], defaults={"flush": "interval", "flush_interval_ms": 600000})
q = reg.create("q")
q.send(b"a")
q.flush()                        # "a" is on disk; nothing after this is
(a,) = q.receive()
q.send(b"b")                     # lost by the kill
(b,) = q.receive()
print(a.receipt_handle, b.receipt_handle, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""

# Reopen on the full disk: it must open, receive and delete (drain), then crash again.
REOPEN_FULL = r"""
import os, signal, sys
from vqs.broker.queue.registry import QueueRegistry
reg = QueueRegistry(sys.argv[1], defaults={"flush": "interval", "flush_interval_ms": 600000})
q = reg.get("q")
assert q.counts() == {"visible": 1, "in_flight": 0, "delayed": 0}, q.counts()
(a,) = q.receive(10)
assert a.body == b"a"
q.delete(sys.argv[2])            # the handle from before the crash
q.flush()
print("served", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _run(code: str, *args: str) -> str:
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, env=env, timeout=60)
    assert p.returncode == -signal.SIGKILL, p.stderr.decode(errors="replace")[-2000:]
    return p.stdout.decode()


def test_an_epoch_record_forgets_the_lost_offsets_at_replay(tmp_path):
    """The model: state before "E"(end) at offsets >= end is dropped, state after
    it applies (new messages reuse those offsets); low and cursor come down to
    end; the epoch joins the list, superseding those at or past end."""
    path = str(tmp_path / "state")
    store = lease_state.LeaseStateStore(path, flush="always")
    store.epochs = []

    def lease(o: int, nonce: int) -> bytes:
        return lease_records.encode_leases([o, nonce, 10**13, 1, 1, 1], 1)

    store.log.append_batch([lease(1, 5), lease(3, 6), lease(4, 7)])
    store.write_epoch(3, 100)
    store.log.append_batch([lease(4, 101)])
    store.close()
    store = lease_state.LeaseStateStore(path, flush="always")
    try:
        st = store.recover()
        assert sorted(st.live) == [1, 4]
        assert st.live[4][0] == 101 and st.live[1][0] == 5
        assert store.epochs == [(3, 100)]
        assert st.max_nonce == 101
        rec = store.log.read(3, max_records=1)[0].value
        assert rec[0] == ord("E") and lease_records.EPOCH.unpack_from(rec, 1) == (3, 100)
    finally:
        store.close()
