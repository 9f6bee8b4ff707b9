"""Standard queues under flush="interval"/"never" keep plain sends (and lease-state
records) in a buffer and hand them to their logs in batches. These tests use real
files: the interval tick makes them durable (kill -9 after it loses nothing), the
order of offsets holds when buffered and direct appends mix, and every operation
sees the buffered messages."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import time
from hashlib import blake2b

import pytest

from vqs.broker.queue.receipt import ReceiptCodec
from vqs.broker.queue.registry import QueueRegistry
from vqs.errors import ReceiptHandleIsInvalid

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = r"""
import sys, time
from vqs.broker.queue.registry import QueueRegistry
reg = QueueRegistry(sys.argv[1], defaults={"flush": "interval", "flush_interval_ms": 50})
q = reg.create("q")
out = sys.stdout
print("READY", flush=True)
n = 0
for r in range(300):
    bodies = ["b%d" % (n + i) for i in range(10)]
    n += 10
    q.send_batch(bodies)
    out.write("".join("S %s\n" % b for b in bodies))
    ms = q.receive(10, visibility_timeout=3600)
    dels = [m for m in ms if int(m.text[1:]) % 3 == 0]
    if dels:
        q.delete_batch([m.receipt_handle for m in dels])
        out.write("".join("D %s\n" % m.text for m in dels))
    out.write("".join("L %s\n" % m.text for m in ms if m not in dels))
