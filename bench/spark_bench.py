#!/usr/bin/env python
"""Spark connector benchmark: the ``vqs`` source and sink vs Spark's Parquet.

One local SparkSession (``local[2]`` by default) with the JVM reader's jar
loaded. N records of S random bytes (default 1 M x 100 B) are appended to a
VQS topic; then:

* ``read count``      ``count()`` through the vqs source (the JVM reader) vs
                      Spark's Parquet reader over the same records (the
                      Parquet copy is written by Spark from the vqs
                      DataFrame, all six columns); the JVM reader answers it
                      from the offsets on the driver (no task);
* ``read sum(len)``   ``sum(length(value))``, the same two ways (the JVM
                      reader prunes to the value column by itself);
* ``url sum(len)``    the same through a VQS server (option ``url``: the
                      binary batch fetch), JVM reader;
* ``py proj sum(len)`` the Python source (option ``reader=python``) with a
                      projected read, ``.schema("value binary")``: it builds
                      (and Spark converts) only ``value``;
* ``write``           a cached DataFrame of the records written to a new vqs
                      topic vs written as Parquet;
* ``stream``          a Structured Streaming read with Trigger.AvailableNow and
                      maxOffsetsPerTrigger (default 250 k) into the noop sink
                      (no Parquet counterpart: reported on its own);
* ``API floor``       ``sum(length(value))`` through a Python data source that
                      does no work at all (it yields the same pre-built Arrow
                      batch of the vqs schema, N rows in as many tasks): the
                      fastest any Python data source can be here, so the
                      vqs/Parquet ratio can be read against it;
* ``API floor 1 col`` the same with a one-column (``value``) batch: the floor
                      of the projected read (as many tasks, rows and Arrow
                      batches as the Python source's read: the source yields
                      one per log batch, <= 1 MiB, about 10,000 records of
                      100 B; the floor 10,000 rows each); ``API floor 1 col/4k``
                      the same in 4096-row batches (how batch size moves it).

Each measurement is the best of ``--repeat`` runs after two warm-up runs.
Prints Markdown (the run's date, machine, command and commit, and the table)
ready for bench/RESULTS.md (with the Python source and its floor timed again
in alternation, which a change of load hits alike: the bar is read there, best
and median), and writes JSON (``--json``) whose ``figures``
bench/ab.py compares. Bars (issue 14): JVM read sum(len) >= 1.5 x Parquet at
4 M records and >= 1.2 x at 1 M, count() >= 2 x; the Python source's projected
read >= 0.9 x the one-column API floor; streaming AvailableNow >= 844 k rec/s
(2 x 422 k). Issue 5's write bar: >= 0.6 x Parquet.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time

import _common as C  # before any vqs import: it decides which vqs is measured


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000, help="records (default 1000000)")
    ap.add_argument("--size", type=int, default=100, help="bytes per record value (default 100)")
    ap.add_argument("--partitions", type=int, default=2, help="topic partitions (default 2)")
    ap.add_argument("--trigger", type=int, default=250_000, help="maxOffsetsPerTrigger of the stream run (default 250000)")
    ap.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per measurement, best kept (default 3)")
    ap.add_argument("--dir", default=None, help="work directory (default: a temporary one, removed after)")
    ap.add_argument("--python-only", action="store_true",
                    help="only the Python source's rows and its API floor (the JVM, url, write and stream rows skipped)")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: 100,000 records, one timed run per measurement")
    ap.add_argument("--json", default=os.path.join(C.HERE, "spark_bench.json"),
                    help="where to write the results (default bench/spark_bench.json; '' for none)")
    ap.add_argument("--vectors", action="store_true",
                    help="also time the JVM reader with .option('vectors', 'arrow') against the default, "
                         "plainly and through a pandas_udf (Spark 4.3's columnar Arrow UDF input)")
    ap.add_argument("--jvm-only", action="store_true",
                    help="only the JVM reader's rows and the stream (no Python source, API floor or write)")
    args = ap.parse_args(argv)
    if args.quick:
        args.records, args.repeat, args.trigger = min(args.records, 100_000), 1, min(args.trigger, 25_000)
    return args


def make_session(master: str, confs: list[str] = (), app: str = "vqs-spark-bench"):
    """A SparkSession with vqs registered; ``confs`` are extra "key=value" settings."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = C.child_env()["PYTHONPATH"]  # Spark's Python workers: the measured vqs
    from pyspark.sql import SparkSession

    import vqs.spark

    b = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.jars", vqs.spark.jar_path() or "")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
    )
    for kv in confs:
        k, v = kv.split("=", 1)
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    vqs.spark.register(spark)
    return spark


