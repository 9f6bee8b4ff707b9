"""A hypothesis state machine: vqs.storage.Log against a plain Python list.

Operations: single appends (with keys, headers, explicit timestamps), batch
appends, reads (read, read_batches copied or mapped, scans by consecutive
read_batches calls, one record at a time), flushes, forced
rolls through a tiny segment_bytes, close + reopen (with other settings),
delete_before and retention by bytes. After every step the log's offsets
match the model, and every read returns exactly the model's records.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from vqs.errors import OffsetOutOfRange
from vqs.storage.log import Log

# The model checks logic, not durability: on tmpfs fsync is free, so hypothesis
# can run (and shrink) many more steps.
SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None

values = st.binary(max_size=120)
keys = st.none() | st.binary(max_size=12)
headers = st.none() | st.lists(st.tuples(st.sampled_from(["a", "b", "ü"]), st.binary(max_size=8)), max_size=2)
timestamps = st.integers(0, 10_000)


class LogMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="vqs-sm-", dir=SCRATCH)
        self.model: list[tuple] = []  # (value, key, headers, ts) at offset i
        self.start = 0
        self.lg = None

    @initialize(
        segment_bytes=st.sampled_from([256, 700, 4096, 1 << 20]),
        flush=st.sampled_from(["never", "interval", "always"]),
        compression=st.sampled_from([None, None, "zstd", "lz4"]),
        batch_max_records=st.sampled_from([1, 3, 4096]),
    )
    def open(self, segment_bytes, flush, compression, batch_max_records):
        self.settings = dict(
            segment_bytes=segment_bytes, flush=flush, compression=compression,
            batch_max_records=batch_max_records, index_interval_bytes=64, segment_ms=None,
            lock=False,  # lets crash_reopen abandon a Log without closing it
        )
        self.durable = 0  # offsets below this were written out (survive a process crash)
        self.zombies = []
        self.lg = Log.open(self.dir, **self.settings)

    def teardown(self):
        if self.lg is not None:
            self.lg.close()
        self.zombies.clear()
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def end(self):
        return len(self.model)

    def expect(self, off):
        v, k, h, t = self.model[off]
        return (off, v, k, tuple(h or ()), t)

    @staticmethod
    def got(r):
        return (r.offset, bytes(r.value), None if r.key is None else bytes(r.key), tuple(r.headers), r.timestamp_ms)

    # ------------------------------------------------------------------ writes

    @rule(v=values, k=keys, h=headers, t=timestamps)
    def append(self, v, k, h, t):
        off = self.lg.append(v, key=k, headers=h, timestamp_ms=t)
        assert off == self.end
        self.model.append((v, k, h, t))
        if self.settings["flush"] == "always":
            self.durable = self.end

    @rule(vs=st.lists(st.tuples(values, keys, timestamps), min_size=1, max_size=40))
    def append_batch(self, vs):
        first = self.lg.append_batch(
            [v for v, _, _ in vs], keys=[k for _, k, _ in vs], timestamps_ms=[t for _, _, t in vs]
        )
        assert first == self.end
        self.model += [(v, k, None, t) for v, k, t in vs]
        self.durable = self.end  # append_batch writes the buffer and its batch at once

    @rule(n=st.integers(1, 200), size=st.integers(0, 64))
    def append_many(self, n, size):
        v = bytes([n % 256]) * size
        first = self.lg.append_batch([v] * n, timestamps_ms=5000)
        assert first == self.end
        self.model += [(v, None, None, 5000)] * n
        self.durable = self.end

    @rule()
    def flush(self):
        self.lg.flush()
        self.durable = self.end

    @rule(
        flush=st.sampled_from(["never", "interval", "always"]),
        compression=st.sampled_from([None, "zstd"]),
        segment_bytes=st.sampled_from([256, 4096]),
    )
    def reopen(self, flush, compression, segment_bytes):
        self.lg.close()
        self.durable = self.end
        self.settings.update(flush=flush, compression=compression, segment_bytes=segment_bytes)
        self.lg = Log.open(self.dir, **self.settings)

    @precondition(lambda self: self.lg is not None and self.settings["flush"] != "interval")
    @rule(flush=st.sampled_from(["never", "always"]))
    def crash_reopen(self, flush):
        """The process dies: no close, no clean-shutdown marker. What was
        written survives (a process crash keeps the page cache); records still
        in the append buffer may be lost, and only as a suffix."""
        z = self.lg
        # A dead process runs nothing more: stop this Log's background fsync of
        # rolled segments (it would write the checkpoint under the new owner).
        with z._lock:
            z._sync.wait_idle()
            z._closed = True
        z._sync.checkpoint.retire()  # (nor its interval checkpoint)
        self.zombies.append(z)  # never closed properly, never used again
        self.settings.update(flush=flush)
        self.lg = Log.open(self.dir, **self.settings)
        end = self.lg.end_offset
        assert self.durable <= end <= self.end, (self.durable, end, self.end)
        del self.model[end:]
        self.durable = end
        assert self.lg.start_offset == min(self.start, end)
        self.start = self.lg.start_offset

    @rule(data=st.data())
    def delete_before(self, data):
        off = data.draw(st.integers(0, self.end + 3))
        self.lg.delete_before(off)
        self.durable = max(self.durable, min(off, self.end))
        new_start = max(self.start, min(off, self.end))
        # Whole segments go; the start moves to exactly the requested offset.
        assert self.lg.start_offset == new_start
        self.start = new_start

    @rule(limit=st.integers(0, 3000))
    def retention_by_bytes(self, limit):
        self.lg.retention_bytes = limit
        self.lg.apply_retention(now_ms=0)
        self.lg.retention_bytes = None
        new = self.lg.start_offset
        assert self.start <= new <= self.end
        self.start = new

    # ------------------------------------------------------------------ reads

    @rule(data=st.data(), max_records=st.integers(1, 50))
    def read(self, data, max_records):
        off = data.draw(st.integers(self.start, self.end))
        recs = self.lg.read(off, max_records=max_records)
        assert [self.got(r) for r in recs] == [
            self.expect(o) for o in range(off, min(off + max_records, self.end))
        ]

    @rule(data=st.data())
    def read_one(self, data):
        if self.end == self.start:
            return
        off = data.draw(st.integers(self.start, self.end - 1))
        (r,) = self.lg.read(off, max_records=1)
        assert self.got(r) == self.expect(off)

    @rule(data=st.data())
    def read_batches(self, data):
        off = data.draw(st.integers(self.start, self.end))
        bs = self.lg.read_batches(off, max_bytes=data.draw(st.sampled_from([1, 300, 1 << 20])),
                                  mapped=data.draw(st.booleans()))
        if off == self.end:
            assert bs == []
            return
        assert bs and bs[0].base_offset <= off < bs[0].next_offset
        prev = None
        for b in bs:
            if prev is not None:
                assert b.base_offset == prev
            for i in range(b.count):
                o = b.base_offset + i
                if o >= off:
                    r = b.records(i, i + 1)[0]
                    assert self.got(r) == self.expect(o)
            prev = b.next_offset

    @rule(data=st.data())
    def scan_batches(self, data):
        """Consecutive read_batches calls from an offset to the end (each
        continuing from the read hint the last one left): every record once,
        in order."""
        off = data.draw(st.integers(self.start, self.end))
        mapped = data.draw(st.booleans())
        max_bytes = data.draw(st.sampled_from([1, 300, 1 << 20]))
        pos = off
        while pos < self.end:
            bs = self.lg.read_batches(pos, max_bytes=max_bytes, mapped=mapped)
            assert bs and bs[0].base_offset <= pos < bs[0].next_offset
            for b in bs:
                for i in range(max(0, pos - b.base_offset), b.count):
                    assert self.got(b.records(i, i + 1)[0]) == self.expect(b.base_offset + i)
                pos = b.next_offset
        assert pos == self.end

    @rule(data=st.data())
    def read_out_of_range(self, data):
        off = data.draw(st.sampled_from([self.end + 1, self.end + 100] + ([self.start - 1] if self.start else [])))
        try:
            self.lg.read(off)
        except OffsetOutOfRange:
            pass
        else:
            raise AssertionError(f"read({off}) outside {self.start}..{self.end} did not raise")

    @rule(t=timestamps)
    def offset_for_time(self, t):
        want = next((o for o in range(self.start, self.end) if self.model[o][3] >= t), None)
        assert self.lg.offset_for_time(t) == want

    @precondition(lambda self: self.lg is not None)
    @invariant()
    def offsets_match(self):
        assert self.lg.end_offset == self.end
        assert self.lg.start_offset == self.start
        assert self.lg.segment_count >= 1

    @precondition(lambda self: self.lg is not None)
    @invariant()
    def full_scan_matches(self):
        if self.end - self.start > 400:
            return
        out, off = [], self.start
        while off < self.end:
            recs = self.lg.read(off, max_records=1000, max_bytes=1 << 24)
            assert recs
            out += recs
            off = recs[-1].offset + 1
        assert [self.got(r) for r in out] == [self.expect(o) for o in range(self.start, self.end)]


TestLogStateMachine = LogMachine.TestCase
TestLogStateMachine.settings = settings(
    max_examples=120,
    stateful_step_count=35,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
