"""VQS's record format: the record batch (a 64-byte header, a columnar body, one CRC-32C)
and its compression codecs, shared by storage (which writes and reads it in segments), the
client (which encodes batches for the stored-batch produce path), the Spark reader and the
CLI, as Kafka's ``common.record`` is shared by its clients and its log. Nothing here does
I/O: it encodes, decodes and verifies bytes (spec: docs/FORMAT.md).

The public surface: every other package imports from ``vqs.record`` only (an import-linter
contract).
"""

from .batch import (
    ATTR_COMPACTED,
    ATTR_HEADERS,
    ATTR_KEYS,
    ATTR_NULL_VALUES,
    ATTR_TIMESTAMPS,
    HEADER,
    HEADER_SIZE,
    MAX_BATCH_BYTES,
    BatchInfo,
    Record,
    RecordBatch,
    check_headers,
    decode_batch,
    decode_headers,
    encode_batch,
    encode_batch_parts,
    encode_headers,
    find_next_valid,
    frame_batch,
    head_batch,
    is_plain,
    peek_header,
    scan_batches,
    stamp_batch,
    verify_batch,
)
from .codecs import CODEC_GZIP, CODEC_LZ4, CODEC_NAMES, CODEC_NONE, CODEC_ZSTD, codec_id

__all__ = [
    "ATTR_COMPACTED", "ATTR_HEADERS", "ATTR_KEYS", "ATTR_NULL_VALUES", "ATTR_TIMESTAMPS",
    "CODEC_GZIP", "CODEC_LZ4", "CODEC_NAMES", "CODEC_NONE", "CODEC_ZSTD", "HEADER", "HEADER_SIZE",
    "MAX_BATCH_BYTES", "BatchInfo", "Record", "RecordBatch", "check_headers", "codec_id", "decode_batch",
    "decode_headers", "encode_batch", "encode_batch_parts", "encode_headers", "find_next_valid",
    "frame_batch", "head_batch", "is_plain", "peek_header", "scan_batches", "stamp_batch", "verify_batch",
]
