"""A preallocated, memory-mapped file of fixed-size, sorted entries.

The base of the offset index and the time index. While a segment is active its
index file is preallocated (zero-filled) and mapped; entries are appended in
place. The preallocation is real (``posix_fallocate``, not a sparse file), so
that a store into the mapping never needs new space; on a full disk the index
is not grown (it stops taking entries: derived data, lookups scan further).
When the segment rolls or the log closes, the file is trimmed to its entries. Indexes carry no checksum: the log is the truth, and recovery rebuilds
an index whenever it is in doubt. An all-zero entry, or one out of order,
ends the entries (a preallocated tail is zeros).
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
import threading


class MappedIndex:
    ENTRY: struct.Struct  # set by subclasses
    KEY_FIELD: int  # which field of an entry is the search key
    REL_FIELD: int  # which field holds the relative offset (> 0 in real entries)

    def __init__(self, path: str, *, writable: bool, capacity_bytes: int = 0, snapshot: bool = False):
        """``snapshot``: read the entries into memory instead of mapping the file
        (readonly readers in another process: the owner may trim the file, and a
        mapping past the end of its file faults)."""
        self.path = path
        self.writable = writable
        self.entry_size = self.ENTRY.size
        self._mm: mmap.mmap | None = None
        self._fd: int | None = None
        # Every use of the mapping holds this lock: trim() shrinks the file and
        # remaps it, and touching a mapping past the end of its file is SIGBUS.
        self._lock = threading.RLock()
        self.entries = 0
        flags = os.O_RDWR | os.O_CREAT if writable else os.O_RDONLY
        try:
            self._fd = os.open(path, flags, 0o644)
        except FileNotFoundError:
            self._fd = None
            return
        size = os.fstat(self._fd).st_size
        if writable:
            cap = max(size, capacity_bytes)
            cap -= cap % self.entry_size
            if cap > size:
                # Allocated, not sparse: a store into a hole of a mapping on a full
                # disk is SIGBUS. No space: the index keeps the entries it has and
                # stops growing (lookups scan further; never a failed open).
                try:
                    os.posix_fallocate(self._fd, size, cap - size)
                    size = cap
                except OSError as e:
                    if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                        raise
                    size -= size % self.entry_size
        if size >= self.entry_size:
            if snapshot and not writable:
                self._mm = os.pread(self._fd, size - size % self.entry_size, 0)
            else:
                prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
                self._mm = mmap.mmap(self._fd, size - size % self.entry_size, mmap.MAP_SHARED, prot)
        self.entries = self._count_valid()

    @property
    def capacity(self) -> int:
        return 0 if self._mm is None else len(self._mm) // self.entry_size

    @property
    def full(self) -> bool:
        return self.entries >= self.capacity

    def _count_valid(self) -> int:
        """Entries before the first that is all-zero or out of order (keys
        non-decreasing, relative offsets strictly increasing)."""
        mm = self._mm
        if mm is None:
            return 0
        unpack = self.ENTRY.unpack_from
        es, kf, rf = self.entry_size, self.KEY_FIELD, self.REL_FIELD
        n = len(mm) // es
        prev = None
        for i in range(n):
            e = unpack(mm, i * es)
            if not any(e):
                return i
            if prev is not None and (e[kf] < prev[kf] or e[rf] <= prev[rf]):
                return i
            prev = e
        return n

    def entry(self, i: int) -> tuple:
        with self._lock:
            return self.ENTRY.unpack_from(self._mm, i * self.entry_size)

    def last(self) -> tuple | None:
        with self._lock:
            return self.entry(self.entries - 1) if self.entries else None

    def append(self, *fields) -> bool:
        """Append an entry; False (nothing written) if the index is full."""
        with self._lock:
            if self.entries >= self.capacity or not self.writable:
                return False
            self.ENTRY.pack_into(self._mm, self.entries * self.entry_size, *fields)
            self.entries += 1
            return True

    def _search(self, key, strict: bool) -> tuple | None:
        with self._lock:
            lo, hi = 0, self.entries
            unpack, mm, es, kf = self.ENTRY.unpack_from, self._mm, self.entry_size, self.KEY_FIELD
            while lo < hi:
                mid = (lo + hi) >> 1
                k = unpack(mm, mid * es)[kf]
                if k < key or (not strict and k == key):
                    lo = mid + 1
                else:
                    hi = mid
            return unpack(mm, (lo - 1) * es) if lo else None

    def floor(self, key) -> tuple | None:
        """The last entry whose key is <= key (None if there is none)."""
        return self._search(key, strict=False)

    def lower(self, key) -> tuple | None:
        """The last entry whose key is < key (None if there is none)."""
        return self._search(key, strict=True)

    def truncate_entries(self, keep: int) -> None:
        """Keep the first ``keep`` entries, zero the rest."""
        with self._lock:
            if keep < self.entries:
                es = self.entry_size
                self._mm[keep * es : self.entries * es] = bytes((self.entries - keep) * es)
                self.entries = keep

    def reset(self) -> None:
        self.truncate_entries(0)

    def flush(self) -> None:
        with self._lock:
            if self._mm is not None and self.writable:
                self._mm.flush()

    def trim(self) -> None:
        """Shrink the file to its entries (at roll and close); keeps it mapped read-only."""
        with self._lock:
            if not self.writable or self._fd is None:
                return
            n = self.entries * self.entry_size
            if self._mm is not None:
                self._mm.flush()
                self._mm.close()
                self._mm = None
            os.ftruncate(self._fd, n)
            os.fsync(self._fd)
            if n:
                self._mm = mmap.mmap(self._fd, n, mmap.MAP_SHARED, mmap.PROT_READ)
            self.writable = False

    def close(self) -> None:
        with self._lock:
            if self._mm is not None:
                if isinstance(self._mm, mmap.mmap):
                    try:
                        self._mm.close()
                    except BufferError:
                        pass
                self._mm = None
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            self.entries = 0
