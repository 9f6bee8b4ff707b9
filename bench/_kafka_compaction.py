"""bench/kafka_bench.py's compaction section: the log cleaner under a produce
stream of 50 % updates (issue: the cleaner keeps up at the single-partition
produce rate; p99 produce latency while it runs <= 2x the p99 without it).

One server (bench/_cleaner_timed_server.py: the log cleaner every
``CLEANER_INTERVAL_MS``, each pass timed), one partition per topic, topics
with ``segment.bytes`` = 4 MiB (so segments seal and the cleaner has work
within seconds; Kafka's defaults otherwise: ``min.cleanable.dirty.ratio``
0.5, no compaction lag). Smaller segments cost the cleaner more per byte: it
fsyncs every cleaned segment and the directory at each swap. The stream: 100-byte values, keys ``k%010d``; each
record after the first is, with probability 1/2 (a fixed seed, the same
stream for every topic), an update of a key already sent (uniform among
them), else a new key.

1. **Rate**: the stream's first records produced as fast as the client takes
   them (acks=all, linger.ms=5) to a ``delete`` topic: the single-partition
   produce rate R.
2. **Without the cleaner**: the stream paced at ``load`` x R for ``seconds``
   (default 0.5: an open-loop stream near what the client and the server can
   take measures their queues, not the cleaner's effect; smoke runs at 0.8 on a
   2-core VM had a delete-topic p50 of 7 to 300 ms by the machine's mode), to a
   ``cleanup.policy=delete`` topic; every
   record's latency from ``produce()`` to its delivery callback
   (``Message.latency()``): p50/p99/max.
3. **With the cleaner**: the same stream, the same pace, to a
   ``cleanup.policy=compact`` topic, the cleaner running; the same latencies,
   and their p99 split by whether the record was sent while a pass ran.
   A sampler reads the partition's directory every 250 ms: log bytes, and the
   dirty ratio the cleaner computes (bytes of the sealed segments at or past
   ``cleaner.checkpoint``'s clean point over all sealed bytes).
4. **Settling**: after the stream, until the dirty ratio is below 0.5 (the
   cleaner has caught up) or ``interval + 15 s`` have passed.

The cleaner's throughput: bytes (and records) its passes read, over the
seconds they took (``busy``), in the server under the stream's load. It
keeps up at rate R when that throughput is at least what holding the dirty
ratio at 0.5 costs at R: each pass reads the whole cleanable log, at most
``1 / min.cleanable.dirty.ratio`` = 2 bytes per byte produced since the last
one, so the need is ``2 x R x bytes per record on disk`` — and the log
settles after the stream.

5. **The Python floor**, timed after the server stops, over the delete topic's log (the same
   stream, uncompacted): reading and verifying every batch, mapping its keys and deciding
   each record's fate, writing nothing (``python_floor``). Every pass of a cleaner in Python
   over this format does at least this, so its throughput over the need bounds what the
   cleaner can reach without a change of format or language.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time

import _common as C
import _kafka_common as K

from vqs.storage import Log

SEGMENT_BYTES = 4 << 20
CLEANER_INTERVAL_MS = 1000
MIN_DIRTY_RATIO = 0.5  # the topic's min.cleanable.dirty.ratio (Kafka's default, left as is)
SETTLE_S = CLEANER_INTERVAL_MS / 1000 + 15
SERVER = os.path.join(C.HERE, "_cleaner_timed_server.py")


def keys(n: int, seed: int = 848) -> list[bytes]:
    """The stream's keys: after the first, half updates of an earlier key, half new ones."""
    rng = random.Random(seed)
    out = [b"k%010d" % 0]
    made = 1
    for _ in range(n - 1):
        if rng.random() < 0.5:
            out.append(b"k%010d" % rng.randrange(made))
        else:
            out.append(b"k%010d" % made)
            made += 1
    return out


