"""The golden format vectors (tests/format_vectors/, docs/FORMAT.md) read by vqs.storage.

Each vector is a checked-in log directory written by make_vectors.py with the
writer of its day, and a JSON file of what a reader must report. A readonly
``Log`` must return exactly those records, fail on exactly the ``unreadable``
offsets (a CorruptRecordError naming the segment and the batch's position), and
step over the ``missing`` ones (a gap ``quarantine/`` records). The same files
are read by the JVM reader in tests/spark/test_format_vectors_jvm.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil

import pytest

from vqs.errors import CorruptRecordError
from vqs.storage import Log

VECTORS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "format_vectors")
NAMES = sorted(f[:-5] for f in os.listdir(VECTORS) if f.endswith(".json"))
INLINE_MAX = 256  # make_vectors.py: longer values are compared by length and SHA-256


def expected(name: str) -> dict:
    with open(os.path.join(VECTORS, f"{name}.json")) as f:
        return json.load(f)


def record_json(r) -> dict:
    out = {"offset": r.offset, "timestamp": r.timestamp_ms,
           "key": None if r.key is None else base64.b64encode(r.key).decode()}
    if r.value is None:
        out["value"] = None
    elif len(r.value) <= INLINE_MAX:
        out["value"] = base64.b64encode(r.value).decode()
    else:
        out["value_len"] = len(r.value)
        out["value_sha256"] = hashlib.sha256(r.value).hexdigest()
    out["headers"] = [[k, None if v is None else base64.b64encode(v).decode()] for k, v in r.headers]
    return out


def read_all(path: str) -> tuple[dict, list[CorruptRecordError]]:
    """Read every offset of the log at ``path`` in order, as a consumer would: on an
    error, note the offset and go on at the next one."""
    log = Log.open(path, readonly=True)
    try:
        start, end = log.start_offset, log.end_offset
        records, unreadable, errors = [], [], []
        o = start
        while o < end:
            try:
                got = log.read(o, max_records=1000)
            except CorruptRecordError as e:
                unreadable.append(o)
                errors.append(e)
                o += 1
                continue
            if not got:
                break
            records += [record_json(r) for r in got]
            o = got[-1].offset + 1
    finally:
        log.close()
    seen = {r["offset"] for r in records} | set(unreadable)
    return ({"start_offset": start, "end_offset": end, "records": records, "unreadable": unreadable,
             "missing": [x for x in range(start, end) if x not in seen]}, errors)


def test_every_vector_is_listed():
    assert set(NAMES) == {"plain", "zstd", "lz4", "gzip", "keys_headers", "empty_values", "torn_tail", "corrupt_batch", "null_values",
                          "null_header_values", "quarantine_gap", "compacted"}


@pytest.mark.parametrize("name", NAMES)
def test_readonly_log_reads_the_vector(name):
    want = expected(name)
    got, errors = read_all(os.path.join(VECTORS, name))
    assert got == {k: want[k] for k in got}
    for e in errors:
        assert want["corrupt"]["segment"] in str(e) and e.position == want["corrupt"]["position"]


def test_segment_files_are_untouched_by_reading():
    """Reading is readonly: no file of any vector was created or changed (the test above ran first
    or not, the checked-in bytes are what make_vectors.py wrote)."""
    for name in NAMES:
        files = sorted(os.listdir(os.path.join(VECTORS, name)))
        assert all(f.endswith(".log") or f in ("quarantine", "cleaner.checkpoint") for f in files), (name, files)


def test_open_truncates_the_torn_tail(tmp_path):
    want = expected("torn_tail")
    d = shutil.copytree(os.path.join(VECTORS, "torn_tail"), tmp_path / "log")
    log = Log.open(d, flush="always")
    try:
        assert log.end_offset == want["end_offset"]
        assert os.path.getsize(d / want["torn_tail"]["segment"]) == want["torn_tail"]["valid_size"]
        assert [record_json(r) for r in log.read(0)] == want["records"]
    finally:
        log.close()


def test_open_refuses_the_corrupt_batch(tmp_path):
    want = expected("corrupt_batch")["corrupt"]
    d = shutil.copytree(os.path.join(VECTORS, "corrupt_batch"), tmp_path / "log")
    with pytest.raises(CorruptRecordError) as exc:
        Log.open(d, flush="always", recovery="fail")
    assert want["segment"] in str(exc.value) and exc.value.position == want["position"]


def test_quarantine_names_the_gap():
    want = expected("quarantine_gap")
    assert sorted(os.listdir(os.path.join(VECTORS, "quarantine_gap", "quarantine"))) == want["quarantine"]
    (name,) = want["quarantine"]
    _base, _pos, lo, hi = name[:-4].split("-")
    assert list(range(int(lo), int(hi))) == want["missing"]
