"""``vqs serve`` with tracemalloc: where the server's memory grows, from inside.

    python bench/traced_server.py --trace-out DIR [--trace-every 20] [--trace-after 30] -- <vqs serve options>

Runs ``vqs.server.run.main`` with the given options. A daemon thread starts
``tracemalloc`` (12 frames) ``--trace-after`` seconds in (tracing the start-up
is very slow), takes a snapshot 5 s later (the baseline: only what is
allocated after the start is traced) and then every ``--trace-every`` seconds,
and writes ``DIR/growth-<seconds>.txt``: the traced total and the 25 tracebacks
whose live size grew most since the baseline (size, count, innermost frames
last). A leak is a traceback whose growth goes on rising file after file; a
cache fills once and stops. ``bench/soak.py --trace DIR`` starts the server
this way. Tracing slows the server (~2-3x): use it to find a leak, not for
figures.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import threading
import time
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: F401  (before any vqs import: it decides which vqs runs)


def _dump(out_dir: str, t: float, base, snap) -> None:
    stats = snap.compare_to(base, "traceback")
    grown = sorted((s for s in stats if s.size_diff > 0), key=lambda s: -s.size_diff)[:25]
    cur, peak = tracemalloc.get_traced_memory()
    lines = [f"t={t:.0f}s traced={cur / 2**20:.2f} MiB peak={peak / 2**20:.2f} MiB "
             f"growth since baseline={sum(s.size_diff for s in stats) / 2**20:.2f} MiB", ""]
    for s in grown:
        lines.append(f"+{s.size_diff / 1024:.1f} KiB ({s.count_diff:+d} blocks), now {s.size / 1024:.1f} KiB")
        lines += ["    " + ln for ln in s.traceback.format()]
        lines.append("")
    path = os.path.join(out_dir, f"growth-{int(t):04d}.txt")
    with open(path, "w") as f:
        f.write("\n".join(lines))


def _tracer(out_dir: str, after: float, every: float) -> None:
    t0 = time.monotonic()
    time.sleep(after)  # start late: tracing the start-up (imports, app build) is very slow
    tracemalloc.start(12)
    time.sleep(5)  # what the first requests after the start allocate once (caches)
    gc.collect()
    base = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
    while True:
        time.sleep(every)
        gc.collect()
        snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
        _dump(out_dir, time.monotonic() - t0, base, snap)


def main() -> None:
    argv = sys.argv[1:]
    rest: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, rest = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace-out", required=True, help="directory for the growth-*.txt files")
    ap.add_argument("--trace-every", type=float, default=20.0)
    ap.add_argument("--trace-after", type=float, default=30.0, help="seconds before the baseline snapshot")
    a = ap.parse_args(argv)
    os.makedirs(a.trace_out, exist_ok=True)
    from vqs.server.run import main as serve

    threading.Thread(target=_tracer, args=(a.trace_out, a.trace_after, a.trace_every),
                     name="tracemalloc-dump", daemon=True).start()
    serve(rest)


if __name__ == "__main__":
    main()
