"""VQS storage: segments and the log over vqs.record's batches (the standard library;
nothing of brokers, servers or Spark).

The public surface: every layer above imports from ``vqs.storage`` only (an
import-linter contract). Storage writes through vqs.disk's filesystem seam and asks its
space governor for room.
The cleaner (vqs.cleaner) reads sealed segments and hands back cleaned files through
the compaction names (``sealed_segments``, ``segment_batches``, ``replace_sealed``, ...).
"""

from .dir_lock import LOCK_NAME, DirLock
from .durable_file import (
    atomic_write,
    fsync_dir,
    make_dirs,
    raise_if_disk_full,
    remove_files,
    rename_aside,
    write_all,
)
from .file_cache import CACHE as FILE_CACHE
from .file_cache import set_max_open_files
from .flusher import Flusher
from .log import FLUSH_POLICIES, RECOVERY_POLICIES, Log
from .log_buffer import BATCH_FIXED, RECORD_FIXED
from .log_compaction import (
    cleaned_path,
    dir_lock_fd,
    has_clean_point,
    open_sealed,
    read_clean_point,
    replace_sealed,
    sealed_segments,
    write_clean_point,
)
from .log_compaction import now_ms as log_now_ms
from .log_dir import CLEAN_MARKER, load_gaps
from .log_settings import LONG_MAX, check_int, check_settings
from .map_cache import MapCache
from .segment import Segment
from .segment_reads import segment_batches, segment_max_timestamp

__all__ = [
    "BATCH_FIXED", "CLEAN_MARKER", "FILE_CACHE", "FLUSH_POLICIES", "LOCK_NAME", "LONG_MAX",
    "RECORD_FIXED", "RECOVERY_POLICIES", "DirLock", "Flusher", "Log", "MapCache", "Segment",
    "atomic_write", "check_int", "check_settings", "cleaned_path", "dir_lock_fd", "fsync_dir", "has_clean_point",
    "load_gaps", "log_now_ms", "make_dirs", "open_sealed", "raise_if_disk_full", "read_clean_point",
    "remove_files", "rename_aside", "replace_sealed", "sealed_segments", "segment_batches",
    "segment_max_timestamp", "set_max_open_files", "write_all", "write_clean_point",
]
