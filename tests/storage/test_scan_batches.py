"""Log.scan_batches: the lazy bulk scan (each segment mapped once, each batch
CRC-checked when the consumer asks for it) returns exactly what a loop of
read_batches returns, and hands out no batch it has not verified."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vqs.errors import CorruptRecordError, OffsetOutOfRange
from vqs.record import scan_batches
from vqs.storage.log import Log


def val(i: int) -> bytes:
    return b"v%06d:" % i + bytes([i % 251]) * (i % 29)


def fill(path, sizes, **kw) -> int:
    """A log of batches of the given record counts (small segments: many of
    them); returns the end offset."""
    with Log.open(path, flush="never", segment_bytes=4096, index_interval_bytes=256, **kw) as lg:
        for n in sizes:
            f = lg.end_offset
            lg.append_batch([val(i) for i in range(f, f + n)])
        return lg.end_offset


def records(batches, lo: int, hi: int) -> list[tuple[int, bytes]]:
    """(offset, value) of the records in [lo, hi) of these batches."""
    return [(b.base_offset + i, b.value(i)) for b in batches for i in range(b.count)
            if lo <= b.base_offset + i < hi]


def read_loop(lg, lo: int, hi: int) -> list:
    out, off = [], lo
    while off < hi:
        bs = lg.read_batches(off, max_bytes=1, mapped=True)
        if not bs:
            break
        out += bs
        off = bs[-1].next_offset
    return out


def segment_batches(path):
    """[(file, position, base offset, size)] of every batch, in log order."""
    out = []
    for f in sorted(os.listdir(path)):
        if f.endswith(".log"):
            full = os.path.join(path, f)
            with open(full, "rb") as fh:
                out += [(full, p, b, s) for p, b, s in scan_batches(fh.read())]
    return out


def flip(path: str, pos: int) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        x = f.read(1)[0]
        f.seek(pos)
        f.write(bytes([x ^ 0xFF]))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(1, 40), min_size=1, max_size=30), data=st.data())
def test_scan_equals_a_loop_of_read_batches(tmp_path_factory, sizes, data):
    """Any [lo, hi) of a many-segment log, readonly or the owner (whose write
    buffer holds the last records): the same records, in order."""
    d = str(tmp_path_factory.mktemp("log"))
    end = fill(d, sizes)
    lo = data.draw(st.integers(0, end))
    hi = data.draw(st.integers(lo, end))
    want = [(o, val(o)) for o in range(lo, hi)]
    with Log.open(d, readonly=True) as ro:
        assert records(ro.scan_batches(lo, hi), lo, hi) == want
        assert records(read_loop(ro, lo, hi), lo, hi) == want
        assert records(ro.scan_batches(lo), lo, end) == [(o, val(o)) for o in range(lo, end)]
    with Log.open(d, flush="never") as lg:  # the owner: some records only in the write buffer
        lg.append_batch([val(end)])
        assert records(lg.scan_batches(lo, end + 1), lo, end + 1) == [(o, val(o)) for o in range(lo, end + 1)]


def test_a_batch_damaged_after_the_scan_began_is_refused_when_reached(tmp_path):
    """The CRC of a batch is checked when the consumer asks for it, so damage
    that appears on disk after the segment was mapped (and after earlier
    batches were handed out) is still caught: no unverified batch comes out,
    and the error names the file and position of the damaged batch."""
    d = str(tmp_path / "log")
    fill(d, [10] * 6)
    (f, _, _, _), _, (f2, pos, base, size) = segment_batches(d)[:3]
    assert f == f2  # the same segment: the mapping made for the first batch covers it
    with Log.open(d, readonly=True) as ro:
        scan = ro.scan_batches(0)
        first = next(scan)
        assert first.base_offset == 0
        flip(f, pos + size // 2)  # seen through the MAP_SHARED mapping
        got = [first.base_offset]
        with pytest.raises(CorruptRecordError) as ei:
            for b in scan:
                got.append(b.base_offset)
        assert got == [0, 10] and base == 20
        assert ei.value.position == pos and os.path.samefile(ei.value.path, f)


def test_skip_recovery_steps_over_a_damaged_batch(tmp_path):
    d = str(tmp_path / "log")
    end = fill(d, [10] * 12)
    f, pos, base, size = segment_batches(d)[5]
    flip(f, pos + size // 2)
    damaged = set(range(base, base + 10))
    with Log.open(d, readonly=True, recovery="skip") as ro:
        got = records(ro.scan_batches(0), 0, end)
    assert got == [(o, val(o)) for o in range(end) if o not in damaged]
    with Log.open(d, readonly=True) as ro, pytest.raises(CorruptRecordError):
        list(ro.scan_batches(0))


def test_below_the_start_offset_is_out_of_range(tmp_path):
    d = str(tmp_path / "log")
    fill(d, [10] * 20)
    with Log.open(d, flush="never", segment_bytes=4096) as lg:
        lg.delete_before(100)
        start = lg.start_offset
        assert start > 0
        with pytest.raises(OffsetOutOfRange) as ei:
            next(lg.scan_batches(0))
        assert ei.value.start_offset == start
        assert records(lg.scan_batches(start, start + 5), start, start + 5) == [(o, val(o)) for o in range(start, start + 5)]
