"""``vqs inspect``: dump segment files and report corruption, without any lock.

The scanning (bounds, CRC, offset order of every batch) is
``segment_scan``'s; this module only finds the ``<digits>.log`` files under a
path, turns the scanner's findings into a report and prints it (a progress
bar on a terminal while it scans). Exit status 4 (EXIT_CORRUPT) if any
segment is corrupt (a torn tail is not corruption: recovery truncates it).
"""

from __future__ import annotations

import os
import re

import typer

from .failures import EXIT_CORRUPT, fail
from .output import (
    JSON_OUT,
    UTC_OUT,
    err,
    iso_time,
    new_table,
    out,
    print_json,
    print_line,
    print_table,
    progress,
)


def inspect_command(path: str = typer.Argument(..., help="a data directory, a partition/log directory, or a .log segment"),
            batches: bool = typer.Option(False, "--batches", help="list every batch"),
            records: bool = typer.Option(False, "--records", help="print every record"),
            as_json: bool = JSON_OUT, utc: bool = UTC_OUT):
    """Verify segment files (every batch's CRC).

    Reads without any lock; reports torn tails and corruption (exit status 4 if any).
    """
    from rich.progress import BarColumn, DownloadColumn, TextColumn

    files = _segment_files(path)
    total = sum(_size(f) for f in files)
    with progress(TextColumn("{task.completed:,.0f}"), DownloadColumn(), BarColumn(), TextColumn("{task.description}"),
                  ) as prog:
        task = prog.add_task("", total=total)

        def scanned(file: str, size: int) -> None:
            prog.update(task, advance=size, description=os.path.basename(file))

        report = inspect_path(path, want_batches=batches or records, want_records=records, on_segment=scanned)
    if as_json:
        print_json(report)
    else:
        _print_report(report, batches or records, records, utc)
    if report["corrupt"]:
        raise typer.Exit(EXIT_CORRUPT)


def _size(file: str) -> int:
    try:
        return os.path.getsize(file)
    except OSError:
        return 0


def _segment_files(path: str) -> list[str]:
    if os.path.isfile(path):
        return [path]
    if not os.path.isdir(path):
        fail(f"{path}: no such file or directory")
    found = []
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for f in sorted(files):
            if f.endswith(".log") and f[:-4].isdigit():
                found.append(os.path.join(root, f))
    return found


def inspect_segment(file: str, want_batches: bool = False, want_records: bool = False) -> dict:
    """Walk one segment file batch by batch (storage's scanner verifies bounds
    and CRC of each); report what it found."""
    from ..record import CODEC_NAMES
    from .segment_scan import scan_segment_file

    info = {"file": file, "batches": 0, "records": 0, "first_offset": None, "last_offset": None,
            "bytes": os.path.getsize(file), "status": "ok", "problems": [], "corrupt": False}
    if want_batches:
        info["batch_list"] = []
    for item in scan_segment_file(file):
        kind, pos, b = item.kind, item.position, item.batch
        if kind == "batch":
            info["batches"] += 1
            info["records"] += b.count
            if info["first_offset"] is None:
                info["first_offset"] = b.base_offset
            info["last_offset"] = b.last_offset
            if want_batches:
                bd = {"position": pos, "base_offset": b.base_offset, "last_offset": b.last_offset,
                      "count": b.count, "size": b.size_bytes, "codec": CODEC_NAMES.get(b.codec) or "none",
                      "first_timestamp_ms": b.first_timestamp_ms, "max_timestamp_ms": b.max_timestamp_ms}
                if want_records:
                    bd["records"] = [repr(r) for r in b.records()]
                info["batch_list"].append(bd)
            continue
        info["problems"].append(_SCAN_PROBLEM[kind](item))
        if item.corrupt:
            info["status"] = "CORRUPT"
            info["corrupt"] = True
        elif kind != "gap":
            info["status"] = "torn tail"
    return info


_SCAN_PROBLEM = {
    "zero_tail": lambda i: f"{i.size} zero byte(s) after the last batch at position {i.position} (torn tail)",
    "incomplete_tail": lambda i: f"incomplete batch of {i.size} byte(s) at position {i.position} (torn tail: "
                                 "recovery truncates it)",
    "bad_header": lambda i: f"impossible batch header at position {i.position} ({i.size} bytes unreadable)",
    "invalid_batch": lambda i: i.detail + (" (last batch of the file: a torn write if the log "
                                           "was not flushed)" if i.at_end else ""),
    "below_segment_base": lambda i: f"batch at {i.position} has base offset {i.batch.base_offset} below the "
                                    f"segment base {i.expected}",
    "offset_goes_back": lambda i: f"batch at {i.position}: base offset {i.batch.base_offset} goes back "
                                  f"(expected >= {i.expected})",
    "gap": lambda i: f"gap: offsets {i.expected}..{i.batch.base_offset - 1} missing before position {i.position}",
}


def inspect_path(path: str, want_batches: bool = False, want_records: bool = False, on_segment=None) -> dict:
    """The report of every segment under ``path``; ``on_segment(file, size)`` after each one."""
    files = _segment_files(path)
    segs = []
    for f in files:
        segs.append(inspect_segment(f, want_batches, want_records))
        if on_segment is not None:
            on_segment(f, segs[-1]["bytes"])
    if os.path.isdir(path):
        for sg in segs:
            sg["file"] = os.path.relpath(sg["file"], path)
    return {"path": path, "files": len(files), "segments": segs,
            "batches": sum(s["batches"] for s in segs), "records": sum(s["records"] for s in segs),
            "corrupt": any(s["corrupt"] for s in segs)}


_TIMESTAMP = re.compile(r"timestamp_ms=(\d+)")  # in a Record's repr


def _print_report(report: dict, show_batches: bool, show_records: bool, utc: bool = False) -> None:
    print_line(f"segments under {report['path']}")
    tab = new_table("segment", *(f"{c}:num" for c in ("batches", "records", "first", "last", "bytes")), "status")
    for s in report["segments"]:
        status = s["status"]
        style = {"ok": "green", "torn tail": "yellow"}.get(status, "red")
        first, last = ("-" if o is None else str(o) for o in (s["first_offset"], s["last_offset"]))
        tab.add_row(s["file"], str(s["batches"]), str(s["records"]), first, last,
                    str(s["bytes"]), f"[{style}]{status}[/{style}]")
    print_table(tab)
    for s in report["segments"]:
        for p in s["problems"]:
            print_line(f"{s['file']}: {p}", err)
        if show_batches:
            for b in s.get("batch_list", []):
                print_line(f"  {s['file']} @{b['position']}: offsets {b['base_offset']}..{b['last_offset']} "
                           f"({b['count']} records, {b['size']} bytes, codec {b['codec']}, "
                           f"{iso_time(b['first_timestamp_ms'], utc)} .. {iso_time(b['max_timestamp_ms'], utc)})")
                for r in b.get("records", []):
                    print_line("    " + _TIMESTAMP.sub(lambda m: "time=" + iso_time(int(m.group(1)), utc), r))
    verdict = "[red]CORRUPT[/red]" if report["corrupt"] else "[green]all CRCs verified[/green]"
    out.print(f"{report['files']} segment file(s), {report['batches']} batches, {report['records']} records: {verdict}",
              soft_wrap=True)
