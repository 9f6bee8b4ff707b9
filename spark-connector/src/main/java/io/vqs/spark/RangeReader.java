package io.vqs.spark;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Reads one OffsetRange as ColumnarBatches of the required columns only
 * (vqs/spark/reader.read_range): a column Spark pruned is never built, and
 * with no column at all (count()) no batch body is decoded.
 *
 * <p>Invariants: deterministic (the same range always yields the same records:
 * a replayed micro-batch sees what the first attempt saw, unless retention
 * deleted it: failOnDataLoss); every record comes from a verified batch; the
 * vectors are reused from one next() to the next, as Spark's Parquet reader
 * does (Spark consumes a batch before asking for the next). The key, value,
 * offset and timestamp columns are LogVectors that read the log batch where it
 * lies (in the cursor's read buffer: no copy), so a ColumnarBatch never spans
 * two log batches; only the headers column is built (OnHeapColumnVector). With
 * no column a ColumnarBatch is a row count over any number of log batches.
 */
final class RangeReader implements PartitionReader<ColumnarBatch> {
    static final int TARGET_ROWS = 4096;
    static final int COUNT_ROWS = 1 << 24;

    private final ReadOptions opts;
    private final OffsetRange range;
    private final Bounds bounds;
    private final String[] columns;
    private final StructField[] fields;
    private final ColumnVector[] vectors;
    private ColumnarBatch batch;
    private final ArrowVectors arrow; // null: LogVectors (the default)
    private long decoded, skipped; // metrics
    private Source src;
    private Source.Batches batches;
    private long pos;
    private RecordBatch cur;  // the log batch being consumed
    private int curIndex;     // next record of cur to hand out
    private boolean done;

    RangeReader(ReadOptions opts, OffsetRange range, StructType required, Bounds bounds) {
        this.opts = opts;
        this.range = range;
        this.bounds = bounds == null ? Bounds.ALL : bounds;
        this.pos = range.start;
        this.columns = required.fieldNames();
        this.fields = required.fields();
        this.arrow = opts.arrowVectors && columns.length > 0
            ? new ArrowVectors(range.topic + "/" + range.partition + "@" + range.start) : null;
        this.vectors = new ColumnVector[columns.length];
        for (int i = 0; i < columns.length; i++) {
            StructField f = required.fields()[i];
            switch (f.name()) {
                case "topic": {
                    ConstantColumnVector v = new ConstantColumnVector(TARGET_ROWS, DataTypes.StringType);
                    v.setUtf8String(UTF8String.fromString(range.topic));
                    vectors[i] = v;
                    break;
                }
                case "partition": {
                    ConstantColumnVector v = new ConstantColumnVector(TARGET_ROWS, DataTypes.IntegerType);
                    v.setInt(range.partition);
                    vectors[i] = v;
                    break;
                }
                case "value": vectors[i] = new LogVectors.Binary(false); break;
                case "key": vectors[i] = new LogVectors.Binary(true); break;
                case "offset": vectors[i] = new LogVectors.Offsets(); break;
                case "timestamp": vectors[i] = new LogVectors.Timestamps(); break;
                default:
                    vectors[i] = new OnHeapColumnVector(TARGET_ROWS, f.dataType());
            }
        }
        this.batch = new ColumnarBatch(vectors);
    }

    private void open() {
        src = Source.of(opts);
        while (true) {
            try {
                batches = columns.length == 0
                    ? src.headers(range.topic, range.partition, pos, opts.maxBytesPerRead)
                    : src.batches(range.topic, range.partition, pos, opts.maxBytesPerRead, bounds.tsLo, bounds.tsHi, range.end);
                return;
            } catch (Source.OutOfRange e) {
                opts.dataLoss(range.topic + "/" + range.partition + ": offset " + pos + " is below the log start offset " + e.start);
                pos = e.start;
                if (pos >= range.end) { done = true; return; }
            }
        }
    }

    /** The next log batch with records in [pos, end), or null at the end of the range. */
    private RecordBatch nextLogBatch() throws IOException {
        if (batches == null) open();
        if (done) return null;
        while (true) {
            RecordBatch b = batches.next();
            if (b == null) {
                if (batches.reached() < range.end) // not where the time range stepped over the rest
                    opts.dataLoss(range.topic + "/" + range.partition + ": offsets [" + pos + ", " + range.end
                        + ") were planned but the log ends before them");
                return null;
            }
            if (b.baseOffset >= range.end) return null;
            if (columns.length > 0) decoded++;
            // a source that could not step over it (url mode): the batch is decoded but not shown
            long min = (b.attributes & RecordBatch.ATTR_TIMESTAMPS) != 0 ? Long.MIN_VALUE : b.firstTimestamp;
            if (columns.length > 0 && bounds.hasTime() && !bounds.timeMayMatch(min, b.maxTimestamp)) {
                skipped++;
                pos = Math.max(pos, b.nextOffset());
                if (pos >= range.end) return null;
                continue;
            }
            return b;
        }
    }

    @Override
    public boolean next() throws IOException {
        if (done) return false;
        if (arrow == null)
            for (ColumnVector v : vectors) if (v instanceof WritableColumnVector) ((WritableColumnVector) v).reset();
        int rows = 0;
        // with columns: one slice of one log batch (the vectors point into it); without: a count
        int limit = columns.length == 0 ? COUNT_ROWS : TARGET_ROWS;
        while (rows < limit && !done) {
            if (cur == null || curIndex >= cur.count) {
                cur = nextLogBatch();
                if (cur == null) { done = true; break; }
                curIndex = (int) Math.max(0, pos - cur.baseOffset);
            }
            int stop = (int) Math.min(cur.count, range.end - cur.baseOffset);
            int take = Math.min(stop - curIndex, limit - rows);
            if (take > 0) {
                if (columns.length > 0) fill(cur, curIndex, take);
                rows += take;
                curIndex += take;
            }
            pos = cur.baseOffset + curIndex;
            if (curIndex >= stop) {
                if (stop < cur.count || pos >= range.end) done = true;
            }
            if (columns.length > 0 && rows > 0) break;
        }
        if (arrow == null) batch.setNumRows(rows);
        return rows > 0;
    }

    private void fill(RecordBatch b, int s, int rows) {
        if (arrow != null) { fillArrow(b, s, rows); return; }
        for (int c = 0; c < columns.length; c++) {
            ColumnVector cv = vectors[c];
            if (cv instanceof LogVectors.Binary) ((LogVectors.Binary) cv).point(b, s, rows);
            else if (cv instanceof LogVectors) ((LogVectors) cv).point(b, s);
            else if (columns[c].equals("headers")) headers((WritableColumnVector) cv, b, s, s + rows, 0);
        }
    }

    private static void headers(WritableColumnVector v, RecordBatch b, int s, int e, int row) {
        WritableColumnVector items = v.arrayData();
        WritableColumnVector keys = items.getChild(0), values = items.getChild(1);
        List<String> names = new ArrayList<>();
        List<byte[]> vals = new ArrayList<>();
        for (int i = s; i < e; i++) {
            names.clear();
            vals.clear();
            b.headers(i, names, vals);
            int at = items.getElementsAppended();
            for (int k = 0; k < names.size(); k++) {
                byte[] kb = names.get(k).getBytes(java.nio.charset.StandardCharsets.UTF_8);
                keys.appendByteArray(kb, 0, kb.length);
                byte[] vb = vals.get(k);
                if (vb == null) values.appendNull(); // a null header value: SQL NULL
                else values.appendByteArray(vb, 0, vb.length);
                items.appendStruct(false);
            }
            v.putArray(row + i - s, at, names.size());
        }
    }

    /**
     * A new ColumnarBatch of new vectors (ArrowVectors: a consumer may keep it past
     * next()); topic and partition stay the reader's constants, headers a new on-heap vector.
     */
    private void fillArrow(RecordBatch b, int s, int rows) {
        ColumnVector[] cols = new ColumnVector[columns.length];
        for (int c = 0; c < columns.length; c++) {
            switch (columns[c]) {
                case "value": cols[c] = arrow.binary(b, s, rows, false); break;
                case "key": cols[c] = arrow.binary(b, s, rows, true); break;
                case "offset": cols[c] = arrow.offsets(b, s, rows); break;
                case "timestamp": cols[c] = arrow.timestamps(b, s, rows); break;
                case "headers": {
                    OnHeapColumnVector h = new OnHeapColumnVector(rows, fields[c].dataType());
                    headers(h, b, s, s + rows, 0);
                    cols[c] = h;
                    break;
                }
                default: cols[c] = vectors[c]; // topic, partition: constants
            }
        }
        batch = new ColumnarBatch(cols, rows);
    }

    @Override
    public ColumnarBatch get() { return batch; }

    @Override
    public org.apache.spark.sql.connector.metric.CustomTaskMetric[] currentMetricsValues() {
        long bytes = batches == null ? 0 : batches.bytesRead();
        long skip = skipped + (batches == null ? 0 : batches.skipped());
        return new org.apache.spark.sql.connector.metric.CustomTaskMetric[] {
            ReadMetrics.value(ReadMetrics.DECODED, decoded), ReadMetrics.value(ReadMetrics.SKIPPED, skip),
            ReadMetrics.value(ReadMetrics.BYTES, bytes)};
    }

    @Override
    public void close() {
        try {
            if (batches != null) batches.close();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        } finally {
            if (src != null) src.close();
            if (arrow != null) {
                for (ColumnVector v : vectors) if (v != null && !(v instanceof LogVectors)) v.close();
                // Spark closes a reader as soon as it is exhausted (PartitionIterator.hasNext), but a
                // columnar Arrow UDF may still hold its last batches as pass-through columns: free the
                // vectors when the task ends (once, whichever comes first), or now outside a task
                org.apache.spark.TaskContext tc = org.apache.spark.TaskContext.get();
                if (tc != null) tc.addTaskCompletionListener((org.apache.spark.util.TaskCompletionListener) ctx -> arrow.close());
                else arrow.close();
            } else batch.close();
        }
    }

    static UncheckedIOException unchecked(IOException e) { return new UncheckedIOException(e); }
}
