"""The record batch and its codecs (vqs/record/, spec docs/FORMAT.md).

Round-trips of every column, both codecs, the CRC's coverage (every flipped
byte after the length field is detected), truncation, re-basing without
re-checksumming, and length fields that are never trusted to allocate.
"""

from __future__ import annotations

import gzip
import pickle
import struct
import tracemalloc

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vqs.errors import ConfigError, CorruptRecordError, VQSError
from vqs.record import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_NONE,
    CODEC_ZSTD,
    HEADER_SIZE,
    Record,
    codec_id,
    decode_batch,
    encode_batch,
    encode_batch_parts,
    peek_header,
    scan_batches,
)
from vqs.record import batch as rb
from vqs.record.batch import CRC_START

CODECS = [CODEC_NONE, CODEC_ZSTD, CODEC_LZ4, CODEC_GZIP]
CODEC_IDS = ["none", "zstd", "lz4", "gzip"]

# Offsets of header fields (HEADER = "<QIIBBHIqqqhiI6x").
OFF_BASE, OFF_LEN, OFF_CRC, OFF_MAGIC, OFF_CODEC, OFF_ATTRS, OFF_COUNT = 0, 8, 12, 16, 17, 18, 20
OFF_BODY_LEN = 54


def roundtrip(base, values, *, codec=CODEC_NONE, **kw):
    buf = encode_batch(base, values, codec=codec, **kw)
    return buf, decode_batch(buf)


def recrc(buf: bytearray) -> bytearray:
    """Recompute the CRC of a (deliberately altered) batch so that only the
    structural checks behind the CRC can catch it."""
    struct.pack_into("<I", buf, OFF_CRC, crc32c.crc32c(bytes(buf[CRC_START:])))
    return buf


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_values_roundtrip(codec):
    values = [b"alpha", b"", b"\x00" * 17, bytes(range(256)), b"z" * 5000]
    buf, b = roundtrip(100, values, codec=codec, timestamps=1234)
    assert b.base_offset == 100
    assert b.count == len(values)
    assert b.next_offset == 100 + len(values)
    assert b.last_offset == 100 + len(values) - 1
    assert b.codec == codec
    assert b.size_bytes == len(buf)
    assert [b.value(i) for i in range(b.count)] == values
    assert b.values() == values
    assert b.values(1, 3) == values[1:3]
    recs = b.records()
    assert [r.offset for r in recs] == list(range(100, 105))
    assert [r.value for r in recs] == values
    assert all(r.timestamp_ms == 1234 for r in recs)
    assert all(r.key is None for r in recs)
    assert all(tuple(r.headers) == () for r in recs)
    assert b.key_validity is None and b.header_offsets is None and b.timestamps is None
    if codec == CODEC_NONE:
        assert len(buf) == HEADER_SIZE + 4 * (len(values) + 1) + sum(map(len, values))


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_keys_with_none_roundtrip(codec):
    values = [b"v%d" % i for i in range(20)]
    keys = [None if i % 3 == 0 else b"key-%d" % i for i in range(20)]
    keys[1] = b""  # an empty key is a key, not None
    _, b = roundtrip(0, values, codec=codec, keys=keys)
    assert [b.key(i) for i in range(20)] == keys
    assert [r.key for r in b.records()] == keys
    assert b.key_validity is not None


def test_all_none_keys_omit_the_column():
    _, b = roundtrip(0, [b"a", b"b"], keys=[None, None])
    assert b.key_validity is None
    assert [b.key(0), b.key(1)] == [None, None]


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_headers_roundtrip(codec):
    values = [b"a", b"b", b"c", b"d"]
    headers = [
        [("content-type", b"application/json"), ("trace", b"\x00\x01")],
        None,
        [],
        [("unicode-é", b""), ("x" * 300, b"y" * 70000)],
    ]
    _, b = roundtrip(7, values, codec=codec, headers=headers)
    expect = [
        (("content-type", b"application/json"), ("trace", b"\x00\x01")),
        (),
        (),
        (("unicode-é", b""), ("x" * 300, b"y" * 70000)),
    ]
    assert [b.headers(i) for i in range(4)] == expect
    assert [tuple(r.headers) for r in b.records()] == expect


