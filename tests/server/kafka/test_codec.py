"""Kafka record batches and request parsing, in process: round trips and fuzz (hypothesis)."""

from __future__ import annotations

import asyncio
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("cramjam")

from vqs.broker import Broker
from vqs.record import decode_batch, encode_batch
from vqs.server.kafka.apis import API_TABLE
from vqs.server.kafka.codec import MAX_ARRAY, ProtocolError, Reader, Writer
from vqs.server.kafka.kafka_context import KafkaContext
from vqs.server.kafka.listener import Connection
from vqs.server.kafka.records import CorruptBatch, decode_batches, encode_records, encode_vqs_batch
from vqs.server.settings import Settings

blobs = st.binary(max_size=40)
records = st.lists(
    st.tuples(blobs, st.none() | blobs, st.lists(st.tuples(st.text(max_size=5), blobs), max_size=3),
              st.integers(0, 1 << 45)),
    min_size=1, max_size=20)


@given(records, st.sampled_from([0, 1, 2, 3, 4]), st.integers(0, 1 << 40))
@settings(max_examples=50, deadline=None)
def test_kafka_batch_round_trip_every_codec(recs, codec, base):
    values = [r[0] for r in recs]
    keys = [r[1] for r in recs]
    headers = [tuple(r[2]) for r in recs]
    stamps = [r[3] for r in recs]
    data = encode_records(base, values, keys, headers, stamps, codec=codec, producer=(7, 1, 3))
    (b,) = decode_batches(data, now_ms=0)
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (7, 1, 3)
    assert b.values == values and b.timestamps == stamps
    assert (b.keys or [None] * len(values)) == keys
    assert [h or () for h in (b.headers or [None] * len(values))] == headers


@given(records, st.integers(0, 1 << 40))
@settings(max_examples=40, deadline=None)
def test_vqs_batch_to_kafka_keeps_every_field(recs, base):
    values = [r[0] for r in recs]
    keys = [r[1] for r in recs]
    headers = [tuple(r[2]) or None for r in recs]
    stamps = [r[3] for r in recs]
    vqs_batch = decode_batch(encode_batch(base, values, keys=keys, headers=headers, timestamps=stamps))
    data = encode_vqs_batch(vqs_batch)
    assert struct.unpack_from(">q", data)[0] == base
    (b,) = decode_batches(data, now_ms=0)
    assert b.values == values and b.timestamps == stamps
    assert (b.keys or [None] * len(values)) == keys
    assert [h or None for h in (b.headers or [None] * len(values))] == headers


@given(st.binary(max_size=300))
@settings(max_examples=150, deadline=None)
def test_garbage_batches_raise_only_corrupt_batch(data):
    try:
        decode_batches(data, now_ms=0)
    except CorruptBatch:
        pass


@given(records, st.integers(0, 200), st.integers(0, 255))
@settings(max_examples=60, deadline=None)
def test_a_flipped_byte_is_caught(recs, where, value):
    data = bytearray(encode_records(0, [r[0] for r in recs], timestamps=5))
    where %= len(data)
    if data[where] == value or where < 12:  # the base offset and length sit outside the CRC
        return
    data[where] = value
    try:
        decode_batches(bytes(data), now_ms=0)
    except CorruptBatch:
        return
    assert where < 21  # only the leader epoch / magic / crc bytes may still decode (then the CRC fails)


@pytest.fixture(scope="module")
def conn(tmp_path_factory):
    broker = Broker(tmp_path_factory.mktemp("fuzz") / "data")
    broker.create_topic("t", partitions=2)
    ctx = KafkaContext(broker, Settings(), "127.0.0.1", 9092)
    yield Connection(ctx, None, None, ("fuzz", 0))
    ctx.pool.shutdown()
    broker.close()


_APIS = sorted((k, v) for k, (lo, hi, _, _) in API_TABLE.items() for v in range(lo, hi + 1)
               if k not in (11, 14))  # JoinGroup/SyncGroup may legitimately wait for other members


@given(st.sampled_from(_APIS), st.binary(max_size=200))
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_request_body_is_answered_or_a_protocol_error(conn, api, body):
    key, version = api
    frame = bytes(Writer().int16(key).int16(version).int32(1).string("fuzz").b) + body

    async def run():
        conn.ctx.loop = asyncio.get_running_loop()
        return await conn.handle(frame)

    try:
        out = asyncio.run(run())
    except ProtocolError:
        return
    assert out is None or out[:4] == b"\x00\x00\x00\x01"


@given(st.binary(max_size=64))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_frame_is_answered_or_a_protocol_error(conn, frame):
    async def run():
        conn.ctx.loop = asyncio.get_running_loop()
        return await conn.handle(frame)

    try:
        asyncio.run(run())
    except ProtocolError:
        pass


def test_array_lengths_are_bounded_before_anything_is_allocated():
    room = b"\0" * (2 * (MAX_ARRAY + 1))
    assert Reader(struct.pack(">i", MAX_ARRAY) + room).array_len(2) == MAX_ARRAY
    for n in (MAX_ARRAY + 1, 1 << 30, -2):
        with pytest.raises(ProtocolError):
            Reader(struct.pack(">i", n) + room).array_len(2)  # Kafka's 1,000,000 elements at most
    with pytest.raises(ProtocolError):
        Reader(struct.pack(">i", 11) + b"\0" * 20).array_len(2)  # more than the bytes left can hold
    assert Reader(struct.pack(">i", -1)).nullable_array_len() is None
    assert Reader(struct.pack(">i", -1)).array_len() == 0
    compact = bytes(Writer().uvarint(MAX_ARRAY + 2).b)  # length + 1
    with pytest.raises(ProtocolError):
        Reader(compact + room).compact_array_len(2)
    with pytest.raises(ProtocolError):
        Reader(bytes(Writer().uvarint(MAX_ARRAY + 1).b) + b"\0" * 10).tagged_fields()
    with pytest.raises(ProtocolError):  # a string longer than what is left: refused before the copy
        Reader(struct.pack(">h", 30_000) + b"ab").string()
