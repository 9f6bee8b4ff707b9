package io.vqs.spark;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Offsets to ranges, shared by batch and streaming reads; the same rules as
 * vqs/spark/reader.py (plan_ranges, split_ranges) and stream_reader.py
 * (rate_limit), so both readers plan the same tasks for the same options.
 */
final class Planner {
    private Planner() {}

    @SuppressWarnings("unchecked")
    static long offsetFor(Object spec, Long ts, String topic, int p, long lo, long hi, Source src, boolean defaultLatest) {
        if (ts != null) {
            long off = src.offsetForTime(topic, p, ts);
            return off < 0 ? hi : Math.max(off, lo);
        }
        if ("earliest".equals(spec)) return lo;
        if ("latest".equals(spec)) return hi;
        Map<Integer, Long> pm = ((Map<String, Map<Integer, Long>>) spec).get(topic);
        Long off = pm == null ? null : pm.get(p);
        if (off == null) return defaultLatest ? hi : lo;
        if (off == ReadOptions.EARLIEST) return lo;
        if (off == ReadOptions.LATEST) return hi;
        return off;
    }

    /** The ranges of a batch read, narrowed by pushed filters (bounds), before splitting. */
    static List<OffsetRange> planRanges(Source src, ReadOptions o, Bounds bounds) {
        List<OffsetRange> ranges = new ArrayList<>();
        for (String topic : o.topics) {
            src.partitionCount(topic, o.topicOption());
            long[][] offs = src.partitionOffsets(topic);
            ReadOptions.checkPartitions(o.starting, "startingOffsets", topic, offs.length);
            ReadOptions.checkPartitions(o.ending, "endingOffsets", topic, offs.length);
            for (int p = 0; p < offs.length; p++) {
                if (!bounds.partition(p)) continue;
                long lo = offs[p][0], hi = offs[p][1];
                long start = offsetFor(o.starting, o.startingTimestamp, topic, p, lo, hi, src, false);
                long end = offsetFor(o.ending, o.endingTimestamp, topic, p, lo, hi, src, true);
                if (start > hi)
                    throw new ConfigError("option 'startingOffsets': offset " + start + " of " + topic + "/" + p + " is past its end offset " + hi);
                if (end > hi)
                    throw new ConfigError("option 'endingOffsets': offset " + end + " of " + topic + "/" + p + " is past its end offset " + hi);
                if (end < start) // as Spark's Kafka source: an inverted range is a mistake, not an empty read
                    throw new ConfigError("option '" + (o.endingTimestamp != null ? "endingTimestamp" : "endingOffsets")
                        + "': end offset " + end + " of " + topic + "/" + p + " is before its starting offset " + start);
                if (start < lo) {
                    o.dataLoss(topic + "/" + p + ": starting offset " + start + " is below the log start offset " + lo);
                    start = lo;
                }
                start = Math.max(start, bounds.lo);
                end = Math.min(end, bounds.hi);
                if (bounds.tsLo != Long.MIN_VALUE && src instanceof Source.UrlSource && end > start) {
                    // every record below the first with timestamp >= tsLo fails the pushed range
                    // (one request; in path mode the readers use the time indexes instead)
                    long t = src.offsetForTime(topic, p, bounds.tsLo);
                    start = Math.max(start, t < 0 ? end : t);
                }
                if (end > start) ranges.add(new OffsetRange(topic, p, start, end));
            }
        }
        return ranges;
    }

    /** About minPartitions tasks, in proportion to the ranges' sizes (largest remainders). */
    static List<OffsetRange> split(List<OffsetRange> ranges, Integer minPartitions) {
        if (minPartitions == null || ranges.size() >= minPartitions) return ranges;
        long total = 0;
        for (OffsetRange r : ranges) total += r.size();
        if (total == 0) return ranges;
        int n = ranges.size();
        long[] parts = new long[n];
        double[] want = new double[n];
        long spare = minPartitions - n;
        for (int i = 0; i < n; i++) {
            parts[i] = 1;
            want[i] = Math.max(0.0, ranges.get(i).size() * (double) minPartitions / total - 1);
        }
        for (int i = 0; i < n; i++) {
            long k = Math.min(Math.min((long) want[i], ranges.get(i).size() - parts[i]), spare);
            parts[i] += k;
            spare -= k;
        }
        List<Integer> order = new ArrayList<>();
        for (int i = 0; i < n; i++) order.add(i);
        order.sort(Comparator.comparingDouble(i -> -(want[i] - Math.floor(want[i]))));
        for (int i : order) {
            if (spare <= 0) break;
            if (parts[i] < ranges.get(i).size()) { parts[i]++; spare--; }
        }
        List<OffsetRange> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            OffsetRange r = ranges.get(i);
            long step = r.size() / parts[i], extra = r.size() % parts[i];
            long s = r.start;
            for (long k = 0; k < parts[i]; k++) {
                long e = s + step + (k < extra ? 1 : 0);
                out.add(new OffsetRange(r.topic, r.partition, s, e));
                s = e;
            }
        }
        return out;
    }

    /** End offsets taking at most maxRows records past start, in proportion to what each partition has. */
    static Map<String, Map<String, Long>> rateLimit(Map<String, Map<String, Long>> start, Map<String, Map<String, Long>> latest, long maxRows) {
        List<Object[]> avail = new ArrayList<>();
        long total = 0;
        for (var t : latest.entrySet()) {
            for (var p : t.getValue().entrySet()) {
                long lo = start.getOrDefault(t.getKey(), Map.of()).getOrDefault(p.getKey(), 0L);
                if (p.getValue() > lo) {
                    avail.add(new Object[] {t.getKey(), p.getKey(), lo, p.getValue() - lo, 0L, 0.0});
                    total += p.getValue() - lo;
                }
            }
        }
        Map<String, Map<String, Long>> end = new LinkedHashMap<>();
        for (var t : latest.entrySet()) end.put(t.getKey(), new LinkedHashMap<>(t.getValue()));
        if (total <= maxRows) return end;
        long given = 0;
        for (Object[] a : avail) {
            double exact = maxRows * (double) (long) a[3] / total;
            long take = Math.min((long) a[3], (long) exact);
            a[4] = take;
            a[5] = exact - take;
            given += take;
        }
        List<Object[]> byRemainder = new ArrayList<>(avail);
        byRemainder.sort(Comparator.comparingDouble(a -> -(double) a[5]));
        for (Object[] a : byRemainder) {
            if (given >= maxRows) break;
            if ((long) a[4] < (long) a[3]) { a[4] = (long) a[4] + 1; given++; }
        }
        for (Object[] a : avail) end.get((String) a[0]).put((String) a[1], (long) a[2] + (long) a[4]);
        return end;
    }
}