def test_header_str_values_are_encoded_as_utf8():
    _, b = roundtrip(0, [b"a"], headers=[[("k", "välue")]])
    assert b.headers(0) == (("k", "välue".encode()),)


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_per_record_timestamps_roundtrip(codec):
    ts = [1_700_000_000_000 + d for d in (5, 0, 9, 9, -3, 2**40)]
    _, b = roundtrip(0, [b"x"] * len(ts), codec=codec, timestamps=ts)
    assert b.first_timestamp_ms == ts[0]
    assert b.max_timestamp_ms == max(ts)
    assert [b.timestamp(i) for i in range(len(ts))] == ts
    assert [r.timestamp_ms for r in b.records()] == ts
    assert list(b.timestamps) == ts


def test_equal_timestamps_need_no_column():
    _, b = roundtrip(0, [b"x"] * 3, timestamps=[42, 42, 42])
    assert b.timestamps is None
    assert [r.timestamp_ms for r in b.records()] == [42, 42, 42]


def test_negative_timestamp_roundtrip():
    _, b = roundtrip(0, [b"x", b"y"], timestamps=[-5, -1])
    assert [r.timestamp_ms for r in b.records()] == [-5, -1]


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_empty_values(codec):
    _, b = roundtrip(0, [b""] * 10, codec=codec)
    assert b.values() == [b""] * 10
    _, b = roundtrip(0, [b""], codec=codec)
    assert b.value(0) == b""


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_one_record(codec):
    _, b = roundtrip(2**40, [b"only"], codec=codec, keys=[b"k"], headers=[[("h", b"1")]], timestamps=[99])
    assert b.count == 1
    assert b.records() == [Record(2**40, 99, b"k", b"only", (("h", b"1"),))]


