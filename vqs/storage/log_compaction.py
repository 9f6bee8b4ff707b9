"""The log's side of compaction: what a cleaner (vqs.cleaner) may read, the files it may
write, and the crash-safe step that puts its output in place of sealed segments.

The cleaner reads only sealed, fsynced segments (``sealed_segments``; in a worker process,
``open_sealed``) and writes only ``{first}.cleaned``; everything that changes what the log
is happens here, under the log's lock. Consecutive sealed segments ``s1..sk`` become one
segment named ``s1``:

1. the cleaner writes the survivors to ``cleaned_path(dir, s1)`` and fsyncs it (a crash:
   the file is deleted at the next open, ``finish_swaps``);
2. ``replace_sealed``, under the log's lock and only if ``s1..sk`` are still its segments,
   renames it to ``{s1}-{end}.swap`` (``end``: the base after ``sk``) and fsyncs the
   directory: the commit;
3. ``sk..s2`` and ``s1``'s files are unlinked, the swap renamed to ``{s1}.log``, the
   directory fsynced; ``finish_swaps`` (the owner's open) completes this for any swap file.

The clean point (``cleaner.checkpoint``: the offset below which the log has been cleaned)
is the cleaner's, but its presence is the log's business too: it tells a reader that
counts records from offsets to count from batch headers, and a readonly follower that a
sealed segment may change under it (readonly_tail.py).
"""

from __future__ import annotations

import json
import os

from ..disk import fs
from .durable_file import atomic_write, fsync_dir, remove_files
from .log_dir import list_segment_bases
from .segment import Segment, segment_files, segment_name

CLEAN_POINT = "cleaner.checkpoint"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"


def cleaned_path(directory: str, first: int) -> str:
    """The one file a cleaner writes for a run of segments starting at ``first``."""
    return os.path.join(directory, segment_name(first) + CLEANED_SUFFIX)


def read_clean_point(path: str) -> int:
    """The log's clean point (0: none, or unreadable: everything is dirty, more work and
    nothing lost)."""
    try:
        with open(os.path.join(path, CLEAN_POINT), "rb") as f:
            v = json.loads(f.read()).get("clean_point", 0)
        return v if isinstance(v, int) and v >= 0 else 0
    except (OSError, ValueError, AttributeError):
        return 0


def write_clean_point(path: str, offset: int) -> None:
    """Replace the clean point (atomically). Written before a log's first swap."""
    atomic_write(os.path.join(path, CLEAN_POINT), json.dumps({"clean_point": offset}).encode())


def has_clean_point(path: str) -> bool:
    return os.path.exists(os.path.join(path, CLEAN_POINT))


def sealed_segments(log) -> tuple[list[Segment], list[int]]:
    """(segments, end offsets): the sealed, fsynced prefix of ``log``'s segments; an end is
    the next one's base. Reads only (the clean-shutdown marker stays)."""
    with log._lock:
        if log._closed or log.readonly or log._failed is not None:
            return [], []
        segs, bases = log._segs.all, log._segs.bases
        pending = {id(s) for s in log._sync.unsynced}
        n = 0
        while n < len(segs) - 1 and bases[n + 1] <= log._sync.durable_end and id(segs[n]) not in pending:
            n += 1
        return list(segs[:n]), list(bases[1 : n + 1])


def open_sealed(directory: str, base: int, size: int, gaps: dict) -> Segment:
    """A sealed segment of another process's log, for reading only (a cleaner's worker):
    ``size`` is the size its log saw; no index is read."""
    seg = Segment(directory, base, active=False, owner=False, gaps=gaps, create=False,
                  index_interval_bytes=4096, index_capacity_bytes=1 << 20)
    seg.size = size
    return seg


def dir_lock_fd(log) -> int | None:
    """The descriptor of ``log``'s directory lock, for a worker process that inherits it
    (the same lock: it holds the directory until the owner releases it)."""
    lock = log._dir_lock
    return lock._fd if lock is not None else None


def now_ms(log) -> int:
    """``log``'s clock (a test's injected clock, or the system's), in milliseconds."""
    return log._now_ms()


def _swap_name(first: int, end: int) -> str:
    return f"{segment_name(first)}-{segment_name(end)}{SWAP_SUFFIX}"


def finish_swaps(path: str) -> bool:
    """The owner's open, before its segments are listed: delete ``*.cleaned`` files and
    complete every committed swap (step 3). True if a file changed."""
    try:
        names = os.listdir(path)
    except FileNotFoundError:
        return False
    changed = False
    for name in names:
        if name.endswith(CLEANED_SUFFIX):
            remove_files(os.path.join(path, name))
            changed = True
    for name in sorted(n for n in names if n.endswith(SWAP_SUFFIX)):
        try:
            first, end = (int(x) for x in name[: -len(SWAP_SUFFIX)].split("-"))
        except ValueError:
            continue  # not ours
        _install(path, name, first, [b for b in list_segment_bases(path, names) if first < b < end])
        changed = True
    if changed:
        fsync_dir(path)
    return changed


def _install(path: str, swap: str, first: int, later: list[int]) -> None:
    """Step 3: the replaced segments' files go, newest first; the swap takes ``first``'s name."""
    for base in reversed(later):
        remove_files(*reversed(segment_files(path, base)))
    log_file, index, timeindex = segment_files(path, first)
    remove_files(index, timeindex, log_file)
    fs.rename(os.path.join(path, swap), log_file)
    fsync_dir(path)


def _commit(path: str, cleaned: str, swap: str) -> None:
    """Step 2. A failure takes the swap back: left beside a log that goes on, it would bring
    back segments retention deleted at the next open."""
    try:
        fs.rename(cleaned, swap)
        fsync_dir(path)
    except OSError as e:
        try:
            remove_files(swap)
        except OSError:
            e.swap_left = True  # the log latches: only its next open may complete the swap
        raise


def replace_sealed(log, old: list[Segment], end: int) -> bool:
    """Put ``cleaned_path(log.path, old[0].base_offset)`` (written and fsynced by the
    cleaner) in place of the sealed segments ``old`` (``end``: the base after the last):
    steps 2 and 3. False, nothing done, unless ``old`` are still the log's; the cleaned file
    is removed whenever it is not installed. An error that leaves a committed swap on disk
    latches the log, as EIO does: only its next open completes the swap, before anything
    else changes."""
    first = old[0].base_offset
    cleaned = cleaned_path(log.path, first)
    swap = os.path.join(log.path, _swap_name(first, end))
    try:
        with log._lock:
            if log._closed or log._failed is not None:
                return False
            segs = log._segs.all
            i = next((j for j, s in enumerate(segs) if s is old[0]), None)
            if i is None:
                return False
            k = i + len(old)
            if k >= len(segs) or any(a is not b for a, b in zip(segs[i:k], old)):
                return False
            log._check_writable()
            try:
                _commit(log.path, cleaned, swap)
                try:
                    _install(log.path, os.path.basename(swap), first, [s.base_offset for s in old[1:]])
                except OSError as e:
                    e.committed = True
                    raise
            except OSError as e:
                if getattr(e, "swap_left", False) or getattr(e, "committed", False):
                    log._failed = e
                    log._blocked = True
                raise
            new = log._segs.make(first, active=False)
            for s in old:
                s.forget()
                log._reads.forget_segment(s)
            segs[i:k] = [new]
            log._segs.rebase()
            log._reads.forget()
            return True
    finally:
        remove_files(cleaned)  # (gone once renamed; else a file nothing will install)
