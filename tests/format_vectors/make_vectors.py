"""Write the golden format vectors of docs/FORMAT.md with the current writer.

    PYTHONPATH=. python tests/format_vectors/make_vectors.py

Each vector is a log directory ``tests/format_vectors/<name>/`` holding only what
the format requires a reader to use (segment ``.log`` files and ``quarantine/``;
the indexes, checkpoint and markers are derived data or optional and are removed,
so a reader must cope without them), and ``<name>.json``: what a reader must
report for it, as :func:`expected` describes. Deterministic: fixed timestamps
and values; zstd and lz4 output depends on the library versions, so a new run
may change compressed bytes but never the expected JSON. The files are checked
in: tests read them, they do not regenerate them (test_format_vectors.py).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from vqs.cleaner import CompactionSettings, clean_log  # noqa: E402
from vqs.record import CODEC_NONE, HEADER_SIZE, encode_batch  # noqa: E402
from vqs.storage import Log  # noqa: E402

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z, ms
#: values longer than this are given in the JSON by length and SHA-256, not in base64
INLINE_MAX = 256


def record_json(offset: int, ts: int, key, value: bytes, headers) -> dict:
    """One record as readers report it (the Java reader prints the same shape)."""
    out = {"offset": offset, "timestamp": ts, "key": None if key is None else base64.b64encode(key).decode()}
    if value is None:
        out["value"] = None
    elif len(value) <= INLINE_MAX:
        out["value"] = base64.b64encode(value).decode()
    else:
        out["value_len"] = len(value)
        out["value_sha256"] = hashlib.sha256(value).hexdigest()
    out["headers"] = [[k, None if v is None else base64.b64encode(v).decode()] for k, v in (headers or ())]
    return out


def seg(base: int) -> str:
    return f"{base:020d}.log"


def fresh(name: str) -> str:
    d = os.path.join(HERE, name)
    shutil.rmtree(d, ignore_errors=True)
    return d


def strip(d: str) -> None:
    """Keep only the segments, quarantine/ and cleaner.checkpoint: everything else is derived or optional."""
    for f in os.listdir(d):
        if f in ("quarantine", "cleaner.checkpoint") or f.endswith(".log"):
            continue
        p = os.path.join(d, f)
        shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)


def write_log(name: str, batches: list[dict], *, compression: str | None = None) -> str:
    """Append each batch (kwargs of Log.append_batch) through a real Log, flush="always"."""
    d = fresh(name)
    log = Log.open(d, flush="always", compression=compression)
    for b in batches:
        log.append_batch(**b)
    log.close()
    strip(d)
    return d


def records_of(batches: list[dict], base: int = 0) -> list[dict]:
    out, o = [], base
    for b in batches:
        n = len(b["values"])
        ts = b.get("timestamps_ms")
        for i in range(n):
            t = ts if isinstance(ts, int) else ts[i]
            key = b["keys"][i] if b.get("keys") else None
            hdrs = b["headers"][i] if b.get("headers") else ()
            out.append(record_json(o, t, key, b["values"][i], hdrs))
            o += 1
    return out


def save(name: str, about: str, records: list[dict], *, start: int = 0, end: int, unreadable=(), missing=(),
         **extra) -> None:
    """``<name>.json``: ``start_offset``/``end_offset`` (a readonly reader's bounds), ``records``
    (every record a read returns, in offset order), ``unreadable`` (offsets whose read must fail
    with a corruption error naming the segment and position), ``missing`` (offsets in the bounds
    that no read returns and no read fails on: a recorded gap), plus vector-specific facts."""
    doc = {"about": about, "start_offset": start, "end_offset": end, "records": records,
           "unreadable": list(unreadable), "missing": list(missing), **extra}
    with open(os.path.join(HERE, f"{name}.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def flip(path: str, pos: int) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        b = f.read(1)
        f.seek(pos)
        f.write(bytes([b[0] ^ 0xFF]))


def batch_sizes(path: str) -> list[int]:
    """Byte positions of the batches in a segment, and its size last."""
    data = open(path, "rb").read()
    pos, out = 0, []
    while pos < len(data):
        out.append(pos)
        pos += 12 + int.from_bytes(data[pos + 8:pos + 12], "little")
    return out + [len(data)]


def main() -> None:
    # plain: one batch whose records share the timestamp (no timestamps column), one with a column
    plain = [{"values": [b"a", b"bb", b"ccc"], "timestamps_ms": T0},
             {"values": [b"d", b"e", b"f"], "timestamps_ms": [T0 + 1, T0 + 5, T0 + 3]}]
    write_log("plain", plain)
    save("plain", "two uncompressed batches, the second with a timestamps column", records_of(plain), end=6)

    # zstd, lz4 and gzip: a small batch and one of 150 KB, larger than lz4's 64 KiB blocks (linked blocks)
    big = b"".join(b"record %03d of the vector; " % (i % 1000) for i in range(5400))
    for codec in ("zstd", "lz4", "gzip"):
        bs = [{"values": [b"x" * 40, b"y" * 40, b""], "timestamps_ms": T0},
              {"values": [big, b"tail"], "timestamps_ms": [T0 + 10, T0 + 20]}]
        write_log(codec, bs, compression=codec)
        save(codec, f"{codec}-compressed batches, one body larger than 64 KiB", records_of(bs), end=5)

    # keys and headers: null and empty keys, no / several headers, UTF-8 names, binary values
    kh = [{"values": [b"v0", b"v1", b"v2", b"v3"],
           "keys": [b"k0", None, b"", b"\x00\xff"],
           "headers": [[("trace", b"abc")], [], [("a", b""), ("\u00e9t\u00e9", b"\x00\x01\x02")], None],
           "timestamps_ms": [T0, T0, T0 + 7, T0 + 2]}]
    write_log("keys_headers", kh)
    save("keys_headers", "keys (null and empty among them) and headers columns", records_of(kh), end=4)

    # empty values: every value empty, keys empty
    ev = [{"values": [b"", b"", b""], "keys": [b"", b"", b""], "timestamps_ms": T0}]
    write_log("empty_values", ev)
    save("empty_values", "empty values and empty (non-null) keys", records_of(ev), end=3)

    # null values (attribute bit 3): null and empty values side by side, and a batch without nulls
    nv = [{"values": [b"v", None, b"", None], "keys": [b"k1", b"k2", None, b""], "timestamps_ms": T0},
          {"values": [b"after"], "timestamps_ms": T0 + 1}]
    write_log("null_values", nv)
    save("null_values", "null values (tombstones) beside empty ones, then a batch without nulls", records_of(nv),
         end=5)

    null_header_values()

    # torn tail: the last batch of the last segment cut short (an append a crash interrupted)
    tt = [{"values": [b"one", b"two"], "timestamps_ms": T0}, {"values": [b"three", b"four"], "timestamps_ms": T0 + 1}]
    d = write_log("torn_tail", tt)
    p = os.path.join(d, seg(0))
    cut = batch_sizes(p)[1]
    with open(p, "r+b") as f:
        f.truncate(os.path.getsize(p) - 7)
    save("torn_tail", "the last segment's last batch lacks its final 7 bytes: a torn tail", records_of(tt[:1]),
         end=2, torn_tail={"segment": seg(0), "valid_size": cut})

    # corrupt batch: a sealed segment whose middle batch fails its CRC, then a second segment
    cb = [{"values": [b"a0", b"a1"], "timestamps_ms": T0}, {"values": [b"b0", b"b1"], "timestamps_ms": T0 + 1},
          {"values": [b"c0", b"c1"], "timestamps_ms": T0 + 2}, {"values": [b"d0", b"d1"], "timestamps_ms": T0 + 3}]
    d = fresh("corrupt_batch")
    os.makedirs(d)
    with open(os.path.join(d, seg(0)), "wb") as f:
        for i, b in enumerate(cb[:3]):
            f.write(encode_batch(2 * i, b["values"], timestamps=b["timestamps_ms"], codec=CODEC_NONE))
    with open(os.path.join(d, seg(6)), "wb") as f:
        f.write(encode_batch(6, cb[3]["values"], timestamps=cb[3]["timestamps_ms"]))
    bad = batch_sizes(os.path.join(d, seg(0)))[1]
    flip(os.path.join(d, seg(0)), bad + HEADER_SIZE + 9)  # a value byte: the CRC no longer matches
    recs = records_of(cb)
    save("corrupt_batch", "segment 0's second batch (offsets 2-3) has a flipped body byte: CRC mismatch",
         recs[:2] + recs[4:], end=8, unreadable=[2, 3], corrupt={"segment": seg(0), "position": bad})

    # quarantine gap: the same damage, quarantined by recovery="skip" (the writer records the gap)
    qg = cb[:3]
    d = write_log("quarantine_gap", qg)
    p = os.path.join(d, seg(0))
    bad = batch_sizes(p)[1]
    flip(p, bad + HEADER_SIZE + 9)
    Log.open(d, flush="always", recovery="skip").close()
    strip(d)
    recs = records_of(qg)
    save("quarantine_gap", "offsets 2-3 were quarantined by recovery=\"skip\" (quarantine/ names the gap)",
         recs[:2] + recs[4:], end=6, missing=[2, 3], quarantine=sorted(os.listdir(os.path.join(d, "quarantine"))))

    compacted()


def null_header_values() -> None:
    """Header values that are null (length 0xFFFFFFFF, nothing after it) beside empty ones, in an
    uncompressed batch and a zstd one; and a batch whose headers have no null (as before)."""
    hs = [[("n", None), ("e", b""), ("v", b"x")], [("only", None)], None, [("a", b"1")]]
    nh = [{"values": [b"v0", b"v1", b"v2", b"v3"], "headers": hs, "timestamps_ms": T0}]
    d = write_log("null_header_values", nh)
    log = Log.open(d, flush="always", compression="zstd")
    log.append_batch([b"z0", b"z1"], headers=[[("n", None)], [("e", b"")]], timestamps_ms=T0 + 1)
    log.close()
    strip(d)
    nh.append({"values": [b"z0", b"z1"], "headers": [[("n", None)], [("e", b"")]], "timestamps_ms": T0 + 1})
    save("null_header_values", "null header values (u32 length 0xFFFFFFFF, no bytes) beside empty ones, "
         "uncompressed then zstd-compressed", records_of(nh), end=6)


def compacted() -> None:
    """A log the cleaner compacted: segments 0, 6, 10, 12 (sealed) and 15 (active); the cleaner
    keeps the latest record per key of the sealed ones (a tombstone among them), so segment 0
    holds a batch of bit 4 after removed offsets and ends before segment 6's base, segment 6
    keeps its batches as they were, segment 10 is left empty (every record replaced later),
    segment 12 is as it was and segment 15 is untouched."""
    layout = [(0, [[b"a", b"b", b"c", b"a"], [b"d", b"e"]]), (6, [[b"b", b"a"], [b"e", b"g"]]),
              (10, [[b"h", b"i"]]), (12, [[b"h", b"i", b"c"]]), (15, [[b"x"]])]
    d = fresh("compacted")
    os.makedirs(d)
    produced = []
    for base, batches in layout:
        with open(os.path.join(d, seg(base)), "wb") as f:
            o = base
            for keys in batches:
                values = [None if (o + i) == 7 else b"%s%d" % (k, o + i) for i, k in enumerate(keys)]
                f.write(encode_batch(o, values, keys=keys, timestamps=[T0 + o + i for i in range(len(keys))],
                                     nulls=True))
                produced += [(o + i, T0 + o + i, k, v) for i, (k, v) in enumerate(zip(keys, values))]
                o += len(keys)
    log = Log.open(d, flush="always", segment_bytes=128)  # 128: each sealed segment cleaned on its own
    stats = clean_log(log, CompactionSettings(delete_retention_ms=10**12), now_ms=T0 + 1000, force=True)
    log.close()
    assert stats.segments_in == 4, stats
    strip(d)
    assert os.path.getsize(os.path.join(d, seg(10))) == 0
    latest = {k: o for o, _, k, _ in produced if o < 15}
    kept = [(o, t, k, v) for o, t, k, v in produced if o >= 15 or latest[k] == o]
    save("compacted", "segments 0-12 cleaned (the latest record per key; offset 7 is a tombstone): "
         "offsets 0-3, 5, 10 and 11 removed; segment 0's batch carries attribute bit 4; segment 10 is empty",
         [record_json(o, t, k, v, ()) for o, t, k, v in kept], end=16,
         missing=sorted({o for o, *_ in produced} - {o for o, *_ in kept}))


if __name__ == "__main__":
    main()
