"""Changing an open log's settings that a topic may alter (``Log.reconfigure``).

Runs under the log's lock, after every value is checked as ``Log.open`` checks
it (ConfigError: nothing changed). Nothing written changes: the next batch the
write buffer encodes uses the new compression, the next roll happens at the
new ``segment_bytes`` (whose segment gets indexes sized for it), and the next
retention pass applies the new limits.
"""

from __future__ import annotations

from ..errors import ConfigError
from .record_batch import codec_id
from .segments import index_capacity


def reconfigure(log, segment_bytes: int, retention_ms: int | None, retention_bytes: int | None,
                compression: str | None) -> None:
    codec = codec_id(compression)  # (ConfigError for an unknown one)
    if not isinstance(segment_bytes, int) or isinstance(segment_bytes, bool) or segment_bytes < 128:
        raise ConfigError(f"segment_bytes={segment_bytes!r}: must be an integer >= 128")
    for name, val in (("retention_ms", retention_ms), ("retention_bytes", retention_bytes)):
        if val is not None and (not isinstance(val, int) or isinstance(val, bool) or val < 0):
            raise ConfigError(f"{name}={val!r}: must be None or an integer >= 0")
    with log._lock:
        log._buf.codec, log.compression = codec, compression
        log.segment_bytes, log.retention_ms, log.retention_bytes = segment_bytes, retention_ms, retention_bytes
        log._segs.index_capacity_bytes = index_capacity(segment_bytes, log.index_interval_bytes)