@pytest.mark.parametrize("n", [63, 64, 65, 1000, 20_000])
@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_many_records(codec, n):
    values = [b"%d" % i * (i % 7) for i in range(n)]
    keys = [None if i % 2 else b"%d" % i for i in range(n)]
    ts = [1000 + i // 3 for i in range(n)]
    _, b = roundtrip(5, values, codec=codec, keys=keys, timestamps=ts)
    assert b.values() == values
    recs = b.records()
    assert [r.value for r in recs] == values
    assert [r.key for r in recs] == keys
    assert [r.timestamp_ms for r in recs] == ts
    assert [r.offset for r in recs] == list(range(5, 5 + n))


def test_bytes_like_values():
    values = [bytearray(b"ba"), memoryview(b"mv"), b"b"]
    _, b = roundtrip(0, values)
    assert b.values() == [b"ba", b"mv", b"b"]


def test_records_subrange_and_clamping():
    values = [b"%d" % i for i in range(10)]
    _, b = roundtrip(50, values)
    recs = b.records(3, 6)
    assert [r.offset for r in recs] == [53, 54, 55]
    assert [r.value for r in recs] == values[3:6]
    assert b.records(8, 100) == b.records(8)
    assert b.records(5, 5) == []


def test_columns_are_arrow_binary_layout():
    values = [b"ab", b"", b"cde"]
    buf, b = roundtrip(0, values)
    assert list(b.value_offsets) == [0, 2, 2, 5]
    assert bytes(b.value_data) == b"abcde"
    # zero-copy: the data column points into the encoded buffer
    assert isinstance(b.value_data, memoryview)
    assert bytes(b.value_data) in buf


def test_encode_parts_equal_encode():
    kw = dict(keys=[b"k", None], headers=[None, [("a", b"b")]], timestamps=[1, 2])
    assert b"".join(encode_batch_parts(3, [b"x", b"y"], **kw)) == encode_batch(3, [b"x", b"y"], **kw)


def test_decode_at_position_in_a_larger_buffer():
    b1 = encode_batch(0, [b"a", b"b"])
    b2 = encode_batch(2, [b"c"], codec=CODEC_ZSTD)
    b3 = encode_batch(3, [b"d", b"e", b"f"], keys=[b"1", None, b"3"])
    buf = b"".join([b1, b2, b3])
    assert decode_batch(buf, len(b1)).values() == [b"c"]
    d3 = decode_batch(buf, len(b1) + len(b2))
    assert d3.base_offset == 3 and d3.values() == [b"d", b"e", b"f"]
    assert list(scan_batches(buf)) == [
        (0, 0, len(b1)),
        (len(b1), 2, len(b2)),
        (len(b1) + len(b2), 3, len(b3)),
    ]
    assert peek_header(buf, len(b1)) == (2, len(b2))
    # scan stops at a truncated batch
    assert len(list(scan_batches(buf[:-1]))) == 2


def test_codec_id_names():
    assert codec_id(None) == CODEC_NONE
    assert codec_id("zstd") == CODEC_ZSTD
    assert codec_id("lz4") == CODEC_LZ4
    assert codec_id("gzip") == CODEC_GZIP
    with pytest.raises(ConfigError, match="'snappy' is not supported"):
        codec_id("snappy")


def test_compression_shrinks_repetitive_bodies():
    values = [b"the same message body " * 10] * 200
    plain = encode_batch(0, values)
    for codec in (CODEC_ZSTD, CODEC_LZ4, CODEC_GZIP):
        packed = encode_batch(0, values, codec=codec)
        assert len(packed) < len(plain) // 5
        assert decode_batch(packed).values() == values


def test_empty_batch_is_refused():
    with pytest.raises(ConfigError):
        encode_batch(0, [])


def test_timestamps_length_mismatch_is_refused():
    with pytest.raises(ConfigError):
        encode_batch(0, [b"a", b"b"], timestamps=[1])


def test_errors_derive_from_vqserror():
    assert issubclass(CorruptRecordError, VQSError)
    assert issubclass(ConfigError, VQSError)


# --------------------------------------------------------------------------- hypothesis

_values = st.lists(st.binary(max_size=300), min_size=1, max_size=80)


@st.composite
def batches(draw):
    values = draw(_values)
    n = len(values)
    keys = draw(st.none() | st.lists(st.none() | st.binary(max_size=40), min_size=n, max_size=n))
    headers = draw(
        st.none()
        | st.lists(
            st.none()
            | st.lists(st.tuples(st.text(max_size=12), st.binary(max_size=40)), max_size=4),
            min_size=n,
            max_size=n,
        )
    )
    ts = draw(
        st.integers(-(2**62), 2**62)
        | st.lists(st.integers(-(2**62), 2**62), min_size=n, max_size=n)
    )
    codec = draw(st.sampled_from(CODECS))
    base = draw(st.integers(0, 2**63 - 1 - n))
    return base, values, keys, headers, ts, codec


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches())
def test_hypothesis_roundtrip(batch):
    base, values, keys, headers, ts, codec = batch
    buf = encode_batch(base, values, keys=keys, headers=headers, timestamps=ts, codec=codec)
    b = decode_batch(buf)
    n = len(values)
    assert b.count == n and b.base_offset == base
    exp_keys = keys if keys is not None else [None] * n
    exp_hdrs = [tuple(h) if h else () for h in headers] if headers is not None else [()] * n
    exp_ts = ts if isinstance(ts, list) else [ts] * n
    expect = [
        Record(base + i, exp_ts[i], exp_keys[i], values[i], exp_hdrs[i]) for i in range(n)
    ]
    assert b.records() == expect
    assert b.first_timestamp_ms == exp_ts[0]
    assert b.max_timestamp_ms == max(exp_ts)


# --------------------------------------------------------------------------- rebase


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_the_base_offset_lies_outside_the_crc(codec):
    """A batch can be given new offsets (its base rewritten) without a new CRC."""
    buf = bytearray(encode_batch(0, [b"a", b"b", b"c"], keys=[b"k", None, b"k3"], codec=codec))
    crc_before = bytes(buf[OFF_CRC : OFF_CRC + 4])
    struct.pack_into("<Q", buf, 0, 123_456_789_012)
    assert bytes(buf[OFF_CRC : OFF_CRC + 4]) == crc_before
    b = decode_batch(buf)
    assert b.base_offset == 123_456_789_012
    assert [r.offset for r in b.records()] == [123_456_789_012 + i for i in range(3)]
    assert b.values() == [b"a", b"b", b"c"]
    # identical to encoding at that base in the first place
    assert bytes(buf) == encode_batch(123_456_789_012, [b"a", b"b", b"c"], keys=[b"k", None, b"k3"], codec=codec)


# --------------------------------------------------------------------------- corruption


def _sample_batches():
    yield "plain", encode_batch(
        10,
        [b"hello", b"", b"world" * 3],
        keys=[b"k", None, b"kk"],
        headers=[[("h", b"v")], None, [("a", b"b"), ("c", b"")]],
        timestamps=[5, 7, 6],
    )
    yield "zstd", encode_batch(0, [b"abc" * 20, b"def"], keys=[None, b"x"], codec=CODEC_ZSTD)
    yield "lz4", encode_batch(0, [b"abc" * 20, b"def"], timestamps=[1, 2], codec=CODEC_LZ4)
    yield "gzip", encode_batch(0, [b"abc" * 20, b"def"], keys=[b"k", None], codec=CODEC_GZIP)


