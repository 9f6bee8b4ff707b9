"""Damage a read finds after open (below the recovery point, so recovery at
open never scanned it) follows ``recovery=`` as recovery at open does:
``skip`` quarantines the batch once (bytes in quarantine/, the gap recorded)
and the next read, the next open and a readonly reader see the same records;
``truncate`` (``Log.repair``) cuts the log there, crash-safely; ``fail``
raises naming the file and position."""

from __future__ import annotations

import os

import pytest
from batch_damage import flip_batch_byte

from vqs.errors import CorruptRecordError
from vqs.storage import Log
from vqs.storage.log_dir import QUARANTINE_DIR, load_gaps, read_checkpoint
from vqs.storage.segment import Segment

PER_BATCH = 3
BATCHES = 60


def _log_with_damage(d, *, segment_bytes=1024, seg_index=1, batch_index=2):
    """A closed log of BATCHES batches of PER_BATCH records over several
    segments, then one byte flipped in a batch of segment ``seg_index``
    (the checkpoint's recovery point is the end: the damage lies below it).
    Returns (segment path, position, base offset, batch bytes as damaged)."""
    with Log.open(d, segment_bytes=segment_bytes) as log:
        for b in range(BATCHES):
            log.append_batch([b"v%04d" % (b * PER_BATCH + k) for k in range(PER_BATCH)])
        end = log.end_offset
    assert read_checkpoint(d)[0] == end
    segs = sorted(f for f in os.listdir(d) if f.endswith(".log"))
    seg = os.path.join(d, segs[seg_index])
    pos, base, _, bad = flip_batch_byte(seg, batch_index)
    assert base < end
    return seg, pos, base, bad


def _read_all(log) -> list[int]:
    out, off = [], log.start_offset
    while True:
        recs = log.read(off, max_records=1000)
        if not recs:
            return out
        out += [r.offset for r in recs]
        off = recs[-1].offset + 1


def _quarantine(d) -> list[str]:
    q = os.path.join(d, QUARANTINE_DIR)
    return sorted(os.listdir(q)) if os.path.isdir(q) else []


def test_skip_quarantines_read_time_damage_once(tmp_path):
    d = str(tmp_path / "log")
    seg, pos, base, bad = _log_with_damage(d)
    n = BATCHES * PER_BATCH
    expect = [o for o in range(n) if not base <= o < base + PER_BATCH]
    ro = Log.open(d, readonly=True)  # a reader that opened before the repair
    with Log.open(d, recovery="skip") as log:
        assert log.segment_count > 3 and log.quarantined_batches == 0
        assert _read_all(log) == expect
        name = f"{os.path.basename(seg)[:-4]}-{pos}-{base}-{base + PER_BATCH}.bad"
        assert _quarantine(d) == [name]
        with open(os.path.join(d, QUARANTINE_DIR, name), "rb") as f:
            assert f.read() == bad
        assert load_gaps(d) == {base: base + PER_BATCH}
        assert log.quarantined_batches == 1
        assert _read_all(log) == expect  # once: the damage is gone from the segment
        assert log.quarantined_batches == 1 and len(_quarantine(d)) == 1
        assert [r.offset for r in log.read_batches(base - 1)[0].records()][-1] == base - 1
        assert log.append(b"after") == n
    # the readonly reader sees the same records, without an error
    ro.refresh()
    assert _read_all(ro) == expect + [n]
    ro.close()
    # reopened with fail: the same records, no error, no new quarantine
    with Log.open(d, recovery="fail") as log:
        assert _read_all(log) == expect + [n]
    with Log.open(d, readonly=True, recovery="fail") as log:
        assert _read_all(log) == expect + [n]
    assert len(_quarantine(d)) == 1


def test_skip_in_the_active_segment_rolls_then_quarantines(tmp_path):
    d = str(tmp_path / "log")
    _, pos, base, _ = _log_with_damage(d, segment_bytes=1 << 20, seg_index=0, batch_index=5)
    n = BATCHES * PER_BATCH
    expect = [o for o in range(n) if not base <= o < base + PER_BATCH]
    with Log.open(d, recovery="skip") as log:
        assert log.segment_count == 1
        assert _read_all(log) == expect
        assert log.segment_count == 2  # rolled: the rewritten segment takes no appends
        log.append_batch([b"a", b"b"])
        assert _read_all(log) == expect + [n, n + 1]
    assert load_gaps(d) == {base: base + PER_BATCH}
    with Log.open(d) as log:
        assert _read_all(log) == expect + [n, n + 1]


def test_fail_raises_naming_file_and_position(tmp_path):
    d = str(tmp_path / "log")
    seg, pos, base, _ = _log_with_damage(d)
    with Log.open(d) as log:
        with pytest.raises(CorruptRecordError) as ei:
            _read_all(log)
        assert ei.value.path == seg and ei.value.position == pos
        assert log.repair(ei.value) is False
    assert _quarantine(d) == []


def test_truncate_repair_cuts_the_log_at_the_damage(tmp_path):
    d = str(tmp_path / "log")
    seg, pos, base, _ = _log_with_damage(d)
    with Log.open(d, recovery="truncate") as log:
        with pytest.raises(CorruptRecordError) as ei:
            _read_all(log)  # the read itself never moves the end back
        assert log.repair(ei.value) is True
        assert log.end_offset == base and log.segment_count == 2
        assert _read_all(log) == list(range(base))
        assert log.append(b"new") == base
    assert sorted(f for f in os.listdir(d) if f.endswith(".log"))[-1] == os.path.basename(seg)
    with Log.open(d, recovery="fail") as log:
        assert _read_all(log) == list(range(base + 1))
    assert _quarantine(d) == []


@pytest.mark.parametrize("crash_at", ["delete", "truncate"])
def test_truncate_interrupted_leaves_a_log_that_opens(tmp_path, monkeypatch, crash_at):
    """An error (standing in for a crash) after the checkpoint was lowered
    (at the first segment deletion) or before the cut: the files left open
    with recovery='truncate' as the cut log, and with 'fail' report the damage."""
    d = str(tmp_path / "log")
    seg, pos, base, _ = _log_with_damage(d)
    with Log.open(d, recovery="truncate") as log:
        with pytest.raises(CorruptRecordError) as ei:
            _read_all(log)
        real = getattr(Segment, crash_at)

        def crash(self, *a):
            raise OSError(5, f"crash before {crash_at}")

        monkeypatch.setattr(Segment, crash_at, crash)
        with pytest.raises(OSError):
            log.repair(ei.value)
        monkeypatch.setattr(Segment, crash_at, real)
    assert read_checkpoint(d)[0] <= base
    with pytest.raises(CorruptRecordError) as ei:
        Log.open(d, recovery="fail")
    assert ei.value.path == seg
    with Log.open(d, recovery="truncate") as log:
        assert _read_all(log) == list(range(base))
        assert log.segment_count == 2
