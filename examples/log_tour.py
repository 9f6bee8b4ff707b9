"""A tour of the bare log (`make demo-log`): ``python examples/log_tour.py --help``.

Appends a million records (with a progress bar), closes, reopens, reads them
all back verifying every one, and prints a throughput table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from vqs.storage import Log


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dir", default=os.path.join("demo-data", "log-tour"))
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100, help="value size in bytes")
    args = ap.parse_args(argv)
    console = Console()
    shutil.rmtree(args.dir, ignore_errors=True)
    n, size = args.records, args.size
    pad = b"." * max(0, size - 12)
    rows = []

    console.print(f"[bold]VQS log tour[/bold]: {n:,} records of {size} B into {args.dir}")
    t0 = time.perf_counter()
    with Log.open(args.dir, flush="interval") as log, Progress(console=console) as progress:
        task = progress.add_task("append", total=n)
        step = max(1, n // 100)
        for i in range(n):
            log.append(b"%012d" % i + pad)
            if i % step == 0:
                progress.update(task, completed=i)
        progress.update(task, completed=n)
    t_append = time.perf_counter() - t0
    rows.append(("append (one at a time, flush=interval)", n, t_append))

    t0 = time.perf_counter()
    log = Log.open(args.dir)
    t_open = time.perf_counter() - t0
    try:
        t0 = time.perf_counter()
        off, seen = log.start_offset, 0
        while off < log.end_offset:
            for rec in log.read(off, max_records=10_000, max_bytes=8 << 20):
                if rec.value[:12] != b"%012d" % rec.offset:
                    raise SystemExit(f"record {rec.offset} does not hold what was written")
                seen += 1
            off = rec.offset + 1
        t_read = time.perf_counter() - t0
        rows.append(("read back + verify (bulk)", seen, t_read))
        t0 = time.perf_counter()
        nb = 0
        off = log.start_offset
        while off < log.end_offset:
            batches = log.read_batches(off, max_bytes=8 << 20)
            nb += sum(b.count for b in batches)
            off = batches[-1].next_offset
        rows.append(("read_batches (zero-copy)", nb, time.perf_counter() - t0))
        segs, disk = log.segment_count, log.size_bytes
    finally:
        log.close()

    table = Table(title="VQS log tour")
    table.add_column("step")
    table.add_column("records", justify="right")
    table.add_column("seconds", justify="right")
    table.add_column("records/s", justify="right")
    table.add_column("MB/s", justify="right")
    for name, count, secs in rows:
        table.add_row(name, f"{count:,}", f"{secs:.2f}", f"{count / secs:,.0f}",
                      f"{count * size / secs / 1e6:,.1f}")
    console.print(table)
    console.print(f"reopen after clean close: {t_open * 1000:.1f} ms; "
                  f"{segs} segment(s), {disk / 1e6:.1f} MB on disk in {args.dir}")
    if seen != n or nb != n:
        console.print(f"[red]expected {n} records, read {seen} / {nb}[/red]")
        return 1
    console.print("[green]every record read back intact[/green]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
