#!/usr/bin/env python
"""Frame pipeline benchmark: frames/s and MB/s at each stage, the limiting stage named.

Frames of ``--cameras`` synthetic cameras (vqs.pipelines.scene, ``--seconds`` at
``--resolution``) are rendered once, then each stage is timed on them alone:

* ``render+encode``   the cameras themselves (numpy scene, Pillow JPEG), one thread;
* ``edge put``        ``HybridQueue.put`` of every frame into its camera's queue
                      (``--edge-memory-mb`` each: the rest spills to disk);
* ``edge get``        draining those queues (``get_batch``: memory, then disk);
* ``forward``         the idempotent producer's ``send_batch`` (16 frames a
                      request) to a local server: the server's append included;
* ``spark read url``  ``sum(length(value))`` over the topic through the server
                      (the JVM reader when loaded);
* ``spark read parquet`` the same frames as a Parquet file, the same query;
* ``UDF url``         read + the job's decode UDF (vqs.pipelines.frames), per
                      frame brightness/sharpness/thumbnail, summed;
* ``UDF parquet``     the same over the Parquet copy;
* ``job``             the streaming job over the topic: its features query
                      (decode, per-camera detector in Spark state, Parquet),
                      and all four queries (+ events, alerts, windows).

Bars (issue 35): each VQS stage (edge put, edge get, forward, spark read url)
>= 2x the UDF stage's rate; the UDF over Parquet at most 1.25x the UDF over
url (the source is not the bottleneck). Prints Markdown for bench/RESULTS.md
and writes JSON (``--json``) with ``figures`` for bench/ab.py.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import _common as C  # before any vqs import: it decides which vqs is measured


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cameras", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--resolution", default="640x360")
    ap.add_argument("--fps", type=int, default=25)
    ap.add_argument("--edge-memory-mb", type=float, default=4.0)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=400)
    ap.add_argument("--dir", default=None, help="work directory (default: a temporary one, removed after)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 2 cameras x 6 s at 320x180")
    ap.add_argument("--json", default=os.path.join(C.HERE, "pipeline_bench.json"),
                    help="where to write the results (default bench/pipeline_bench.json; '' for none)")
    args = ap.parse_args(argv)
    if args.quick:
        args.cameras, args.seconds, args.resolution = 2, 6, "320x180"
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    info = C.run_info("pipeline_bench", argv, __file__)
    from vqs import Client, HybridQueue
    from vqs.pipelines import frames as job
    from vqs.pipelines import scene
    from vqs.pipelines.demo import LocalServer
    from vqs.pipelines.edge import FRAME_HEADER, _frame_size

    cams = scene.cameras(args.cameras, resolution=args.resolution, fps=args.fps, seconds=args.seconds)
    rows: dict[str, tuple[int, int, float]] = {}  # stage -> (frames, bytes, seconds)

    C.note("rendering ...")
    t0 = time.perf_counter()
    per_cam = {c.name: list(c.frames()) for c in cams}
    render_s = time.perf_counter() - t0
    n = sum(len(v) for v in per_cam.values())
    nbytes = sum(len(f.jpeg) for v in per_cam.values() for f in v)
    rows["render+encode"] = (n, nbytes, render_s)

    with C.scratch_dir("vqs-pipeline-bench-", args.dir) as work:
        C.note("edge put/get ...")
        qs = {name: HybridQueue(os.path.join(work, "edge", name), memory_items=None,
                                memory_bytes=int(args.edge_memory_mb * (1 << 20)), sizeof=_frame_size)
              for name in per_cam}
        t0 = time.perf_counter()
        for name, frs in per_cam.items():
            put = qs[name].put
            for f in frs:
                put((f.frame, f.ts_ms, f.jpeg))
        rows["edge put"] = (n, nbytes, time.perf_counter() - t0)
        spilled = sum(q.metrics.spilled for q in qs.values())
        t0 = time.perf_counter()
        for q in qs.values():
            while q.get_batch(64, block=False):
                pass
        rows["edge get"] = (n, nbytes, time.perf_counter() - t0)
        for q in qs.values():
            q.close()

        server = LocalServer(os.path.join(work, "data"), os.path.join(work, "server.log")).start()
        spark = None
        try:
            C.note("forward ...")
            with Client(server.url) as client:
                client.create_topic("frames", partitions=min(4, args.cameras))
                prod = client.producer(idempotent=True)
                t0 = time.perf_counter()
                for name, frs in per_cam.items():
                    for i in range(0, len(frs), 16):
                        chunk = frs[i:i + 16]
                        prod.send_batch("frames", [f.jpeg for f in chunk], keys=[name.encode()] * len(chunk),
                                        headers=[[(FRAME_HEADER, b"%d" % f.frame)] for f in chunk],
                                        timestamps_ms=[f.ts_ms for f in chunk])
                rows["forward (idempotent, server append)"] = (n, nbytes, time.perf_counter() - t0)

            C.note("spark ...")
            spark = job_session(args.master)
            from pyspark.sql import functions as F
            from pyspark.sql.functions import pandas_udf

            import vqs.spark

            src = spark.read.format("vqs").option("url", server.url).option("topic", "frames")
            pq = os.path.join(work, "frames.parquet")
            src.load().select("key", "value", "timestamp").write.parquet(pq)
            decode = pandas_udf(job._decode, job.DECODED)

            def q_read(df):
                return df.select(F.sum(F.length("value"))).first()[0]

            def q_udf(df):
                return df.select(decode("value").alias("f")).select(F.sum("f.brightness")).first()[0]

            for name, make in (("spark read url", lambda: src.load()), ("spark read parquet", lambda: spark.read.parquet(pq))):
                q_read(make())  # warm-up
                rows[name] = (n, nbytes, C.timed(lambda m=make: q_read(m())))
            for name, make in (("UDF url", lambda: src.load()), ("UDF parquet", lambda: spark.read.parquet(pq))):
                q_udf(make())
                rows[name] = (n, nbytes, C.timed(lambda m=make: q_udf(m())))
            res = job.run(spark, url=server.url, out=os.path.join(work, "out"),
                          max_offsets=args.max_offsets_per_trigger)
            rows["job: features query (read, decode, detect, Parquet)"] = (res.frames, res.bytes, res.seconds)
            rows["job: all four queries (+ events, alerts, windows)"] = (res.frames, res.bytes, res.total_seconds)
            jvm = vqs.spark.jvm_reader_loaded(spark)
        finally:
            if spark is not None:
                spark.stop()
            server.stop()

    rates = {k: (f / s, b / s / 1e6) for k, (f, b, s) in rows.items()}
    udf = rates["UDF url"][0]
    vqs_stages = ["edge put", "edge get", "forward (idempotent, server append)", "spark read url"]
    limiting = min(rates, key=lambda k: rates[k][0])
    bars = [{"bar": f"{k} >= 2x UDF url", "value": rates[k][0] / udf, "target": ">= 2", "ok": rates[k][0] >= 2 * udf}
            for k in vqs_stages]
    ratio = rates["UDF parquet"][0] / udf
    bars.append({"bar": "UDF parquet / UDF url", "value": ratio, "target": "<= 1.25", "ok": ratio <= 1.25})

    print(C.run_header_md(info))
    print(f"- frames: {n:,} ({nbytes / 1e6:,.1f} MB, {nbytes / n / 1024:.1f} KiB avg) from {args.cameras} cameras x "
          f"{args.seconds:g} s at {args.resolution}, {args.fps} fps; edge spilled {spilled:,}; reader: "
          f"{'JVM' if jvm else 'Python'}")
    print()
    print(C.markdown_table(["stage", "frames/s", "MB/s", "seconds"],
                           [[k, C.fmt_num(rates[k][0]), C.fmt_num(rates[k][1], 1), f"{rows[k][2]:.2f}"]
                            for k in rows], right=[1, 2, 3]))
    print()
    print(f"limiting stage: {limiting} ({rates[limiting][0]:,.0f} frames/s)")
    print()
    print(C.bars_table(bars))
    C.write_json(args.json, {**info, "stages": {k: {"frames": f, "bytes": b, "seconds": s}
                                                for k, (f, b, s) in rows.items()},
                             "limiting": limiting, "bars": bars,
                             "figures": [C.figure(f"{k} frames/s", rates[k][0], "frames/s") for k in rates]})
    return 0


def job_session(master: str):
    os.environ["PYTHONPATH"] = C.child_env()["PYTHONPATH"]  # Spark's Python workers: the measured vqs
    from vqs.pipelines.camera import make_session

    return make_session(master, "vqs-pipeline-bench")


if __name__ == "__main__":
    sys.exit(main())
