"""Corruption injection, modelled on LevelDB's db/log_test.cc.

Each test damages a log on disk the way a crash, a bad disk or a bad tool
would (flip a byte, cut the file, zero-filled or garbage tail, damaged index
files), reopens it, and asserts the expected outcome of the design:

* a torn tail (damage at or past the recovery point with nothing valid after
  it) is truncated silently; everything before it is intact;
* damage followed by valid batches, or before the recovery point, is
  corruption: ``recovery="fail"`` raises CorruptRecordError naming the file
  and position, ``"skip"`` drops exactly the damaged batch, ``"truncate"``
  keeps only the prefix;
* indexes are derived data: any damage to them leaves reads correct.

Every test asserts that no corrupted record is returned (each value is a
function of its offset) and that every record outside the damaged batch is
intact.

An unclean shutdown is made by a child process that appends and flushes, then
exits with os._exit (no close: no clean-shutdown marker, and the checkpoint's
recovery point stays where the last clean open put it).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
import tracemalloc
import zlib

import pytest

from vqs.errors import CorruptRecordError
from vqs.record import scan_batches
from vqs.storage.log import CHECKPOINT, CLEAN_MARKER, QUARANTINE_DIR, Log

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BATCH = 10  # records per batch
TS0 = 1_600_000_000_000  # record i has timestamp TS0 + i


def val(i: int) -> bytes:
    return b"v%08d:" % i + bytes([i % 251]) * (i % 37)


CHILD = textwrap.dedent(
    """
    import json, os, sys
    sys.path.insert(0, %r)
    from vqs.storage.log import Log
    path, spec = sys.argv[1], json.loads(sys.argv[2])
    def val(i):
        return b"v%%08d:" %% i + bytes([i %% 251]) * (i %% 37)
    def add(lg, n):
        for _ in range(n):
            f = lg.end_offset
            lg.append_batch([val(i) for i in range(f, f + %d)],
                            timestamps_ms=[%d + i for i in range(f, f + %d)])
    lg = Log.open(path, flush="never", **spec["kw"])
    add(lg, spec["committed"])
    lg.close()                      # clean: checkpoint recovery point = end
    lg = Log.open(path, flush="never", **spec["kw"])
    add(lg, spec["tail"])           # after the recovery point
    lg.flush()                      # on disk, but never closed
    os._exit(0)
    """
) % (ROOT, BATCH, TS0, BATCH)


def make_log(path, *, committed, tail=0, crash=True, **kw):
    """A log of ``committed + tail`` batches of BATCH records. With crash=True
    the tail batches were written after the last clean open and the writer
    died without closing."""
    if crash:
        spec = json.dumps({"committed": committed, "tail": tail, "kw": kw})
        subprocess.run([sys.executable, "-c", CHILD, path, spec], check=True, timeout=60)
        assert not os.path.exists(os.path.join(path, CLEAN_MARKER))
    else:
        with Log.open(path, flush="never", **kw) as lg:
            for _ in range(committed + tail):
                f = lg.end_offset
                lg.append_batch([val(i) for i in range(f, f + BATCH)],
                                timestamps_ms=[TS0 + i for i in range(f, f + BATCH)])
        assert os.path.exists(os.path.join(path, CLEAN_MARKER))


_templates: dict = {}


@pytest.fixture
def log_from(tmp_path, tmp_path_factory):
    """Copy of a (cached) template log: log_from(name, **make_log args) -> path."""

    def get(name, **spec):
        key = (name, json.dumps(spec, sort_keys=True))
        if key not in _templates:
            src = str(tmp_path_factory.mktemp("tpl") / name)
            make_log(src, **spec)
            _templates[key] = src
        dst = str(tmp_path / name)
        shutil.copytree(_templates[key], dst)
        return dst

    return get


def seg_files(path, suffix=".log"):
    return sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(suffix) and f[:20].isdigit())


def batches(logfile):
    """[(position, base_offset, size)] of the batches in a segment file."""
    with open(logfile, "rb") as f:
        return list(scan_batches(f.read()))


def patch(path, pos, fn):
    with open(path, "r+b") as f:
        f.seek(pos)
        b = f.read(1)
        f.seek(pos)
        f.write(bytes([fn(b[0])]))


def flip(path, pos, mask=0xFF):
    patch(path, pos, lambda x: x ^ mask)


def unclean(path):
    """Forget the clean shutdown (as if the process had been killed)."""
    try:
        os.unlink(os.path.join(path, CLEAN_MARKER))
    except FileNotFoundError:
        pass


def read_everything(lg):
    """All records from start to end, one read() call after another."""
    out = []
    off = lg.start_offset
    while off < lg.end_offset:
        recs = lg.read(off, max_records=37, max_bytes=1 << 20)
        assert recs, f"read({off}) returned nothing below end {lg.end_offset}"
        assert recs[0].offset >= off
        out += recs
        off = recs[-1].offset + 1
    return out


def read_everything_batches(lg):
    """Every record by consecutive read_batches calls, copied (pread) and
    mapped (mmap, continuing from the read hint): both must agree."""
    outs = []
    for mapped in (False, True):
        out = {}
        off = lg.start_offset
        while off < lg.end_offset:
            bs = lg.read_batches(off, max_bytes=4096, mapped=mapped)
            assert bs
            for b in bs:
                for i in range(b.count):
                    o = b.base_offset + i
                    if o >= off:
                        out[o] = bytes(b.value(i))
            off = bs[-1].next_offset
        outs.append(out)
    assert outs[0] == outs[1]
    return outs[0]


def check(lg, expected_offsets):
    """Exactly the expected records, each intact, through both read paths."""
    expected_offsets = list(expected_offsets)
    recs = read_everything(lg)
    bad = [r.offset for r in recs if bytes(r.value) != val(r.offset)]
    assert not bad, f"corrupted records returned at offsets {bad[:10]}"
    assert [r.offset for r in recs] == expected_offsets
    assert all(r.timestamp_ms == TS0 + r.offset for r in recs)
    by_batch = read_everything_batches(lg)
    assert sorted(by_batch) == expected_offsets
    assert all(v == val(o) for o, v in by_batch.items())
    for o in expected_offsets[:: max(1, len(expected_offsets) // 25)]:
        (r,) = lg.read(o, max_records=1)
        assert r.offset == o and bytes(r.value) == val(o)


def digest(path):
    """Hash of the data files (segment .log files and the checkpoint); the
    indexes are derived data that a reader may rebuild."""
    h = hashlib.sha256()
    for name in sorted(os.listdir(path)):
        p = os.path.join(path, name)
        if os.path.isfile(p) and (name.endswith(".log") or name == CHECKPOINT):
            h.update(name.encode())
            with open(p, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


ONE_SEG = dict(committed=10, tail=5)  # batches 0..9 before the recovery point, 10..14 after
N = (10 + 5) * BATCH


# --------------------------------------------------------------------------- sanity


def test_unclean_shutdown_without_damage_keeps_everything(log_from):
    d = log_from("one", **ONE_SEG)
    with Log.open(d) as lg:
        assert lg.end_offset == N
        check(lg, range(N))


# --------------------------------------------------------------------------- torn tails


def test_truncated_trailing_batch_is_ignored(log_from):
    d = log_from("one", **ONE_SEG)
    (f,) = seg_files(d)
    pos, base, size = batches(f)[-1]
    os.truncate(f, pos + size // 2)
    with Log.open(d) as lg:  # recovery="fail": a torn tail is not an error
        assert lg.end_offset == base == N - BATCH
        check(lg, range(N - BATCH))
        assert lg.append(val(N - BATCH), timestamp_ms=TS0 + N - BATCH) == N - BATCH
    with Log.open(d) as lg:
        check(lg, range(N - BATCH + 1))


def test_trailing_batch_cut_at_every_position_is_ignored(log_from, tmp_path):
    d = log_from("one", **ONE_SEG)
    (f,) = seg_files(d)
    bs = batches(f)
    pos, base, size = bs[-1]
    cuts = sorted(set(range(pos + 1, pos + 80)) | set(range(pos + 80, pos + size, 13)))
    for cut in cuts:
        work = str(tmp_path / "cut")
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(d, work)
        os.truncate(seg_files(work)[0], cut)
        with Log.open(work) as lg:
            assert lg.end_offset == base, f"cut at {cut}"
            recs = read_everything(lg)
            assert [r.offset for r in recs] == list(range(base)), f"cut at {cut}"
            assert all(bytes(r.value) == val(r.offset) for r in recs)


def test_cut_at_a_batch_boundary_loses_nothing_else(log_from):
    d = log_from("one", **ONE_SEG)
    (f,) = seg_files(d)
    pos, base, _ = batches(f)[-3]
    os.truncate(f, pos)
    with Log.open(d) as lg:
        assert lg.end_offset == base
        check(lg, range(base))


@pytest.mark.parametrize("where", ["length", "crc", "magic", "count", "timestamp", "body", "last byte"])
def test_flipped_byte_in_trailing_batch_is_ignored(log_from, where):
    d = log_from("one", **ONE_SEG)
    (f,) = seg_files(d)
    pos, base, size = batches(f)[-1]
    at = {"length": 9, "crc": 13, "magic": 16, "count": 20, "timestamp": 25, "body": 70,
          "last byte": size - 1}[where]
    flip(f, pos + at)
    with Log.open(d) as lg:
        assert lg.end_offset == base
        check(lg, range(base))


@pytest.mark.parametrize("byte", range(8))
def test_flipped_base_offset_of_trailing_batch(log_from, byte):
    """The base offset sits outside the CRC (so batches can be re-based). A
    flipped bit there must not make records appear under wrong offsets."""
    d = log_from("one", **ONE_SEG)
    (f,) = seg_files(d)
    pos, base, size = batches(f)[-1]
    flip(f, pos + byte, 0x01)
    with Log.open(d) as lg:
        assert lg.end_offset in (N, N - BATCH)
        check(lg, range(lg.end_offset))


@pytest.mark.parametrize("n", [1, 63, 64, 4096, 1 << 20])
def test_zero_filled_tail_is_ignored(log_from, n):
    d = log_from("one", **ONE_SEG)
    (f,) = seg_files(d)
    good = os.path.getsize(f)
    with open(f, "ab") as fh:
        fh.write(bytes(n))
    with Log.open(d) as lg:
        assert lg.end_offset == N
        check(lg, range(N))
        assert lg.append(val(N), timestamp_ms=TS0 + N) == N
    assert os.path.getsize(f) > good
    with Log.open(d) as lg:
        check(lg, range(N + 1))


def test_zeroed_trailing_batch_is_ignored(log_from):
    """The file grew but the last batch's data never reached the disk."""
    d = log_from("one", **ONE_SEG)
    (f,) = seg_files(d)
    pos, base, size = batches(f)[-1]
    with open(f, "r+b") as fh:
        fh.seek(pos)
        fh.write(bytes(size))
    with Log.open(d) as lg:
        assert lg.end_offset == base
        check(lg, range(base))


