"""A segment's two sparse indexes: derived data, rebuilt when in doubt.

- ``.index`` (``OffsetIndex``): ``(relative offset u32, file position u32)``, an entry once
  ``index_interval_bytes`` were written since the previous one; a lookup binary-searches,
  then scans about one interval.
- ``.timeindex`` (``TimeIndex``): ``(max timestamp ms i64, relative offset u32)``, an entry
  ``(T, r)`` when the largest timestamp through batch ``r`` grew to ``T``: the first record
  >= t lies at or after the batch of the last entry with T < t.

A ``MappedIndex`` is a file of fixed-size sorted entries, preallocated (not sparse) and
mapped while the segment is active, trimmed at roll or close; read into memory otherwise (no
descriptor held). No checksum: the log is the truth. An all-zero entry, or one out of order,
ends the entries. On a full disk an index stops taking entries (lookups scan further).

A store into a mapping that needs space the filesystem cannot give is SIGBUS. Preallocation
rules that out only where blocks are rewritten in place (tmpfs, ext2/3/4, XFS, overlayfs);
elsewhere (btrfs, ZFS, unknown) the entries are kept in memory and written with ``pwrite``.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading

from ..disk import fs

#: statfs f_type of tmpfs, ext2/3/4, XFS, overlayfs (module doc)
_IN_PLACE_FS = frozenset({0x01021994, 0xEF53, 0x58465342, 0x794C7630})


class MappedIndex:
    ENTRY: struct.Struct  # set by subclasses
    KEY_FIELD: int  # which field of an entry is the search key
    REL_FIELD: int  # which field holds the relative offset (> 0 in real entries)

    def __init__(self, path: str, opener, *, writable: bool, capacity_bytes: int = 0, entries_hint: int = 0):
        """A writable index is preallocated to ``capacity_bytes`` and mapped; a read-only one
        is read into memory (another process may trim the file). ``opener(path, flags) ->
        fd``: the file cache's. ``entries_hint``: entries this process wrote (not checked)."""
        self.path = path
        self.writable = writable
        self.entry_size = self.ENTRY.size
        self._mm: mmap.mmap | bytearray | bytes | None = None
        # held by every use of the mapping: trim() shrinks the file (past its end: SIGBUS)
        self._lock = threading.RLock()
        self.entries = 0
        self._opener = opener
        self.exists = True
        self.file_size = 0
        self._fd: int | None = None  # _pwrite mode: the file's descriptor, kept open
        flags = os.O_RDWR | os.O_CREAT if writable else os.O_RDONLY
        try:
            fd = opener(path, flags)
        except FileNotFoundError:
            self.exists = False
            return
        except OSError as e:
            # no space even for the file: no index (lookups scan), never a failed open
            if not writable or e.errno not in fs.NO_SPACE:
                raise
            self.exists = False
            return
        try:
            size = os.fstat(fd).st_size
            self.file_size = size
            if writable:
                cap = max(size, capacity_bytes)
                cap -= cap % self.entry_size
                if cap > size:
                    # no space: it stops growing
                    try:
                        os.posix_fallocate(fd, size, cap - size)
                        size = cap
                    except OSError as e:
                        if e.errno not in fs.NO_SPACE:
                            raise
                        # ext4 keeps what a failed posix_fallocate got: give it back
                        try:
                            os.ftruncate(fd, size)
                        except OSError:
                            pass  # (btrfs under a spent quota: the zeros read as the end)
                        size -= size % self.entry_size
            if size >= self.entry_size:
                if not writable:
                    self._mm = os.pread(fd, size - size % self.entry_size, 0)
                elif fs.fs_magic(os.path.dirname(path) or ".") in _IN_PLACE_FS:  # (not cached:
                    # a device number is reused by the next mount)
                    prot = mmap.PROT_READ | mmap.PROT_WRITE
                    self._mm = mmap.mmap(fd, size - size % self.entry_size, mmap.MAP_SHARED, prot)
                else:
                    n = size - size % self.entry_size
                    data = os.pread(fd, n, 0)
                    self._mm = bytearray(data) + bytearray(n - len(data))
                    self._fd, fd = fd, None
        finally:
            if fd is not None:
                os.close(fd)  # a mapping keeps its own descriptor
        self.entries = self._count_valid(min(entries_hint, self.capacity))

    @classmethod
    def peek_last(cls, path: str, opener):
        """The last entry of the file at ``path``, read from its end (close trimmed it); None
        if it is missing or empty; False if it ends in an all-zero entry (not trimmed)."""
        try:
            fd = opener(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            es = cls.ENTRY.size
            size = os.fstat(fd).st_size
            size -= size % es
            if size < es:
                return None
            e = cls.ENTRY.unpack(os.pread(fd, es, size - es))
        finally:
            os.close(fd)
        return e if any(e) else False

    @property
    def capacity(self) -> int:
        return 0 if self._mm is None else len(self._mm) // self.entry_size

    def _count_valid(self, start: int = 0) -> int:
        """Entries before the first all-zero or out-of-order one (keys non-decreasing,
        relative offsets increasing); the first ``start`` are taken as valid."""
        mm = self._mm
        if mm is None:
            return 0
        unpack = self.ENTRY.unpack_from
        es, kf, rf = self.entry_size, self.KEY_FIELD, self.REL_FIELD
        n = len(mm) // es
        prev = unpack(mm, (start - 1) * es) if start else None
        for i in range(start, n):
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
            pos = self.entries * self.entry_size
            self.ENTRY.pack_into(self._mm, pos, *fields)
            if self._fd is not None:
                try:
                    fs.pwrite(self._fd, self._mm[pos:pos + self.entry_size], pos)
                except OSError as e:
                    self._mm[pos:pos + self.entry_size] = bytes(self.entry_size)
                    if e.errno not in fs.NO_SPACE:
                        raise
                    del self._mm[pos:]  # no space: the index stops growing (derived data)
                    return False
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

    def trim(self) -> None:
        """Shrink the file to its entries, fsync it, keep them in memory (read-only now)."""
        with self._lock:
            if not self.writable or not self.exists:
                return
            n = self.entries * self.entry_size
            data = b""
            if isinstance(self._mm, mmap.mmap):
                self._mm.flush()
                data = self._mm[:n]
                self._mm.close()
            elif isinstance(self._mm, bytearray):
                data = bytes(self._mm[:n])
                self._close_fd()
            self._mm = data or None
            fd = self._opener(self.path, os.O_RDWR)
            try:
                try:
                    fs.ftruncate(fd, n)
                except OSError as e:
                    # (btrfs under a spent quota: the zero tail stays, ending the entries)
                    if e.errno not in fs.NO_SPACE:
                        raise
                    n = os.fstat(fd).st_size
                fs.fsync(fd)
            finally:
                os.close(fd)
            self.file_size = n
            self.writable = False

    def close(self) -> None:
        with self._lock:
            if isinstance(self._mm, mmap.mmap):
                try:
                    self._mm.close()
                except BufferError:
                    pass
            self._close_fd()
            self._mm = None
            self.entries = 0

    def _close_fd(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:
        # (pwrite mode: an index the file cache dropped lets go of its descriptor)
        try:
            self._close_fd()
        except (OSError, AttributeError):
            pass


class OffsetIndex(MappedIndex):
    ENTRY = struct.Struct("<II")
    KEY_FIELD = 0
    REL_FIELD = 0


class TimeIndex(MappedIndex):
    ENTRY = struct.Struct("<qI")
    KEY_FIELD = 0
    REL_FIELD = 1

    def append(self, *fields) -> bool:
        """``(0, 0)`` is never written (all zeros end the entries): it is implied, a lookup
        that finds no entry scans from the segment start."""
        if fields[0] == 0 and fields[1] == 0:
            return True
        return super().append(*fields)
