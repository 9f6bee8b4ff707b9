"""Sparse offset index of a segment: ``(relative offset u32, file position u32)``.

An entry is added for a batch when at least ``index_interval_bytes`` of log
were written since the previous entry; it maps the batch's base offset
(relative to the segment's base) to the batch's position in the log file.
Lookup: the last entry at or below the target (binary search), then a forward
scan of at most about one interval of log.
"""

from __future__ import annotations

import struct

from .mapped_index import MappedIndex


class OffsetIndex(MappedIndex):
    ENTRY = struct.Struct("<II")
    KEY_FIELD = 0
    REL_FIELD = 0
