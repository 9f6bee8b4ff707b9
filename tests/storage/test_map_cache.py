"""MapCache: kept read-only mappings of segment files, named by file identity."""

from __future__ import annotations

import os

import pytest

from vqs.storage.log import Log
from vqs.storage.map_cache import MapCache


def write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def view(cache: MapCache, path: str, position: int, n: int, valid: int | None = None) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return bytes(cache.view(fd, position, n, os.fstat(fd).st_size if valid is None else valid))
    finally:
        os.close(fd)


def test_a_second_view_of_a_file_reuses_its_mapping(tmp_path):
    p = str(tmp_path / "a")
    write(p, bytes(range(256)) * 64)
    c = MapCache()
    assert view(c, p, 10, 5) == bytes(range(10, 15))
    assert view(c, p, 300, 4) == bytes(range(44, 48))
    assert c.mapped == 1 and len(c) == 1


def test_a_file_recreated_under_the_same_name_is_not_served_from_the_old_mapping(tmp_path):
    p = str(tmp_path / "seg")
    write(p, b"A" * 8192)
    c = MapCache()
    kept = view(c, p, 0, 4)
    os.unlink(p)
    write(p, b"B" * 8192)
    assert kept == b"AAAA" and view(c, p, 0, 4) == b"BBBB"
    assert c.mapped == 2


def test_a_grown_file_is_mapped_again_and_nothing_beyond_the_valid_size_is_handed_out(tmp_path):
    p = str(tmp_path / "seg")
    write(p, b"x" * 5000)
    c = MapCache()
    old = view(c, p, 4990, 10)
    with open(p, "ab") as f:
        f.write(b"y" * 5000)
    assert view(c, p, 4995, 10) == b"xxxxxyyyyy" and old == b"x" * 10
    assert c.mapped == 2 and len(c) == 1
    with pytest.raises(ValueError):
        view(c, p, 9000, 100, valid=9050)  # beyond what the reader may touch


def test_at_most_max_entries_are_kept_and_a_dropped_mapping_stays_readable_through_its_views(tmp_path):
    c = MapCache(max_entries=2)
    paths = [str(tmp_path / f"s{i}") for i in range(3)]
    views = []
    for i, p in enumerate(paths):
        write(p, bytes([65 + i]) * 4096)
        fd = os.open(p, os.O_RDONLY)
        views.append(c.view(fd, 0, 4096, 4096))
        os.close(fd)
    assert len(c) == 2
    assert [bytes(v[:2]) for v in views] == [b"AA", b"BB", b"CC"]


def test_log_scans_through_a_cache_map_each_segment_once(tmp_path):
    d = str(tmp_path / "log")
    with Log.open(d, flush="never", segment_bytes=4096) as lg:
        for k in range(40):
            lg.append_batch([b"%05d" % (10 * k + i) * 7 for i in range(10)])
        end = lg.end_offset
    c = MapCache(max_entries=1000)
    want = [b"%05d" % o * 7 for o in range(end)]
    for _ in range(3):
        with Log.open(d, readonly=True) as ro:  # a fresh Log per scan, as Spark's tasks open it
            got = [b.value(i) for b in ro.scan_batches(0, maps=c) for i in range(b.count)]
        assert got == want
    segments = len([f for f in os.listdir(d) if f.endswith(".log")])
    assert segments > 3 and c.mapped == segments
