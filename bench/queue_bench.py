#!/usr/bin/env python
"""Benchmark of VQS queues and the HybridQueue against peers (issue 3, item 6).

One run, one machine:

(a) SQS-style queue cycle, 100-byte bodies, batches of 1 and 10: each round
    sends a batch, receives it (``receive(k)`` until k came) and deletes it
    (``delete``/``delete_batch``), so the queue stays near empty — a worker's
    steady state. Throughput = messages through the whole cycle per second.
      * VQS: ``vqs.Broker(dir).create_queue(...)`` with the default flush
        policy (``interval``, 100 ms), and with ``flush="always"``;
      * persist-queue ``SQLiteAckQueue`` (put, get, ack; SQLite WAL,
        synchronous FULL: a commit per call);
      * litequeue ``LiteQueue`` (put, pop, done; SQLite WAL, synchronous NORMAL).
    Peers have no batch calls: a batch of 10 is 10 calls of each.
(b) HybridQueue put/get of 100-byte ``bytes`` items: put N, then get N.
      * memory tier (N within the memory budget) vs ``queue.Queue``;
      * overflowing (memory_items=1000: nearly every item goes through the
        log) vs persist-queue ``Queue`` (file-based; fsyncs every put);
      * durable (write-through, fsync per put; and ``put_batch`` of 100)
        vs persist-queue ``Queue``;
      * durable, 4 writer threads putting for ``--poll-seconds``, alone and
        with 6 threads polling ``get(False)`` in a loop (they take what the
        writers put): what polling consumers cost the writers' group commit;
        ``queue.Queue`` in the same rounds under the same pollers is the
        reference (what busy threads cost writers that never wait: their
        share of the GIL).
    Fast in-memory rows are the median of 5 alternating repeats (the machine
    is shared; alternating spreads the noise over both sides of a ratio).

Peers are time-boxed (``--peer-seconds``): they run until N items or the time
box, whichever comes first, and their rate is items done / time taken. The
queue cycle runs ``--repeat`` interleaved rounds of every workload (vqs and
peers alike) and reports each one's best round, as bench/log_bench.py does.

Prints Markdown (the run's date, machine, command and commit; the result
table; the ratios against the bars of issue 3) ready for bench/RESULTS.md,
and writes JSON (default bench/queue_bench.json) whose ``figures``
bench/ab.py compares. Progress goes to stderr.

    python bench/queue_bench.py            # full run (about 3 minutes)
    python bench/queue_bench.py --quick    # counts scaled down
    python bench/queue_bench.py --only hybrid

Bench-only peers: ``pip install -e ".[bench]"`` (persist-queue, litequeue).
"""

from __future__ import annotations

import argparse
import gc
import os
import queue as _stdqueue
import statistics
import sys
import threading
import time

import _common as C  # before any vqs import: it decides which vqs is measured

import vqs
from vqs.hybrid import HybridQueue

BODY = b"x" * 100
_now = time.perf_counter


class Bench:
    def __init__(self, args, base: str):
        self.args = args
        self.rows: list[dict] = []
        self.base = base
        self._rounds: list[dict] | None = None

    def fresh(self, name: str) -> str:
        p = os.path.join(self.base, name)
        C.drop(p)  # names repeat across rounds
        return p

    def start_rounds(self) -> None:
        """Collect rows instead of recording them, until finish_rounds()."""
        self._rounds = []

    def finish_rounds(self) -> None:
        """Record the best round of each workload (load from other users of a
        shared machine only ever slows a round down), noting the worst."""
        rounds, self._rounds = self._rounds, None
        for row in C.best_of_rounds(rounds, lambda r: (r["group"], r["name"]), "per_s"):
            self._add(row)

    def record(self, group: str, name: str, items: int, seconds: float, note: str = "") -> None:
        row = {"group": group, "name": name, "items": items, "seconds": round(seconds, 4),
               "per_s": C.rate(items, seconds), "note": note}
        if self._rounds is not None:
            self._rounds.append(row)
            C.note(f"    round: {name:46s} {row['per_s']:>12,.0f} /s")
        else:
            self._add(row)

    def _add(self, row: dict) -> None:
        self.rows.append(row)
        C.note(f"  {row['group']:8s} {row['name']:46s} {row['per_s']:>12,.0f} /s   "
               f"({row['items']} in {row['seconds']:.2f} s) {row['note']}")


# --------------------------------------------------------------- (a) queues


