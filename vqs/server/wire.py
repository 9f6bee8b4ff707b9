"""Wire formats shared by the server and the remote client (no server imports here).

``application/vnd.vqs.batch``: a body of one or more record batches in the
log's own format (docs/FORMAT.md), back to back. Producers send it (base
offsets are ignored; the server assigns offsets); consumers ask for it with
``Accept`` and get exactly the records asked for, as batches carrying their
offsets and timestamps. Response headers ``X-VQS-Next-Offset``,
``X-VQS-Start-Offset`` and ``X-VQS-End-Offset`` carry the positions.
"""

from __future__ import annotations

BATCH_CONTENT_TYPE = "application/vnd.vqs.batch"
NEXT_OFFSET = "x-vqs-next-offset"
START_OFFSET = "x-vqs-start-offset"
END_OFFSET = "x-vqs-end-offset"
PARTITION = "x-vqs-partition"


def batch_parts(batch, start: int = 0, stop: int | None = None) -> list:
    """Re-encode records [start, stop) of a decoded RecordBatch as buffers of one batch."""
    from ..storage.record_batch import encode_batch_parts

    stop = batch.count if stop is None else stop
    values = batch.values(start, stop)
    keys = None
    if batch.key_validity is not None:
        keys = [batch.key(i) for i in range(start, stop)]
    headers = None
    if batch.header_offsets is not None:
        headers = [batch.headers(i) for i in range(start, stop)]
    if batch.timestamps is None:
        ts = batch.first_timestamp_ms
    else:
        ts = batch.timestamps[start:stop].tolist()
    return encode_batch_parts(batch.base_offset + start, values, keys=keys, headers=headers, timestamps=ts)


def decode_body(body: bytes, where: str = "request body") -> list:
    """Decode (and CRC-verify) every batch of a binary body."""
    from ..storage.record_batch import decode_batch

    out = []
    pos = 0
    n = len(body)
    while pos < n:
        b = decode_batch(body, pos, where=where)
        out.append(b)
        pos += b.size_bytes
    return out