def log_files(path: str) -> list[tuple[int, int]]:
    """[(base offset, bytes)] of a Log directory's segments, by base (files may vanish meanwhile)."""
    out = []
    try:
        names = os.listdir(path)
    except FileNotFoundError:
        return out
    for name in names:
        if name.endswith(".log") and name[:-4].isdigit():
            try:
                out.append((int(name[:-4]), os.path.getsize(os.path.join(path, name))))
            except FileNotFoundError:
                pass
    return sorted(out)


def dirty_state(path: str) -> tuple[int, float | None]:
    """(log bytes, dirty ratio of the sealed segments or None when none is sealed)."""
    segs = log_files(path)
    try:
        with open(os.path.join(path, "cleaner.checkpoint"), "rb") as f:
            clean_point = int(json.loads(f.read()).get("clean_point", 0))
    except (OSError, ValueError):
        clean_point = 0
    sealed = segs[:-1]
    total = sum(size for _, size in sealed)
    dirty = sum(size for base, size in sealed if base >= clean_point)
    return sum(size for _, size in segs), (dirty / total if total else None)


class Sampler(threading.Thread):
    """(seconds since start, log bytes, dirty ratio) of a partition every ``every`` s until stopped."""

    def __init__(self, path: str, every: float = 0.25):
        super().__init__(daemon=True, name="dirty-sampler")
        self.path, self.every = path, every
        self.samples: list[tuple[float, int, float | None]] = []
        self.t0 = time.monotonic()
        self.halt = threading.Event()

    def run(self):
        while not self.halt.wait(self.every):
            size, ratio = dirty_state(self.path)
            self.samples.append((time.monotonic() - self.t0, size, ratio))


def stream(bootstrap: str, topic: str, ks: list[bytes], rate: float | None) -> dict:
    """Produce one record per key of ``ks`` (paced at ``rate`` records/s; None: unpaced);
    {"seconds", "rate", "latencies_ms" (sorted), "sent" ([(unix time sent, latency ms)]), "errors"}."""
    from confluent_kafka import Producer

    lat: list[tuple[float, float]] = []  # (unix time delivered, seconds since produce())
    errors = [0]

    def delivered(err, msg):
        if err is None:
            lat.append((time.time(), msg.latency()))
        else:
            errors[0] += 1

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 1_000_000, "on_delivery": delivered})
    p.produce(topic, K.VALUE, b"warm-up", partition=0)  # the connection and metadata, off the clock
    p.flush(30)
    lat.clear()
    n = len(ks)
    i = 0
    t0 = time.perf_counter()
    while i < n:
        due = n if rate is None else min(n, int((time.perf_counter() - t0) * rate) + 1)
        while i < due:
            try:
                p.produce(topic, K.VALUE, ks[i], partition=0)
                i += 1
            except BufferError:
                p.poll(0.001)
        p.poll(0)
        if rate is not None and i < n:
            ahead = t0 + i / rate - time.perf_counter()
            if ahead > 0:
                time.sleep(min(ahead, 0.001))
    assert p.flush(120) == 0, "records left undelivered"
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "rate": n / seconds, "errors": errors[0],
            "latencies_ms": sorted(x * 1000 for _, x in lat if x is not None),
            "sent": [(t - x, x * 1000) for t, x in lat if x is not None]}


def python_floor(path: str) -> dict:
    """The Python work no cleaner of this format can skip, timed on the uncompacted stream at
    ``path`` (read-only, after the stream): read and verify every batch, slice its keys and
    take them into the offset map (``dict.update``), then read again and decide per record
    whether it is the latest of its key (``dict.get``). Nothing is written: the cleaner's
    own pass does all this (with its own key slicing, used here) and writes the survivors,
    so this bounds its throughput."""
    from vqs.cleaner.work import _keys as keys

    log = Log.open(path, readonly=True)
    try:
        nbytes = sum(size for _, size in log_files(path))
        t0 = time.perf_counter()
        latest: dict = {}
        n = 0
        for b in log.scan_batches(log.start_offset):
            latest.update(zip(keys(b), range(b.base_offset, b.base_offset + b.count)))
            n += b.count
        kept = 0
        get = latest.get
        for b in log.scan_batches(log.start_offset):
            kept += sum(1 for k, off in zip(keys(b), range(b.base_offset, b.base_offset + b.count))
                        if get(k) == off)
        seconds = time.perf_counter() - t0
    finally:
        log.close()
    return {"records": n, "kept": kept, "seconds": seconds, "bytes": nbytes,
            "records_per_s": n / seconds, "bytes_per_s": nbytes / seconds}