@pytest.mark.parametrize("n", [1, 15, 64, 1000, 100_000])
def test_garbage_tail_is_ignored(log_from, n):
    d = log_from("one", **ONE_SEG)
    (f,) = seg_files(d)
    with open(f, "ab") as fh:
        fh.write(random.Random(n).randbytes(n))
    with Log.open(d) as lg:
        assert lg.end_offset == N
        check(lg, range(N))


def test_tail_that_looks_like_a_header_is_ignored(log_from):
    d = log_from("one", **ONE_SEG)
    (f,) = seg_files(d)
    pos, base, size = batches(f)[-1]
    with open(f, "rb") as fh:
        fh.seek(pos)
        header = fh.read(64)
    with open(f, "ab") as fh:
        fake = bytearray(header)
        fake[0:8] = (N).to_bytes(8, "little")
        fh.write(bytes(fake) + b"\x01" * 10)  # header promising a body that is not there
    with Log.open(d) as lg:
        assert lg.end_offset == N
        check(lg, range(N))


def test_garbage_after_clean_close_is_ignored(log_from):
    d = log_from("clean", committed=8, crash=False)
    (f,) = seg_files(d)
    with open(f, "ab") as fh:
        fh.write(random.Random(7).randbytes(777))
    with Log.open(d) as lg:
        assert lg.end_offset == 80
        check(lg, range(80))


