"""VQS storage: segments and the log over vqs.record's batches (the standard library;
nothing of brokers, servers or Spark).

The public surface: every layer above imports from ``vqs.storage`` only (an
import-linter contract), except ``vqs.storage.fs``, the filesystem seam,
whose names a test's fault rebinds (look them up on the module at call time).
"""

from .cleaner import CleanStats, CompactionSettings, check_rate, clean_log
from .dir_lock import LOCK_NAME, DirLock
from .durable_file import atomic_write, fsync_dir, make_dirs, raise_if_disk_full, rename_aside
from .fd_limit import limit_raised_from, open_file_limits, raise_open_file_limit
from .file_cache import CACHE as FILE_CACHE
from .file_cache import set_max_open_files
from .flusher import Flusher
from .log import FLUSH_POLICIES, RECOVERY_POLICIES, Log
from .log_buffer import BATCH_FIXED, RECORD_FIXED
from .log_dir import CLEAN_MARKER, load_gaps
from .log_throttle import Throttle
from .map_cache import MapCache
from .segment_scan import scan_segment_file
from .space import Claim, check_room, free_bytes
from .space import for_path as space_for

__all__ = [
    "BATCH_FIXED", "CLEAN_MARKER", "FILE_CACHE", "FLUSH_POLICIES", "LOCK_NAME", "RECORD_FIXED",
    "RECOVERY_POLICIES", "Claim", "CleanStats", "CompactionSettings", "DirLock", "Flusher", "Log", "MapCache", "Throttle",
    "atomic_write", "check_rate", "check_room", "clean_log",
    "free_bytes", "fsync_dir", "limit_raised_from", "load_gaps", "make_dirs",
    "open_file_limits", "raise_if_disk_full", "raise_open_file_limit", "rename_aside", "scan_segment_file",
    "set_max_open_files", "space_for",
]
