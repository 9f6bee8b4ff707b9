"""``recovery="skip"`` and a damaged base offset met by a read: the base offset
lies outside the batch CRC, so a flipped bit there leaves a batch that checks
but does not continue the offsets. A log opened with ``skip`` steps over it
as over any damaged batch (the log and a HybridQueue on it serve every other
record in order); ``fail`` still raises CorruptRecordError naming the file.
Real files (on tmpfs when there is one: 100 durable puts are 100 fsyncs); the
damage is made after a clean close, so no recovery scan at open meets it first."""

from __future__ import annotations

import os
import queue
import shutil
import tempfile

import pytest

from vqs import CorruptRecordError, Log
from vqs.hybrid import HybridQueue


@pytest.fixture
def scratch(tmp_path):
    d = tempfile.mkdtemp(dir="/dev/shm") if os.path.isdir("/dev/shm") else str(tmp_path)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _flip_base_offset(seg: str, batch_index: int, nbatches: int) -> None:
    size = os.path.getsize(seg)
    assert size % nbatches == 0  # equal batches: one record each, same size
    pos = batch_index * (size // nbatches)
    with open(seg, "r+b") as f:
        f.seek(pos)
        b = f.read(1)
        f.seek(pos)
        f.write(bytes([b[0] ^ 0x40]))  # the low byte of the base offset


def _read_all(log: Log) -> list[int]:
    out, off = [], log.start_offset
    while True:
        recs = log.read(off, max_records=1000)
        if not recs:
            return out
        out += [r.offset for r in recs]
        off = recs[-1].offset + 1


def test_log_skip_steps_over_a_damaged_base_offset(scratch):
    path = os.path.join(scratch, "log")
    with Log.open(path) as log:
        for i in range(100):
            log.append_batch([b"%08d" % i])
    _flip_base_offset(os.path.join(path, "00000000000000000000.log"), 50, 100)
    with Log.open(path, recovery="fail") as log, pytest.raises(CorruptRecordError) as ei:
        _read_all(log)
    assert "00000000000000000000.log" in str(ei.value)
    with Log.open(path, recovery="skip") as log:
        assert _read_all(log) == [i for i in range(100) if i != 50]


def test_hybrid_queue_skip_steps_over_a_damaged_base_offset(scratch):
    path = os.path.join(scratch, "hq")
    with HybridQueue(path, durable=True, serializer="raw") as q:
        for i in range(100):
            q.put(b"%08d" % i)
    _flip_base_offset(os.path.join(path, "log", "00000000000000000000.log"), 50, 100)
    got = []
    with HybridQueue(path, durable=True, serializer="raw", recovery="skip") as q:
        while True:
            try:
                got.append(int(q.get_nowait()))
            except queue.Empty:
                break
    assert got == [i for i in range(100) if i != 50]
