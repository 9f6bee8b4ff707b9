"""Read-only mappings of segment files kept from one scan to the next.

For bulk readers that scan the same segments again and again in one process:
Spark runs the queries of a session in reused Python workers, each task
opening the log afresh (``Log.open(readonly=True)``). A fresh mapping of a
segment costs the kernel's page-table work twice, to fault the pages in and
to tear them down at unmap, and for data already in the page cache that is
about as much as the CRC-32C of the same bytes (a scan of segments in the
page cache took about twice as long with a fresh mapping per segment as with
the mapping kept; bench/HISTORY.md). A :class:`MapCache` keeps the mappings, so a
second scan of a segment only reads it (and still checks every batch's CRC:
what is kept is the mapping, never a verdict on the data).

Invariants:

- an entry maps ``[0, length)`` of one file, named by its identity
  ``(st_dev, st_ino)`` taken from the open descriptor, not by its path: a
  segment deleted and another created under the same name is a different
  file and gets its own mapping (the kept mapping holds the old inode, so
  its number cannot be reused while the entry lives);
- a view is handed out only for ``[position, position + n)`` within the
  mapping and within the valid size the caller passes (the reading
  ``Segment``'s ``size``, as its log sees it now); a request beyond the
  mapping maps the file again, to that valid size, and replaces the entry;
- at most ``max_entries`` mappings are kept (least recently used dropped);
  a dropped mapping is unmapped by Python when its last view goes, so
  batches still in use stay readable;
- each kept mapping holds a duplicate of the file's descriptor (Python's
  mmap keeps one): at most ``max_entries`` of them.

SIGBUS: as for ``Segment.map`` (segment.py, "Mapped reads"), touching a page
wholly cut off by a truncation raises SIGBUS. A kept mapping may be longer
than the file is now (the owner's recovery truncated it), but views are only
handed out within the size the current reader sees, and reads stay within
the views, so a kept mapping adds no case the module doc there does not
cover: a reader is exposed only while it reads data that is cut at that
moment.
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

    def clear(self) -> None:
        """Drop every kept mapping (each unmapped once its last view goes)."""
        with self._lock:
            self._maps.clear()

    def __len__(self) -> int:
        return len(self._maps)
