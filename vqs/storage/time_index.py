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

    def append(self, *fields) -> bool:
        """As MappedIndex.append, except that ``(0, 0)`` (timestamp 0 for the batch at the segment
        start) is never written: it is all zeros, which a preallocated file reads as the end of
        its entries, so writing it would only make the next entry overwrite it on a reopen. It is
        implied, as the offset index's entry for position 0 is: a lookup that finds no entry
        scans from the segment start, which is where it points."""
        if fields[0] == 0 and fields[1] == 0:
            return True
        return super().append(*fields)
