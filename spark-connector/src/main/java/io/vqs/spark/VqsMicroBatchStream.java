package io.vqs.spark;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.types.StructType;

/**
 * Structured Streaming reads with the semantics of vqs/spark/stream_reader.py:
 * initialOffset resolves startingOffsets/startingTimestamp (default latest);
 * latestOffset(start, limit) is admission control (maxOffsetsPerTrigger split
 * across partitions in proportion to what each has, largest remainders);
 * Trigger.AvailableNow freezes the end offsets of that moment; a planned range
 * reads deterministically; a partition added to a topic is read from 0;
 * commit() has nothing to release.
 */
final class VqsMicroBatchStream implements MicroBatchStream, SupportsTriggerAvailableNow {
    private final ReadOptions opts;
    private final StructType required;
    private Map<String, Map<String, Long>> target;

    VqsMicroBatchStream(ReadOptions opts, StructType required) {
        this.opts = opts;
        this.required = required;
        try (Source src = Source.of(opts)) {
            for (String t : opts.topics) src.partitionCount(t, opts.topicOption());
        }
    }

    /** {topic: {"p": {start, end}}} as of now. */
    private Map<String, Map<String, long[]>> current(Source src) {
        Map<String, Map<String, long[]>> out = new LinkedHashMap<>();
        for (String t : opts.topics) {
            src.partitionCount(t, opts.topicOption());
            long[][] offs = src.partitionOffsets(t);
            Map<String, long[]> m = new LinkedHashMap<>();
            for (int p = 0; p < offs.length; p++) m.put(Integer.toString(p), offs[p]);
            out.put(t, m);
        }
        return out;
    }

    @Override
    public Offset initialOffset() {
        try (Source src = Source.of(opts)) {
            Map<String, Map<String, Long>> offs = new LinkedHashMap<>();
            for (var t : current(src).entrySet()) {
                ReadOptions.checkPartitions(opts.starting, "startingOffsets", t.getKey(), t.getValue().size());
                Map<String, Long> m = new LinkedHashMap<>();
                for (var p : t.getValue().entrySet()) {
                    long lo = p.getValue()[0], hi = p.getValue()[1];
                    long off = Planner.offsetFor(opts.starting, opts.startingTimestamp, t.getKey(), Integer.parseInt(p.getKey()), lo, hi, src, false);
                    if (off > hi)
                        throw new ConfigError("option 'startingOffsets': offset " + off + " of " + t.getKey() + "/" + p.getKey() + " is past its end offset " + hi);
                    m.put(p.getKey(), off);
                }
                offs.put(t.getKey(), m);
            }
            return new VqsOffset(offs);
        }
    }

    private Map<String, Map<String, Long>> latest(Map<String, Map<String, Long>> start) {
        Map<String, Map<String, Long>> out = new LinkedHashMap<>();
        try (Source src = Source.of(opts)) {
            for (var t : current(src).entrySet()) {
                Map<String, Long> sp = start.getOrDefault(t.getKey(), Map.of());
                Map<String, Long> m = new LinkedHashMap<>();
                for (var p : t.getValue().entrySet()) {
                    long s = sp.getOrDefault(p.getKey(), 0L);
                    long hi = p.getValue()[1];
                    if (hi < s) {
                        opts.dataLoss(t.getKey() + "/" + p.getKey() + ": the end offset went back from " + s + " to " + hi + " (was the topic re-created?)");
                        hi = s;
                    }
                    if (target != null) {
                        Long cap = target.getOrDefault(t.getKey(), Map.of()).get(p.getKey());
                        hi = cap == null ? s : Math.max(s, Math.min(hi, cap));
                    }
                    m.put(p.getKey(), hi);
                }
                for (String p : sp.keySet())
                    if (!t.getValue().containsKey(p)) opts.dataLoss(t.getKey() + "/" + p + ": the partition disappeared");
                out.put(t.getKey(), m);
            }
        }
        return out;
    }

    @Override
    public Offset latestOffset() {
        throw new UnsupportedOperationException("latestOffset(start, limit) is the one Spark calls for admission control");
    }

    @Override
    public Offset latestOffset(Offset start, ReadLimit limit) {
        Map<String, Map<String, Long>> s = ((VqsOffset) start).offsets;
        Map<String, Map<String, Long>> l = latest(s);
        if (limit instanceof ReadMaxRows) return new VqsOffset(Planner.rateLimit(s, l, ((ReadMaxRows) limit).maxRows()));
        return new VqsOffset(l);
    }

    @Override
    public Offset reportLatestOffset() {
        try (Source src = Source.of(opts)) {
            Map<String, Map<String, Long>> out = new LinkedHashMap<>();
            for (var t : current(src).entrySet()) {
                Map<String, Long> m = new LinkedHashMap<>();
                for (var p : t.getValue().entrySet()) m.put(p.getKey(), p.getValue()[1]);
                out.put(t.getKey(), m);
            }
            return new VqsOffset(out);
        } catch (RuntimeException e) { // progress reporting only: never fail the query for it
            return null;
        }
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
        return opts.maxOffsetsPerTrigger != null ? ReadLimit.maxRows(opts.maxOffsetsPerTrigger) : ReadLimit.allAvailable();
    }

    @Override
    public void prepareForTriggerAvailableNow() {
        Map<String, Map<String, Long>> t = new LinkedHashMap<>();
        try (Source src = Source.of(opts)) {
            for (var e : current(src).entrySet()) {
                Map<String, Long> m = new LinkedHashMap<>();
                for (var p : e.getValue().entrySet()) m.put(p.getKey(), p.getValue()[1]);
                t.put(e.getKey(), m);
            }
        }
        target = t;
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start, Offset end) {
        Map<String, Map<String, Long>> s = ((VqsOffset) start).offsets, e = ((VqsOffset) end).offsets;
        List<OffsetRange> ranges = new ArrayList<>();
        try (Source src = Source.of(opts)) {
            for (var t : e.entrySet()) {
                Map<String, Long> sp = s.getOrDefault(t.getKey(), Map.of());
                long[][] now = null;
                for (var p : t.getValue().entrySet()) {
                    long so = sp.getOrDefault(p.getKey(), 0L), eo = p.getValue();
                    if (eo <= so) continue;
                    if (now == null) now = src.partitionOffsets(t.getKey());
                    int pi = Integer.parseInt(p.getKey());
                    long lo = pi < now.length ? now[pi][0] : 0;
                    if (so < lo) {
                        opts.dataLoss(t.getKey() + "/" + p.getKey() + ": offset " + so + " is below the log start offset " + lo);
                        so = Math.min(lo, eo);
                    }
                    if (eo > so) ranges.add(new OffsetRange(t.getKey(), pi, so, eo));
                }
            }
        }
        return Planner.split(ranges, opts.minPartitions).toArray(new InputPartition[0]);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() { return new VqsScan.Factory(opts, required, Bounds.ALL); }

    @Override
    public Offset deserializeOffset(String json) { return VqsOffset.parse(json); }

    @Override
    public void commit(Offset end) {}

    @Override
    public void stop() {}
}
