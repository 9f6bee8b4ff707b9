"""VQS's disks: what the operating system's filesystems give the process, below the log.

As LevelDB's ``Env`` and RocksDB's ``SstFileManager`` sit under their engines, three
services sit under storage, the HybridQueue's spills and the broker's state files:

- ``fs``: the filesystem seam. Storage writes, syncs, truncates, renames and unlinks
  through it, so a test can fail a chosen call as a filesystem would (ENOSPC, EDQUOT,
  EIO). Callers look its names up on the module at call time.
- the space governor (``space_for``, ``Claim``, ``check_room``): one per filesystem, it
  decides which writes the free space allows, in two tiers (data and control), and counts
  the bytes this process holds buffered as used.
- the open-file limit (``raise_open_file_limit``): ``RLIMIT_NOFILE`` raised once per
  process, and named in ``TooManyOpenFiles`` when still hit.

Nothing here knows a segment, a log or a queue.
"""

from . import fs
from .fd_limit import (
    FD_EXHAUSTED,
    limit_raised_from,
    open_file_limits,
    raise_open_file_limit,
    too_many_open_files,
)
from .space import Claim, Space, check_room, default_min_free, floor_of, free_bytes
from .space import for_path as space_for

__all__ = [
    "FD_EXHAUSTED", "Claim", "Space", "check_room", "default_min_free", "floor_of", "free_bytes", "fs",
    "limit_raised_from", "open_file_limits", "raise_open_file_limit", "space_for", "too_many_open_files",
]