@pytest.mark.parametrize("name,buf", list(_sample_batches()), ids=lambda x: x if isinstance(x, str) else "")
def test_every_flipped_byte_in_crc_region_is_detected(name, buf):
    """Every byte from the length field to the end of the batch is covered by a
    check: the length by bounds, the CRC field and everything after it by the
    CRC. Only the base offset is left outside, on purpose (a batch can be given new offsets)."""
    for i in range(OFF_LEN, len(buf)):
        for mask in (0xFF, 0x01, 0x80):
            bad = bytearray(buf)
            bad[i] ^= mask
            with pytest.raises(CorruptRecordError):
                decode_batch(bytes(bad))


def test_flipped_byte_followed_by_more_data_is_detected():
    """Same, with valid batches after the damaged one in the buffer (a length
    that grows then lands inside the next batch, not past the end)."""
    buf = encode_batch(0, [b"a" * 40, b"b" * 40])
    tail = encode_batch(2, [b"c" * 500]) * 3
    for i in range(OFF_LEN, len(buf)):
        bad = bytearray(buf + tail)
        bad[i] ^= 0xFF
        with pytest.raises(CorruptRecordError):
            decode_batch(bytes(bad), 0)


def test_base_offset_is_outside_the_crc():
    bad = bytearray(encode_batch(0, [b"a"]))
    bad[0] ^= 0x01
    assert decode_batch(bytes(bad)).base_offset == 1


def test_corrupt_error_names_where_and_position():
    buf = bytearray(encode_batch(0, [b"x"]) + encode_batch(1, [b"y"]))
    pos = len(buf) // 2
    buf[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError) as ei:
        decode_batch(bytes(buf), pos, where="/some/file.log")
    assert ei.value.position == pos
    assert "/some/file.log" in str(ei.value)
    assert str(pos) in str(ei.value)


@pytest.mark.parametrize("name,buf", list(_sample_batches()), ids=lambda x: x if isinstance(x, str) else "")
def test_every_truncation_is_detected(name, buf):
    for cut in range(len(buf)):
        with pytest.raises(CorruptRecordError):
            decode_batch(buf[:cut])
        assert peek_header(buf[:cut]) is None or cut >= HEADER_SIZE
        assert list(scan_batches(buf[:cut])) == []


def test_decode_past_end_of_buffer():
    with pytest.raises(CorruptRecordError):
        decode_batch(b"")
    buf = encode_batch(0, [b"x"])
    with pytest.raises(CorruptRecordError):
        decode_batch(buf, len(buf))


def test_zero_filled_buffer_is_not_a_batch():
    with pytest.raises(CorruptRecordError):
        decode_batch(bytes(4096))
    assert peek_header(bytes(4096)) is None
    assert list(scan_batches(bytes(4096))) == []


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_structural_damage_behind_a_valid_crc_is_detected(codec):
    """A batch whose CRC is valid but whose fields lie (a buggy or hostile
    writer) is refused, never returned half-decoded."""
    good = bytearray(encode_batch(0, [b"aa", b"bbb"], keys=[b"k", None], timestamps=[1, 2], codec=codec))
    mutations = {
        "magic": lambda b: struct.pack_into("<B", b, OFF_MAGIC, 99),
        "codec": lambda b: struct.pack_into("<B", b, OFF_CODEC, 77),
        "unknown attribute": lambda b: struct.pack_into("<H", b, OFF_ATTRS, 0x80),
        "count zero": lambda b: struct.pack_into("<I", b, OFF_COUNT, 0),
        "count larger": lambda b: struct.pack_into("<I", b, OFF_COUNT, 1000),
        "count smaller": lambda b: struct.pack_into("<I", b, OFF_COUNT, 1),
        "body length": lambda b: struct.pack_into("<I", b, OFF_BODY_LEN, 3),
    }
    for what, mutate in mutations.items():
        bad = bytearray(good)
        mutate(bad)
        with pytest.raises(CorruptRecordError):
            decode_batch(bytes(recrc(bad)))
            pytest.fail(f"{what}: accepted")


