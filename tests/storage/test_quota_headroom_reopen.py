"""The quota headroom (vqs/storage/quota_headroom.py) after a restart on a
spent btrfs quota (tests/conftest.py ``quota_disk``): what an earlier run left
is used. Two defects a queue met when its process was SIGKILLed beside a
topic that filled the quota, then restarted and drained (the receives were
refused for good, issue 13):
- the earlier run's ballast sat in another log's directory (the topic's),
  and was adopted only once that log reserved space again: a write into
  reserved blocks elsewhere met EDQUOT with a ballast standing, unused. Every
  log now adopts the ballast in its directory at open;
- the blocks a log had reserved past its end (a queue's lease-state log keeps
  ``reserve_bytes``) survive a SIGKILL, but the reopened log counted nothing
  reserved and, to reserve again, first wanted a new ballast, which a spent
  quota has no room for. A reopened log with ``reserve_bytes`` now takes the
  blocks past its end as reserved once ``fallocate`` confirms them."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

import vqs
from vqs.storage.quota_headroom import BALLAST_NAME, spend

RUN = r"""
import os, signal, sys
import vqs
a = vqs.Log.open(sys.argv[1], flush="interval")
a.append(b"x" * 1000)  # its first reservation makes the ballast, in a's directory
a.flush()
b = vqs.Log.open(sys.argv[2], flush="interval", reserve_bytes=256 << 10)
b.append(b"y" * 1000)
b.flush()
print("ok", flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # the reservations stay allocated
"""


def _earlier_run(child_env, python, a: str, b: str) -> None:
    p = subprocess.run([python, "-c", RUN, a, b], env=child_env, capture_output=True, timeout=60)
    assert p.returncode == -signal.SIGKILL and p.stdout == b"ok\n", p.stderr.decode(errors="replace")[-2000:]


def test_a_ballast_left_beside_another_log_is_spent_after_a_restart(quota_disk, child_env, python):
    """The earlier run's ballast is in a's directory; b, reopened beside a (a
    opened too, never written: a broker's idle topic), finds its quota spent
    (``spend``, as its full disk's compaction or a write into its reserved
    blocks does): a's ballast goes for it. Before, nothing had adopted it
    (b looked only beside itself), and the step was refused."""
    a, b = os.path.join(quota_disk.path, "a"), os.path.join(quota_disk.path, "b")
    _earlier_run(child_env, python, a, b)
    assert os.path.exists(os.path.join(a, BALLAST_NAME))
    quota_disk.fill(512 << 10)  # (the earlier run made both ballasts: 512 KiB)
    quota_disk.fill_rest()
    assert quota_disk.is_full()
    la = vqs.Log.open(a, flush="interval")
    lb = vqs.Log.open(b, flush="interval", reserve_bytes=256 << 10)
    try:
        fd = os.open(os.path.join(b, "00000000000000000000.log"), os.O_RDONLY)
        try:
            assert spend(b, fd)
        finally:
            os.close(fd)
        assert not os.path.exists(os.path.join(a, BALLAST_NAME))
        assert not quota_disk.is_full()  # (its 256 KiB are back)
        for i in range(100):  # and b takes appends into its reserve, written
            lb.append(b"z%03d" % i + b"z" * 500)
        lb.flush()
    finally:
        lb.close()
        la.close()
    with vqs.Log.open(b) as lb:
        assert [r.value[:4] for r in lb.read(1, max_records=200)] == [b"z%03d" % i for i in range(100)]


def test_a_reserve_left_by_a_sigkill_is_used_on_a_spent_quota(quota_disk, child_env, python):
    a, b = os.path.join(quota_disk.path, "a"), os.path.join(quota_disk.path, "b")
    _earlier_run(child_env, python, a, b)
    spacer = os.path.join(quota_disk.path, "spacer")  # 64 KiB of room, less than a ballast
    with open(spacer, "wb") as f:
        f.write(b"\0" * (64 << 10))
    os.unlink(os.path.join(a, BALLAST_NAME))
    quota_disk.fill(1 << 20)
    quota_disk.fill_rest()
    os.unlink(spacer)
    subprocess.run(["btrfs", "filesystem", "sync", quota_disk.path], check=True)
    lb = vqs.Log.open(b, flush="interval", reserve_bytes=256 << 10)
    try:
        assert lb.hold(128 << 10)  # within what the killed run had reserved: no new space
        lb.hold(0)
        for i in range(100):
            lb.append(b"z%03d" % i + b"z" * 500)
        lb.flush()
        assert lb.end_offset == 101
        with pytest.raises(vqs.DiskFullError):  # (the quota is spent: past that reserve, refused)
            lb.hold(1 << 20)
    finally:
        lb.close()
