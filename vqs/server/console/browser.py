"""The message browser of a topic: records by partition and offset, by timestamp or by key,
shown as text, pretty JSON or hex, with their headers, paged both ways.

Invariants: a page reads at most ``MAX_LIMIT`` records, and a key search scans
at most ``SCAN_RECORDS`` records per page (it says where it stopped, and the
next page goes on from there); offsets asked for outside the partition are
clamped to [start, end]; values are returned as data for the template (text,
autoescaped), never as markup.
"""

from __future__ import annotations

from datetime import UTC, datetime

from ...broker.partitioner import partition_for_key
from .base import int_arg
from .views import show_value

MAX_LIMIT = 200
#: what one page shows, at most: headers of a record (the rest counted), and bytes of shown
#: keys, values and headers together (rows stop there, at least one shown; "newer" goes on)
MAX_HEADERS_SHOWN = 50
MAX_PAGE_BYTES = 4 << 20
SCAN_RECORDS = 20_000
FORMATS = ("text", "json", "hex")
MODES = ("offset", "time", "key")


def parse_time(s: str) -> int:
    """Milliseconds since the epoch from digits (ms) or ISO 8601 (UTC when no zone is given)."""
    s = s.strip()
    if s.isdigit():
        return int(s)
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        raise ValueError(f"timestamp must be ISO 8601 (2026-11-24T08:00:00Z) or milliseconds, not {s!r}") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def browser_values(t, q) -> dict:
    """What browser.html shows for query parameters ``q`` on topic ``t``."""
    mode = q.get("mode") or "offset"
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}")
    fmt = q.get("format") or "text"
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}")
    limit = int_arg(q.get("limit"), "limit", 20, 1, MAX_LIMIT)
    key = q.get("key") or ""
    part_given = q.get("partition") not in (None, "")
    partition = int_arg(q.get("partition"), "partition", 0, 0, t.partitions - 1)
    if mode == "key" and not part_given and key:
        partition = partition_for_key(key.encode(), t.partitions)
    lg = t.log(partition)
    start, end = lg.start_offset, lg.end_offset
    offset = int_arg(q.get("offset"), "offset", None)
    ts_text = q.get("ts") or ""
    direction = q.get("dir") or "forward"
    note = ""
    if mode == "time" and ts_text and offset is None:
        found = lg.offset_for_time(parse_time(ts_text))
        offset = end if found is None else found
        if found is None:
            note = "no record at or after that time yet"
    if offset is None:
        offset = max(start, end - limit) if mode != "key" else start
    offset = min(max(offset, start), end)
    records, scanned_to, scan_from = [], offset, offset
    if mode == "key" and key:
        kb = key.encode()
        if direction == "back":
            records, scan_from = _scan_back(lg, kb, offset, start, limit)
            scanned_to = offset
        else:
            records, scanned_to = _scan_forward(lg, kb, offset, end, limit)
        if not records:
            note = f"no record with this key in offsets {scan_from}..{scanned_to - 1}" if scanned_to > scan_from \
                else "nothing to scan"
    else:
        records = lg.read(offset, max_records=limit, max_bytes=8 << 20) if offset < end else []
        records = records[:limit]
    rows, _ = _rows(records, fmt)
    if len(rows) < len(records):
        note = (f"{len(rows)} of {len(records)} records shown: a page shows at most "
                f"{MAX_PAGE_BYTES >> 20} MiB of keys, values and headers")
        if mode == "key" and key:
            scanned_to = rows[-1]["offset"] + 1
    first = rows[0]["offset"] if rows else offset
    last = rows[-1]["offset"] if rows else offset - 1
    if mode == "key" and key:
        older = scan_from if scan_from > start else None
        newer = scanned_to if scanned_to < end else None
    else:
        older = max(start, first - limit) if first > start else None
        newer = last + 1 if last + 1 < end else None
    return {"b": {"mode": mode, "format": fmt, "limit": limit, "key": key, "partition": partition,
                  "partition_count": t.partitions, "offset": offset, "ts": ts_text, "start": start, "end": end,
                  "rows": rows, "older": older, "newer": newer, "note": note,
                  "oldest": start, "newest": max(start, end - limit)}}


def _rows(records, fmt: str) -> tuple[list, int]:
    """The rows of ``records`` a page shows, within MAX_PAGE_BYTES (at least one), and the bytes
    they show; a record's headers past MAX_HEADERS_SHOWN are counted, not shown."""
    rows, shown = [], 0
    for r in records:
        key = show_value(r.key, "text" if fmt == "json" else fmt) if r.key is not None else None
        value = show_value(r.value, fmt)
        hs = r.headers or ()
        headers = [(n[:200], show_value(v, "text")["text"]) for n, v in hs[:MAX_HEADERS_SHOWN]]
        if len(hs) > MAX_HEADERS_SHOWN:
            headers.append(("…", f"and {len(hs) - MAX_HEADERS_SHOWN} more headers"))
        size = len(value["text"]) + (len(key["text"]) if key else 0) + sum(len(n) + len(v) for n, v in headers)
        if rows and shown + size > MAX_PAGE_BYTES:
            break
        shown += size
        rows.append({"offset": r.offset, "timestamp_ms": r.timestamp_ms, "key": key, "value": value,
                     "headers": headers})
    return rows, shown


def _scan_forward(lg, key: bytes, offset: int, end: int, limit: int):
    out, o, scanned = [], offset, 0
    while o < end and len(out) < limit and scanned < SCAN_RECORDS:
        recs = lg.read(o, max_records=1000, max_bytes=4 << 20)
        if not recs:
            break
        for r in recs:
            scanned += 1
            o = r.offset + 1
            if r.key == key:
                out.append(r)
                if len(out) >= limit:
                    break
    return out, o


def _scan_back(lg, key: bytes, offset: int, start: int, limit: int):
    """Matches below ``offset``, scanning backwards in windows; returns (records in
    offset order, the lowest offset scanned)."""
    out: list = []
    hi, scanned = offset, 0
    while hi > start and len(out) < limit and scanned < SCAN_RECORDS:
        lo = max(start, hi - 1000)
        window = []
        o = lo
        while o < hi:
            recs = lg.read(o, max_records=hi - o, max_bytes=4 << 20)
            if not recs:
                break
            window += [r for r in recs if r.offset < hi]
            o = recs[-1].offset + 1
        scanned += hi - lo
        hits = [r for r in window if r.key == key]
        out = hits[-(limit - len(out)):] + out if hits else out
        hi = lo
        if len(out) >= limit:
            hi = out[0].offset
    return out, hi