def _latency(run: dict) -> dict:
    lat = run.pop("latencies_ms")
    run.pop("sent", None)
    return {**run, "n": len(lat), "p50_ms": K.percentile(lat, 0.5), "p99_ms": K.percentile(lat, 0.99),
            "max_ms": lat[-1] if lat else None}


def _split(sent: list, passes: list) -> dict:
    """p99 of the records sent while a cleaner pass ran, and of the others."""
    windows = sorted((p["t"] - p["seconds"], p["t"]) for p in passes)
    during, outside = [], []
    i = 0
    for t, ms in sorted(sent):
        while i < len(windows) and windows[i][1] < t:
            i += 1
        (during if i < len(windows) and windows[i][0] <= t else outside).append(ms)
    during.sort()
    outside.sort()
    return {"n_during_passes": len(during), "p99_during_passes_ms": K.percentile(during, 0.99),
            "p99_outside_passes_ms": K.percentile(outside, 0.99)}


def _passes(path: str, log_dir: str, since: float) -> list[dict]:
    try:
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []
    return [r for r in rows if os.path.realpath(r["path"]) == os.path.realpath(log_dir) and r["t"] >= since]


def run(tmp: str, seconds: float, load: float, n_rate: int) -> dict:
    passes_file = os.path.join(tmp, "cleaner-passes.jsonl")
    env = {"VQS_CLEANER_INTERVAL_MS": str(CLEANER_INTERVAL_MS), "VQS_BENCH_CLEANER_PASSES": passes_file}
    res: dict = {"segment_bytes": SEGMENT_BYTES, "cleaner_interval_ms": CLEANER_INTERVAL_MS,
                 "min_cleanable_dirty_ratio": MIN_DIRTY_RATIO, "load": load}
    with K.Server(tmp, "vqs-compaction", env=env, script=SERVER) as srv:
        seg = {"segment.bytes": str(SEGMENT_BYTES)}
        for name, policy in (("c-rate", "delete"), ("c-delete", "delete"), ("c-compact", "compact")):
            K.create_topic(srv.bootstrap, name, 1, {**seg, "cleanup.policy": policy})
        ks = keys(n_rate)
        C.note(f"compaction: the single-partition rate ({n_rate:,} records) ...")
        r = stream(srv.bootstrap, "c-rate", ks, None)
        rate = r["rate"]
        res["single_partition_rate"] = rate
        n = max(1000, int(rate * load * seconds))
        ks = keys(n)
        res["n"] = n
        C.note(f"compaction: {n:,} records at {rate * load:,.0f}/s to a delete topic ...")
        res["delete"] = _latency(stream(srv.bootstrap, "c-delete", ks, rate * load))
        delete_bytes = sum(size for _, size in log_files(srv.partition_dir("c-delete")))
        res["bytes_per_record"] = delete_bytes / n
        C.note("compaction: the same stream to a compacted topic, the cleaner running ...")
        log_dir = srv.partition_dir("c-compact")
        sampler = Sampler(log_dir)
        since = time.time()
        sampler.start()
        compact = stream(srv.bootstrap, "c-compact", ks, rate * load)
        sent = compact["sent"]
        res["compact"] = _latency(compact)
        stream_end = time.monotonic() - sampler.t0
        window = (since, time.time())
        deadline = time.monotonic() + SETTLE_S
        settled = None
        while time.monotonic() < deadline:
            _, ratio = dirty_state(log_dir)
            if ratio is not None and ratio < MIN_DIRTY_RATIO:
                settled = time.monotonic() - sampler.t0 - stream_end
                break
            time.sleep(0.1)
        sampler.halt.set()
        sampler.join()
        passes = _passes(passes_file, log_dir, since)
        res["compact"].update(_split(sent, passes))
        final_bytes, final_ratio = dirty_state(log_dir)
    res["cleaner"] = _cleaner(passes, res, sampler.samples, stream_end, window, settled, final_bytes, final_ratio,
                              delete_bytes)
    C.note("compaction: the Python floor (read, map, decide; no writes) over the delete topic's log ...")
    floor = python_floor(srv.partition_dir("c-delete"))
    floor["of_need"] = floor["bytes_per_s"] / res["cleaner"]["needed_bytes_per_s"]
    res["cleaner"]["floor"] = floor
    return res