def cycle_vqs(b: Bench, k: int, n: int, flush: str | None) -> None:
    path = b.fresh(f"vqs-{k}-{flush}")
    opts = {} if flush is None else {"flush": flush}
    broker = vqs.Broker(path, **opts)
    try:
        q = broker.create_queue("bench")
        bodies = [BODY] * k
        rounds = max(1, n // k)
        deadline = _now() + b.args.peer_seconds * 4
        gc.collect()
        t0 = _now()
        done = 0
        for r in range(rounds):
            if k == 1:
                q.send(BODY)
            else:
                q.send_batch(bodies)
            got = q.receive(k)
            while len(got) < k:
                got += q.receive(k - len(got))
            if k == 1:
                q.delete(got[0].receipt_handle)
            else:
                q.delete_batch([m.receipt_handle for m in got])
            done += k
            if not r & 63 and _now() > deadline:
                break
        dt = _now() - t0
        label = f"vqs queue flush={flush or 'interval (default)'}"
        b.record("queue", f"{label}, batch {k}", done, dt)
    finally:
        broker.close()


def cycle_sqliteack(b: Bench, k: int, n: int) -> None:
    from persistqueue import SQLiteAckQueue

    path = b.fresh(f"pq-ack-{k}")
    q = SQLiteAckQueue(path)
    deadline = _now() + b.args.peer_seconds
    gc.collect()
    t0 = _now()
    done = 0
    while done < n and _now() < deadline:
        for _ in range(k):
            q.put(BODY)
        items = [q.get(block=False) for _ in range(k)]
        for it in items:
            q.ack(it)
        done += k
    dt = _now() - t0
    b.record("queue", f"persist-queue SQLiteAckQueue, batch {k}", done, dt)
    q.close() if hasattr(q, "close") else None


def cycle_litequeue(b: Bench, k: int, n: int) -> None:
    from litequeue import LiteQueue

    path = b.fresh(f"litequeue-{k}")
    os.makedirs(path, exist_ok=True)
    q = LiteQueue(os.path.join(path, "q.sqlite3"))
    deadline = _now() + b.args.peer_seconds
    gc.collect()
    t0 = _now()
    done = 0
    while done < n and _now() < deadline:
        for _ in range(k):
            q.put(BODY)
        msgs = [q.pop() for _ in range(k)]
        for m in msgs:
            q.done(m.message_id)
        done += k
    dt = _now() - t0
    b.record("queue", f"litequeue, batch {k}", done, dt)
    q.close()


def run_queues(b: Bench) -> None:
    C.note("(a) queue cycle: send -> receive -> delete, 100-byte bodies")
    s = b.args.scale
    b.start_rounds()
    for _ in range(b.args.repeat):  # rounds interleave every workload
        for k in (1, 10):
            n = int((50_000 if k == 1 else 200_000) * s)
            if hasattr(vqs, "Broker"):
                try:
                    cycle_vqs(b, k, n, None)
                    cycle_vqs(b, k, max(k, n // 10), "always")
                except Exception as e:  # report, keep benchmarking the rest
                    C.note(f"  vqs queue batch {k}: FAILED {type(e).__name__}: {e}")
            for fn in (cycle_sqliteack, cycle_litequeue):
                try:
                    fn(b, k, int(20_000 * s))
                except ImportError as e:
                    C.note(f"  {fn.__name__}: skipped ({e}; pip install persist-queue litequeue)")
    b.finish_rounds()


# ---------------------------------------------------------- (b) HybridQueue


def _put_get(q, n: int) -> float:
    put, get = q.put, q.get
    gc.collect()
    gc.disable()
    try:
        t0 = _now()
        for _ in range(n):
            put(BODY)
        for _ in range(n):
            get()
        return _now() - t0
    finally:
        gc.enable()


def _interleaved(q, n: int) -> float:
    put, get = q.put, q.get
    gc.collect()
    gc.disable()
    try:
        t0 = _now()
        for _ in range(n):
            put(BODY)
            get()
        return _now() - t0
    finally:
        gc.enable()


def _writers_and_pollers(q, writers: int, pollers: int, seconds: float) -> tuple[int, float]:
    """Items put by ``writers`` threads into ``q`` in ``seconds`` while ``pollers`` threads
    loop on ``get(False)``; (items, seconds taken). ``q`` is closed after (if it can be)."""
    stop = threading.Event()
    puts = [0] * writers

    def write(i: int) -> None:
        n = 0
        while not stop.is_set():
            q.put(BODY)
            n += 1
        puts[i] = n

    def poll() -> None:
        while not stop.is_set():
            try:
                q.get(False)
            except _stdqueue.Empty:
                pass

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    threads += [threading.Thread(target=poll) for _ in range(pollers)]
    t0 = _now()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    took = _now() - t0
    if hasattr(q, "close"):
        q.close()
    return sum(puts), took


def run_hybrid(b: Bench) -> None:
    C.note("(b) HybridQueue put N then get N, 100-byte bytes items")
    s = b.args.scale
    reps = 5

    # memory tier vs queue.Queue: alternating repeats, median
    n = int(100_000 * s)
    for label, fn in (("put N, get N", _put_get), ("put+get interleaved", _interleaved)):
        tq, th = [], []
        for r in range(reps):
            tq.append(fn(_stdqueue.Queue(), n))
            path = b.fresh(f"hq-mem-{r}")
            hq = HybridQueue(path)  # defaults: 100k items / 64 MiB in memory
            th.append(fn(hq, n))
            assert hq.metrics.spilled == 0
            hq.close()
        b.record("hybrid", f"queue.Queue ({label})", n, statistics.median(tq), f"median of {reps}")
        b.record("hybrid", f"HybridQueue memory tier ({label})", n, statistics.median(th),
                 f"median of {reps}")

    # overflowing: nearly everything through the log
    n = int(300_000 * s)
    times = []
    for r in range(3):
        path = b.fresh(f"hq-over-{r}")
        hq = HybridQueue(path, memory_items=1000)
        times.append(_put_get(hq, n))
        spilled = hq.metrics.spilled
        hq.close()
    b.record("hybrid", "HybridQueue overflowing (memory_items=1000)", n, statistics.median(times),
             f"median of 3; {spilled} of {n} spilled")

    # durable: write-through, fsync per put (group commit has nobody to share with here)
    n = int(3000 * s)
    path = b.fresh("hq-durable")
    hq = HybridQueue(path, durable=True)
    b.record("hybrid", "HybridQueue durable=True (put, get)", n, _put_get(hq, n))
    hq.close()
    path = b.fresh("hq-durable-batch")
    hq = HybridQueue(path, durable=True)
    nb = int(100_000 * s)
    gc.collect()
    t0 = _now()
    batch = [BODY] * 100
    for _ in range(nb // 100):
        hq.put_batch(batch)
    got = 0
    while got < nb:
        got += len(hq.get_batch(1000))
    b.record("hybrid", "HybridQueue durable=True (put_batch 100, get_batch)", nb, _now() - t0)
    hq.close()

    # durable writers alone and under polling consumers: alternating rounds, median; the
    # stdlib's queue.Queue under the same pollers in the same rounds (what polling threads
    # cost writers that never wait: the GIL's share, the reference for the durable ratio)
    kinds = {"HybridQueue durable=True": lambda path: HybridQueue(path, durable=True),
             "queue.Queue": lambda path: _stdqueue.Queue()}
    rounds = {(k, p): [] for k in kinds for p in (0, 6)}
    for r in range(3):
        for kind, pollers in rounds:
            q = kinds[kind](b.fresh(f"hq-poll-{len(kind)}-{pollers}-{r}"))
            rounds[kind, pollers].append(_writers_and_pollers(q, 4, pollers, b.args.poll_seconds))
    for (kind, pollers), runs in rounds.items():
        items, took = sorted(runs, key=lambda it: it[0] / it[1])[1]
        b.record("hybrid", f"{kind}, 4 writers{f', {pollers} get(False) pollers' if pollers else ''}"
                 " (put)", items, took, "median of 3")

    # persist-queue Queue (file based, fsync per put), time-boxed
    try:
        import persistqueue
    except ImportError as e:
        C.note(f"  persist-queue Queue: skipped ({e})")
        return
    path = b.fresh("pq-queue")
    pq = persistqueue.Queue(path, tempdir=b.base)
    n = int(20_000 * s)
    deadline = _now() + b.args.peer_seconds
    gc.collect()
    t0 = _now()
    done = 0
    while done < n and _now() < deadline:
        pq.put(BODY)
        done += 1
    for _ in range(done):
        pq.get()
        pq.task_done()
    b.record("hybrid", "persist-queue Queue (put, get+task_done)", done, _now() - t0)


# ------------------------------------------------------------------ report


def _rate(rows, name_prefix: str) -> float | None:
    for r in rows:
        if r["name"].startswith(name_prefix):
            return r["per_s"]
    return None


def ratios(rows: list[dict]) -> list[dict]:
    out = []

    def bar(name, value, target, ok):
        out.append({"bar": name, "value": value, "target": target,
                    "ok": None if value is None or ok is None else ok(value)})

    v10 = _rate(rows, "vqs queue flush=interval (default), batch 10")
    ack10 = _rate(rows, "persist-queue SQLiteAckQueue, batch 10")
    lq10 = _rate(rows, "litequeue, batch 10")
    peers = [x for x in (ack10, lq10) if x]
    bar("queue cycle batch 10 (msg/s)", v10, ">= 100,000", lambda v: v >= 100_000)
    bar("queue cycle batch 10 / faster of SQLiteAckQueue, litequeue",
        v10 / max(peers) if v10 and peers else None, ">= 50x", lambda v: v >= 50)
    qq = _rate(rows, "queue.Queue (put N, get N)")
    hm = _rate(rows, "HybridQueue memory tier (put N, get N)")
    bar("HybridQueue memory tier / queue.Queue", hm / qq if hm and qq else None, ">= 0.5x",
        lambda v: v >= 0.5)
    qqi = _rate(rows, "queue.Queue (put+get interleaved)")
    hmi = _rate(rows, "HybridQueue memory tier (put+get interleaved)")
    bar("HybridQueue memory tier / queue.Queue (interleaved)", hmi / qqi if hmi and qqi else None,
        ">= 0.5x", lambda v: v >= 0.5)
    ho = _rate(rows, "HybridQueue overflowing")
    pq = _rate(rows, "persist-queue Queue")
    bar("HybridQueue overflowing / persist-queue Queue", ho / pq if ho and pq else None, ">= 100x",
        lambda v: v >= 100)
    hd = _rate(rows, "HybridQueue durable=True (put, get)")
    bar("HybridQueue durable (fsync per put) / persist-queue Queue (fsync per put)",
        hd / pq if hd and pq else None, "no bar (same durability)", None)
    alone = _rate(rows, "HybridQueue durable=True, 4 writers (put)")
    polled = _rate(rows, "HybridQueue durable=True, 4 writers, 6 get(False) pollers (put)")
    bar("HybridQueue durable puts with 6 pollers / without", polled / alone if polled and alone else None,
        "no bar", None)
    q_alone = _rate(rows, "queue.Queue, 4 writers (put)")
    q_polled = _rate(rows, "queue.Queue, 4 writers, 6 get(False) pollers (put)")
    bar("queue.Queue puts with 6 pollers / without (the same rounds: the reference)",
        q_polled / q_alone if q_polled and q_alone else None, "no bar", None)
    return out


def figures(rows: list[dict]) -> list[dict]:
    """Every row's rate (higher is better), for bench/ab.py."""
    return [C.figure(f"{r['group']} | {r['name']}", r["per_s"], "items/s",
                     vqs=r["name"].startswith(("vqs", "HybridQueue"))) for r in rows]


def results_table(rows: list[dict]) -> str:
    return C.markdown_table(
        ["part", "workload (100-byte bodies)", "items", "seconds", "msg/s", "note"],
        [[r["group"], r["name"], f"{r['items']:,}", f"{r['seconds']:.3f}", C.fmt_num(r["per_s"]), r["note"]]
         for r in rows],
        right=[2, 3, 4])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="See the module docstring for the workloads.")
    ap.add_argument("--quick", action="store_true", help="scale counts down (about 5x), one round")
    ap.add_argument("--only", choices=("queue", "hybrid"), help="run one part only")
    ap.add_argument("--peer-seconds", type=float, default=4.0,
                    help="time box of each slow peer run (default 4, --quick at most 3)")
    ap.add_argument("--poll-seconds", type=float, default=3.0,
                    help="seconds of each durable writers/pollers round (default 3; 6 rounds)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="rounds of the queue cycle, interleaved; each workload's best "
                         "round is reported, vqs and peers alike (default 3, --quick 1)")
    ap.add_argument("--dir", default=None, help="parent of the scratch directory (default: the system temp dir)")
    ap.add_argument("--json", "--out", dest="json", default=os.path.join(C.HERE, "queue_bench.json"),
                    help="JSON output (default bench/queue_bench.json; '' for none)")
    args = ap.parse_args(argv)
    args.scale = 0.2 if args.quick else 1.0
    if args.quick:
        args.peer_seconds = min(args.peer_seconds, 3.0)
        args.poll_seconds = min(args.poll_seconds, 1.0)
        args.repeat = 1
    if args.repeat < 1:
        ap.error(f"--repeat {args.repeat}: must be >= 1")

    info = C.run_info("queue_bench", argv, __file__)
    C.note(f"VQS queue bench: {C.machine_text(info['machine'])}")
    with C.scratch_dir("vqs-queue-bench-", args.dir) as base:
        b = Bench(args, base)
        if args.only in (None, "queue"):
            run_queues(b)
        if args.only in (None, "hybrid"):
            run_hybrid(b)

    bars = ratios(b.rows)
    print(f"## Queues and HybridQueue — bench/queue_bench.py\n\n{C.run_header_md(info)}\n")
    print(results_table(b.rows))
    print("\nRatios against the bars (issue 3):\n")
    print(C.bars_table(bars))
    C.write_json(args.json, {**info, "rows": b.rows, "bars": bars, "figures": figures(b.rows)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
