"""Read-only mappings of segment files kept from one scan to the next.

For bulk readers that scan the same segments again in one process (Spark's
reused Python workers, each task opening the log afresh): a fresh mapping
costs page-table work to fault in and tear down, about as much as the CRC of
the bytes (bench/HISTORY.md). A :class:`MapCache` keeps the mappings; every
batch's CRC is still checked on each scan (the mapping is kept, never a
verdict on the data).

Invariants:
- an entry maps ``[0, length)`` of one file named by its identity
  ``(st_dev, st_ino)`` from the open descriptor, not its path (a file created
  under a deleted one's name gets its own mapping; the kept one holds the old
  inode, so its number is not reused);
- views are handed out only within the mapping and within the valid size the
  caller passes (its ``Segment.size``); beyond the mapping the file is mapped
  again to that size, replacing the entry;
- at most ``max_entries`` mappings (LRU), each holding a duplicate
  descriptor; a dropped mapping is unmapped when its last view goes.

SIGBUS: as for ``Segment.map`` (segment.py). A kept mapping may outlast a
truncation, but views stay within the size the current reader sees, so it
adds no case.
"""

from __future__ import annotations

import mmap
import os
import threading
from collections import OrderedDict


class MapCache:
    """Kept read-only mappings of segment files (see module doc)."""

    def __init__(self, max_entries: int = 16):
        self.max_entries = max_entries
        self._maps: OrderedDict[tuple[int, int], mmap.mmap] = OrderedDict()
        self._lock = threading.Lock()
        self.mapped = 0  # mappings made (a kept one reused is not counted)

    def view(self, fd: int, position: int, n: int, valid_size: int) -> memoryview:
        """Bytes ``[position, position + n)`` of the file open as ``fd``, a
        read-only view of a kept mapping; ``position + n`` must lie within
        ``valid_size`` (the bytes of the file a reader may touch now)."""
        end = position + n
        if end > valid_size:
            raise ValueError(f"bytes [{position}, {end}) lie beyond the valid size {valid_size}")
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        with self._lock:
            m = self._maps.get(key)
            if m is None or len(m) < end:
                m = mmap.mmap(fd, valid_size, mmap.MAP_SHARED, mmap.PROT_READ)
                self.mapped += 1
                self._maps[key] = m
                while len(self._maps) > self.max_entries:
                    self._maps.popitem(last=False)  # unmapped once its last view goes
            else:
                self._maps.move_to_end(key)
        return memoryview(m)[position:end]

    def __len__(self) -> int:
        return len(self._maps)
