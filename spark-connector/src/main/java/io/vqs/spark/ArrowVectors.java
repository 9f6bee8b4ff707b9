package io.vqs.spark;

import java.util.ArrayList;
import java.util.List;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.BaseVariableWidthVector;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.TimeStampMicroTZVector;
import org.apache.arrow.vector.VarBinaryVector;
import org.apache.spark.sql.util.ArrowUtils;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;

/**
 * Arrow-backed columns for {@code .option("vectors", "arrow")}: each ColumnarBatch
 * gets its own arrow-vector vectors (VarBinaryVector for value and key, BigIntVector
 * for offset, TimeStampMicroTZVector "UTC" for timestamp) wrapped in Spark's
 * ArrowColumnVector, so Spark 4.3's columnar input to Arrow Python UDFs
 * (ArrowEvalPythonExec with spark.sql.execution.arrow.pythonUDF.columnarInput.enabled,
 * ColumnarArrowEvalPythonEvaluatorFactory's "Arrow columnar path") serialises them
 * to the Python worker as they are, with no row conversion and no ArrowWriter.
 *
 * <p>The log slice is copied once into the vectors (offsets rebased to 0, ms
 * timestamps to µs): a log batch lives in the cursor's reused read buffer, and an
 * Arrow consumer keeps vectors past the reader's next().
 *
 * <p>Invariants: every buffer comes from one child allocator of Spark's
 * ArrowUtils.rootAllocator per reader, bounded by {@link #LIMIT} bytes; vectors are
 * never reused or freed while the task runs, because that consumer holds earlier
 * batches' vectors as pass-through columns until the UDF's result for them comes
 * back (Spark's own Arrow test source, ArrowBackedDataSourceV2, keeps them the same
 * way), and Spark closes the reader when it is exhausted, before that; so
 * RangeReader calls {@link #close} at the task's end, which frees them all and
 * closes the allocator, which fails loudly if any buffer is still allocated (a leak).
 * A task's vectors therefore hold about the bytes of its range (bounded by LIMIT).
 */
final class ArrowVectors implements AutoCloseable {
    /** The most one reader's batches may hold (a task's share of the read): 1 GiB. */
    static final long LIMIT = 1L << 30;

    private final BufferAllocator alloc;
    private final List<ColumnVector> live = new ArrayList<>();

    ArrowVectors(String name) {
        alloc = ArrowUtils.rootAllocator().newChildAllocator("vqs " + name, 0, LIMIT);
    }

    long allocated() { return alloc.getAllocatedMemory(); }

    private synchronized ColumnVector keep(ColumnVector v) {
        live.add(v);
        return v;
    }

    /** Rows [s, s + n) of b's values (keys = false) or keys; null where the column's validity bit is 0. */
    ColumnVector binary(RecordBatch b, int s, int n, boolean keys) {
        VarBinaryVector v = new VarBinaryVector(keys ? "key" : "value", alloc);
        try {
            int col = keys ? b.keyOffsets : b.valueOffsets, data = keys ? b.keyData : b.valueData;
            int a = b.body.getInt(col + 4 * s), z = b.body.getInt(col + 4 * (s + n));
            v.allocateNew(Math.max(1, z - a), n);
            ArrowBuf offs = v.getOffsetBuffer(), bytes = v.getDataBuffer(), valid = v.getValidityBuffer();
            for (int i = 0; i <= n; i++) offs.setInt(4L * i, b.body.getInt(col + 4 * (s + i)) - a);
            if (z > a) bytes.setBytes(0, b.body.duplicate().limit(data + z).position(data + a));
            valid.setZero(0, valid.capacity());
            if (!keys && b.valueValidity < 0) valid.setOne(0, (n + 7) / 8);
            else for (int i = 0; i < n; i++)
                if (keys ? b.hasKey(s + i) : b.hasValue(s + i)) valid.setByte(i >> 3, valid.getByte(i >> 3) | (1 << (i & 7)));
            ((BaseVariableWidthVector) v).setLastSet(n - 1);
            v.setValueCount(n);
        } catch (RuntimeException e) {
            v.close();
            throw e;
        }
        return keep(new ArrowColumnVector(v));
    }

    /** offset: base + s + r. */
    ColumnVector offsets(RecordBatch b, int s, int n) {
        BigIntVector v = new BigIntVector("offset", alloc);
        try {
            v.allocateNew(n);
            ArrowBuf d = v.getDataBuffer();
            for (int i = 0; i < n; i++) d.setLong(8L * i, b.baseOffset + s + i);
            v.getValidityBuffer().setOne(0, (n + 7) / 8);
            v.setValueCount(n);
        } catch (RuntimeException e) {
            v.close();
            throw e;
        }
        return keep(new ArrowColumnVector(v));
    }

    /** timestamp: the log's ms as Spark's µs. */
    ColumnVector timestamps(RecordBatch b, int s, int n) {
        TimeStampMicroTZVector v = new TimeStampMicroTZVector("timestamp", alloc, "UTC");
        try {
            v.allocateNew(n);
            ArrowBuf d = v.getDataBuffer();
            for (int i = 0; i < n; i++) d.setLong(8L * i, b.timestamp(s + i) * 1000);
            v.getValidityBuffer().setOne(0, (n + 7) / 8);
            v.setValueCount(n);
        } catch (RuntimeException e) {
            v.close();
            throw e;
        }
        return keep(new ArrowColumnVector(v));
    }

    private boolean closed;

    /** Free every batch's vectors and close the allocator (which refuses if a buffer leaked); idempotent. */
    @Override
    public synchronized void close() {
        if (closed) return;
        closed = true;
        for (ColumnVector v : live) v.close();
        live.clear();
        alloc.close();
    }
}
