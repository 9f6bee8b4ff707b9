"""vqs/cli/segment_scan.py: the full scan behind ``vqs inspect``."""

from vqs.cli.segment_scan import scan_segment_buffer, scan_segment_file
from vqs.record import encode_batch


def _kinds(buf, **kw):
    return [(i.kind, i.position) for i in scan_segment_buffer(buf, **kw)]


def test_valid_batches_gap_and_offsets_going_back():
    a = encode_batch(0, [b"a", b"b"], timestamps=1)
    b = encode_batch(5, [b"c"], timestamps=1)
    c = encode_batch(1, [b"d"], timestamps=1)
    items = list(scan_segment_buffer(a + b + c, base_offset=0))
    assert [(i.kind, i.position) for i in items] == [
        ("batch", 0), ("gap", len(a)), ("batch", len(a)),
        ("offset_goes_back", len(a) + len(b)), ("batch", len(a) + len(b)),
    ]
    assert items[1].expected == 2 and not items[1].corrupt
    assert items[3].expected == 6 and items[3].corrupt
    assert [r.value for r in items[0].batch.records()] == [b"a", b"b"]


def test_a_corrupt_batch_is_reported_and_the_scan_goes_on():
    a, b = encode_batch(0, [b"x" * 40]), encode_batch(1, [b"y"])
    buf = bytearray(a + b)
    buf[len(a) - 3] ^= 0xFF
    items = list(scan_segment_buffer(bytes(buf)))
    assert [(i.kind, i.position) for i in items] == [("invalid_batch", 0), ("batch", len(a))]
    assert "CRC mismatch" in items[0].detail and not items[0].at_end and items[0].corrupt


def test_torn_tails_and_an_impossible_header():
    a = encode_batch(0, [b"x"])
    assert _kinds(a + bytes(30)) == [("batch", 0), ("zero_tail", len(a))]
    assert _kinds(a + a[:-1]) == [("batch", 0), ("incomplete_tail", len(a))]
    items = list(scan_segment_buffer(a + b"\xff" * 64))
    assert [(i.kind, i.size) for i in items] == [("batch", len(a)), ("bad_header", 64)]
    assert items[1].corrupt


def test_below_the_segment_base_from_the_file_name(tmp_path):
    f = tmp_path / "00000000000000000010.log"
    f.write_bytes(encode_batch(3, [b"x"]))
    assert [i.kind for i in scan_segment_file(str(f))] == ["below_segment_base", "batch"]
