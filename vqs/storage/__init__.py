"""VQS storage: the record-batch codec, segments and the log.

Depends on the standard library plus crc32c (and zstandard/lz4 for compression).
Knows nothing of brokers, servers or Spark.
"""

from .log import FLUSH_POLICIES, RECOVERY_POLICIES, Log
from .record_batch import Record, RecordBatch, decode_batch, encode_batch

__all__ = ["FLUSH_POLICIES", "RECOVERY_POLICIES", "Log", "Record", "RecordBatch", "decode_batch", "encode_batch"]