def test_torn_tail_without_checkpoint_is_ignored(log_from):
    d = log_from("one", **ONE_SEG)
    os.unlink(os.path.join(d, CHECKPOINT))
    (f,) = seg_files(d)
    pos, base, size = batches(f)[-1]
    os.truncate(f, pos + size - 3)
    with Log.open(d) as lg:
        assert lg.end_offset == base
        check(lg, range(base))


def test_readonly_open_of_a_torn_log_reads_the_prefix_and_changes_nothing(log_from):
    d = log_from("one", **ONE_SEG)
    (f,) = seg_files(d)
    pos, base, size = batches(f)[-1]
    os.truncate(f, pos + size // 2)
    before = digest(d)
    with Log.open(d, readonly=True) as ro:
        assert ro.end_offset == base
        check(ro, range(base))
    assert digest(d) == before


# --------------------------------------------------------------------------- corruption


def _middle(d, which):
    """(file, position, base, size) of a batch followed by valid batches:
    'committed' = before the recovery point, 'tail' = after it."""
    (f,) = seg_files(d)
    bs = batches(f)
    pos, base, size = bs[4] if which == "committed" else bs[12]
    return f, pos, base, size


@pytest.mark.parametrize("which", ["committed", "tail"])
@pytest.mark.parametrize("at", [9, 13, 16, 40, 70, -1])
def test_flipped_byte_in_middle_batch_fails_by_default(log_from, which, at):
    d = log_from("one", **ONE_SEG)
    f, pos, base, size = _middle(d, which)
    flip(f, pos + (at if at >= 0 else size + at))
    before = digest(d)
    with pytest.raises(CorruptRecordError) as ei:
        Log.open(d)
    e = ei.value
    assert os.path.basename(f) in str(e), str(e)
    assert str(pos) in str(e), str(e)
    assert e.position == pos
    assert e.path is not None and os.path.samefile(e.path, f)
    # failing changes nothing: the data is still there for a human to inspect
    assert digest(d) == before
    # and the lock was released
    with pytest.raises(CorruptRecordError):
        Log.open(d)


@pytest.mark.parametrize("which", ["committed", "tail"])
@pytest.mark.parametrize("at", [9, 13, 16, 40, 70, -1])
def test_flipped_byte_in_middle_batch_skip_drops_exactly_that_batch(log_from, which, at):
    d = log_from("one", **ONE_SEG)
    f, pos, base, size = _middle(d, which)
    flip(f, pos + (at if at >= 0 else size + at))
    expect = [o for o in range(N) if not base <= o < base + BATCH]
    with Log.open(d, recovery="skip") as lg:
        assert lg.end_offset == N
        assert lg.quarantined_batches == 1
        check(lg, expect)
        # a read that starts inside the gap gets the next record after it
        (r,) = lg.read(base + 3, max_records=1)
        assert r.offset == base + BATCH
        assert lg.append(val(N), timestamp_ms=TS0 + N) == N
    assert os.listdir(os.path.join(d, QUARANTINE_DIR))
    with Log.open(d) as lg:  # reopens cleanly with the gap
        check(lg, expect + [N])


@pytest.mark.parametrize("which", ["committed", "tail"])
def test_flipped_byte_in_middle_batch_truncate_keeps_the_prefix(log_from, which):
    d = log_from("one", **ONE_SEG)
    f, pos, base, size = _middle(d, which)
    flip(f, pos + 40)
    with Log.open(d, recovery="truncate") as lg:
        assert lg.end_offset == base
        check(lg, range(base))
        assert lg.append(val(base), timestamp_ms=TS0 + base) == base
    with Log.open(d) as lg:
        check(lg, range(base + 1))


def test_two_damaged_batches_skip_drops_exactly_those(log_from):
    d = log_from("one", **ONE_SEG)
    (f,) = seg_files(d)
    bs = batches(f)
    flip(f, bs[3][0] + 50)
    flip(f, bs[11][0] + 50)
    dropped = set(range(bs[3][1], bs[3][1] + BATCH)) | set(range(bs[11][1], bs[11][1] + BATCH))
    with Log.open(d, recovery="skip") as lg:
        check(lg, [o for o in range(N) if o not in dropped])


def test_bit_rot_in_last_batch_after_clean_close_is_corruption(log_from):
    """After a clean close everything was fsynced: the recovery point is the
    end, so damage in the last batch is corruption, not a torn tail."""
    d = log_from("clean", committed=8, crash=False)
    (f,) = seg_files(d)
    pos, base, size = batches(f)[-1]
    flip(f, pos + 30)
    with pytest.raises(CorruptRecordError) as ei:
        Log.open(d)
    assert ei.value.position == pos
    with Log.open(d, recovery="skip") as lg:
        check(lg, range(base))
    with Log.open(d) as lg:
        check(lg, range(base))


@pytest.mark.parametrize("length", [0x3FFFFFF0, 0xFFFFFFFF, 12, 0])
def test_broken_length_field_in_middle_batch(log_from, length):
    d = log_from("one", **ONE_SEG)
    f, pos, base, size = _middle(d, "committed")
    with open(f, "r+b") as fh:
        fh.seek(pos + 8)
        fh.write(length.to_bytes(4, "little"))
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError):
            Log.open(d)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"opening allocated {peak >> 20} MiB for a bogus length field"
    with Log.open(d, recovery="skip") as lg:
        check(lg, [o for o in range(N) if not base <= o < base + BATCH])


