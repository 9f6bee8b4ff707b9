package io.vqs.spark;

/**
 * A segment's time index read for skipping (docs/FORMAT.md, "Time index"):
 * entries of 12 bytes, timestamp i64 (the largest record timestamp in the
 * segment up to and including the batch) and relative_offset u32 of that batch.
 *
 * <p>Invariants: entries are read up to the first all-zero one after the first
 * (the active segment's file is preallocated with zeros) or the first out of
 * order (timestamps must not decrease, relative offsets must increase), so a
 * damaged tail is ignored, never trusted; only the entries' own meaning is used
 * (every record up to and including batch r has a timestamp <= T), so an index
 * that stops early only skips less. The Python twin is
 * vqs/storage/segment_reads.first_offset_at_time.
 */
final class TimeIndex {
    private TimeIndex() {}

    /**
     * The relative offset of the first batch of the segment that may hold a record
     * with timestamp >= ts: that of the last entry with T < ts (its batch must still
     * be read: records after its largest may pass), or 0.
     */
    static long floor(byte[] index, long ts) {
        long best = 0, prevT = Long.MIN_VALUE, prevR = -1;
        for (int k = 0; k + 12 <= index.length; k += 12) {
            long t = RecordBatch.i64(index, k), r = RecordBatch.u32(index, k + 8);
            if ((t == 0 && r == 0 && k > 0) || t < prevT || r <= prevR || t >= ts) break;
            best = r;
            prevT = t;
            prevR = r;
        }
        return best;
    }
}
