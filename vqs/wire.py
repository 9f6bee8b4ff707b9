"""The batch wire format shared by the server and the remote client (below both; imports only storage).

``application/vnd.vqs.batch``: a body of one or more record batches in the
log's own format (docs/FORMAT.md), back to back. Producers send it (base
offsets are ignored; the server assigns offsets); consumers ask for it with
``Accept`` and get exactly the records asked for, as batches carrying their
offsets and timestamps, or with ``stored=1`` the stored batches holding them,
as the log holds them (vqs/server/rest/messages.py). Response headers ``X-VQS-Next-Offset``,
``X-VQS-Start-Offset`` and ``X-VQS-End-Offset`` carry the positions.

Invariants: every batch of a body is CRC-verified, and its offsets columns checked,
before any record of it is used (``decode_body``); a response batch holds only consecutive offsets, so a
gap in the log (a batch quarantined by recovery) starts a new batch
(``encode_records``).
"""

from __future__ import annotations

from .record import decode_batch, encode_batch_parts

BATCH_CONTENT_TYPE = "application/vnd.vqs.batch"
#: the most records one produce request holds, on every front (REST JSON and binary, native,
#: gRPC; Kafka's codec holds an array to as many): a record costs the server about a hundred
#: bytes of objects however small it is on the wire (gRPC's empty value is 2 bytes), so the
#: body's size alone would let a 64 MiB request stand for gigabytes
MAX_PRODUCE_RECORDS = 1_000_000
NEXT_OFFSET = "x-vqs-next-offset"
START_OFFSET = "x-vqs-start-offset"
END_OFFSET = "x-vqs-end-offset"


def decode_body(body: bytes, where: str = "request body", max_inflated: int | None = None) -> list:
    """Decode (and CRC-verify) every batch of a binary body, as batches from outside the log
    (``decode_batch``'s ``untrusted``: offsets that decrease are refused, so no value outgrows
    the body). ``max_inflated``: the most its compressed batches may inflate to, together
    (MessageTooLarge before a batch past it is decompressed; a remote body: never more than
    the server accepts in a request)."""
    out = []
    pos = 0
    n = len(body)
    while pos < n:
        b = decode_batch(body, pos, where=where, max_inflated=max_inflated, untrusted=True)
        if max_inflated is not None and b.codec:
            max_inflated -= b.body_bytes
        out.append(b)
        pos += b.size_bytes
    return out


def encode_records(recs: list) -> tuple[list, int]:
    """Buffers of the batches carrying ``recs`` (storage Records, ascending offsets) with
    their offsets and timestamps, one batch per run of consecutive offsets; and the total
    bytes of their values (the caller's metric, counted here to spare a second pass)."""
    n = len(recs)
    if not n:
        return [], 0
    values = [r.value for r in recs]
    keys = [r.key for r in recs]
    hdrs = [r.headers for r in recs]
    ts = [r.timestamp_ms for r in recs]
    nulls = None in values  # null values (tombstones) travel as nulls
    nbytes = sum(len(v) for v in values if v is not None) if nulls else sum(map(len, values))
    first = recs[0].offset
    if recs[-1].offset - first + 1 == n:
        return encode_batch_parts(first, values, keys=keys, headers=hdrs, timestamps=ts, nulls=nulls), nbytes
    parts: list = []
    i = 0
    while i < n:
        j = i + 1
        while j < n and recs[j].offset == recs[j - 1].offset + 1:
            j += 1
        parts += encode_batch_parts(recs[i].offset, values[i:j], keys=keys[i:j], headers=hdrs[i:j],
                                    timestamps=ts[i:j], nulls=nulls)
        i = j
    return parts, nbytes