def check_each_offset(lg, n, damaged, *, skip=False):
    """read(o, max_records=1) for every offset: outside the damaged batch it
    returns exactly record o; inside it raises CorruptRecordError (or, with
    skip, returns the first record after the batch). Never a corrupted record."""
    for o in range(lg.start_offset, n):
        if o in damaged:
            if skip:
                (r,) = lg.read(o, max_records=1)
                assert r.offset == max(damaged) + 1 and bytes(r.value) == val(r.offset)
            else:
                with pytest.raises(CorruptRecordError):
                    lg.read(o, max_records=1)
            continue
        try:
            recs = lg.read(o, max_records=1)
        except CorruptRecordError as e:
            pytest.fail(f"read({o}) outside the damaged batch {min(damaged)}..{max(damaged)} raised: {e}")
        assert [r.offset for r in recs] == [o], f"read({o}) -> {recs}"
        assert bytes(recs[0].value) == val(o)


def test_bit_flip_under_an_open_log_is_never_returned(log_from):
    d = log_from("clean", committed=8, crash=False)
    (f,) = seg_files(d)
    bs = batches(f)
    with Log.open(d) as lg:
        pos, base, size = bs[5]
        flip(f, pos + 60)
        damaged = set(range(base, base + BATCH))
        recs = []
        with pytest.raises(CorruptRecordError):
            off = 0
            while off < lg.end_offset:
                got = lg.read(off, max_records=BATCH)
                recs += got
                off = got[-1].offset + 1
        assert all(bytes(r.value) == val(r.offset) for r in recs)
        assert all(r.offset < base for r in recs)
        with pytest.raises(CorruptRecordError):
            lg.read_batches(base)
        check_each_offset(lg, 80, damaged)


