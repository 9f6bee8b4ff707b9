package io.vqs.spark;

import java.nio.ByteBuffer;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Column vectors that read a log batch's columns where they lie (docs/FORMAT.md,
 * "Body"): no per-batch copy. A values/keys column is already offsets + data (an
 * Arrow BinaryArray's layout), so row r of a slice starting at record s is
 * data[off(s + r), off(s + r + 1)); the offset column is base + s + r; the
 * timestamp column is the batch's i64 column (or its first timestamp), in
 * microseconds as Spark's TimestampType wants.
 *
 * <p>Invariants: a vector is valid from {@link #point} until the next call of
 * point (the reader re-points it at the next slice, and the body's buffer may be
 * reused by then: Spark consumes a ColumnarBatch before asking for the next, the
 * contract its own Parquet reader's reused vectors rely on too); it reads only
 * bytes of a batch that RecordBatch.decode verified (CRC and layout), so an index
 * here never leaves the body.
 */
abstract class LogVectors extends ColumnVector {
    RecordBatch batch;
    int start; // the slice's first record in the batch

    LogVectors(DataType type) { super(type); }

    /** Show rows [s, s + rows) of b. */
    void point(RecordBatch b, int s) {
        this.batch = b;
        this.start = s;
    }

    @Override public void close() { batch = null; }
    @Override public boolean hasNull() { return false; }
    @Override public int numNulls() { return 0; }
    @Override public boolean isNullAt(int rowId) { return false; }
    @Override public boolean getBoolean(int rowId) { throw unsupported(); }
    @Override public byte getByte(int rowId) { throw unsupported(); }
    @Override public short getShort(int rowId) { throw unsupported(); }
    @Override public int getInt(int rowId) { throw unsupported(); }
    @Override public long getLong(int rowId) { throw unsupported(); }
    @Override public float getFloat(int rowId) { throw unsupported(); }
    @Override public double getDouble(int rowId) { throw unsupported(); }
    @Override public ColumnarArray getArray(int rowId) { throw unsupported(); }
    @Override public ColumnarMap getMap(int rowId) { throw unsupported(); }
    @Override public Decimal getDecimal(int rowId, int precision, int scale) { throw unsupported(); }
    @Override public UTF8String getUTF8String(int rowId) { throw unsupported(); }
    @Override public byte[] getBinary(int rowId) { throw unsupported(); }
    @Override public ColumnVector getChild(int ordinal) { throw unsupported(); }

    private UnsupportedOperationException unsupported() {
        return new UnsupportedOperationException("a vqs " + dataType().simpleString() + " column has no such accessor");
    }

    /** value (keys = false) or key (keys = true); null where the column's validity bit is 0. */
    static final class Binary extends LogVectors {
        private final boolean keys;
        private ByteBuffer body;
        private int offs, data, rows;

        Binary(boolean keys) {
            super(DataTypes.BinaryType);
            this.keys = keys;
        }

        void point(RecordBatch b, int s, int rows) {
            point(b, s);
            this.rows = rows;
            body = b.body;
            offs = (keys ? b.keyOffsets : b.valueOffsets) + 4 * s;
            data = keys ? b.keyData : b.valueData;
        }

        @Override public boolean hasNull() { return (keys || batch.valueValidity >= 0) && numNulls() > 0; }

        @Override
        public int numNulls() {
            if (!keys && batch.valueValidity < 0) return 0;
            int n = 0;
            for (int r = 0; r < rows; r++) if (isNullAt(r)) n++;
            return n;
        }

        @Override public boolean isNullAt(int rowId) { return keys ? !batch.hasKey(start + rowId) : !batch.hasValue(start + rowId); }

        @Override
        public byte[] getBinary(int rowId) {
            if (isNullAt(rowId)) return null;
            int a = body.getInt(offs + 4 * rowId), z = body.getInt(offs + 4 * rowId + 4);
            byte[] out = new byte[z - a];
            body.get(data + a, out, 0, z - a);
            return out;
        }
    }

    /** offset: the batch's base offset + record index. */
    static final class Offsets extends LogVectors {
        Offsets() { super(DataTypes.LongType); }

        @Override public long getLong(int rowId) { return batch.baseOffset + start + rowId; }
    }

    /** timestamp: ms in the log, µs for Spark. */
    static final class Timestamps extends LogVectors {
        Timestamps() { super(DataTypes.TimestampType); }

        @Override public long getLong(int rowId) { return batch.timestamp(start + rowId) * 1000; }
    }
}
