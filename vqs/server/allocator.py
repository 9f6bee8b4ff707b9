"""The server process's allocator policy: large answer buffers are reused, not faulted in anew.

A batch fetch (Kafka Fetch; REST consumes of records re-encoded) builds answers of
several MiB: bytes read with ``pread`` or encoded, joined into one body. (A REST
``stored=1`` answer allocates none: it is written from a mapping.) glibc's
malloc serves allocations over its mmap threshold with a fresh anonymous
mapping and trims a heap whose free top passes its trim threshold; both
thresholds move with the sizes seen, so a server answering multi-MiB
bodies can settle where every answer is allocated from pages the kernel
must zero and map again: a page fault per 4 KiB, which made such fetches
about three times slower than the copy itself.

``keep_large_buffers`` fixes the policy for the server process alone (never
for an embedding application, whose allocator is its own business): blocks up
to ``MMAP_THRESHOLD`` come from the heap, up to ``TRIM_THRESHOLD`` of freed
heap top is kept for the next answer, and at most ``ARENA_MAX`` arenas exist
(the GIL serialises allocation anyway; more arenas would each keep their own
free top). What a process may keep beyond what it uses is thus bounded by
``ARENA_MAX x TRIM_THRESHOLD`` (128 MiB). On a C library without ``mallopt``
(musl, macOS) nothing changes and the server runs as before.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

logger = logging.getLogger("vqs.server")

MMAP_THRESHOLD = 32 << 20   # glibc's largest allowed value on 64-bit
TRIM_THRESHOLD = 64 << 20
ARENA_MAX = 2

# mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8


def keep_large_buffers() -> bool:
    """Set the policy above with glibc's ``mallopt``; True if every call was taken."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    ok = all(mallopt(param, value) == 1 for param, value in (
        (_M_MMAP_THRESHOLD, MMAP_THRESHOLD), (_M_TRIM_THRESHOLD, TRIM_THRESHOLD), (_M_ARENA_MAX, ARENA_MAX)))
    if not ok:
        logger.debug("mallopt refused the server's allocator policy; large answers are allocated as before")
    return ok