# --------------------------------------------------------------------------- older segments

MULTI = dict(committed=30, tail=2, segment_bytes=2048, index_interval_bytes=128)
NM = 32 * BATCH


def test_multi_segment_template_is_sane(log_from):
    d = log_from("multi", **MULTI)
    assert len(seg_files(d)) >= 5
    with Log.open(d) as lg:
        check(lg, range(NM))


@pytest.mark.parametrize("recovery", ["fail", "skip", "truncate"])
def test_damage_in_an_older_segment(log_from, recovery):
    """Damage in a sealed segment far below the recovery point. Whether it is
    found at open or at read, no corrupted record is returned and every
    record outside the damaged batch stays readable."""
    d = log_from("multi", **MULTI)
    f = seg_files(d)[1]
    bs = batches(f)
    assert len(bs) >= 3
    pos, base, size = bs[1]
    flip(f, pos + 50)
    damaged = set(range(base, base + BATCH))
    try:
        lg = Log.open(d, recovery=recovery)
    except CorruptRecordError as e:
        assert recovery == "fail"
        assert e.position == pos and os.path.samefile(e.path, f)
        return
    with lg:
        if recovery == "skip":
            check(lg, [o for o in range(NM) if o not in damaged])
            check_each_offset(lg, NM, damaged, skip=True)
        elif recovery == "truncate" and lg.end_offset == base:
            check(lg, range(base))
        else:  # damage not seen at open: reads refuse the damaged batch only
            check_each_offset(lg, NM, damaged)


