package io.vqs.spark;

import java.util.List;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Planning of a JVM read: the scan builder takes the columns Spark needs
 * (SupportsPushDownRequiredColumns: a query touching only value reads only
 * values), the batch plans OffsetRanges on the driver, the factory makes
 * columnar readers on executors.
 */
final class VqsScan implements Scan, Batch {
    final CaseInsensitiveStringMap options;
    final StructType required;

    VqsScan(CaseInsensitiveStringMap options, StructType required) {
        this.options = options;
        this.required = required;
    }

    static final class Builder implements ScanBuilder, SupportsPushDownRequiredColumns {
        private final CaseInsensitiveStringMap options;
        private StructType required;

        Builder(CaseInsensitiveStringMap options, StructType schema) {
            this.options = options;
            this.required = schema;
        }

        @Override
        public void pruneColumns(StructType requiredSchema) {
            // keep the table's order and types; Spark passes a subset of them
            StructType out = new StructType();
            for (var f : required.fields()) if (requiredSchema.getFieldIndex(f.name()).isDefined()) out = out.add(f);
            required = out;
        }

        @Override
        public Scan build() { return new VqsScan(options, required); }
    }

    @Override
    public StructType readSchema() { return required; }

    @Override
    public String description() { return "vqs " + options.getOrDefault("topic", options.getOrDefault("topics", "")); }

    @Override
    public Batch toBatch() { return this; }

    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
        return new VqsMicroBatchStream(ReadOptions.parse(options, true), required);
    }

    @Override
    public InputPartition[] planInputPartitions() {
        ReadOptions o = ReadOptions.parse(options, false);
        try (Source src = Source.of(o)) {
            List<OffsetRange> ranges = Planner.planBatch(src, o);
            return ranges.toArray(new InputPartition[0]);
        }
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new Factory(ReadOptions.parse(options, false), required);
    }

    static final class Factory implements PartitionReaderFactory {
        final ReadOptions opts;
        final StructType required;

        Factory(ReadOptions opts, StructType required) {
            this.opts = opts;
            this.required = required;
        }

        @Override
        public boolean supportColumnarReads(InputPartition partition) { return true; }

        @Override
        public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
            return new RangeReader(opts, (OffsetRange) partition, required);
        }

        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            throw new UnsupportedOperationException("the vqs JVM reader is columnar");
        }
    }
}
