"""A clean reopen from the clean-shutdown marker's record of the tail
(``defer_clean_marker``, a broker's partitions; vqs/storage/recovery.py) leaves
the log exactly as the scan of the tail does: the same end, the same largest
timestamp and index schedule, and after more appends and a close, byte-for-byte
the same files. A marker without the record (VQS before 2026-11-24), one that
does not match the segment, or an unreadable one: the tail is scanned as before.
"""

from __future__ import annotations

import filecmp
import os
import shutil

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings

from vqs.storage.log import CLEAN_MARKER, Log
from vqs.storage.log_dir import read_clean_marker

OPTS = {"segment_bytes": 2048, "index_interval_bytes": 100, "flush": "never"}

batches = st.lists(
    st.tuples(st.lists(st.binary(min_size=0, max_size=300), min_size=1, max_size=6),
              st.integers(min_value=0, max_value=10**12)),
    min_size=1, max_size=12)


def _write(path, bs, *, defer=True) -> None:
    with Log.open(path, defer_clean_marker=defer, **OPTS) as lg:
        for values, ts in bs:
            lg.append_batch(values, timestamps_ms=ts)


def _tail(path):
    lg = Log.open(path, defer_clean_marker=True, **OPTS)
    s = lg._segs.all[-1]
    state = (lg.start_offset, lg.end_offset, s.size, s.next_offset, s.max_timestamp_ms, s._ti_last,
             s._since_index, lg._clean_marker)
    return lg, state


def _same_tree(a: str, b: str) -> None:
    names = sorted(os.listdir(a))
    assert names == sorted(os.listdir(b))
    match, mismatch, errors = filecmp.cmpfiles(a, b, [n for n in names if n != ".lock"], shallow=False)
    assert not mismatch and not errors, (mismatch, errors)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=batches, more=batches)
def test_marker_tail_reopens_as_the_scan_does(tmp_path_factory, first, more):
    root = tmp_path_factory.mktemp("reopen")
    a, b = str(root / "marker"), str(root / "scan")
    _write(a, first)
    marker = read_clean_marker(a)
    assert marker is not None and marker["next_offset"] == sum(len(v) for v, _ in first)
    shutil.copytree(a, b)
    with open(os.path.join(b, CLEAN_MARKER), "wb"):
        pass  # an empty marker, as VQS wrote before: the tail is scanned
    la, sa = _tail(a)
    lb, sb = _tail(b)
    assert sa == sb
    for lg in (la, lb):
        for values, ts in more:
            lg.append_batch(values, timestamps_ms=ts)
        lg.close()
    _same_tree(a, b)
    with Log.open(a, **OPTS) as lg:
        n = sum(len(v) for v, _ in first + more)
        assert [r.value for r in lg.read(0, max_records=n + 1)] == [v for vs, _ in first + more for v in vs]


def test_a_marker_that_does_not_match_is_not_used(tmp_path):
    path = str(tmp_path / "log")
    _write(path, [([b"a" * 50] * 3, 1000), ([b"b" * 50] * 2, 2000)])
    seg = os.path.join(path, "00000000000000000000.log")
    size = os.path.getsize(seg)
    with open(seg, "ab") as f:
        f.write(b"\x00" * 40)  # garbage after the clean close: the size no longer matches
    lg, state = _tail(path)
    try:
        assert state[1] == 5 and state[2] == size  # scanned: the garbage is not part of the log
        assert lg.append(b"c") == 5
    finally:
        lg.close()
    with Log.open(path, **OPTS) as lg:
        assert [r.value for r in lg.read(0, max_records=10)][-1] == b"c"

    with open(os.path.join(path, CLEAN_MARKER), "wb") as f:
        f.write(b'{"version": 1, "segment": 0')  # unreadable: scanned
    lg, state = _tail(path)
    lg.close()
    assert state[1] == 6
