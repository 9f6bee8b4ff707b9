"""Read-only mappings of segment files kept from one scan to the next, for bulk readers that
scan the same segments again in one process (Spark's reused workers): a fresh mapping costs
about as much to fault in and tear down as the CRC of its bytes. Every batch's CRC is still
checked on each scan.

Invariants:
- an entry maps ``[0, length)`` of one file named by ``(st_dev, st_ino)`` from the open
  descriptor, not its path (the kept mapping holds the inode, so its number is not reused);
- views are handed out only within the mapping and the valid size the caller passes (its
  ``Segment.size``); beyond the mapping the file is mapped again, replacing the entry;
- at most ``max_entries`` mappings (LRU); a dropped one is unmapped with its last view.

SIGBUS: as for ``Segment.map``; views stay within the size the reader sees, so a kept
mapping that outlasts a truncation adds no case.
"""

from __future__ import annotations

import mmap
import os
import threading
from collections import OrderedDict


class MapCache:
    def __init__(self, max_entries: int = 16):
        self.max_entries = max_entries
        self._maps: OrderedDict[tuple[int, int], mmap.mmap] = OrderedDict()
        self._lock = threading.Lock()
        self.mapped = 0  # mappings made (a kept one reused is not counted)

    def view(self, fd: int, position: int, n: int, valid_size: int) -> memoryview:
        """Bytes ``[position, position + n)``, within ``valid_size``, of the file open as ``fd``."""
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