q.send_batch(["tail%d" % i for i in range(7)])  # left buffered, no receive
out.write("".join("S tail%d\n" % i for i in range(7)))
out.flush()
time.sleep(0.6)  # several flush intervals: the tick hands everything to the logs
print("SYNCED", flush=True)
time.sleep(60)
"""


def test_kill9_after_an_interval_loses_nothing(tmp_path):
    data = str(tmp_path / "d")
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.Popen([sys.executable, "-c", CHILD, data], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env)
    lines = []
    try:
        assert p.stdout.readline() == b"READY\n", p.stderr.read()
        while True:
            ln = p.stdout.readline().decode()
            assert ln, p.stderr.read().decode(errors="replace")
            if ln == "SYNCED\n":
                break
            lines.append(ln.split())
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    sent = {b for op, b in lines if op == "S"}
    deleted = {b for op, b in lines if op == "D"}
    leased = {b for op, b in lines if op == "L"}
    assert len(sent) == 3007 and deleted and leased
    reg = QueueRegistry(data)
    q = reg.get("q")
    fresh = []
    while ms := q.receive(10):
        fresh += [m.text for m in ms]
    # leases survived: only the never-received tail is visible now
    assert sorted(fresh) == sorted("tail%d" % i for i in range(7))
    reg.close()
    reg = QueueRegistry(data, clock=lambda: time.time() + 7200)  # every lease over
    q = reg.get("q")
    back = []
    while ms := q.receive(10):
        back += [m.text for m in ms]
    reg.close()
    assert set(back) == sent - deleted
    assert len(back) == len(sent - deleted)


@pytest.mark.parametrize("flush", ["interval", "never"])
def test_buffered_and_direct_sends_keep_offset_order(tmp_path, flush):
    reg = QueueRegistry(str(tmp_path / "d"), defaults={"flush": flush})
    q = reg.create("q")
    ids = q.send_batch([b"a0", b"a1", b"a2"])  # buffered
    ids.append(q.send_message("b0", attributes={"k": "v"})["message_id"])  # direct (headers)
    ids += q.send_batch([b"c0", b"c1"])  # buffered again
    ids.append(q.send(b"d0", delay_seconds=0))
    assert q.counts()["visible"] == 7
    ms = q.receive(10)
    assert [m.text for m in ms] == ["a0", "a1", "a2", "b0", "c0", "c1", "d0"]
    assert [m.id for m in ms] == ids
    assert ms[3].attributes == {"k": {"DataType": "String", "StringValue": "v"}}
    q.delete_batch([m.receipt_handle for m in ms[:4]])
    q.send_batch([b"e0"])
    reg.close()  # a clean close hands everything to the logs
    reg = QueueRegistry(str(tmp_path / "d"), clock=lambda: time.time() + 3600)
    q = reg.get("q")
    assert [m.text for m in q.receive(10)] == ["c0", "c1", "d0", "e0"]
    reg.close()


def test_buffered_sends_are_seen_by_every_operation(tmp_path):
    reg = QueueRegistry(str(tmp_path / "d"), defaults={"flush": "never"})
    q = reg.create("q")
    q.send_batch([b"x%d" % i for i in range(10)])
    assert q.counts() == {"visible": 10, "in_flight": 0, "delayed": 0}
    q.flush()  # pushes and fsyncs
    q.send_batch([b"y%d" % i for i in range(5)])
    q.purge()
    assert q.counts()["visible"] == 0
    assert q.receive(10) == []
    q.send_batch([b"z"])
    assert [m.text for m in q.receive(10)] == ["z"]
    reg.close()


def test_consumed_segments_are_reclaimed_while_cycling(tmp_path):
    reg = QueueRegistry(str(tmp_path / "d"), defaults={"segment_bytes": 64 << 10})
    q = reg.create("q")
    body = b"m" * 200
    for _ in range(3000):
        q.send_batch([body] * 10)
        ms = q.receive(10)
        q.delete_batch([m.receipt_handle for m in ms])
    # 6 MB went through; only about the backlog (nothing) plus a segment or two stay
    assert q._log.segment_count <= 4
    reg.close()


def test_receipt_handles_of_a_batch_and_legacy_handles(tmp_path):
    reg = QueueRegistry(str(tmp_path / "d"))
    q = reg.create("q")
    q.send_batch([b"m%d" % i for i in range(10)])
    ms = q.receive(10, visibility_timeout=3600)
    assert len({m.receipt_handle for m in ms}) == 10
    codec = ReceiptCodec(q._settings.secret)
    for m in ms:
        o, nonce = codec.decode(m.receipt_handle)
        assert o == m.offset
        assert codec.encode(o, nonce) == m.receipt_handle
        bad = m.receipt_handle[:-1] + ("0" if m.receipt_handle[-1] != "0" else "1")
        with pytest.raises(ReceiptHandleIsInvalid):
            q.delete(bad)
        forged = codec.encode(o, nonce)[:32]
        with pytest.raises(ReceiptHandleIsInvalid):
            q.delete(forged + "0" * 16)
    # another offset with a valid tag slice is no handle
    o, nonce = codec.decode(ms[0].receipt_handle)
    other = struct.pack("<QQ", o + 1, nonce).hex() + ms[0].receipt_handle[32:]
    with pytest.raises(ReceiptHandleIsInvalid):
        q.delete(other)
    # a handle of the earlier construction (keyed BLAKE2b-64) is still accepted
    o, nonce = codec.decode(ms[1].receipt_handle)
    mac = blake2b(key=q._settings.secret, digest_size=8)
    body = struct.pack("<QQ", o, nonce)
    mac.update(body)
    q.delete((body + mac.digest()).hex())
    reg.close()
    # after a restart (no cache of issued handles) the handles still work
    reg = QueueRegistry(str(tmp_path / "d"))
    q = reg.get("q")
    q.delete_batch([m.receipt_handle for m in ms[2:]])
    q.delete(ms[1].receipt_handle)  # already deleted: a success that does nothing
    assert q.counts()["in_flight"] == 1
    q.change_visibility(ms[0].receipt_handle, 0)
    assert [m.text for m in q.receive(10)] == ["m0"]
    reg.close()


def test_receipt_handles_of_consecutive_receives(tmp_path):
    # receives of fresh messages share receipt tag blocks (8 deliveries per hash)
    reg = QueueRegistry(str(tmp_path / "d"))
    q = reg.create("q")
    codec = ReceiptCodec(q._settings.secret)
    seen = set()
    for k in [3, 7, 10, 1, 8, 9, 2, 10, 5] * 3:
        q.send_batch([b"x"] * k)
        ms = q.receive(k)
        assert len(ms) == k
        for m in ms:
            o, nonce = codec.decode(m.receipt_handle)
            assert o == m.offset and codec.encode(o, nonce) == m.receipt_handle
            assert m.receipt_handle not in seen
            seen.add(m.receipt_handle)
        if k % 2:
            q.delete_batch([m.receipt_handle for m in ms])
    assert q.counts()["in_flight"] == sum(k for k in [3, 7, 10, 1, 8, 9, 2, 10, 5] * 3 if k % 2 == 0)
    reg.close()
