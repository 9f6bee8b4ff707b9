"""vqs.wire: records go out as batches of consecutive offsets and decode back unchanged."""

from __future__ import annotations

import struct

import crc32c
import pytest

from vqs.errors import CorruptRecordError
from vqs.record import HEADER_SIZE, Record, encode_batch
from vqs.wire import decode_body, encode_records


def _records(offsets):
    return [Record(o, 1_700_000_000_000 + o, b"k%d" % o if o % 2 else None, b"v%d" % o, [("h", b"%d" % o)])
            for o in offsets]


def test_consecutive_offsets_make_one_batch():
    recs = _records(range(5, 9))
    parts, nbytes = encode_records(recs)
    [batch] = decode_body(b"".join(parts))
    assert batch.base_offset == 5 and batch.count == 4
    assert nbytes == sum(len(r.value) for r in recs)
    assert [(r.offset, r.timestamp_ms, r.key, r.value, list(r.headers)) for r in batch.records()] == \
        [(r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in recs]


def test_a_gap_starts_a_new_batch():
    recs = _records([3, 4, 9, 10, 11, 20])
    parts, _ = encode_records(recs)
    batches = decode_body(b"".join(parts))
    assert [(b.base_offset, b.count) for b in batches] == [(3, 2), (9, 3), (20, 1)]
    assert [r.offset for b in batches for r in b.records()] == [3, 4, 9, 10, 11, 20]


def test_nothing_encodes_to_nothing():
    assert encode_records([]) == ([], 0)
    assert decode_body(b"") == []


def test_a_body_is_decoded_as_batches_from_outside_the_log():
    """``decode_body`` checks what a batch from a client (or a server) could lie about behind a
    valid CRC: offsets that go back, reading as more values than the body holds."""
    good = bytearray(encode_batch(0, [b"abc", b"defg", b"h"]))
    struct.pack_into("<II", good, HEADER_SIZE + 4, 7, 3)  # value offsets 0, 7, 3, 8
    struct.pack_into("<I", good, 12, crc32c.crc32c(bytes(good[16:])))
    with pytest.raises(CorruptRecordError, match="value offsets decrease"):
        decode_body(bytes(good))
