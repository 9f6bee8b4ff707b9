"""Instructions per log operation, before/after: valgrind cachegrind on two run
lengths of the same loop, the difference divided by the extra operations, so
that start-up, imports and a fixed prefill cancel. The log's hot paths (append,
append_batch, read, read_batches) as bench/log_bench.py times them, counted
instead of timed: wall time on a shared VM moves +-20 %, instruction counts
settle a few-percent question (user-space instructions only: an fsync's time
is the disk's, not the code's; the interval flusher's background rounds are
held off, as their number depends on the run's wall time). bench/queue_cycle.py does the same for queues.
The counted stretch is long enough that an event that comes once in it (a full
garbage collection: some 2.6 M instructions) moves a figure by about 1 % at most:
a one-record read is ~6,600 instructions, so it runs 40,000 more reads.

    python bench/log_cycle.py --base-tree /tmp/base      # a worktree of the base commit
    python bench/log_cycle.py --run 2000 append          # one run (what valgrind executes)

Prints a Markdown table; --json writes the figures.
"""

from __future__ import annotations

import tempfile

import _cycle

VALUE = b"x" * 100
PREFILL = 200_000  # records a read mode appends first (the same in both run lengths)
MODES = {  # mode: (short run, long run, records per operation)
    "append": (2000, 6000, 1),
    "append_always": (300, 900, 1),
    "append_batch": (100, 300, 100),
    "read": (10000, 50000, 1),
    "read_1000": (20, 60, 1000),
    "read_batches": (20, 60, 5000),
}
LABELS = {
    "append": "Log.append, 100 B, flush=interval",
    "append_always": "Log.append, 100 B, flush=always",
    "append_batch": "Log.append_batch of 100 x 100 B, interval, per record",
    "read": "Log.read, 1 record a call",
    "read_1000": "Log.read, 1,000 records a call, per record",
    "read_batches": "Log.read_batches, ~500 KB a call, per record",
}


def run_ops(n: int, mode: str) -> None:
    from vqs.storage import Log

    d = tempfile.mkdtemp()
    flush = "always" if mode == "append_always" else "interval"
    # the interval flusher's rounds are background work whose count under valgrind depends on
    # the run's (slowed) wall time: held off for the count, the hot path's own work remains
    lg = Log.open(d, flush=flush, flush_interval_ms=3_600_000)
    try:
        if mode.startswith("append"):
            for _ in range(n):
                if mode == "append_batch":
                    lg.append_batch([VALUE] * 100)
                else:
                    lg.append(VALUE)
            return
        for _ in range(PREFILL // 1000):
            lg.append_batch([VALUE] * 1000)
        lg.flush()
        if mode == "read":
            for off in range(n):
                lg.read(off, max_records=1)
        elif mode == "read_1000":
            for i in range(n):
                lg.read(i * 1000, max_records=1000, max_bytes=8 << 20)
        else:  # read_batches: about 5,000 records (~520 KB) a call
            off = 0
            for _ in range(n):
                bs = lg.read_batches(off, max_bytes=5000 * 104)
                off = bs[-1].next_offset if bs[-1].next_offset < PREFILL else 0
    finally:
        lg.close()


def main() -> None:
    _cycle.main(__file__, __doc__, MODES, LABELS, run_ops, "record")


if __name__ == "__main__":
    main()