def fill_topic(data_dir: str, topic: str, n: int, size: int, partitions: int) -> float:
    """Append n random records of ``size`` bytes (round-robin over partitions)."""
    import numpy as np

    from vqs.broker import Broker

    rng = np.random.default_rng(42)
    t0 = time.perf_counter()
    with Broker(data_dir, flush="never") as b:
        b.create_topic(topic, partitions=partitions)
        prod = b.producer()
        chunk = max(1, min(50_000, -(-n // partitions)))  # every partition gets records
        for a in range(0, n, chunk):
            m = min(chunk, n - a)
            raw = rng.integers(0, 256, size=m * size, dtype=np.uint8).tobytes()
            values = [raw[i * size:(i + 1) * size] for i in range(m)]
            prod.send_batch(topic, values, partition=(a // chunk) % partitions)
        prod.flush()
    return time.perf_counter() - t0


FLOOR_SCHEMA = "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp"


def register_floor(spark, n: int, size: int, tasks: int, name: str = "apifloor", value_only: bool = False,
                   rows: int = 10_000) -> None:
    """A Python data source (format ``name``) that does nothing but yield one
    pre-built Arrow batch (the vqs schema, or only its ``value`` column with
    ``value_only``; ``rows`` rows, default 10 000: Spark's
    ``spark.sql.execution.arrow.maxRecordsPerBatch``) until it has produced n rows."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class FloorReader(DataSourceReader):
        def partitions(self):
            return [InputPartition(i) for i in range(tasks)]

        def read(self, partition):
            import numpy as np
            import pyarrow as pa

            values = pa.Array.from_buffers(pa.binary(), rows, [
                None, pa.py_buffer(np.arange(0, size * (rows + 1), size, dtype=np.int32)),
                pa.py_buffer(np.zeros(size * rows, np.uint8))])
            if value_only:
                batch = pa.RecordBatch.from_arrays([values], names=["value"])
            else:
                batch = pa.RecordBatch.from_arrays([
                    pa.nulls(rows, pa.binary()), values, pa.repeat(pa.scalar("bench"), rows),
                    pa.array(np.zeros(rows, np.int32)), pa.array(np.arange(rows, dtype=np.int64)),
                    pa.array(np.zeros(rows, np.int64)).cast(pa.timestamp("us", tz="UTC")),
                ], names=["key", "value", "topic", "partition", "offset", "timestamp"])
            for _ in range(n // rows // tasks):
                yield batch

    class FloorSource(DataSource):
        @classmethod
        def name(cls):
            return name

        def schema(self):
            return "value binary" if value_only else FLOOR_SCHEMA

        def reader(self, schema):
            return FloorReader()

    spark.dataSource.register(FloorSource)


def count_source_batches(data_dir: str, topic: str) -> int:
    """The Arrow batches the Python source yields for the whole topic (its
    read() run here, outside Spark)."""
    from vqs.spark.options import parse_read_options
    from vqs.spark.reader import make_source, plan_ranges, read_range

    opts = parse_read_options({"path": data_dir, "topic": topic}, streaming=False)
    src = make_source(opts)
    try:
        return sum(1 for r in plan_ranges(src, opts) for _ in read_range(src, r, opts, ("value",)))
    finally:
        src.close()


def measure_vectors(spark, data, pq_df, measure, rows, expect, sum_len, same):
    """The JVM reader's two kinds of vectors: sum(length(value)) (Spark converts the
    batches to rows either way), then a pandas_udf over value (with vectors=arrow
    Spark 4.3 passes the batches to the Python worker as they are), each against
    the same query over Parquet."""
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    def vqs_df(vectors):
        return (spark.read.format("vqs").option("path", data).option("topic", "bench")
                .option("vectors", vectors).load())

    measure("read sum(len) arrow", lambda: sum_len(vqs_df("arrow")), lambda: sum_len(pq_df()),
            lambda a, b: (same(a, b), same(a, expect)))
    rows[-1]["note"] = "JVM reader, path mode, option vectors=arrow (ArrowColumnVector batches)"

    def lengths(v):
        return v.str.len()

    lengths.__annotations__ = {"v": pd.Series, "return": pd.Series}  # real types, not this module's strings
    vlen = pandas_udf(lengths, "long")

    def udf_sum(df):
        return df.select(vlen("value").alias("n")).selectExpr("sum(n) s").first().s

    for vectors in ("direct", "arrow"):
        measure(f"udf sum(len) {vectors}", lambda v=vectors: udf_sum(vqs_df(v)), lambda: udf_sum(pq_df()),
                lambda a, b: (same(a, b), same(a, expect)))
        rows[-1]["note"] = (f"JVM reader, vectors={vectors}: a pandas_udf over value, then sum; "
                            + ("columnar into the UDF" if vectors == "arrow" else "ColumnarToRow, then ArrowWriter"))


def best_of(fn, repeat: int, warmup: int = 2) -> tuple[float, object]:
    for _ in range(warmup):  # Python workers, JIT, page cache
        fn()
    best, result = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def main(argv=None) -> int:
    args = parse_args(argv)
    info = C.run_info("spark_bench", argv, __file__)
    with work_dir(args.dir, "vqs-spark-bench-") as work:
        return _main(args, info, work)


def work_dir(path: str | None, prefix: str):
    """``path`` (kept) if given, else a scratch directory (removed after)."""
    if path:
        os.makedirs(path, exist_ok=True)
        return contextlib.nullcontext(path)
    return C.scratch_dir(prefix)


def _main(args, info: dict, work: str) -> int:
    data = os.path.join(work, "data")
    pq = os.path.join(work, "records.parquet")
    n, size = args.records, args.size
    mb = n * size / 1e6
    rows = []
    C.note(f"filling topic: {n:,} records x {size} B ...")
    fill_s = fill_topic(data, "bench", n, size, args.partitions)
    t0 = time.perf_counter()
    spark = make_session(args.master)
    session_s = time.perf_counter() - t0

    vqs_df = lambda: spark.read.format("vqs").option("path", data).option("topic", "bench").load()  # noqa: E731
    vqs_df().write.mode("overwrite").parquet(pq)
    pq_df = lambda: spark.read.parquet(pq)  # noqa: E731

    def measure(name, vqs_fn, pq_fn, check=None):
        tv, rv = best_of(vqs_fn, args.repeat)
        tp, rp = best_of(pq_fn, args.repeat) if pq_fn else (None, None)
        if check is not None:
            check(rv, rp)
        rows.append({
            "op": name, "vqs_s": tv, "parquet_s": tp,
            "vqs_records_per_s": n / tv, "vqs_mb_per_s": mb / tv,
            "ratio_vs_parquet": None if tp is None else tp / tv,
        })
        ratio = "" if tp is None else f"  parquet {tp:6.2f} s  ratio {tp / tv:4.2f}x"
        C.note(f"  {name:<16} vqs {tv:6.2f} s{ratio}")

    def same(a, b):
        assert a == b, (a, b)

    import vqs.spark

    jvm = "JVM" if vqs.spark.jvm_reader_loaded(spark) else "Python (no JVM reader here)"
    expect = n * size

    def sum_len(df):
        return df.selectExpr("sum(length(value)) s").first().s

    if not args.python_only:
        measure("read count()", lambda: vqs_df().count(), lambda: pq_df().count(), same)
        rows[-1]["note"] = f"{jvm} reader" + (": count(*) from the offsets, no task" if jvm == "JVM" else "")
        measure("read sum(len)", lambda: sum_len(vqs_df()), lambda: sum_len(pq_df()),
                lambda a, b: (same(a, b), same(a, expect)))
        rows[-1]["note"] = f"{jvm} reader, path mode, no user schema"
        if args.vectors:
            measure_vectors(spark, data, pq_df, measure, rows, expect, sum_len, same)
        from vqs.pipelines.demo import LocalServer

        server = LocalServer(data, os.path.join(work, "server.log")).start()
        try:
            url_df = lambda: spark.read.format("vqs").option("url", server.url).option("topic", "bench").load()  # noqa: E731
            measure("url sum(len)", lambda: sum_len(url_df()), lambda: sum_len(pq_df()),
                    lambda a, b: (same(a, b), same(a, expect)))
            rows[-1]["note"] = f"{jvm} reader, url mode (the server's binary batch fetch)"
        finally:
            server.stop()
        if args.jvm_only:
            stream_row(spark, data, work, args, n, measure, rows, jvm)
            spark.stop()
            return report(args, info, rows, n, size, fill_s, session_s, None)
    proj_df = lambda: (spark.read.format("vqs").schema("value binary").option("reader", "python")  # noqa: E731
                       .option("path", data).option("topic", "bench").load())
    register_floor(spark, n, size, args.partitions)
    register_floor(spark, n, size, args.partitions, name="apifloor1", value_only=True)
    # The floor is read as the source is, with the schema given (.schema(...)):
    # then Spark calls no Python at load(), for either.
    floor_df = lambda: spark.read.format("apifloor1").schema("value binary").load()  # noqa: E731
    # Warm up both Python paths before either is timed: the first Python data
    # source query of a session starts its Python workers and JIT-compiles the
    # JVM's Arrow-to-rows path (in an all-bars run, after a minute of JVM-only
    # queries, Spark has also stopped idle Python workers); timed first, the
    # source paid for that and the floor, timed after it, did not.
    for _ in range(2):
        sum_len(floor_df())
        sum_len(proj_df())
    measure("py proj sum(len)", lambda: sum_len(proj_df()), lambda: sum_len(pq_df()),
            lambda a, b: (same(a, b), same(a, expect)))
    rows[-1]["note"] = 'Python source (reader=python), .schema("value binary"): only the value column is built'
    py_row = rows[-1]
    # Fairness: both run args.partitions tasks of n / args.partitions rows, and
    # yield about as many Arrow batches (the source one per log batch, <= 1 MiB
    # of records; the floor one per 10,000 rows, Spark's maxRecordsPerBatch).
    source_batches, floor_batches = count_source_batches(data, "bench"), n // 10_000 // args.partitions * args.partitions
    measure("API floor 1 col", lambda: sum_len(floor_df()),
            lambda: sum_len(pq_df()), lambda a, b: same(a, b))
    rows[-1]["note"] = "a Python data source doing no work, yielding a value column: the ceiling for the projected read"
    py_row["ratio_vs_floor"] = rows[-1]["vqs_s"] / py_row["vqs_s"]
    py_row["note"] += f"; {py_row['ratio_vs_floor']:.2f} x the API floor"
    # The floor in smaller batches (the log's default batch_max_records, 4096):
    # what batch size alone moves.
    register_floor(spark, n, size, args.partitions, name="apifloor1s", value_only=True, rows=4096)
    measure("API floor 1 col/4k", lambda: sum_len(spark.read.format("apifloor1s").schema("value binary").load()),
            lambda: sum_len(pq_df()))
    rows[-1]["note"] = ("the same in 4096-row batches (2.4x as many as the source yields); "
                        f"{n // 4096 // args.partitions * 4096 * args.partitions:,} rows")

    # The bar is a ratio of the two rows above, timed minutes apart: on a
    # shared machine a change of load between them moves it. The same queries
    # again in alternation, so a change of load hits them alike: 4 x --repeat
    # rounds (at least 10: a query takes under a second, and on this shared
    # machine the median of 6 rounds still moved by +-10 %), one run of each
    # per round, the order reversed every other round (A B, B A, ...) so that
    # neither always runs first, or always right after the other (which leaves
    # its garbage to the JVM's collector).
    pair = {"py proj": lambda: sum_len(proj_df()), "API floor 1 col": lambda: sum_len(floor_df())}
    alt: dict[str, list[float]] = {q: [] for q in pair}
    for i in range(max(4 * args.repeat, 10)):
        for q in (list(pair) if i % 2 == 0 else list(pair)[::-1]):
            t0 = time.perf_counter()
            got = pair[q]()
            alt[q].append(time.perf_counter() - t0)
            assert q != "py proj" or got == expect, (q, got)
    inter = {q: {"best_s": min(ts), "median_s": statistics.median(ts), "runs_s": ts} for q, ts in alt.items()}
    py_row["interleaved"] = inter
    py_row["arrow_batches"] = {"py proj": source_batches, "API floor 1 col": floor_batches}
    py_row["ratio_vs_floor_interleaved_best"] = inter["API floor 1 col"]["best_s"] / inter["py proj"]["best_s"]
    py_row["ratio_vs_floor_interleaved_median"] = inter["API floor 1 col"]["median_s"] / inter["py proj"]["median_s"]
    # Each round's two runs are back to back: the median of the per-round
    # ratios is the statistic least moved by load that changes between rounds.
    py_row["ratio_vs_floor_paired_median"] = statistics.median(
        f / q for f, q in zip(alt["API floor 1 col"], alt["py proj"]))
    C.note(f"  interleaved: py proj / floor best {py_row['ratio_vs_floor_interleaved_best']:.2f}x, "
           f"median {py_row['ratio_vs_floor_interleaved_median']:.2f}x")

    if not args.python_only:
        # Writes: the same cached DataFrame (value only) to a new topic / to Parquet.
        src = spark.read.parquet(pq).select("value").repartition(args.partitions).cache()
        assert src.count() == n
        counter = {"i": 0}

        def vqs_write():
            counter["i"] += 1
            (src.write.format("vqs").mode("append").option("path", data)
             .option("topic", f"copy{counter['i']}").option("topicPartitions", str(args.partitions)).save())

        def pq_write():
            counter["i"] += 1
            src.write.mode("overwrite").parquet(os.path.join(work, f"copy{counter['i']}.parquet"))

        measure("write", vqs_write, pq_write)
        src.unpersist()
        got = spark.read.format("vqs").option("path", data).option("topic", "copy1").load().count()
        assert got == n, got

        stream_row(spark, data, work, args, n, measure, rows, jvm)
    spark.stop()
    return report(args, info, rows, n, size, fill_s, session_s, py_row)


def stream_row(spark, data, work, args, n, measure, rows, jvm):
    # Streaming: AvailableNow in batches of args.trigger records.
    ck = {"i": 0}
    batches = {}

    def stream():
        ck["i"] += 1
        q = (spark.readStream.format("vqs").option("path", data).option("topic", "bench")
             .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(args.trigger)).load()
             .writeStream.format("noop").option("checkpointLocation", os.path.join(work, f"ck{ck['i']}"))
             .trigger(availableNow=True).start())
        q.awaitTermination()
        if q.exception():
            raise q.exception()
        sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
        batches["sizes"] = sizes
        assert sum(sizes) == n, sizes
        return sizes

    measure(f"stream AvNow/{args.trigger // 1000}k", stream, None)
    rows[-1]["micro_batches"] = batches["sizes"]
    rows[-1]["note"] = f"{jvm} reader into the noop sink"


def report(args, info, rows, n, size, fill_s, session_s, py_row) -> int:

    import pyspark

    info["machine"]["pyspark"] = pyspark.__version__
    result = {
        **info,
        "params": {"records": n, "size": size, "partitions": args.partitions, "master": args.master,
                   "trigger": args.trigger, "repeat": args.repeat},
        "fill_topic_s": fill_s,
        "session_start_s": session_s,
        "results": rows,
        "figures": [C.figure(f"{r['op']} | {w}", r[f"{w}_s"], "s", better="lower", vqs=w == "vqs")
                    for r in rows for w in ("vqs", "parquet") if r[f"{w}_s"] is not None],
    }
    print(f"## Spark — bench/spark_bench.py\n\n{C.run_header_md(info)}\n")
    print(f"{n:,} records x {size} B, {args.partitions} partitions, {args.master}, pyspark {pyspark.__version__}; "
          f"best of {args.repeat} after 2 warm-ups.\n")
    print(C.markdown_table(
        ["operation", "vqs s", "Parquet s", "vqs / Parquet", "vqs records/s", "vqs MB/s", "note"],
        [[r["op"], f"{r['vqs_s']:.2f}", "-" if r["parquet_s"] is None else f"{r['parquet_s']:.2f}",
          C.fmt_ratio(r["ratio_vs_parquet"]), C.fmt_num(r["vqs_records_per_s"]), f"{r['vqs_mb_per_s']:.1f}",
          r.get("note", "")] for r in rows],
        right=[1, 2, 3, 4, 5]))
    ops = {r["op"]: r for r in rows}
    if "url sum(len)" in ops and "read sum(len)" in ops:
        u = ops["read sum(len)"]["vqs_s"] / ops["url sum(len)"]["vqs_s"]
        result["url_vs_path"] = u
        print(f"\nBar (issue 35), url mode >= 0.5 x path mode (read sum(len), JVM reader): {u:.2f}x: "
              f"{'pass' if u >= 0.5 else 'FAIL'}")
    if py_row is None:
        C.write_json(args.json, result)
        return 0
    inter = py_row["interleaved"]
    nb = py_row["arrow_batches"]
    print(f"\nThe Python source and the one-column floor timed in alternation ({len(inter['py proj']['runs_s'])} "
          f"rounds, one run of each per round, the order reversed every other round); both run {args.partitions} "
          f"tasks of {n // args.partitions:,} rows, in {nb['py proj']} and {nb['API floor 1 col']} Arrow batches:\n")
    print(C.markdown_table(
        ["query", "best s", "median s", "floor / query, best", "floor / query, median"],
        [[q, f"{v['best_s']:.2f}", f"{v['median_s']:.2f}",
          C.fmt_ratio(inter["API floor 1 col"]["best_s"] / v["best_s"]),
          C.fmt_ratio(inter["API floor 1 col"]["median_s"] / v["median_s"])] for q, v in inter.items()],
        right=[1, 2, 3, 4]))
    b, m = py_row["ratio_vs_floor_interleaved_best"], py_row["ratio_vs_floor_interleaved_median"]
    print(f"\nBar (issue 14), Python source >= 0.9 x the one-column API floor, best and median: "
          f"{b:.2f}x / {m:.2f}x: {'pass' if min(b, m) >= 0.9 else 'FAIL'} (the median of the rounds' own "
          f"ratios, each round's two runs back to back: {py_row['ratio_vs_floor_paired_median']:.2f}x)")
    C.write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
