"""Time index of a segment: ``(max timestamp ms i64, relative offset u32)``.

An entry ``(T, r)`` is written for the batch at relative offset ``r`` when the
largest timestamp seen in the segment so far (through that batch) grew to
``T``. Hence every record up to and including batch ``r`` has a timestamp
<= T; to find the first record with timestamp >= t, scan from the batch of the
last entry whose T < t (or from the segment start).
"""

from __future__ import annotations

import struct

from .mapped_index import MappedIndex


class TimeIndex(MappedIndex):
    ENTRY = struct.Struct("<qI")
    KEY_FIELD = 0
    REL_FIELD = 1
