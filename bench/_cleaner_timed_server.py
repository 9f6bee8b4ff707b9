"""``vqs serve`` whose log cleaner reports each pass: what bench/kafka_bench.py's
compaction section reads to measure the cleaner's throughput in the server it
runs in (under the produce stream's load, on the same cores).

    VQS_BENCH_CLEANER_PASSES=FILE python bench/_cleaner_timed_server.py <vqs serve options>

Wraps the broker's ``clean_log`` (the one call each partition's share of a
pass makes, vqs/broker/compaction.py) with a timer and appends one JSON line
per call that cleaned anything to FILE: ``{"t": unix seconds at its end,
"seconds": its wall time, "path": the log directory, "segments_in", "segments_out",
"bytes_in", "bytes_out", "records_removed"}``. The cleaner's work is unchanged; the
line is written after the call returns, off its clock.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: F401  (before any vqs import: it decides which vqs runs)


def main() -> None:
    out = os.environ["VQS_BENCH_CLEANER_PASSES"]
    import vqs.broker.compaction as compaction
    from vqs.server.run import main as serve

    clean_log = compaction.clean_log
    lock = threading.Lock()

    def timed(log, *args, **kw):
        t0 = time.perf_counter()
        stats = clean_log(log, *args, **kw)
        dt = time.perf_counter() - t0
        if stats.segments_in:
            line = json.dumps({"t": time.time(), "seconds": dt, "path": log.path, **vars(stats)})
            with lock, open(out, "a") as f:
                f.write(line + "\n")
        return stats

    compaction.clean_log = timed
    serve(sys.argv[1:])


if __name__ == "__main__":
    main()
