"""The log cleaner on a storage Log: compressed logs, a bounded offset map (several passes,
one part of the dirty section each), batches carrying bit 4 only after a gap, and reopening
cleaned segments (indexes rebuilt from the new files)."""

from __future__ import annotations

import pytest

from vqs.cleaner import CompactionSettings, clean_log
from vqs.record import ATTR_COMPACTED
from vqs.storage import Log


def _write(log, n: int, keys: int) -> list:
    produced = []
    for i in range(0, n, 5):
        ks = [b"k%d" % ((i + j) % keys) for j in range(5)]
        vs = [b"value-%d" % (i + j) * 3 for j in range(5)]
        first = log.append_batch(vs, keys=ks, timestamps_ms=1000 + i)
        produced += [(first + j, ks[j], vs[j]) for j in range(5)]
    log.flush()
    return produced


def _model(produced, end_cleaned):
    latest = {}
    for o, k, _ in produced:
        if o < end_cleaned:
            latest[k] = o
    return [(o, k, v) for o, k, v in produced if o >= end_cleaned or latest[k] == o]


def _read(log):
    return [(r.offset, r.key, r.value) for r in log.read(0, max_records=1_000_000, max_bytes=1 << 40)]


@pytest.mark.parametrize("compression", [None, "zstd", "lz4", "gzip"])
def test_compressed_logs(tmp_path, compression):
    log = Log.open(tmp_path / "log", segment_bytes=1024, flush="always", compression=compression)
    try:
        produced = _write(log, 400, 7)
        clean_log(log, CompactionSettings(), now_ms=10**9, force=True)
        active = log._segs.all[-1].base_offset
        assert _read(log) == _model(produced, active)
    finally:
        log.close()
    with Log.open(tmp_path / "log", segment_bytes=1024, compression=compression) as log:
        assert _read(log) == _model(produced, active)
        for r in _model(produced, active)[::17]:  # lookups through rebuilt indexes
            assert log.read(r[0], max_records=1)[0].offset == r[0]


def test_a_bounded_offset_map_cleans_in_several_passes(tmp_path):
    log = Log.open(tmp_path / "log", segment_bytes=1024, flush="always")
    try:
        produced = _write(log, 600, 40)
        active = log._segs.all[-1].base_offset
        small = CompactionSettings(max_map_bytes=1)  # one segment mapped per pass
        passes = 0
        while clean_log(log, small, now_ms=10**9, force=True).segments_in:
            passes += 1
            assert passes < 200
        assert passes > 3
        got = _read(log)
        # each pass kept the latest per key of what it mapped: every key's latest value is there
        assert {k: v for _, k, v in got} == {k: v for _, k, v in produced}
        assert set(_model(produced, active)) <= set(got) <= set(produced)
        # one pass with room for the whole dirty section ends where a single pass would
        assert clean_log(log, CompactionSettings(), now_ms=10**9, force=True).segments_in == 0
    finally:
        log.close()


def test_bit_4_only_after_a_gap(tmp_path):
    log = Log.open(tmp_path / "log", segment_bytes=128, flush="always")  # a segment per batch
    try:
        log.append_batch([b"a0", b"b0"], keys=[b"a", b"b"])
        log.append_batch([b"c0", b"d0"], keys=[b"c", b"d"])
        log.append_batch([b"a1", b"e0"], keys=[b"a", b"e"])  # a1 supersedes a0
        log.append(b"x", key=b"x")
        log.flush()
        assert log.segment_count == 4
        clean_log(log, CompactionSettings(), force=True)
        shape = [(b.base_offset, b.count, bool(b.attributes & ATTR_COMPACTED))
                 for off in (0, 2, 4, 6) for b in log.read_batches(off, max_bytes=1)[:1]]
        # b0 after the removed a0: bit 4; the batches kept whole continue their segments: as they were
        assert shape == [(1, 1, True), (2, 2, False), (4, 2, False), (6, 1, False)]
        assert [(r.offset, r.value) for r in log.read(0, max_records=100)] == [
            (1, b"b0"), (2, b"c0"), (3, b"d0"), (4, b"a1"), (5, b"e0"), (6, b"x")]
    finally:
        log.close()
