#!/usr/bin/env python
"""Where the time of a vqs Spark batch read goes (issue 5's read bar).

Runs ``sum(length(value))`` queries in one SparkSession set up as
``bench/spark_bench.py``'s (``local[2]``) over N records of S bytes (default
1 M x 100 B, 2 topic partitions) and reports, per query, the wall time and the
CPU time it cost each kind of process (read from ``/proc`` before and after):

* ``jvm``      the Spark JVM (driver and executor: planning, scheduling, the
               Arrow -> row conversion, the aggregate);
* ``planner``  the Python workers Spark runs on the driver for a Python data
               source (``create_data_source`` at ``load()``,
               ``plan_data_source_read`` at planning);
* ``tasks``    the Python workers running ``read()`` (one per task).

Queries:

* ``vqs``        the vqs source over the whole topic;
* ``vqs 10 rec`` the vqs source over 10 records (5 per partition): the fixed
                 cost of a query, whatever its size;
* ``vqs proj``   the vqs source read with ``.schema("value binary")``: only
                 the value column is built and converted (the JVM reader when
                 its jar is loaded);
* ``py proj``    the same through the Python source (option
                 ``reader=python``, handed over by the JVM provider);
* ``vqs_python proj`` the same with the Python source named directly
                 (``format("vqs_python")``): shows what the hand-over costs;
* ``floor``      a Python data source yielding one pre-built Arrow batch of the
                 vqs schema (as ``spark_bench.py``'s "API floor");
* ``floor 1col`` the same yielding only a value column (``API floor 1 col``);
* ``parquet``    Spark's Parquet reader over the same records (written by Spark
                 from the vqs DataFrame, as in ``spark_bench.py``).

Queries run in interleaved rounds (``--rounds`` x ``--repeat``) after two
warm-ups each, so a change of load on a shared machine hits all alike;
``--only`` runs the queries named (comma-separated).
``--conf key=value`` adds a Spark conf, for experiments only: the bar is
measured by ``spark_bench.py`` with Spark's defaults.

Prints Markdown (the run's date, machine, command and commit, and the table)
and writes JSON (``--json``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import _common as C  # before any vqs import: it decides which vqs is measured
import spark_bench


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument("--repeat", type=int, default=5, help="runs of each query per round (default 5)")
    ap.add_argument("--dir", default=None, help="work directory (reused if it holds data; default: temporary)")
    ap.add_argument("--conf", action="append", default=[], help="extra Spark conf key=value (experiments)")
    ap.add_argument("--only", default="", help="comma-separated queries to run (default: all)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 100,000 records, 1 round of 1 run")
    ap.add_argument("--json", default=os.path.join(C.HERE, "spark_profile.json"),
                    help="JSON output (default bench/spark_profile.json; '' for none)")
    args = ap.parse_args(argv)
    if args.quick:
        args.records, args.rounds, args.repeat = min(args.records, 100_000), 1, 1
    return args


_TICK = os.sysconf("SC_CLK_TCK")


def _proc_table() -> dict[int, tuple[int, float, str]]:
    """pid -> (ppid, cpu seconds, cmdline) of every process we can read."""
    out = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                st = f.read()
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        rest = st[st.rindex(")") + 2:].split()
        out[int(p)] = (int(rest[1]), (int(rest[11]) + int(rest[12])) / _TICK, cmd)
    return out


def _kind(cmd: str) -> str:
    if "pyspark.worker" in cmd.split("pyspark.daemon", 1)[-1] and "sql.worker" not in cmd:
        return "tasks"
    if "pyspark.sql.worker" in cmd:
        return "planner"
    if "java" in cmd.split(" ", 1)[0]:
        return "jvm"
    return "other"


def cpu_by_kind() -> dict[str, float]:
    """CPU seconds so far of the Spark processes under this one, by kind
    (exited processes are not counted: Spark reuses its Python workers)."""
    table = _proc_table()
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    acc = {"jvm": 0.0, "planner": 0.0, "tasks": 0.0, "other": 0.0}
    stack = list(kids.get(os.getpid(), []))
    while stack:
        pid = stack.pop()
        _, cpu, cmd = table[pid]
        acc[_kind(cmd)] += cpu
        stack.extend(kids.get(pid, []))
    return acc


def main(argv=None) -> int:
    args = parse_args(argv)
    info = C.run_info("spark_profile", argv, __file__)
    with spark_bench.work_dir(args.dir, "vqs-spark-profile-") as work:
        samples = run_queries(args, work)

    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"## Spark read profile — bench/spark_profile.py\n\n{C.run_header_md(info)}\n")
    print(f"{args.records:,} records x {args.size} B, {args.partitions} partitions, {args.master}, "
          f"{args.rounds}x{args.repeat} runs per query; load average at the end {load}"
          + (f"; extra conf {args.conf}" if args.conf else "") + "\n")
    rows, out = [], []
    for q, s in samples.items():
        walls = [w for w, _ in s]
        med = {k: statistics.median(c[k] for _, c in s) for k in ("jvm", "planner", "tasks")}
        out.append({"query": q, "wall_best_s": min(walls), "wall_median_s": statistics.median(walls),
                    "cpu_median_s": med, "walls_s": walls})
        rows.append([q, f"{min(walls):.3f}", f"{statistics.median(walls):.3f}", f"{med['jvm']:.2f}",
                     f"{med['planner']:.2f}", f"{med['tasks']:.2f}", f"{sum(med.values()):.2f}"])
    print(C.markdown_table(["query", "wall best s", "wall median s", "JVM CPU s", "planner CPU s",
                            "task workers CPU s", "total CPU s"], rows, right=[1, 2, 3, 4, 5, 6]))
    C.write_json(args.json, {
        **info, "params": {k: getattr(args, k) for k in ("records", "size", "partitions", "master", "rounds",
                                                         "repeat", "conf")},
        "loadavg_at_end": load, "queries": out,
        "figures": [C.figure(f"{r['query']} | wall median", r["wall_median_s"], "s", better="lower",
                             vqs=r["query"].startswith("vqs")) for r in out],
    })
    return 0


def run_queries(args, work: str) -> dict[str, list]:
    """Every query's (wall seconds, CPU seconds by kind) samples."""
    data = os.path.join(work, "data")
    pq = os.path.join(work, "records.parquet")
    n, size = args.records, args.size
    if not os.path.isdir(data):
        C.note(f"filling topic: {n:,} records x {size} B ...")
        spark_bench.fill_topic(data, "bench", n, size, args.partitions)
    spark = spark_bench.make_session(args.master, args.conf, app="vqs-spark-profile")
    vqs_df = lambda **o: spark.read.format("vqs").option("path", data).option("topic", "bench").options(**o).load()  # noqa: E731
    if not os.path.isdir(pq):
        vqs_df().write.mode("overwrite").parquet(pq)
    spark_bench.register_floor(spark, n, size, args.partitions)
    spark_bench.register_floor(spark, n, size, args.partitions, name="apifloor1", value_only=True)
    proj_df = lambda fmt="vqs", **o: (spark.read.format(fmt).schema("value binary")  # noqa: E731
                                      .option("path", data).option("topic", "bench").options(**o).load())

    def sum_len(df):
        return df.selectExpr("sum(length(value)) s").first().s

    ten = "{" + ", ".join(f'"{p}": 5' for p in range(args.partitions)) + "}"
    floor_bytes = n // 10_000 // args.partitions * 10_000 * args.partitions * size
    queries = {
        "vqs": (lambda: sum_len(vqs_df()), n * size),
        "vqs 10 rec": (lambda: sum_len(vqs_df(endingOffsets='{"bench": ' + ten + "}")), 5 * args.partitions * size),
        "vqs proj": (lambda: sum_len(proj_df()), n * size),
        "py proj": (lambda: sum_len(proj_df(reader="python")), n * size),
        "vqs_python proj": (lambda: sum_len(proj_df("vqs_python")), n * size),
        "floor": (lambda: sum_len(spark.read.format("apifloor").load()), floor_bytes),
        "floor 1col": (lambda: sum_len(spark.read.format("apifloor1").load()), floor_bytes),
        "parquet": (lambda: sum_len(spark.read.parquet(pq)), n * size),
    }
    if args.only:
        queries = {q: queries[q] for q in args.only.split(",")}
    samples: dict[str, list] = {q: [] for q in queries}
    for fn, _ in queries.values():
        fn()
        fn()
    for _ in range(args.rounds):
        for q, (fn, expect) in queries.items():
            for _ in range(args.repeat):
                c0 = cpu_by_kind()
                t0 = time.perf_counter()
                got = fn()
                wall = time.perf_counter() - t0
                c1 = cpu_by_kind()
                assert got == expect, (q, got, expect)
                samples[q].append((wall, {k: c1[k] - c0[k] for k in c1}))
    spark.stop()
    return samples


if __name__ == "__main__":
    sys.exit(main())