def _tear_sealed_segment(d, which, recovery_point):
    """As after a power loss during the background fsync of a rolled segment:
    segment ``which`` (not the last) ends in a cut batch, and the checkpoint's
    recovery point (None: no checkpoint) is ``recovery_point``. Returns the
    segment file and the base offset of the cut batch."""
    f = seg_files(d)[which]
    pos, base, size = batches(f)[-1]
    os.truncate(f, pos + size // 2)
    cp = os.path.join(d, CHECKPOINT)
    if recovery_point is None:
        os.unlink(cp)
    else:
        with open(cp, "w") as fh:
            json.dump({"version": 1, "recovery_point": recovery_point, "log_start_offset": 0}, fh)
    unclean(d)
    return f, base


def test_torn_end_of_an_unsynced_sealed_segment_is_a_torn_tail(log_from):
    """The recovery point is below the segment: its fsync never completed, so
    nothing from the tear on was acknowledged as durable. The tear is cut and
    the later segments (written after it, never durable either) are deleted."""
    d = log_from("multi", **MULTI)
    seg_base = int(os.path.basename(seg_files(d)[2])[:20])
    f, base = _tear_sealed_segment(d, 2, recovery_point=seg_base)
    with Log.open(d) as lg:
        assert lg.end_offset == base
        check(lg, range(base))
        assert seg_files(d)[-1] == f
        assert lg.append(val(base), timestamp_ms=TS0 + base) == base  # appends continue there
        check(lg, range(base + 1))


@pytest.mark.parametrize("rp", ["none", "past"])
def test_torn_end_of_a_sealed_segment_is_corruption_unless_known_unsynced(log_from, rp):
    """Without a checkpoint, or with the recovery point past the segment (it
    was fsynced), a damaged end of a sealed segment is corruption, never a
    torn tail: nothing after it is dropped silently."""
    d = log_from("multi", **MULTI)
    nxt = int(os.path.basename(seg_files(d)[3])[:20])
    f, base = _tear_sealed_segment(d, 2, recovery_point=None if rp == "none" else nxt)
    if rp == "past":
        # Below the recovery point recovery does not rescan; reads find the damage.
        with Log.open(d) as lg:
            assert lg.end_offset == NM
            check_each_offset(lg, NM, set(range(base, base + BATCH)))
        return
    with pytest.raises(CorruptRecordError) as e:
        Log.open(d)
    assert os.path.samefile(e.value.path, f)
    with Log.open(d, recovery="truncate") as lg:  # the operator's explicit choice
        check(lg, range(base))


def test_deleted_middle_segment_file_is_detected(log_from):
    """Not silently renumbered: offsets of the remaining records never change."""
    d = log_from("multi", **MULTI)
    files = seg_files(d)
    victim = files[2]
    first = int(os.path.basename(victim)[:20])
    nxt = int(os.path.basename(files[3])[:20])
    os.unlink(victim)
    try:
        lg = Log.open(d)
    except CorruptRecordError:
        return
    with lg:  # the reads that reach the missing offsets say so; every other record is there
        check_each_offset(lg, NM, set(range(first, nxt)))


def _rewrite_checkpoint(d, recovery_point):
    with open(os.path.join(d, CHECKPOINT), "w") as fh:
        json.dump({"version": 1, "recovery_point": recovery_point, "log_start_offset": 0}, fh)
    unclean(d)


def test_a_sealed_segment_cut_at_a_batch_boundary_is_found_by_reads(log_from):
    """A whole batch gone from the end of a sealed segment below the recovery point (the
    file cut short): its offsets are held by no batch and no gap records them. Open scans
    nothing there (a clean close); every read that reaches them raises, naming the segment,
    and the records around them stay readable."""
    d = log_from("multi-clean", crash=False, **MULTI)
    files = seg_files(d)
    pos, base, _ = batches(files[1])[-2]
    nxt = int(os.path.basename(files[2])[:20])
    os.truncate(files[1], pos)
    with Log.open(d) as lg:
        assert lg.end_offset == NM
        with pytest.raises(CorruptRecordError) as e:
            read_everything(lg)
        assert os.path.samefile(e.value.path, files[1]) and f"offsets {base}..{nxt - 1}" in str(e.value)
        with pytest.raises(CorruptRecordError):
            lg.read_batches(base)
        # a read that collected good records first returns them; the next one reports the damage
        assert [r.offset for r in lg.read(base - 1, max_records=5)] == [base - 1]
        assert [b.base_offset for b in lg.read_batches(base - BATCH, max_bytes=1 << 20)] == [base - BATCH]
        check_each_offset(lg, NM, set(range(base, nxt)))


@pytest.mark.parametrize("recovery", ["fail", "skip", "truncate"])
def test_a_sealed_segment_that_ends_short_below_the_recovery_point_is_corruption(log_from, recovery):
    """Recovery scans from the segment holding the recovery point: one of its batches, fsynced,
    is gone whole (its file cut at the batch's start). Not a torn tail: ``fail`` refuses,
    ``truncate`` cuts there, ``skip`` records the missing offsets as a gap (kept: a reopen
    with ``fail`` opens) and keeps what follows."""
    d = log_from("multi", **MULTI)
    files = seg_files(d)
    f = files[2]
    pos, base, _ = batches(f)[-1]
    nxt = int(os.path.basename(files[3])[:20])
    os.truncate(f, pos)
    _rewrite_checkpoint(d, base + 1)
    missing = set(range(base, nxt))
    if recovery == "fail":
        with pytest.raises(CorruptRecordError) as e:
            Log.open(d)
        assert os.path.samefile(e.value.path, f) and "recovery point" in str(e.value)
        return
    with Log.open(d, recovery=recovery) as lg:
        if recovery == "truncate":
            assert lg.end_offset == base
            check(lg, range(base))
            return
        assert lg.end_offset == NM
        check(lg, [o for o in range(NM) if o not in missing])
        check_each_offset(lg, NM, missing, skip=True)
    with Log.open(d) as lg:  # the gap is recorded (quarantine/): a strict open accepts it
        check(lg, [o for o in range(NM) if o not in missing])


def test_an_unsynced_sealed_segment_that_ends_short_is_a_torn_tail(log_from):
    """As a power loss leaves a rolled segment whose background fsync never ran: its file
    fell back to a batch boundary (a whole batch gone, nothing torn inside one), the recovery
    point at its base. Nothing from there on was acknowledged durable: the log ends there and
    the later segments (never durable either) are deleted, as for a torn sealed segment."""
    d = log_from("multi", **MULTI)
    f = seg_files(d)[2]
    seg_base = int(os.path.basename(f)[:20])
    pos, base, _ = batches(f)[-1]
    os.truncate(f, pos)
    _rewrite_checkpoint(d, seg_base)
    with Log.open(d) as lg:
        assert lg.end_offset == base
        check(lg, range(base))
        assert seg_files(d)[-1] == f
        assert lg.append(val(base), timestamp_ms=TS0 + base) == base
        check(lg, range(base + 1))


@pytest.mark.parametrize("damage", ["cut at a batch boundary", "deleted"])
@pytest.mark.parametrize("clean", [True, False], ids=["after a clean close", "after a crash"])
def test_a_log_that_ends_below_its_recovery_point_is_refused(log_from, damage, clean):
    """The recovery point (the checkpoint, or the clean-shutdown marker's) says every offset
    below it was fsynced: a log whose last segment lost batches below it whole, or was
    deleted, lost durable records and is not opened as if nothing happened (``skip`` and
    ``truncate`` open it as it is)."""
    d = log_from("multi-clean" if clean else "multi", crash=not clean, **MULTI)
    with open(os.path.join(d, CHECKPOINT)) as fh:
        rp = json.load(fh)["recovery_point"]
    last = seg_files(d)[-1]
    last_base = int(os.path.basename(last)[:20])
    if damage == "deleted":
        for name in os.listdir(d):
            if name.startswith(os.path.basename(last)[:20]):
                os.unlink(os.path.join(d, name))
        end = last_base
    else:
        pos, end, _ = next(b for b in batches(last) if b[1] < rp)
        os.truncate(last, pos)
    assert end < rp
    with pytest.raises(CorruptRecordError) as e:
        Log.open(d)
    assert f"ends at offset {end}, below its recovery point {rp}" in str(e.value)
    for recovery in ("skip", "truncate"):
        with Log.open(d, recovery=recovery) as lg:
            assert lg.end_offset == end
            check(lg, range(end))


# --------------------------------------------------------------------------- indexes


def _damage_index(path, mode, rnd):
    size = os.path.getsize(path) if os.path.exists(path) else 0
    if mode == "deleted":
        os.unlink(path)
    elif mode == "empty":
        os.truncate(path, 0)
    elif mode == "zero-filled":
        with open(path, "r+b") as fh:
            fh.write(bytes(size))
    elif mode == "garbage":
        with open(path, "r+b") as fh:
            fh.write(rnd.randbytes(size))
    elif mode == "odd size":
        os.truncate(path, max(0, size - 3))
    elif mode == "grown":
        with open(path, "ab") as fh:
            fh.write(rnd.randbytes(4096))
    elif mode == "shifted":
        # plausible entries, every position off by a few bytes (not a batch start)
        with open(path, "r+b") as fh:
            data = bytearray(fh.read())
            es = 8 if path.endswith(".index") else 12
            for i in range(0, len(data) - es + 1, es):
                if path.endswith(".index"):
                    p = int.from_bytes(data[i + 4 : i + 8], "little")
                    data[i + 4 : i + 8] = (p + 5).to_bytes(4, "little")
                else:
                    t = int.from_bytes(data[i : i + 8], "little", signed=True)
                    data[i : i + 8] = (t - 7).to_bytes(8, "little", signed=True)
            fh.seek(0)
            fh.write(data)
    elif mode == "past the end":
        with open(path, "r+b") as fh:
            data = bytearray(fh.read())
            es = 8 if path.endswith(".index") else 12
            for i in range(0, len(data) - es + 1, es):
                if path.endswith(".index"):
                    data[i + 4 : i + 8] = (10**9 + i).to_bytes(4, "little")
                else:
                    data[i + 8 : i + 12] = (10**6 + i).to_bytes(4, "little")
            fh.seek(0)
            fh.write(data)
    elif mode == "swapped":
        # valid entries of another segment: positions and offsets that exist, but not here
        with open(path, "r+b") as fh:
            data = bytearray(fh.read())
            es = 8 if path.endswith(".index") else 12
            n = len(data) // es
            ents = [data[i * es : (i + 1) * es] for i in range(n)]
            if n > 1 and path.endswith(".index"):
                # keep keys (relative offsets) in order, rotate positions
                poss = [e[4:8] for e in ents]
                poss = poss[1:] + poss[:1]
                for e, p in zip(ents, poss):
                    e[4:8] = p
            elif n > 1:
                rels = [e[8:12] for e in ents]
                rels = rels[1:] + rels[:1]
                for e, r in zip(ents, rels):
                    e[8:12] = r
            fh.seek(0)
            fh.write(b"".join(ents))


INDEX_MODES = ["deleted", "empty", "zero-filled", "garbage", "odd size", "grown", "shifted",
               "past the end", "swapped"]


def _check_with_indexes(lg, n):
    check(lg, range(n))
    for o in range(0, n, 7):  # random access goes through the offset index
        (r,) = lg.read(o, max_records=1)
        assert r.offset == o and bytes(r.value) == val(o)
        bs = lg.read_batches(o, max_bytes=1)
        assert bs[0].base_offset <= o < bs[0].next_offset
        assert bs[0].value(o - bs[0].base_offset) == val(o)
    for o in range(0, n, 11):  # the time index
        assert lg.offset_for_time(TS0 + o) == o
    assert lg.offset_for_time(TS0 + n) is None


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])
@pytest.mark.parametrize("mode", INDEX_MODES)
@pytest.mark.parametrize("kind", [".index", ".timeindex"])
def test_damaged_index_files_of_sealed_segments(log_from, clean, mode, kind):
    d = log_from("multi-clean" if clean else "multi", crash=not clean, **MULTI)
    rnd = random.Random(zlib.crc32((mode + kind).encode()))
    idx = seg_files(d, kind)
    assert len(idx) >= 4
    for p in idx[:-1]:
        _damage_index(p, mode, rnd)
    with Log.open(d) as lg:
        _check_with_indexes(lg, NM)
    with Log.open(d) as lg:  # and after another reopen
        _check_with_indexes(lg, NM)
    with Log.open(d, readonly=True) as ro:
        _check_with_indexes(ro, NM)


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])
@pytest.mark.parametrize("mode", INDEX_MODES)
def test_damaged_index_files_of_the_active_segment(log_from, clean, mode):
    d = log_from("multi-clean" if clean else "multi", crash=not clean, **MULTI)
    rnd = random.Random(zlib.crc32(mode.encode()))
    for kind in (".index", ".timeindex"):
        p = seg_files(d, kind)[-1]
        if os.path.exists(p):
            _damage_index(p, mode, rnd)
    with Log.open(d) as lg:
        _check_with_indexes(lg, NM)
        # appending on top of a repaired index keeps lookups right
        for i in range(NM, NM + 50):
            lg.append(val(i), timestamp_ms=TS0 + i)
        lg.flush()
        _check_with_indexes(lg, NM + 50)
    with Log.open(d) as lg:
        _check_with_indexes(lg, NM + 50)


