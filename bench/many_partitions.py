"""Many partitions on one broker: open files, produce/read, reopen (issue 13, item 7).

Two scenarios, each in a child process (so that its limits and descriptors are
its own):

* ``many``: under ``RLIMIT_NOFILE`` soft = hard = ``--nofile`` (default 1,024,
  set with ``resource.setrlimit`` in the child, so the broker cannot raise it),
  a broker creates ``--partitions`` partitions (default 10,000: topics of 4),
  produces ``--records`` records to every one, reads them all back, closes,
  reopens and reads them all again. Descriptors held (``/proc/self/fd``) are
  sampled after each phase and every 500 partitions within it (the peak).
* ``reopen``: ``--reopen-partitions`` partitions (default 2,000) with a record
  each, closed cleanly; the broker is reopened ``--rounds`` times (best
  reported), with the descriptors it holds after the open. With
  ``--base-tree`` the same data directory is also reopened by that tree (the
  on-disk format is the same), for a before/after in the same run.

Bars (issue 13): 10,000 partitions work under 1,024 descriptors; a reopen of
2,000 partitions takes under 1 s.

    python bench/many_partitions.py                    # both scenarios
    python bench/many_partitions.py --base-tree /work/main --only reopen

Data goes to ``--dir`` (default: /dev/shm when it exists, so that thousands
of topic creations do not wait for a shared disk's fsyncs; descriptor counts
and reopen do not depend on the filesystem: a clean reopen writes nothing).
Prints Markdown; ``--json`` writes the figures (default bench/many_partitions.json).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _partitions(n: int) -> list[tuple[str, int]]:
    return [(f"t{i // 4:05d}", i % 4) for i in range(n)]


def _create(broker, n: int) -> None:
    for i in range(0, n, 4):
        broker.create_topic(f"t{i // 4:05d}", partitions=min(4, n - i))


def child_many(args) -> dict:
    import resource

    resource.setrlimit(resource.RLIMIT_NOFILE, (args.nofile, args.nofile))
    import vqs
    from vqs.storage.file_cache import CACHE

    out: dict = {"nofile": args.nofile, "partitions": args.partitions, "records": args.records}
    parts = _partitions(args.partitions)
    peak = fds()

    def sample():
        nonlocal peak
        peak = max(peak, fds())

    opts = {"segment_bytes": 64 << 10, "flush": "interval"}
    t = time.perf_counter()
    with vqs.Broker(args.dir, **opts) as b:
        out["max_open_files"] = CACHE.max_open_files
        _create(b, args.partitions)
        out["create_s"] = time.perf_counter() - t
        out["fds_after_create"] = fds()
        sample()
        t = time.perf_counter()
        for k, (topic, p) in enumerate(parts):
            log = b.topic(topic).log(p)
            log.append_batch([b"%s/%d/%d" % (topic.encode(), p, r) for r in range(args.records)])
            if k % 500 == 0:
                sample()
        b.flush()
        out["produce_s"] = time.perf_counter() - t
        out["fds_after_produce"] = fds()
        sample()
        out["read_s"], out["read_ok"] = _read_all(b, parts, args.records, sample)
        out["fds_after_read"] = fds()
        sample()
    t = time.perf_counter()
    with vqs.Broker(args.dir, **opts) as b:
        out["reopen_s"] = time.perf_counter() - t
        out["fds_after_reopen"] = fds()
        sample()
        out["reread_s"], ok = _read_all(b, parts, args.records, sample)
        out["read_ok"] = out["read_ok"] and ok
        out["fds_after_reread"] = fds()
    out["fds_peak"] = peak
    return out


def _read_all(b, parts, records, sample) -> tuple[float, bool]:
    t = time.perf_counter()
    ok = True
    for k, (topic, p) in enumerate(parts):
        got = [r.value for r in b.topic(topic).read(p, 0, max_records=records)]
        ok = ok and got == [b"%s/%d/%d" % (topic.encode(), p, r) for r in range(records)]
        if k % 500 == 0:
            sample()
    return time.perf_counter() - t, ok


def child_reopen(args) -> dict:
    import vqs

    out: dict = {"partitions": args.reopen_partitions}
    if args.create:
        with vqs.Broker(args.dir, segment_bytes=1 << 20) as b:
            _create(b, args.reopen_partitions)
            for topic, p in _partitions(args.reopen_partitions):
                b.topic(topic).log(p).append(b"x" * 100)
        return out
    times, closes = [], []
    for _ in range(args.rounds):
        t = time.perf_counter()
        b = vqs.Broker(args.dir, segment_bytes=1 << 20)
        times.append(time.perf_counter() - t)
        out["fds_after_reopen"] = fds()
        t = time.perf_counter()
        b.close()
        closes.append(time.perf_counter() - t)
    out["reopen_s"] = min(times)
    out["reopen_all_s"] = times
    out["close_s"] = min(closes)
    return out


def run_child(scenario: str, args, extra: list[str], tree: str | None = None) -> dict:
    env = C.child_env()
    if tree is not None:
        env["PYTHONPATH"] = tree
    cmd = [sys.executable, os.path.abspath(__file__), "--child", scenario, "--dir", args.dir,
           "--partitions", str(args.partitions), "--records", str(args.records),
           "--nofile", str(args.nofile), "--reopen-partitions", str(args.reopen_partitions),
           "--rounds", str(args.rounds), *extra]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.stderr.write(r.stderr[-4000:])
        raise SystemExit(f"{scenario} child failed ({r.returncode})")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=10_000, help="partitions of the 'many' scenario")
    ap.add_argument("--records", type=int, default=3, help="records produced to each partition")
    ap.add_argument("--nofile", type=int, default=1024, help="RLIMIT_NOFILE (soft = hard) of the 'many' child")
    ap.add_argument("--reopen-partitions", type=int, default=2000, help="partitions of the 'reopen' scenario")
    ap.add_argument("--rounds", type=int, default=3, help="reopens timed (best reported)")
    ap.add_argument("--base-tree", help="also reopen with this tree (PYTHONPATH) for a before/after")
    ap.add_argument("--only", default="many,reopen", help="scenarios: many,reopen")
    ap.add_argument("--dir", default=None, help="parent of the scratch directories (default /dev/shm)")
    ap.add_argument("--json", default=os.path.join(C.HERE, "many_partitions.json"), help="JSON output ('' for none)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--create", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        res = child_many(args) if args.child == "many" else child_reopen(args)
        print(json.dumps(res))
        return
    parent = args.dir or ("/dev/shm" if os.path.isdir("/dev/shm") else None)
    info = C.run_info("many_partitions", argv, __file__)
    info["load_before"] = os.getloadavg()
    only = set(args.only.split(","))
    doc: dict = {"info": info, "figures": []}
    rows = []
    if "many" in only:
        with C.scratch_dir("vqs-many-", parent) as d:
            args.dir = os.path.join(d, "data")
            m = run_child("many", args, [])
        doc["many"] = m
        C.note(f"many: {m}")
        rows += [
            (f"{m['partitions']:,} partitions under RLIMIT_NOFILE {m['nofile']}: create", f"{m['create_s']:.1f} s", ""),
            (f"produce {m['records']} records to each (append_batch) + flush", f"{m['produce_s']:.1f} s", ""),
            ("read every partition back (values checked)", f"{m['read_s']:.1f} s", "ok" if m["read_ok"] else "WRONG"),
            ("reopen (clean) / read all again", f"{m['reopen_s']:.2f} s / {m['reread_s']:.1f} s", ""),
            ("descriptors held: after create / produce / read / reopen",
             f"{m['fds_after_create']} / {m['fds_after_produce']} / {m['fds_after_read']} / {m['fds_after_reopen']}", ""),
            ("descriptors held: peak (sampled every 500 partitions)", str(m["fds_peak"]),
             f"max_open_files {m['max_open_files']}"),
        ]
        doc["figures"] += [
            C.figure("many.fds_peak", m["fds_peak"], "fds", better="lower"),
            C.figure("many.reopen_s", m["reopen_s"], "s", better="lower"),
        ]
    if "reopen" in only:
        with C.scratch_dir("vqs-reopen-", parent) as d:
            args.dir = os.path.join(d, "data")
            run_child("reopen", args, ["--create"])
            r = run_child("reopen", args, [])
            base = run_child("reopen", args, [], tree=args.base_tree) if args.base_tree else None
            if base is not None:
                r2 = run_child("reopen", args, [])  # again after the base: order effects
                if r2["reopen_s"] < r["reopen_s"]:
                    r = r2
        doc["reopen"] = r
        doc["reopen_base"] = base
        rows.append((f"reopen {r['partitions']:,} partitions (best of {args.rounds})", f"{r['reopen_s']:.3f} s",
                     f"base {base['reopen_s']:.3f} s ({base['reopen_s'] / r['reopen_s']:.1f}x)" if base else ""))
        rows.append(("descriptors held after that reopen", str(r["fds_after_reopen"]),
                     f"base {base['fds_after_reopen']}" if base else ""))
        rows.append(("close of the reopened broker", f"{r['close_s']:.3f} s",
                     f"base {base['close_s']:.3f} s" if base else ""))
        doc["figures"].append(C.figure("reopen.seconds", r["reopen_s"], "s", better="lower"))
    doc["info"]["load_after"] = os.getloadavg()
    print(C.run_header_md(info))
    print(f"- load average before / after: {info['load_before'][0]:.1f} / {doc['info']['load_after'][0]:.1f}")
    print()
    print(C.markdown_table(["what", "figure", "note"], rows))
    if args.json:
        C.write_json(args.json, doc)


if __name__ == "__main__":
    main()
