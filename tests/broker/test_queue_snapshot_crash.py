"""A flush="always" queue's lease-state snapshot covers only records already
in the state log's file (vqs.broker.queue.lease_state.write_snapshot writes and
fsyncs the log's buffer first).

Under flush="always" a queue's state records wait in the state log's own
write buffer (in the process) until the caller's fsync after the queue lock
is released, and a compaction inside a receive or a delete snapshots under the
lock. Before, a snapshot could name a state offset S past the log's end E in
the file; a SIGKILL then left E < S. The open after it, on a full disk, wrote
its receipt epoch as an "E" record at E, and every record after it went to
offsets below S, which the next open skips: the epoch record, which brings
``cursor`` back to the message log's end, was never replayed, and the
messages sent after the first restart, which reuse the offsets the crash lost,
counted as received and deleted. An acknowledged send was lost."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from vqs.broker.queue.registry import QueueRegistry

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# no background flush tick in the test's window: what is buffered stays buffered until the kill
OPTS = {"flush": "always", "flush_interval_ms": 600000}

CRASH = r"""
import os, signal, sys
from vqs.broker.queue.registry import QueueRegistry
reg = QueueRegistry(sys.argv[1], defaults=%r)
q = reg.create("q")
for i in range(3):
    q.send(b"m%%d" %% i)            # acknowledged: fsynced
# The crash window, made wide: sends appended to the message log's buffer whose
# fsync (after the queue lock) has not run yet, received and deleted with their
# state records in the state log's buffer, and a compaction under the lock meanwhile.
q._sync = False                 # (the calls below skip their fsyncs after the lock)
for i in range(3):
    q.send(b"u%%d" %% i)            # not acknowledged (lost by the kill)
ms = q.receive(10, visibility_timeout=0)
q.delete_batch([m.receipt_handle for m in ms if m.body.startswith(b"u")])
from vqs.broker.queue import lease_state
write = lease_state.atomic_write
def write_then_die(*a, **k):   # SIGKILL right after the snapshot's rename
    write(*a, **k)
    os.kill(os.getpid(), signal.SIGKILL)
lease_state.atomic_write = write_then_die
q.compact()
""" % (OPTS,)

# The first restart, on the full disk: the snapshot finds no space, the epoch goes to
# the state log as an "E" record; new sends take the offsets the crash lost.
RESTART_FULL = r"""
import os, signal, sys
from vqs.broker.queue.registry import QueueRegistry
from fs_fault import Fault, install
# the disk found full by the snapshot's write (the filesystem seam), not by the state log's
install(Fault.space(os.path.join(sys.argv[1], "q", "state", "snapshot.tmp"), 0))
reg = QueueRegistry(sys.argv[1], defaults=%r)
q = reg.get("q")
for i in range(3):
    q.send(b"n%%d" %% i)            # acknowledged: fsynced
print("sent", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
""" % (OPTS,)


def _run(code: str, *args: str) -> str:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join((REPO, os.path.join(REPO, "tests"), env.get("PYTHONPATH", "")))
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, env=env, timeout=60)
    assert p.returncode == -signal.SIGKILL, p.stderr.decode(errors="replace")[-2000:]
    return p.stdout.decode()


def test_sends_after_a_restart_on_a_full_disk_survive_the_next_restart(tmp_path):
    data = str(tmp_path / "data")
    _run(CRASH, data)
    snap = os.path.join(data, "q", "state", "snapshot")
    before = os.stat(snap).st_mtime_ns
    assert _run(RESTART_FULL, data).strip() == "sent"
    assert os.stat(snap).st_mtime_ns == before  # the restart's snapshot found no space (the "E" path)
    reg = QueueRegistry(data, defaults=OPTS)
    try:
        q = reg.get("q")
        got = []
        while ms := q.receive(10, visibility_timeout=60):
            got += [m.body for m in ms]
        assert sorted(got) == [b"m0", b"m1", b"m2", b"n0", b"n1", b"n2"]
    finally:
        reg.close()
