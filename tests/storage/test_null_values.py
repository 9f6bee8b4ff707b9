"""A null value (Kafka's tombstone) or a null header value is not an empty one: written, buffered, reopened,
read back as None."""

import pytest

from vqs.record import (
    ATTR_NULL_VALUES,
    decode_batch,
    decode_headers,
    encode_batch,
    encode_headers,
)
from vqs.storage import Log


@pytest.mark.parametrize("flush", ["never", "always"])
@pytest.mark.parametrize("compression", [None, "zstd"])
def test_null_and_empty_values_survive_buffer_write_and_reopen(tmp_path, flush, compression):
    want = [b"a", None, b"", None, b"b"]
    with Log.open(tmp_path / "l", flush=flush, compression=compression) as lg:
        for i, v in enumerate(want[:3]):
            lg.append(v, key=b"k%d" % i if v is None else None)
        assert [r.value for r in lg.read(0)] == want[:3]  # from the write buffer
        lg.append_batch(want[3:], keys=[b"gone", None])
        assert [r.value for r in lg.read(0)] == want
        assert [v for b in lg.read_batches(0) for v in b.values()] == want
    with Log.open(tmp_path / "l") as lg:
        recs = lg.read(0)
        assert [r.value for r in recs] == want
        assert [r.key for r in recs] == [None, b"k1", None, b"gone", None]


def test_a_batch_without_nulls_has_no_validity_column():
    plain = decode_batch(encode_batch(0, [b"", b"x"], nulls=True))
    assert plain.attributes & ATTR_NULL_VALUES == 0 and plain.value_validity is None
    assert plain.values() == [b"", b"x"]
    nulls = decode_batch(encode_batch(0, [b"", None, b"x"] * 5, nulls=True))
    assert nulls.attributes & ATTR_NULL_VALUES and nulls.values() == [b"", None, b"x"] * 5
    assert [nulls.value(i) for i in range(3)] == [b"", None, b"x"]
    assert nulls.records()[1].value is None and nulls.values(1, 2) == [None]


@pytest.mark.parametrize("compression", [None, "lz4"])
def test_null_header_values_survive_buffer_write_and_reopen(tmp_path, compression):
    hs = [("n", None), ("e", b""), ("v", b"x")]
    with Log.open(tmp_path / "l", compression=compression, flush="never") as lg:
        lg.append(b"a", headers=hs)
        lg.append(b"d", headers=[(b"bytes-key", "text")])
        # from the write buffer: as a read of the written batch returns them (str keys, bytes or None)
        assert [r.headers for r in lg.read(0)] == [tuple(hs), (("bytes-key", b"text"),)]
        lg.append_batch([b"b", b"c"], headers=[[("only", None)], None])
        assert [r.headers for r in lg.read(0)] == [tuple(hs), (("bytes-key", b"text"),), (("only", None),), ()]
    with Log.open(tmp_path / "l") as lg:
        assert [r.headers for r in lg.read(0)] == [tuple(hs), (("bytes-key", b"text"),), (("only", None),), ()]


def test_a_null_header_value_is_its_length_alone_and_an_empty_one_is_not_null():
    assert encode_headers([("k", None)]) == b"\x01\x00\x01\x00k\xff\xff\xff\xff"
    assert encode_headers([("k", b"")]) == b"\x01\x00\x01\x00k\x00\x00\x00\x00"
    assert decode_headers(encode_headers([("k", None), ("e", b""), ("v", b"x")])) == (
        ("k", None), ("e", b""), ("v", b"x"))
