"""``Log.append_encoded``: a producer's plain batch written as it came (its base offset set, its
timestamp when it has none), the bytes ``append_batch`` would have written; any other batch left
to ``append_batch`` (None, nothing done)."""

from __future__ import annotations

import glob
import os
import shutil
import struct

import crc32c
import pytest

from vqs.errors import DiskFullError
from vqs.record import CODEC_NONE, CODEC_ZSTD, decode_batch, encode_batch, is_plain
from vqs.storage.log import Log

T0 = 1_700_000_000_000


def _segment_bytes(path) -> bytes:
    [seg] = glob.glob(os.path.join(path, "*.log"))
    with open(seg, "rb") as f:
        return f.read()


def _clock(ms: int):
    return lambda: ms / 1000


@pytest.mark.parametrize("keys", [None, [b"k0", b"", b"k2"]])
@pytest.mark.parametrize("stamp", [0, T0 - 5])
def test_a_plain_batch_is_written_as_append_batch_writes_its_records(tmp_path, keys, stamp):
    """The same values, keys and time through either path: the same segment bytes, the base
    offset and (when the producer gave none) the log's clock filled in, the CRC valid."""
    values = [b"a", b"bb" * 50, b""]
    with Log.open(tmp_path / "enc", clock=_clock(T0)) as enc, Log.open(tmp_path / "vals", clock=_clock(T0)) as ref:
        for lg in (enc, ref):
            lg.append(b"buffered first")  # (written before the batch)
        assert enc.append_encoded(decode_batch(encode_batch(99, values, keys=keys, timestamps=stamp))) == 1
        assert ref.append_batch(values, keys=keys, timestamps_ms=stamp if stamp > 0 else None) == 1
        assert enc.end_offset == ref.end_offset == 4
        recs = enc.read(0, max_records=10)
        assert [(r.offset, r.key, r.value, r.timestamp_ms) for r in recs[1:]] == [
            (1 + i, None if keys is None else keys[i], v, stamp or T0) for i, v in enumerate(values)]
    assert _segment_bytes(tmp_path / "enc") == _segment_bytes(tmp_path / "vals")
    with Log.open(tmp_path / "enc") as lg:  # (reopened: every batch verified where recovery reads)
        assert [r.value for r in lg.read(1, max_records=10)] == values


def test_a_compressed_batch_in_the_logs_codec_is_kept_compressed(tmp_path):
    values = [b"z" * 1000] * 4
    with Log.open(tmp_path / "l", compression="zstd") as lg:
        b = decode_batch(encode_batch(0, values, codec=CODEC_ZSTD))
        assert lg.append_encoded(b) == 0
        assert lg.append_encoded(decode_batch(encode_batch(0, values, codec=CODEC_NONE))) is None  # not its codec
        assert [r.value for r in lg.read(0, max_records=10)] == values
    stored = decode_batch(_segment_bytes(tmp_path / "l"))
    assert stored.codec == CODEC_ZSTD and stored.size_bytes == b.size_bytes


def _recrc(buf: bytearray) -> bytes:
    struct.pack_into("<I", buf, 12, crc32c.crc32c(bytes(buf[16:])))
    return bytes(buf)


def _refused() -> dict:
    """Batches the log would not have written as they are: each is left to append_batch."""
    out = {
        "headers": encode_batch(0, [b"a"], headers=[[("h", b"v")]]),
        "a null value": encode_batch(0, [b"a", None], nulls=True),
        "a null key": encode_batch(0, [b"a", b"b"], keys=[b"k", None]),
        "a timestamps column": encode_batch(0, [b"a", b"b"], timestamps=[T0, T0 + 1]),
        "a producer's numbers": encode_batch(0, [b"a"], producer_id=7, producer_epoch=0, base_sequence=0),
        "the cleaner's bit": encode_batch(0, [b"a"], compacted=True),
        "more records than a batch holds": encode_batch(0, [b"r"] * 5),
        "more bytes than a batch holds": encode_batch(0, [b"x" * 600]),
    }
    stamps = bytearray(encode_batch(0, [b"a"], timestamps=T0))
    struct.pack_into("<q", stamps, 32, T0 + 1)  # max != first, no column
    out["two times and no column"] = _recrc(stamps)
    reserved = bytearray(encode_batch(0, [b"a"]))
    reserved[60] = 1
    out["a reserved byte set"] = _recrc(reserved)
    back = bytearray(encode_batch(0, [b"abc", b"defg", b"h"]))
    struct.pack_into("<II", back, 64 + 4, 7, 3)  # value offsets 0, 7, 3, 8
    out["offsets that decrease"] = _recrc(back)
    return out


@pytest.mark.parametrize("what", sorted(_refused()))
def test_any_other_batch_is_left_to_append_batch(tmp_path, what):
    with Log.open(tmp_path / "l", batch_max_records=4, batch_max_bytes=512) as lg:
        b = decode_batch(_refused()[what])
        assert lg.append_encoded(b) is None
        assert lg.end_offset == 0 and lg.size_bytes == 0
        if what != "offsets that decrease":
            assert not is_plain(b) or what.startswith("more")


def test_a_full_disk_refuses_it_and_nothing_is_written(tmp_path):
    avail = shutil.disk_usage(tmp_path).free
    with Log.open(tmp_path / "l", min_free_bytes=avail + (1 << 30)) as lg:
        with pytest.raises(DiskFullError):
            lg.append_encoded(decode_batch(encode_batch(0, [b"a"])))
        assert lg.end_offset == 0


def test_under_always_it_returns_once_fsynced(tmp_path, fsyncs):
    with Log.open(tmp_path / "l", flush="always") as lg:
        assert lg.append_encoded(decode_batch(encode_batch(0, [b"a", b"b"]))) == 0
        [seg] = glob.glob(os.path.join(tmp_path / "l", "*.log"))
        assert fsyncs.synced.get(os.stat(seg).st_ino, 0) >= os.path.getsize(seg) > 0
