"""The video-frame pipeline: camera frame events -> VQS topic -> Structured Streaming.

The workload the original HybridQueue was built for. Cameras emit one event per
video frame (camera id, frame number, capture timestamp, frame type I/P/B,
byte size). The network drops some frames (gaps in frame numbers) and delivers
some late (after frames captured later). Events land in a VQS topic keyed by
camera, so a camera's frames stay in order in one partition.

The Structured Streaming job reads the topic with ``maxOffsetsPerTrigger``,
and per camera and event-time window (with a watermark, so late frames within
it are counted and later ones are dropped) computes frames, fps, bytes/s,
key frames, dropped frames and late arrivals. It writes the windows to Parquet
and publishes an alert to a VQS topic for each window whose fps or drop rate is
out of bounds. Both outputs are exactly once across restarts (checkpoints, the
Parquet sink's log, the ``vqs`` sink's per-batch commit).

Works on a data directory (``--path``) or a VQS server (``--url``)::

    python -m vqs.pipelines.camera feed --url http://127.0.0.1:8642 --cameras 8 --seconds 60
    python -m vqs.pipelines.camera run  --url http://127.0.0.1:8642 --out demo-data/camera
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from dataclasses import dataclass

FRAME_SCHEMA = "camera string, frame long, ts long, type string, bytes long"
EOS = "EOS"  # end-of-stream marker: advances the watermark so the last windows close


# ------------------------------------------------------------------ the feed
_EVENT_KEYS = {"camera", "frame", "ts", "type", "bytes"}


def _is_frame_event(value: bytes | None) -> bool:
    try:
        doc = json.loads(value)
    except (TypeError, ValueError):
        return False
    return isinstance(doc, dict) and doc.keys() >= _EVENT_KEYS

@dataclass
class FeedStats:
    cameras: int
    frames_sent: int
    frames_dropped: int
    frames_late: int
    first_ts: int
    last_ts: int


def generate(cameras: int = 8, seconds: int = 60, *, start_ms: int | None = None, seed: int = 7,
             drop_rate: float = 0.01, late_rate: float = 0.02, gop: int = 25):
    """Yield ``(arrival_ms, camera, event)`` in arrival order; returns FeedStats
    (as StopIteration.value). Camera ``cam-02`` has a burst of heavy loss, and
    ``cam-05`` runs below its nominal rate for a while: the alerts to expect."""
    rng = random.Random(seed)
    if start_ms is None:  # recent, aligned to 10 s so that windows are whole
        start_ms = (int(time.time() * 1000) - seconds * 1000) // 10_000 * 10_000
    start = start_ms
    events = []
    dropped = late = 0
    for c in range(cameras):
        cam = f"cam-{c:02d}"
        fps = 30 if c % 3 == 0 else 25
        period = 1000 / fps
        n = int(seconds * fps)
        burst = (seconds * 0.4, seconds * 0.55) if c == 2 else None
        slow = (seconds * 0.6, seconds * 0.8) if c == 5 else None
        for f in range(n):
            ts = start + int(f * period)
            t_rel = f / fps
            p_drop = drop_rate
            if burst and burst[0] <= t_rel < burst[1]:
                p_drop = 0.35
            if slow and slow[0] <= t_rel < slow[1] and f % 3 == 0:
                p_drop = 1.0  # a third of the frames never made it: ~2/3 of nominal fps
            if rng.random() < p_drop:
                dropped += 1
                continue
            kind = "I" if f % gop == 0 else ("P" if f % 3 == 0 else "B")
            size = int(max(500, rng.gauss({"I": 60_000, "P": 9_000, "B": 3_500}[kind], 800)))
            delay = rng.uniform(5, 60)
            if rng.random() < late_rate:
                delay += rng.uniform(1_000, 9_000)  # some beyond a 5 s watermark
                late += 1
            events.append((ts + delay, cam, {"camera": cam, "frame": f, "ts": ts, "type": kind, "bytes": size}))
    events.sort(key=lambda e: e[0])
    end = start + seconds * 1000
    last_arrival = events[-1][0] if events else end
    for c in range(cameras):
        cam = f"cam-{c:02d}"
        # one end-of-stream marker per camera, far enough ahead to close every window
        events.append((last_arrival + 1, cam, {"camera": cam, "frame": -1, "ts": end + 60_000, "type": EOS, "bytes": 0}))
    yield from events
    return FeedStats(cameras, len(events) - cameras, dropped, late, start, end)


class _Producer:
    """Appends to a topic in a data dir (Broker) or on a server (Client)."""

    def __init__(self, path: str | None, url: str | None, token: str | None = None):
        if url:
            from ..client import Client

            self._owner = Client(url, token=token)
        else:
            from ..broker import Broker

            self._owner = Broker(path)
        self._p = self._owner.producer()

    def ensure_topic(self, name: str, partitions: int) -> None:
        """Create ``name``, or check that the topic there holds camera frame events: the last
        record of each partition is one (frames appended to an unrelated topic would be
        counted as frames by the job)."""
        from ..errors import ConfigError, TopicAlreadyExists, TopicDoesNotExist

        try:
            t = self._owner.topic(name)
        except TopicDoesNotExist:
            try:
                self._owner.create_topic(name, partitions=partitions)
            except TopicAlreadyExists:
                pass
            return
        for row in self._owner.offsets(name):
            p, end = row["partition"], row["end_offset"]
            if end <= row["start_offset"]:
                continue
            recs = t.read(p, end - 1, max_records=1)
            if recs and not _is_frame_event(recs[-1].value):
                raise ConfigError(f"topic {name!r} holds records that are not camera frame events (partition {p}, "
                                  f"offset {end - 1}); give the feed a topic of its own (--topic)")

    def send(self, topic, values, keys, timestamps):
        self._p.send_batch(topic, values, keys=keys, timestamps_ms=timestamps)

    def close(self) -> None:
        try:
            self._p.flush()
        finally:
            self._owner.close()


def feed(*, path=None, url=None, token=None, topic="frames", partitions=4, cameras=8, seconds=60,
         batch=2000, start_ms=None, seed=7, on_progress=None) -> FeedStats:
    """Append the generated frame events to ``topic`` (created if missing)."""
    prod = _Producer(path, url, token)
    try:
        prod.ensure_topic(topic, partitions)
        gen = generate(cameras, seconds, start_ms=start_ms, seed=seed)
        values, keys, tss = [], [], []
        sent = 0
        # Events of one camera share a key, hence a partition; send_batch groups by partition.
        while True:
            try:
                arrival, cam, ev = next(gen)
            except StopIteration as stop:
                stats = stop.value
                break
            values.append(json.dumps(ev, separators=(",", ":")).encode())
            keys.append(cam.encode())
            tss.append(int(arrival))
            if len(values) >= batch:
                prod.send(topic, values, keys, tss)
                sent += len(values)
                values, keys, tss = [], [], []
                if on_progress:
                    on_progress(sent)
        if values:
            prod.send(topic, values, keys, tss)
            sent += len(values)
            if on_progress:
                on_progress(sent)
        return stats
    finally:
        prod.close()


# ------------------------------------------------------------------ the job
def source_options(path: str | None, url: str | None, token: str | None = None) -> dict:
    if bool(path) == bool(url):
        raise SystemExit("give exactly one of --path (a data directory) or --url (a VQS server)")
    opts = {"path": path} if path else {"url": url}
    if token:
        opts["token"] = token
    return opts


def build_stats(spark, src_opts: dict, topic: str, *, max_offsets: int, window: str, watermark: str):
    """The windowed per-camera statistics of the frame topic (a streaming DataFrame)."""
    from pyspark.sql import functions as F

    window_s = _seconds(window)
    raw = (spark.readStream.format("vqs").options(**src_opts).option("topic", topic)
           .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(max_offsets)).load())
    ev = (raw.select(F.from_json(F.col("value").cast("string"), FRAME_SCHEMA).alias("e"),
                     F.col("timestamp").alias("arrived"))
          .select("e.*", "arrived")
          .withColumn("event_time", F.timestamp_millis("ts"))
          .withWatermark("event_time", watermark)
          # Drop the end-of-stream markers *after* the watermark saw them. The
          # predicate must reference the event-time column: Spark pushes any
          # other filter below the watermark, and the markers would not count.
          .where(F.when(F.col("event_time").isNotNull(), F.col("type")).otherwise(F.lit(EOS)) != F.lit(EOS)))
    late = (F.col("arrived").cast("double") - F.col("event_time").cast("double")) > 1.0
    agg = (ev.groupBy(F.window("event_time", window).alias("w"), "camera")
           .agg(F.count("*").alias("frames"),
                F.sum("bytes").alias("bytes"),
                F.sum(F.when(F.col("type") == "I", 1).otherwise(0)).alias("keyframes"),
                F.min("frame").alias("first_frame"),
                F.max("frame").alias("last_frame"),
                F.sum(F.when(late, 1).otherwise(0)).alias("late_frames")))
    return agg.select(
        "camera",
        F.col("w.start").alias("window_start"),
        F.col("w.end").alias("window_end"),
        "frames",
        (F.col("frames") / F.lit(window_s)).alias("fps"),
        (F.col("bytes") / F.lit(window_s)).alias("bytes_per_s"),
        "keyframes",
        (F.col("last_frame") - F.col("first_frame") + 1 - F.col("frames")).alias("dropped"),
        "late_frames",
    )


def alerts_of(stats, *, min_fps_ratio: float, max_drop_ratio: float):
    """Windows out of bounds, as ``key`` (camera) and ``value`` (JSON) for the vqs sink."""
    from pyspark.sql import functions as F

    # Nominal rate: the camera's frames (received + dropped) per second of window.
    nominal = (F.col("frames") + F.col("dropped")) / (F.col("window_end").cast("long") - F.col("window_start").cast("long"))
    drop_ratio = F.col("dropped") / (F.col("frames") + F.col("dropped"))
    reason = (F.when(drop_ratio > max_drop_ratio, F.lit("dropped_frames"))
              .when(F.col("fps") < nominal * min_fps_ratio, F.lit("low_fps")))
    out = stats.withColumn("reason", reason).where(F.col("reason").isNotNull())
    return out.select(
        F.col("camera").alias("key"),
        F.to_json(F.struct("camera", "window_start", "window_end", "fps", "dropped", "frames", "reason")).alias("value"),
    )


def _seconds(spec: str) -> float:
    n, unit = spec.split()
    mult = {"second": 1, "seconds": 1, "minute": 60, "minutes": 60}[unit.lower()]
    return float(n) * mult


def make_session(master: str = "local[2]", app: str = "vqs-camera-pipeline"):
    """The job's session, built with :func:`vqs.spark.session`: the JVM reader's
    jar on ``spark.jars`` (Spark ships it to a cluster's executors), so the frames
    are read in the JVM and no Python process runs the stream's source on the
    driver (Spark gives such a process 10 s to connect back, which a loaded machine
    can miss), and ``spark.pyspark.python`` set to this interpreter, so executors
    on a standalone cluster (vqs.pipelines.cluster) start their Python workers
    (the ``vqs`` sink's) with it and find vqs without an activated venv."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from .. import spark as vqs_spark

    conf = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2", "spark.sql.session.timeZone": "UTC"}
    if master.startswith("spark://"):
        conf["spark.driver.host"] = os.environ["SPARK_LOCAL_IP"]
    spark = vqs_spark.session(master, app, conf)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@dataclass
class RunResult:
    batches: int
    frames_read: int
    stats_path: str
    windows: int
    alerts: int
    alerts_topic: str
    seconds: float


def run(spark, *, path=None, url=None, token=None, topic="frames", alerts_topic="camera-alerts", out="camera-out",
        max_offsets=5000, window="10 seconds", watermark="5 seconds", trigger: str = "availableNow",
        timeout_s: float | None = None, min_fps_ratio=0.9, max_drop_ratio=0.05, on_progress=None) -> RunResult:
    """Run the two streaming queries (stats -> Parquet, alerts -> VQS topic)
    until they finish (``trigger="availableNow"``) or ``timeout_s`` passes."""
    src = source_options(path, url, token)
    out = os.path.abspath(out)  # executors on a cluster write here, and their working dir is not ours
    stats_path = os.path.join(out, "stats")
    ck = os.path.join(out, "checkpoints")
    stats = build_stats(spark, src, topic, max_offsets=max_offsets, window=window, watermark=watermark)

    def trig(w):
        return w.trigger(availableNow=True) if trigger == "availableNow" else w.trigger(processingTime=trigger)

    t0 = time.perf_counter()
    q_stats = trig(stats.writeStream.format("parquet").outputMode("append").option("path", stats_path)
                   .option("checkpointLocation", os.path.join(ck, "stats"))).queryName("camera_stats").start()
    q_alerts = trig(alerts_of(stats, min_fps_ratio=min_fps_ratio, max_drop_ratio=max_drop_ratio)
                    .writeStream.format("vqs").options(**src).option("topic", alerts_topic)
                    .option("topicPartitions", "1").outputMode("append")
                    .option("checkpointLocation", os.path.join(ck, "alerts"))).queryName("camera_alerts").start()
    queries = [q_stats, q_alerts]
    seen = set()

    def report_new_progress() -> None:
        for q in queries:
            for p in q.recentProgress:
                k = (q.name, p["batchId"])
                if k not in seen:
                    seen.add(k)
                    if on_progress:
                        on_progress(q.name, p)

    try:
        while any(q.isActive for q in queries):
            report_new_progress()
            if timeout_s is not None and time.perf_counter() - t0 > timeout_s:
                break
            time.sleep(0.5)
        report_new_progress()
    finally:
        for q in queries:
            if q.isActive:
                q.stop()
    for q in queries:
        if q.exception() is not None:
            raise RuntimeError(f"query {q.name} failed: {q.exception()}")
    elapsed = time.perf_counter() - t0
    frames = sum(p["numInputRows"] for p in q_stats.recentProgress)
    batches = len([p for p in q_stats.recentProgress if p["numInputRows"]])
    windows = spark.read.parquet(stats_path).count() if os.path.isdir(stats_path) else 0
    alerts = (spark.read.format("vqs").options(**src).option("topic", alerts_topic).load().count())
    return RunResult(batches, frames, stats_path, windows, alerts, alerts_topic, elapsed)


def summarize(spark, result: RunResult, *, path=None, url=None, token=None, limit: int = 8) -> dict:
    """Per-camera totals (``cameras``) and every window (``windows``: camera,
    window_start/window_end in epoch ms, fps, dropped) from the Parquet output, and
    the alerts of the alert topic (``all_alerts``), latest window first (then by
    camera); ``alerts`` is the first ``limit`` of them."""
    from pyspark.sql import functions as F

    per_cam, windows = [], []
    if result.windows:
        df = spark.read.parquet(result.stats_path)
        per_cam = [r.asDict() for r in df.groupBy("camera").agg(
            F.count("*").alias("windows"),
            F.round(F.avg("fps"), 1).alias("avg_fps"),
            F.round(F.avg("bytes_per_s") / 1e6, 2).alias("avg_MBps"),
            F.sum("dropped").alias("dropped"),
            F.sum("late_frames").alias("late"),
        ).orderBy("camera").collect()]
        windows = [r.asDict() for r in df.select(
            "camera", F.unix_millis("window_start").alias("window_start"),
            F.unix_millis("window_end").alias("window_end"), "fps", "dropped",
        ).orderBy("camera", "window_start").collect()]
    alerts = []
    if result.alerts:
        src = source_options(path, url, token)
        a = spark.read.format("vqs").schema("value binary").options(**src).option("topic", result.alerts_topic).load()
        alerts = [json.loads(bytes(r.value)) for r in a.collect()]
        # Published in micro-batch order, several windows per batch in no set order:
        # sort by the window itself. window_start is ISO-8601 in the session's time
        # zone, the same for every alert, so strings sort as times.
        alerts.sort(key=lambda x: x["camera"])
        alerts.sort(key=lambda x: x["window_start"], reverse=True)
    return {"cameras": per_cam, "windows": windows, "all_alerts": alerts, "alerts": alerts[:limit]}


def write_chart(summary: dict, out: str, *, subtitle: str = "") -> str:
    """The summary's picture (vqs.pipelines.chart): ``OUT/camera-stats.html``, next to
    the Parquet windows (``OUT/stats``); returns its path."""
    from .chart import write_report

    return write_report(os.path.join(out, "camera-stats.html"), summary["windows"], summary["all_alerts"],
                        title="VQS camera pipeline: per-camera statistics", subtitle=subtitle)


# ------------------------------------------------------------------ CLI
def _print_progress(name, p):
    rows = p["numInputRows"]
    rate = p.get("processedRowsPerSecond") or 0
    wm = p.get("eventTime", {}).get("watermark", "-")
    print(f"  [{name}] batch {p['batchId']:>3}: {rows:>6} frames  {rate:>9.0f} frames/s  watermark {wm}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vqs.pipelines.camera", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p):
        g = p.add_mutually_exclusive_group(required=True)
        g.add_argument("--path", help="a VQS data directory (no server may own it)")
        g.add_argument("--url", help="a VQS server, e.g. http://127.0.0.1:8642")
        p.add_argument("--token", help="bearer token for --url")
        p.add_argument("--topic", default="frames", help="the frame-event topic (default frames)")

    f = sub.add_parser("feed", help="append generated camera frame events to the topic")
    common(f)
    f.add_argument("--cameras", type=int, default=8)
    f.add_argument("--seconds", type=int, default=60, help="seconds of video per camera (default 60)")
    f.add_argument("--partitions", type=int, default=4, help="partitions if the topic is created (default 4)")

    r = sub.add_parser("run", help="run the Structured Streaming job on the topic")
    common(r)
    r.add_argument("--out", default="camera-out", help="Parquet windows and checkpoints go here")
    r.add_argument("--alerts-topic", default="camera-alerts")
    r.add_argument("--max-offsets-per-trigger", type=int, default=5000)
    r.add_argument("--window", default="10 seconds")
    r.add_argument("--watermark", default="5 seconds")
    r.add_argument("--trigger", default="availableNow",
                   help="'availableNow' (process what is there, then stop) or an interval like '5 seconds'")
    r.add_argument("--timeout", type=float, default=None, help="stop after this many seconds")
    r.add_argument("--master", default="local[2]", help="local[N], or spark://HOST:PORT for a standalone cluster "
                   "(read with --url there: workers need not share the data dir)")
    args = ap.parse_args(argv)

    if args.cmd == "feed":
        t0 = time.perf_counter()
        st = feed(path=args.path, url=args.url, token=args.token, topic=args.topic, partitions=args.partitions,
                  cameras=args.cameras, seconds=args.seconds)
        print(f"fed {st.frames_sent:,} frames from {st.cameras} cameras into {args.topic!r} "
              f"({st.frames_dropped:,} dropped, {st.frames_late:,} late) in {time.perf_counter() - t0:.1f} s")
        return 0

    spark = make_session(args.master)
    from ..spark import jvm_reader_loaded

    print(f"reading {args.topic!r} with the {'JVM reader' if jvm_reader_loaded(spark) else 'Python source'} "
          f"on {args.master}", flush=True)
    try:
        res = run(spark, path=args.path, url=args.url, token=args.token, topic=args.topic,
                  alerts_topic=args.alerts_topic, out=args.out, max_offsets=args.max_offsets_per_trigger,
                  window=args.window, watermark=args.watermark, trigger=args.trigger, timeout_s=args.timeout,
                  on_progress=_print_progress)
        summary = summarize(spark, res, path=args.path, url=args.url, token=args.token)
    finally:
        spark.stop()
    print(f"\n{res.frames_read:,} frames in {res.batches} micro-batches, {res.seconds:.1f} s; "
          f"{res.windows} windows -> {res.stats_path}; {res.alerts} alerts -> topic {res.alerts_topic!r}")
    for c in summary["cameras"]:
        print(f"  {c['camera']}: {c['windows']} windows, {c['avg_fps']} fps, {c['avg_MBps']} MB/s, "
              f"{c['dropped']} dropped, {c['late']} late")
    for a in summary["alerts"]:
        print(f"  alert {a['camera']} {a['window_start']}: {a['reason']} (fps {a['fps']:.1f}, dropped {a['dropped']})")
    print(f"chart: {write_chart(summary, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
