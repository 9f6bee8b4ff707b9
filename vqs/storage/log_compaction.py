"""The log's side of compaction (cleaner.py): which segments a cleaner may read, and the
step that replaces a run of them.

Invariants: only sealed, fsynced segments are offered; a replacement happens under the
log's lock and only while the run is still the log's, so reads and appends see the old
segments or the cleaned one.
"""

from __future__ import annotations

from .segment import Segment


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


def replace_sealed(log, old: list[Segment], commit, finish) -> bool:
    """Replace the sealed segments ``old`` by the one that ``commit()`` and ``finish()`` put
    in ``old[0]``'s files (cleaner.py's steps 2 and 3); False, nothing done, unless ``old``
    are still the log's. An error that leaves a committed swap on disk latches the log, as
    EIO does: only its next open completes the swap, before anything else changes."""
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
            commit()
            finish()
        except OSError as e:
            if getattr(e, "swap_left", False) or getattr(e, "committed", False):
                log._failed = e
                log._blocked = True
            raise
        new = log._segs.make(old[0].base_offset, active=False)
        for s in old:
            s.forget()
            log._reads.forget_segment(s)
        segs[i:k] = [new]
        log._segs.rebase()
        log._reads.forget()
        return True
