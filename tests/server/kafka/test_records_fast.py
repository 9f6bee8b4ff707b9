"""The fast record decoder (records._records) answers exactly as the reference one (_records_simple)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("cramjam")

from vqs.server.kafka.records import HEAD_SIZE, CorruptBatch, _records, _records_simple, encode_records

# values of every varint width: empty, 1-byte and 2-byte lengths, and now and then one of 3 bytes
values = st.one_of(st.binary(max_size=70), st.binary(min_size=60, max_size=300),
                   st.integers(8_000, 9_000).map(lambda n: b"v" * n))
record = st.tuples(values, st.none() | st.binary(max_size=80),
                   st.lists(st.tuples(st.text(max_size=4), st.none() | st.binary(max_size=8)), max_size=2),
                   st.integers(0, 1 << 45))
batches = st.lists(record, min_size=1, max_size=150)  # past 64 records the offset delta takes two bytes


def _outcome(fn, body, count, base_ts):
    try:
        return fn(body, count, base_ts)
    except CorruptBatch as e:
        return ("CorruptBatch", e.code)


def _body(recs, same_ts: bool) -> bytes:
    data = encode_records(0, [r[0] for r in recs], [r[1] for r in recs], [tuple(r[2]) for r in recs],
                          recs[0][3] if same_ts else [r[3] for r in recs])
    return data[HEAD_SIZE:]


@given(batches, st.booleans())
@settings(max_examples=40, deadline=None)
def test_the_fast_decoder_agrees_with_the_reference_on_valid_records(recs, same_ts):
    body = _body(recs, same_ts)
    fast = _records(body, len(recs), 1_000)
    assert fast == _records_simple(body, len(recs), 1_000)
    assert fast[0] == [r[0] for r in recs]
    # header values come back as sent: a null (length -1) as None, an empty one as b""
    assert [h or () for h in fast[2] or [None] * len(recs)] == [tuple(r[2]) for r in recs]


@given(st.lists(record, min_size=1, max_size=12), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)),
                                                          min_size=1, max_size=3),
       st.integers(-2, 2), st.integers(0, 40))
@settings(max_examples=150, deadline=None)
def test_the_fast_decoder_agrees_with_the_reference_on_damaged_records(recs, flips, dcount, cut):
    body = bytearray(_body(recs, False))
    for where, value in flips:
        body[where % len(body)] = value
    body = bytes(body[: max(len(body) - cut, 0)]) if cut < 20 else bytes(body)
    count = max(len(recs) + dcount, 0)
    assert _outcome(_records, body, count, 0) == _outcome(_records_simple, body, count, 0)


@given(st.binary(max_size=200), st.integers(0, 30))
@settings(max_examples=100, deadline=None)
def test_the_fast_decoder_agrees_with_the_reference_on_garbage(body, count):
    assert _outcome(_records, body, count, 0) == _outcome(_records_simple, body, count, 0)


def test_a_record_longer_than_its_fields_is_refused_by_both():
    body = _body([(b"value", None, [], 5)], True)
    assert body[0] < 0x80  # a one-byte zigzag length
    longer = bytes([body[0] + 2]) + body[1:] + b"\x07"  # the length covers one byte more than the fields
    assert _outcome(_records, longer, 1, 0) == _outcome(_records_simple, longer, 1, 0) == ("CorruptBatch", 2)
