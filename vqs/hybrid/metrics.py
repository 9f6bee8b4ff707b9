"""HybridMetrics: a snapshot of a HybridQueue's counters (``queue.metrics``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class HybridMetrics:
    """A snapshot of a HybridQueue's counters (``queue.metrics``)."""

    puts: int            #: items put since open
    gets: int            #: items got since open
    spilled: int         #: items moved from the memory tail to disk (budget full, or close)
    disk_writes: int     #: items written to the log (spilled, or every put when durable)
    disk_reads: int      #: items read back from the log (read-ahead)
    memory_items: int    #: live objects held: memory tail + read cache
    memory_bytes: int    #: their estimated size (see docs/hybrid.md)
    disk_items: int      #: unconsumed items in the log (read cache included)
    disk_bytes: int      #: their serialized size
    log_bytes: int       #: size of the log's files
    log_segments: int
    durable: bool

    def as_dict(self) -> dict:
        return asdict(self)