def test_damaged_indexes_readonly_changes_nothing(log_from):
    d = log_from("multi-clean", crash=False, **MULTI)
    rnd = random.Random(3)
    for p in seg_files(d, ".index") + seg_files(d, ".timeindex"):
        _damage_index(p, "garbage", rnd)
    before = digest(d)
    with Log.open(d, readonly=True) as ro:
        _check_with_indexes(ro, NM)
    assert digest(d) == before


# --------------------------------------------------------------------------- batch placement


@pytest.mark.parametrize("no_checkpoint", [False, True], ids=["lazy", "full-scan"])
@pytest.mark.parametrize("where", ["first of a segment", "last of a segment", "two adjacent",
                                   "first of the last segment"])
def test_skip_drops_exactly_the_damaged_batches_wherever_they_are(log_from, where, no_checkpoint):
    """Damage at segment boundaries. With the checkpoint deleted every segment
    is validated (and excised) at open; otherwise older segments are checked
    when read. Either way exactly the damaged batches go."""
    d = log_from("multi", **MULTI)
    if no_checkpoint:
        os.unlink(os.path.join(d, CHECKPOINT))
    files = seg_files(d)
    if where == "first of a segment":
        targets = [(files[2], 0)]
    elif where == "last of a segment":
        targets = [(files[2], -1)]
    elif where == "two adjacent":
        targets = [(files[1], 1), (files[1], 2)]
    else:
        targets = [(files[-1], 0)]
    damaged = set()
    for f, i in targets:
        pos, base, size = batches(f)[i]
        flip(f, pos + size // 2)
        damaged |= set(range(base, base + BATCH))
    expect = [o for o in range(NM) if o not in damaged]
    with Log.open(d, recovery="skip") as lg:
        assert lg.end_offset == NM
        check(lg, expect)
        check_each_offset(lg, NM, damaged, skip=True)
        assert lg.append(val(NM), timestamp_ms=TS0 + NM) == NM
    qdir = os.path.join(d, QUARANTINE_DIR)
    excised = os.path.isdir(qdir) and len(os.listdir(qdir)) > 0
    if no_checkpoint or where == "first of the last segment":
        assert excised, "damage at or after the recovery point must be quarantined at open"
    if excised:
        # excised and recorded at open: the gap is part of the log from now on
        with Log.open(d) as lg:
            check(lg, expect + [NM])
        with Log.open(d, readonly=True) as ro:
            check(ro, expect + [NM])
    else:
        # stepped over at read time: still there for the next reader to judge
        with Log.open(d, recovery="skip") as lg:
            check(lg, expect + [NM])
        with Log.open(d, readonly=True, recovery="skip") as ro:
            check(ro, expect + [NM])
        with Log.open(d) as lg:
            check_each_offset(lg, NM + 1, damaged)


@pytest.mark.parametrize("mapped", [False, True])
def test_readonly_read_batches_of_a_damaged_middle_batch_names_it(log_from, mapped):
    """A reader that finds damage the owner did not (a readonly log checks
    batches only as it reads them) gets CorruptRecordError naming the file and
    position, mapped or not, after the intact batches before it."""
    d = log_from("one", **ONE_SEG)
    f, pos, base, size = _middle(d, "committed")
    flip(f, pos + 40)
    with Log.open(d, readonly=True) as ro:
        off, got = 0, []
        with pytest.raises(CorruptRecordError) as ei:
            while True:
                bs = ro.read_batches(off, max_bytes=size, mapped=mapped)
                got += [bytes(b.value(i)) for b in bs for i in range(b.count)]
                off = bs[-1].next_offset
        assert ei.value.position == pos and os.path.samefile(ei.value.path, f)
        assert got == [val(o) for o in range(base)]


def test_fail_at_open_names_the_first_damaged_batch_of_a_full_scan(log_from):
    d = log_from("multi", **MULTI)
    os.unlink(os.path.join(d, CHECKPOINT))
    f = seg_files(d)[1]
    pos, base, size = batches(f)[1]
    flip(f, pos + 30)
    with pytest.raises(CorruptRecordError) as ei:
        Log.open(d)
    assert ei.value.position == pos and os.path.samefile(ei.value.path, f)