def test_column_offsets_past_the_body_behind_a_valid_crc():
    good = bytearray(encode_batch(0, [b"aa", b"bbb"]))
    # value_offsets = [0, 2, 5] right after the header; make the end offset huge
    struct.pack_into("<I", good, HEADER_SIZE + 8, 0xFFFFFFF0)
    with pytest.raises(CorruptRecordError):
        decode_batch(bytes(recrc(good)))
    good = bytearray(encode_batch(0, [b"aa", b"bbb"]))
    struct.pack_into("<I", good, HEADER_SIZE, 1)  # first offset must be 0
    with pytest.raises(CorruptRecordError):
        decode_batch(bytes(recrc(good)))


def _decreasing(column: str) -> bytes:
    """A batch of three records whose ``column`` offsets go back (0, 7, 3, 8 for 0, 3, 7, 8), its
    CRC valid: read as the offsets say, records overlap (the first spans two records' bytes)."""
    values = [b"abc", b"defg", b"h"]
    kw: dict = {"keys": list(values)} if column == "key" else {}
    if column == "header":
        kw = {"headers": [[("a", b"x")], [("bb", b"yy")], [("c", b"")]]}
    good = bytearray(encode_batch(0, values, **kw))
    at = HEADER_SIZE  # the values' offsets; the keys' follow the values' data and their bitmap
    if column != "value":
        at += 4 * 4 + 8 + (1 if column == "key" else 0)
    o = struct.unpack_from("<4I", good, at)
    struct.pack_into("<II", good, at + 4, o[2], o[1])  # the first two ends swapped
    return bytes(recrc(good))


@pytest.mark.parametrize("column", ["value", "key", "header"])
def test_offsets_that_decrease_are_refused_in_a_batch_from_outside(column):
    """A client's batch whose offsets column goes back: behind a valid CRC, each slice may span
    the whole column, so a body of a few KiB could stand for GiB of values. ``untrusted``
    (vqs.wire.decode_body: every body a client or a server sends) refuses it; the log's own reads, whose
    batches the encoder made, skip the O(n) check."""
    bad = _decreasing(column)
    assert decode_batch(bad).count == 3  # (as the log reads its own: not checked)
    with pytest.raises(CorruptRecordError, match=f"{column} offsets decrease"):
        decode_batch(bad, untrusted=True)
    good = encode_batch(0, [b"a", b"", b"bc"], keys=[b"k", None, b""], headers=[[("h", b"v")], [], None])
    assert [r.value for r in decode_batch(good, untrusted=True).records()] == [b"a", b"", b"bc"]


def test_a_body_cannot_stand_for_more_values_than_it_holds():
    """The amplification the check closes: 4 KiB of values and 1,024 offsets alternating 0 and
    4,096 would read as 512 values of 4 KiB each (2 MiB)."""
    n = 1024
    offs = [0] + [4096 if i % 2 == 0 else 0 for i in range(n - 1)] + [4096]
    body = struct.pack(f"<{n + 1}I", *offs) + b"x" * 4096
    batch = bytearray(HEADER_SIZE) + body
    struct.pack_into("<QIIBBHIqqqhiI", batch, 0, 0, len(batch) - 12, 0, 1, 0, 0, n, 0, 0, -1, -1, -1, len(body))
    bad = bytes(recrc(batch))
    assert sum(map(len, decode_batch(bad).values())) == 512 * 4096  # what it would stand for
    with pytest.raises(CorruptRecordError, match="value offsets decrease"):
        decode_batch(bad, untrusted=True)


def test_malformed_headers_column_raises_corrupt():
    with pytest.raises(CorruptRecordError):
        rb.decode_headers(b"\x05\x00\xff")
    with pytest.raises(CorruptRecordError):
        rb.decode_headers(rb.encode_headers([("k", b"value")])[:-2])


# --------------------------------------------------------------------------- length fields


def _peak_alloc(fn) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("length", [0xFFFFFFFF, rb.MAX_BATCH_BYTES, rb.MAX_BATCH_BYTES + 1, 1 << 29, 4])
def test_huge_length_field_does_not_allocate(length):
    buf = bytearray(encode_batch(0, [b"x" * 100]))
    struct.pack_into("<I", buf, OFF_LEN, length)
    data = bytes(buf)

    def go():
        with pytest.raises(CorruptRecordError):
            decode_batch(data)

    assert _peak_alloc(go) < 1 << 20
    assert peek_header(data) is None or peek_header(data)[1] > len(data)
    assert list(scan_batches(data)) == []


