package io.vqs.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.sources.EqualNullSafe;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.IsNotNull;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;

/**
 * The filters a batch read answers itself by planning narrower offset ranges
 * (SupportsPushDownFilters): comparisons and equality of {@code offset} with an
 * integer, comparisons, equality and IN of {@code partition}, and IS NOT NULL of
 * a column that is never null (all but key and headers). Each is exact
 * (the planned ranges hold the rows that pass it and no other), so Spark does
 * not evaluate it again; anything else (other columns, OR, NOT, non-integer
 * literals) is left to Spark.
 *
 * <p>Comparisons of {@code timestamp} with a timestamp literal (and so BETWEEN)
 * narrow the time range [tsLo, tsHi] (ms, inclusive) that the readers use to
 * skip log batches and segment prefixes none of whose records can pass
 * (RangeReader, PartitionLog.Cursor). Skipping is by batch, not by record, so
 * such a filter is inexact: Spark evaluates it again after the scan.
 *
 * <p>Invariants: immutable once planning starts; {@code ALL} narrows nothing;
 * offsets [lo, hi), partitions [pLo, pHi] and, when not null, the set {@code in};
 * a record whose timestamp lies outside [tsLo, tsHi] fails some pushed filter.
 */
final class Bounds implements Serializable {
    static final Bounds ALL = new Bounds();
    // (not "value" or "key": a record's key and value may be null, read as SQL NULL)
    private static final List<String> NEVER_NULL = List.of("topic", "partition", "offset", "timestamp");

    long lo = 0, hi = Long.MAX_VALUE;
    long pLo = 0, pHi = Long.MAX_VALUE;
    List<Long> in; // partitions an IN or = left, or null for any
    long tsLo = Long.MIN_VALUE, tsHi = Long.MAX_VALUE; // record timestamps (ms) that may pass

    boolean hasTime() { return tsLo != Long.MIN_VALUE || tsHi != Long.MAX_VALUE; }

    /** May a batch whose records' timestamps lie in [min, max] (ms) hold a record that passes? */
    boolean timeMayMatch(long min, long max) { return max >= tsLo && min <= tsHi; }

    /** Microseconds since the epoch of a timestamp literal (java.sql.Timestamp or Instant), or null. */
    static Long micros(Object v) {
        if (v instanceof java.sql.Timestamp) {
            java.sql.Timestamp t = (java.sql.Timestamp) v;
            return Math.floorDiv(t.getTime(), 1000L) * 1_000_000L + t.getNanos() / 1000;
        }
        if (v instanceof java.time.Instant) {
            java.time.Instant i = (java.time.Instant) v;
            return i.getEpochSecond() * 1_000_000L + i.getNano() / 1000;
        }
        return null;
    }

    private static long ceilDiv(long a, long b) { return -Math.floorDiv(-a, b); }

    /**
     * Narrow the time range by f if it compares timestamp with a timestamp literal
     * (Spark's microseconds against the log's milliseconds); false if it does not.
     * Inexact: the caller still has Spark evaluate f.
     */
    boolean addTime(Filter f) {
        String col;
        Object val;
        int op;
        if (f instanceof EqualTo) { col = ((EqualTo) f).attribute(); val = ((EqualTo) f).value(); op = 0; }
        else if (f instanceof EqualNullSafe) { col = ((EqualNullSafe) f).attribute(); val = ((EqualNullSafe) f).value(); op = 0; }
        else if (f instanceof GreaterThan) { col = ((GreaterThan) f).attribute(); val = ((GreaterThan) f).value(); op = 1; }
        else if (f instanceof GreaterThanOrEqual) { col = ((GreaterThanOrEqual) f).attribute(); val = ((GreaterThanOrEqual) f).value(); op = 2; }
        else if (f instanceof LessThan) { col = ((LessThan) f).attribute(); val = ((LessThan) f).value(); op = 3; }
        else if (f instanceof LessThanOrEqual) { col = ((LessThanOrEqual) f).attribute(); val = ((LessThanOrEqual) f).value(); op = 4; }
        else return false;
        Long us = col.equals("timestamp") ? micros(val) : null;
        if (us == null) return false;
        // a record of ts ms is ts * 1000 µs: the ms bounds that keep exactly the records that pass
        long lo = Long.MIN_VALUE, hi = Long.MAX_VALUE;
        switch (op) {
            case 0: lo = ceilDiv(us, 1000); hi = Math.floorDiv(us, 1000L); break;
            case 1: lo = Math.floorDiv(us, 1000L) + 1; break;
            case 2: lo = ceilDiv(us, 1000); break;
            case 3: hi = ceilDiv(us, 1000) - 1; break;
            default: hi = Math.floorDiv(us, 1000L);
        }
        tsLo = Math.max(tsLo, lo);
        tsHi = Math.min(tsHi, hi);
        return true;
    }

