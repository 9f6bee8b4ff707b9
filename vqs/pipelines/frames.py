"""The frame job: JPEG frames in a VQS topic -> Structured Streaming -> features, events, alerts.

Four streaming queries, each exactly once across restarts (checkpoints, the
Parquet sink's log, the ``vqs`` sink's per-batch commit):

1. ``frame_features``: the frame topic (the JVM reader when the session has
   its jar; ``maxOffsetsPerTrigger`` micro-batches; key = camera, timestamp =
   capture time, header ``frame`` = frame number) -> a vectorised pandas UDF
   decodes each Arrow batch of JPEGs (vqs.pipelines.detect.features:
   brightness, sharpness, a thumbnail) -> ``applyInPandasWithState`` per
   camera: the camera's :class:`~vqs.pipelines.detect.Detector`, whose state
   (a few numbers and the previous frame's thumbnail) Spark keeps between
   micro-batches, computes motion against the previous frame and the events
   -> Parquet ``OUT/frames``: one row per frame (``kind = 'frame'``) and one
   per event (``kind`` = the event; its partition and offset are the frame's
   that confirmed it), thumbnails dropped.
2. ``frame_events``: ``OUT/frames`` as a file stream, event rows only ->
   Parquet ``OUT/events``.
3. ``frame_alerts``: the same rows -> the VQS topic ``alerts`` (key camera,
   value JSON), exactly once.
4. ``frame_windows``: the frame rows, per camera and 1 s event-time window with
   a 2 s watermark (late frames within it are counted in their window):
   frames received, bytes, late frames, mean motion, brightness and sharpness
   -> Parquet ``OUT/windows``. A window is written once the watermark passes
   it, so the last seconds of a run stay open until later frames come.

2, 3 and 4 start when 1 has finished (``availableNow``): they read what 1
committed. Within a micro-batch a camera's rows are sorted by offset (its
arrival order: one camera is one key, one partition) before the detector
sees them.

:func:`ground_truth` compares the events with the cameras' script.

On a topic of your own (values JPEG, key the camera, header ``frame``, as
vqs.pipelines.edge sends them)::

    python -m vqs.pipelines.frames --url http://127.0.0.1:8642 --out frames-out
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass

FEATURES = ("camera string, kind string, frame long, ts timestamp, partition int, offset long, bytes int, brightness double, "
            "sharpness double, motion double, late boolean, covered boolean, frozen boolean")
_COLS = [c.split()[0] for c in FEATURES.split(", ")]
STATE = "d string, thumb binary"
WINDOW, WATERMARK = "1 second", "2 seconds"
DECODED = "brightness double, sharpness double, thumb binary"


def _decode(values):
    """pandas UDF body: a Series of JPEG bytes -> a DataFrame of DECODED (nulls for a
    frame that does not decode)."""
    import pandas as pd

    from .detect import features

    out = {"brightness": [], "sharpness": [], "thumb": []}
    for v in values:
        try:
            b, s, th, _, _ = features(bytes(v))
        except Exception:  # not a JPEG: the frame's features are null, the job goes on
            b, s, th = None, None, None
        out["brightness"].append(b)
        out["sharpness"].append(s)
        out["thumb"].append(th)
    return pd.DataFrame(out)


def _detect(key, pdfs, state):
    """applyInPandasWithState body: one camera's rows of a micro-batch, in offset order,
    through its Detector (state: the detector's JSON and the previous thumbnail)."""
    import math
    import warnings

    import pandas as pd

    from .detect import Detector

    # Spark's worker concatenates the frames this yields, some with all-NA columns (event
    # rows carry no features); pandas warns that it will keep their dtypes one day, which
    # changes nothing for these columns
    warnings.filterwarnings("ignore", message="The behavior of DataFrame concatenation with empty or all-NA",
                            category=FutureWarning)
    camera = key[0]
    parts = [p for p in pdfs if len(p)]
    if not parts:
        return
    pdf = (pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]).sort_values("offset")
    det = Detector.loads(*state.get) if state.exists else Detector()
    rows = []
    for r in pdf.itertuples(index=False):
        ts_ms = int(pd.Timestamp(r.ts).value // 1_000_000)
        if r.thumb is None or (isinstance(r.brightness, float) and math.isnan(r.brightness)):
            rows.append((camera, "frame", r.frame, r.ts, r.partition, r.offset, r.bytes, None, None, None, None, None,
                         None))
            continue
        motion, late, covered, frozen, events = det.step(int(r.frame), ts_ms, float(r.brightness),
                                                         float(r.sharpness), bytes(r.thumb))
        rows.append((camera, "frame", r.frame, r.ts, r.partition, r.offset, r.bytes, r.brightness, r.sharpness, motion,
                     late, covered, frozen))
        for kind, f, t in events:
            rows.append((camera, kind, f, pd.Timestamp(t, unit="ms"), r.partition, r.offset, None, None, None,
                         None, None, None, None))
    state.update((det.dumps(), det.prev_thumb))
    yield pd.DataFrame(rows, columns=_COLS)


def source_options(path: str | None, url: str | None, token: str | None = None) -> dict:
    if bool(path) == bool(url):
        raise SystemExit("give exactly one of --path (a data directory) or --url (a VQS server)")
    opts = {"path": path} if path else {"url": url}
    if token:
        opts["token"] = token
    return opts


def build_features(spark, src_opts: dict, topic: str, *, max_offsets: int):
    """The per-frame features and events of the frame topic (a streaming DataFrame of FEATURES)."""
    from pyspark.sql import functions as F
    from pyspark.sql.functions import pandas_udf

    decode = pandas_udf(_decode, DECODED)
    raw = (spark.readStream.format("vqs").options(**src_opts).option("topic", topic)
           .option("includeHeaders", "true").option("startingOffsets", "earliest")
           .option("maxOffsetsPerTrigger", str(max_offsets)).load())
    frames = raw.select(
        F.col("key").cast("string").alias("camera"),
        F.expr("cast(cast(filter(headers, h -> h.key = 'frame')[0].value as string) as long)").alias("frame"),
        F.col("timestamp").alias("ts"), "partition", "offset", F.length("value").alias("bytes"),
        decode("value").alias("f"),
    ).select("camera", "frame", "ts", "partition", "offset", "bytes", "f.*")
    return frames.groupBy("camera").applyInPandasWithState(
        _detect, outputStructType=FEATURES, stateStructType=STATE, outputMode="append", timeoutConf="NoTimeout")


@dataclass
class JobResult:
    batches: int
    frames: int
    bytes: int
    events: int
    alerts: int
    windows: int
    seconds: float            # the features query (read, decode, detect, write)
    total_seconds: float      # all four queries
    out: str
    alerts_topic: str


def _await(queries, on_progress, timeout_s):
    t0 = time.perf_counter()
    seen = set()

    def report():
        for q in queries:
            for p in q.recentProgress:
                k = (q.name, p["batchId"])
                if k not in seen:
                    seen.add(k)
                    if on_progress:
                        on_progress(q.name, p)
    try:
        while any(q.isActive for q in queries):
            report()
            if timeout_s is not None and time.perf_counter() - t0 > timeout_s:
                break
            queries[0].awaitTermination(0.5)
        report()
    finally:
        for q in queries:
            if q.isActive:
                q.stop()
    for q in queries:
        if q.exception() is not None:
            raise RuntimeError(f"query {q.name} failed: {q.exception()}")


def run(spark, *, path=None, url=None, token=None, topic="frames", alerts_topic="alerts", out="frames-out",
        max_offsets=400, timeout_s: float | None = None, on_progress=None) -> JobResult:
    """Run the four queries to completion (``availableNow``); see the module doc."""
    from pyspark.sql import functions as F

    src = source_options(path, url, token)
    out = os.path.abspath(out)
    frames_path, events_path = os.path.join(out, "frames"), os.path.join(out, "events")
    ck = os.path.join(out, "checkpoints")

    t0 = time.perf_counter()
    q1 = (build_features(spark, src, topic, max_offsets=max_offsets).writeStream.format("parquet")
          .outputMode("append").option("path", frames_path).option("checkpointLocation", os.path.join(ck, "frames"))
          .trigger(availableNow=True).queryName("frame_features").start())
    _await([q1], on_progress, timeout_s)
    seconds = time.perf_counter() - t0
    progress = [p for p in q1.recentProgress if p["numInputRows"]]

    if os.path.isdir(frames_path):
        ev = (spark.readStream.schema(FEATURES).parquet(frames_path).where(F.col("kind") != "frame")
              .select("camera", "kind", "frame", "ts", "partition", "offset"))
        q2 = (ev.writeStream.format("parquet").outputMode("append").option("path", events_path)
              .option("checkpointLocation", os.path.join(ck, "events")).trigger(availableNow=True)
              .queryName("frame_events").start())
        alerts = ev.select(F.col("camera").alias("key"),
                           F.to_json(F.struct("camera", "kind", "frame",
                                              F.unix_millis("ts").alias("ts_ms"))).alias("value"))
        q3 = (alerts.writeStream.format("vqs").options(**src).option("topic", alerts_topic)
              .option("topicPartitions", "1").outputMode("append")
              .option("checkpointLocation", os.path.join(ck, "alerts")).trigger(availableNow=True)
              .queryName("frame_alerts").start())
        # Several batches, so that the watermark moves and closes windows on the way (a
        # window is written in the batch after the one that moved the watermark past it).
        files = sum(1 for f in os.listdir(frames_path) if f.endswith(".parquet"))
        win = (spark.readStream.schema(FEATURES).option("maxFilesPerTrigger", str(max(1, -(-files // 4))))
               .parquet(frames_path)
               .where(F.col("kind") == "frame").withWatermark("ts", WATERMARK)
               .groupBy("camera", F.window("ts", WINDOW).alias("w"))
               .agg(F.count("*").alias("frames"), F.sum("bytes").alias("bytes"),
                    F.sum(F.when(F.col("late"), 1).otherwise(0)).alias("late"),
                    F.avg("motion").alias("motion"), F.avg("brightness").alias("brightness"),
                    F.avg("sharpness").alias("sharpness"))
               .select("camera", F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"),
                       "frames", "bytes", "late", "motion", "brightness", "sharpness"))
        q4 = (win.writeStream.format("parquet").outputMode("append").option("path", os.path.join(out, "windows"))
              .option("checkpointLocation", os.path.join(ck, "windows")).trigger(availableNow=True)
              .queryName("frame_windows").start())
        _await([q2, q3, q4], on_progress, timeout_s)

    total = time.perf_counter() - t0
    n_frames = n_bytes = n_events = 0
    if os.path.isdir(frames_path):
        df = spark.read.schema(FEATURES).parquet(frames_path)
        row = df.where(F.col("kind") == "frame").agg(F.count("*").alias("n"), F.sum("bytes").alias("b")).first()
        n_frames, n_bytes = row["n"], row["b"] or 0
    if os.path.isdir(events_path):
        n_events = spark.read.parquet(events_path).count()
    win_path = os.path.join(out, "windows")
    n_windows = spark.read.parquet(win_path).count() if os.path.isdir(win_path) else 0
    n_alerts = spark.read.format("vqs").options(**src).option("topic", alerts_topic).load().count() \
        if n_events or _topic_exists(src, alerts_topic) else 0
    return JobResult(len(progress), n_frames, n_bytes, n_events, n_alerts, n_windows, seconds, total, out,
                     alerts_topic)


def _topic_exists(src: dict, topic: str) -> bool:
    from ..errors import TopicDoesNotExist

    if "url" in src:
        from ..client import Client

        owner = Client(src["url"], token=src.get("token"))
    else:
        from ..broker import Broker

        owner = Broker(src["path"])
    try:
        owner.topic(topic)
        return True
    except TopicDoesNotExist:
        return False
    finally:
        owner.close()


def events_of(spark, out: str) -> list[dict]:
    """The detected events (``OUT/events``): camera, kind, frame, ts_ms, and the partition
    and offset of the frame that confirmed it."""
    from pyspark.sql import functions as F

    p = os.path.join(os.path.abspath(out), "events")
    if not os.path.isdir(p):
        return []
    return [r.asDict() for r in spark.read.parquet(p).select(
        "camera", "kind", "frame", F.unix_millis("ts").alias("ts_ms"), "partition", "offset",
    ).orderBy("camera", "ts_ms").collect()]


def alerts_of(spark, src: dict, topic: str) -> list[dict]:
    a = spark.read.format("vqs").schema("value binary").options(**src).option("topic", topic).load()
    return [json.loads(bytes(r.value)) for r in a.collect()]


def ground_truth(cams, detected: list[dict], *, tolerance_ms: int = 1000) -> dict:
    """Every scripted event against the detected ones (vqs.pipelines.detect.score)."""
    from .detect import score

    return score([t for c in cams for t in c.truth], detected, tolerance_ms=tolerance_ms)


def format_truth(sc: dict) -> list[str]:
    """The ground-truth table as text lines."""
    lines = [f"{'camera':<8} {'event':<13} {'frame':>6} {'found':<6} {'error':>8}"]
    for r in sc["rows"]:
        err = "-" if r["error_ms"] is None else f"{r['error_ms']:+d} ms"
        lines.append(f"{r['camera']:<8} {r['kind']:<13} {r['frame']:>6} {'yes' if r['found'] else 'NO':<6} {err:>8}")
    for f in sc["false_alarms"]:
        lines.append(f"{f['camera']:<8} {f['kind']:<13} {f['frame']:>6} {'FALSE ALARM'}")
    errs = [abs(r["error_ms"]) for r in sc["rows"] if r["found"]]
    lines.append(f"{sc['found']}/{sc['truth']} scripted events found, {len(sc['false_alarms'])} false alarms, "
                 f"time error mean {sum(errs) / max(1, len(errs)):.0f} ms, max {max(errs, default=0)} ms")
    return lines


def curves_of(spark, out: str, *, max_points: int = 1500) -> dict[str, list[dict]]:
    """Each camera's features over capture time, averaged in time buckets so that a camera
    has at most ``max_points`` points: camera -> [{ts_ms, motion, brightness, sharpness}]."""
    from pyspark.sql import functions as F

    p = os.path.join(os.path.abspath(out), "frames")
    if not os.path.isdir(p):
        return {}
    df = spark.read.schema(FEATURES).parquet(p).where(F.col("kind") == "frame").withColumn(
        "ms", F.unix_millis("ts"))
    lo, hi = df.agg(F.min("ms"), F.max("ms")).first()
    if lo is None:
        return {}
    bucket = max(1, -(-(hi - lo + 1) // max(1, max_points)))
    rows = (df.groupBy("camera", F.floor((F.col("ms") - lo) / bucket).alias("b"))
            .agg(F.min("ms").alias("ts_ms"), F.avg("motion").alias("motion"),
                 F.avg("brightness").alias("brightness"), F.avg("sharpness").alias("sharpness"))
            .orderBy("camera", "b").collect())
    out_: dict[str, list[dict]] = {}
    for r in rows:
        out_.setdefault(r.camera, []).append({"ts_ms": r.ts_ms, "motion": r.motion, "brightness": r.brightness,
                                              "sharpness": r.sharpness})
    return out_


def thumbnails_of(src: dict, topic: str, events: list[dict], *, limit: int = 200) -> dict[tuple, bytes]:
    """(partition, offset) -> a small JPEG of that frame of ``topic``, for the first ``limit`` events."""
    from .report import thumbnail

    if "url" in src:
        from ..client import Client

        owner = Client(src["url"], token=src.get("token"))
    else:
        from ..broker import Broker

        owner = Broker(src["path"])
    out: dict[tuple, bytes] = {}
    try:
        t = owner.topic(topic)
        for e in events[:limit]:
            k = (e["partition"], e["offset"])
            if k in out or k[0] is None:
                continue
            recs = t.read(k[0], k[1], max_records=1)
            if recs and recs[0].offset == k[1] and recs[0].value:
                try:
                    out[k] = thumbnail(recs[0].value)
                except Exception:  # not an image: no thumbnail
                    pass
    finally:
        owner.close()
    return out


# ------------------------------------------------------------------ CLI
def main(argv=None) -> int:
    """``python -m vqs.pipelines.frames`` / ``vqs pipeline frames``: the job on a topic, then its report."""
    ap = argparse.ArgumentParser(prog="python -m vqs.pipelines.frames", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--path", help="a VQS data directory (no server may own it)")
    g.add_argument("--url", help="a VQS server, e.g. http://127.0.0.1:8642")
    ap.add_argument("--token", help="bearer token for --url")
    ap.add_argument("--topic", default="frames")
    ap.add_argument("--alerts-topic", default="alerts")
    ap.add_argument("--out", default="frames-out", help="Parquet, checkpoints and report.html go here")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=400)
    ap.add_argument("--master", default="local[2]", help="local[N], or spark://HOST:PORT (read with --url there)")
    args = ap.parse_args(argv)

    from pyspark.sql import SparkSession

    from .camera import make_session
    from .report import write_report

    had = SparkSession.getActiveSession() is not None  # (a caller's session is left running)
    spark = make_session(args.master, "vqs-frame-job")
    src = source_options(args.path, args.url, args.token)
    try:
        def progress(name, p):
            if p["numInputRows"] and name == "frame_features":
                print(f"  batch {p['batchId']:>3}: {p['numInputRows']:>6,} frames "
                      f"({p.get('processedRowsPerSecond') or 0:,.0f}/s)", flush=True)

        res = run(spark, path=args.path, url=args.url, token=args.token, topic=args.topic,
                  alerts_topic=args.alerts_topic, out=args.out, max_offsets=args.max_offsets_per_trigger,
                  on_progress=progress)
        detected = events_of(spark, args.out)
        page = write_report(os.path.join(res.out, "report.html"), curves_of(spark, args.out), detected, None,
                            thumbnails_of(src, args.topic, detected), subtitle=f"topic {args.topic!r}")
    finally:
        if not had:
            spark.stop()
    print(f"{res.frames:,} frames ({res.bytes / 1e6:,.1f} MB) in {res.batches} micro-batches, {res.seconds:.1f} s "
          f"({res.frames / max(res.seconds, 1e-9):,.0f} frames/s); {res.events} events -> {res.out}/events; "
          f"{res.alerts} alerts in topic {res.alerts_topic!r}")
    for e in detected[:20]:
        print(f"  {e['camera']}  {e['kind']:<13} frame {e['frame']}")
    print(f"report: {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