def test_huge_count_does_not_allocate():
    buf = bytearray(encode_batch(0, [b"x" * 100]))
    struct.pack_into("<I", buf, OFF_COUNT, 0xFFFFFFFF)
    data = bytes(recrc(buf))

    def go():
        with pytest.raises(CorruptRecordError):
            decode_batch(data)

    assert _peak_alloc(go) < 1 << 20


@pytest.mark.parametrize("codec", CODECS[1:], ids=CODEC_IDS[1:])
def test_huge_body_length_does_not_allocate(codec):
    buf = bytearray(encode_batch(0, [b"x" * 100], codec=codec))
    struct.pack_into("<I", buf, OFF_BODY_LEN, rb.MAX_BATCH_BYTES)
    data = bytes(recrc(buf))

    def go():
        with pytest.raises(CorruptRecordError):
            decode_batch(data)

    assert _peak_alloc(go) < 4 << 20


@pytest.mark.parametrize("codec", CODECS[1:], ids=CODEC_IDS[1:])
def test_decompression_bomb_is_bounded_by_body_length(codec):
    """The compressed frame's own content-size field is a length field too: a
    batch whose header says body_length=16 but whose (CRC-valid) body inflates
    to 64 MiB must be refused without inflating it (decompression bounded by
    the header's body length, itself bounded by MAX_BATCH_BYTES)."""
    if codec == CODEC_ZSTD:
        import zstandard

        frame = zstandard.ZstdCompressor().compress(bytes(64 << 20))
    elif codec == CODEC_GZIP:
        frame = gzip.compress(bytes(64 << 20))  # gzip declares no size: the inflater's bound holds
    else:
        import lz4.frame

        frame = lz4.frame.compress(bytes(64 << 20), store_size=True)
    hdr = bytearray(encode_batch(0, [b"x" * 8], codec=codec)[:HEADER_SIZE])
    bad = hdr + frame
    struct.pack_into("<I", bad, OFF_LEN, len(bad) - 12)
    struct.pack_into("<I", bad, OFF_BODY_LEN, 16)
    data = bytes(recrc(bad))

    def go():
        with pytest.raises(CorruptRecordError):
            decode_batch(data)

    peak = _peak_alloc(go)
    assert peak < 8 << 20, f"decoding a batch with body_length=16 allocated {peak >> 20} MiB"


@pytest.mark.parametrize("tail,error", [(b"junk", "follow"), (gzip.compress(b"", mtime=0), "follow"), (None, "truncated")],
                         ids=["junk", "an-empty-member", "cut-short"])
def test_a_gzip_body_is_one_whole_member(tail, error):
    """Bytes after the member (a second, empty member too) or a member cut short are refused,
    even with the batch's CRC and lengths made to match them."""
    hdr = bytearray(encode_batch(0, [b"x" * 8], codec=CODEC_GZIP)[:HEADER_SIZE])
    member = gzip.compress(b"\x00" * 16)  # 16 bytes, as the header is made to say
    body = member[:-4] if tail is None else member + tail
    bad = hdr + body
    struct.pack_into("<I", bad, OFF_LEN, len(bad) - 12)
    struct.pack_into("<I", bad, OFF_BODY_LEN, 16)
    with pytest.raises(CorruptRecordError, match=error):
        decode_batch(bytes(recrc(bad)))


def test_record_is_a_record_not_a_tuple():
    r = Record(5, 7, None, b"v")
    assert (r.offset, r.timestamp_ms, r.key, r.value, r.headers) == (5, 7, None, b"v", ())
    assert r == Record(offset=5, timestamp_ms=7, key=None, value=b"v", headers=[])
    assert r != Record(5, 7, None, b"v", [("h", b"x")])
    assert r != (5, 7, None, b"v", ())
    assert (r == (5, 7, None, b"v", ())) is False
    assert ((5, 7, None, b"v", ()) == r) is False  # noqa: SIM300 (the reflected comparison)
    assert repr(r) == "Record(offset=5, timestamp_ms=7, key=None, value=b'v')"
    with pytest.raises(TypeError):
        hash(r)
    with pytest.raises(TypeError):
        r < Record(6, 7, None, b"v")  # noqa: B015
    with pytest.raises(AttributeError):
        r.value = b"w"
    assert pickle.loads(pickle.dumps(r)) == r