def _cleaner(passes, res, samples, stream_end, window, settled, final_bytes, final_ratio, delete_bytes) -> dict:
    busy = sum(p["seconds"] for p in passes)
    # the share of the stream's time the cleaner worked (passes clipped to the stream)
    in_stream = sum(max(0.0, min(p["t"], window[1]) - max(p["t"] - p["seconds"], window[0])) for p in passes)
    bytes_in = sum(p["bytes_in"] for p in passes)
    bpr = res["bytes_per_record"]
    second_half = [ratio for t, _, ratio in samples if stream_end / 2 <= t <= stream_end and ratio is not None]
    sizes = [size for t, size, _ in samples if t <= stream_end]
    need = res["single_partition_rate"] * bpr / MIN_DIRTY_RATIO
    tput = bytes_in / busy if busy else None
    return {
        "passes": len(passes), "busy_s": busy,
        "busy_share": in_stream / (window[1] - window[0]) if window[1] > window[0] else None,
        "longest_pass_s": max((p["seconds"] for p in passes), default=None),
        "bytes_in": bytes_in, "bytes_out": sum(p["bytes_out"] for p in passes),
        "records_removed": sum(p["records_removed"] for p in passes),
        "bytes_per_s": tput, "records_per_s": tput / bpr if tput else None,
        "removed_per_s": sum(p["records_removed"] for p in passes) / busy if busy else None,
        "needed_bytes_per_s": need, "headroom": tput / need if tput else None,
        "max_dirty_ratio_second_half": max(second_half, default=None),
        "median_dirty_ratio_second_half": C.median(second_half) if second_half else None,
        "ingest_bytes_per_s": res["compact"]["rate"] * bpr,
        "max_log_bytes": max(sizes, default=None), "final_log_bytes": final_bytes,
        "final_dirty_ratio": final_ratio, "uncompacted_bytes": delete_bytes,
        "settled_after_s": settled, "stream_seconds": stream_end,
    }


def keeps_up(c: dict) -> bool | None:
    if not c["passes"]:
        return False
    return c["headroom"] is not None and c["headroom"] >= 1 and c["settled_after_s"] is not None


def bars(res: dict) -> list[dict]:
    d, k, c = res["delete"], res["compact"], res["cleaner"]
    ratio = k["p99_ms"] / d["p99_ms"] if k["p99_ms"] and d["p99_ms"] else None
    return [
        {"bar": "compaction: produce p99 with the cleaner / without", "value": ratio, "target": "<= 2x",
         "ok": None if ratio is None else ratio <= 2},
        {"bar": "compaction: cleaner throughput / need at the single-partition rate (and settles)",
         "value": c["headroom"], "target": ">= 1x", "ok": keeps_up(c)},
    ]