    boolean partition(int p) { return p >= pLo && p <= pHi && (in == null || in.contains((long) p)); }

    private static Long integer(Object v) {
        if (v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte) return ((Number) v).longValue();
        return null;
    }

    private static long plus1(long v) { return v == Long.MAX_VALUE ? v : v + 1; }

    /** Narrow by f if it is one this read answers exactly; false (nothing changed) if not. */
    boolean add(Filter f) {
        if (f instanceof IsNotNull) return NEVER_NULL.contains(((IsNotNull) f).attribute());
        String col;
        Object val;
        int op; // 0 =, 1 >, 2 >=, 3 <, 4 <=
        if (f instanceof EqualTo) { col = ((EqualTo) f).attribute(); val = ((EqualTo) f).value(); op = 0; }
        else if (f instanceof EqualNullSafe) { col = ((EqualNullSafe) f).attribute(); val = ((EqualNullSafe) f).value(); op = 0; }
        else if (f instanceof GreaterThan) { col = ((GreaterThan) f).attribute(); val = ((GreaterThan) f).value(); op = 1; }
        else if (f instanceof GreaterThanOrEqual) { col = ((GreaterThanOrEqual) f).attribute(); val = ((GreaterThanOrEqual) f).value(); op = 2; }
        else if (f instanceof LessThan) { col = ((LessThan) f).attribute(); val = ((LessThan) f).value(); op = 3; }
        else if (f instanceof LessThanOrEqual) { col = ((LessThanOrEqual) f).attribute(); val = ((LessThanOrEqual) f).value(); op = 4; }
        else if (f instanceof In && ((In) f).attribute().equals("partition")) {
            List<Long> vals = new ArrayList<>();
            for (Object o : ((In) f).values()) {
                Long v = integer(o);
                if (v == null) { if (o != null) return false; continue; } // a null in IN matches nothing
                vals.add(v);
            }
            intersect(vals);
            return true;
        } else return false;
        Long v = integer(val);
        if (v == null) return false;
        if (col.equals("offset")) {
            switch (op) {
                case 0: lo = Math.max(lo, v); hi = Math.min(hi, plus1(v)); break;
                case 1: lo = Math.max(lo, plus1(v)); break;
                case 2: lo = Math.max(lo, v); break;
                case 3: hi = Math.min(hi, v); break;
                default: hi = Math.min(hi, plus1(v));
            }
            return true;
        }
        if (col.equals("partition")) {
            switch (op) {
                case 0: intersect(List.of(v)); break;
                case 1: pLo = Math.max(pLo, plus1(v)); break;
                case 2: pLo = Math.max(pLo, v); break;
                case 3: pHi = Math.min(pHi, v - 1); break;
                default: pHi = Math.min(pHi, v);
            }
            return true;
        }
        return false;
    }

    @Override
    public String toString() {
        List<String> out = new ArrayList<>();
        if (lo > 0) out.add("offset >= " + lo);
        if (hi < Long.MAX_VALUE) out.add("offset < " + hi);
        if (pLo > 0) out.add("partition >= " + pLo);
        if (pHi < Long.MAX_VALUE) out.add("partition <= " + pHi);
        if (in != null) out.add("partition in " + in);
        if (tsLo != Long.MIN_VALUE) out.add("timestamp >= " + java.time.Instant.ofEpochMilli(tsLo) + " (skipping batches)");
        if (tsHi != Long.MAX_VALUE) out.add("timestamp <= " + java.time.Instant.ofEpochMilli(tsHi) + " (skipping batches)");
        return String.join(" and ", out);
    }

    private void intersect(List<Long> vals) {
        List<Long> out = new ArrayList<>();
        for (Long v : vals) if ((in == null || in.contains(v)) && !out.contains(v)) out.add(v);
        in = out;
    }
}