def table_md(res: dict) -> str:
    d, k, c = res["delete"], res["compact"], res["cleaner"]
    mib = 1 << 20

    def ms(x):
        return "-" if x is None else f"{x:.2f}"

    def ratio(x):
        return "-" if x is None else f"{x:.2f}"

    head = (f"One partition, `segment.bytes` = {SEGMENT_BYTES >> 20} MiB, cleaner every {res['cleaner_interval_ms']} ms, "
            f"`min.cleanable.dirty.ratio` {MIN_DIRTY_RATIO}. Stream: 100-byte values, 50 % updates of earlier "
            f"keys; single-partition rate R = {C.fmt_num(res['single_partition_rate'])} records/s "
            f"({res['bytes_per_record']:.0f} bytes/record on disk); {res['n']:,} records paced at "
            f"{res['load']:g} x R, acks=all, linger.ms=5; latency = produce() to delivery callback.\n\n")
    rows = [
        ["produce rate achieved (records/s)", C.fmt_num(d["rate"]), C.fmt_num(k["rate"])],
        ["produce latency p50 / p99 / max (ms)", f"{ms(d['p50_ms'])} / {ms(d['p99_ms'])} / {ms(d['max_ms'])}",
         f"{ms(k['p50_ms'])} / {ms(k['p99_ms'])} / {ms(k['max_ms'])}"],
        ["p99 of records sent during / outside cleaner passes (ms)", "-",
         f"{ms(k.get('p99_during_passes_ms'))} / {ms(k.get('p99_outside_passes_ms'))} "
         f"({k.get('n_during_passes', 0):,} during)"],
        ["delivery errors", d["errors"], k["errors"]],
        ["log bytes at the end (MiB)", f"{c['uncompacted_bytes'] / mib:.1f}", f"{c['final_log_bytes'] / mib:.1f}"],
    ]
    t1 = C.markdown_table(["produce stream", "cleanup.policy=delete", "cleanup.policy=compact (cleaner on)"],
                          rows, right=[1, 2])
    rows2 = [
        ["passes / busy seconds / share of the stream", f"{c['passes']} / {c['busy_s']:.2f} s / "
         + ("-" if c["busy_share"] is None else f"{c['busy_share'] * 100:.0f} %")],
        ["longest pass (s)", ms(c["longest_pass_s"])],
        ["read / written (MiB)", f"{c['bytes_in'] / mib:.1f} / {c['bytes_out'] / mib:.1f}"],
        ["throughput (MiB/s read)", "-" if c["bytes_per_s"] is None else f"{c['bytes_per_s'] / mib:.2f}"],
        ["throughput (records/s read; removed/s)",
         f"{C.fmt_num(c['records_per_s'])}; {C.fmt_num(c['removed_per_s'])}"],
        ["produced during the stream (MiB/s)", f"{c['ingest_bytes_per_s'] / mib:.2f}"],
        ["needed at R: R x bytes/record / min.cleanable.dirty.ratio (MiB/s)", f"{c['needed_bytes_per_s'] / mib:.2f}"],
        ["floor: reading, mapping and deciding alone, no writes, in Python (MiB/s; of the need)",
         f"{c['floor']['bytes_per_s'] / mib:.2f}; {c['floor']['of_need']:.2f}x"
         if c.get("floor") else "-"],
        ["dirty ratio in the stream's second half: median / max; at the end",
         f"{ratio(c['median_dirty_ratio_second_half'])} / {ratio(c['max_dirty_ratio_second_half'])}; "
         f"{ratio(c['final_dirty_ratio'])}"],
        ["log bytes: max during the stream (MiB)",
         "-" if c["max_log_bytes"] is None else f"{c['max_log_bytes'] / mib:.1f}"],
        ["settled (dirty ratio < 0.5) after the stream (s)",
         "never" if c["settled_after_s"] is None else f"{c['settled_after_s']:.1f}"],
    ]
    t2 = C.markdown_table(["log cleaner (compacted topic)", "value"], rows2, right=[1])
    return head + t1 + "\n\n" + t2


def figures(res: dict) -> list[dict]:
    d, k, c = res["delete"], res["compact"], res["cleaner"]
    out = [C.figure("compaction_p99_delete_ms", d["p99_ms"], "ms", better="lower"),
           C.figure("compaction_p99_compact_ms", k["p99_ms"], "ms", better="lower"),
           C.figure("compaction_p50_compact_ms", k["p50_ms"], "ms", better="lower")]
    if c["bytes_per_s"]:
        out.append(C.figure("cleaner_bytes_per_s", c["bytes_per_s"], "B/s"))
    return out
