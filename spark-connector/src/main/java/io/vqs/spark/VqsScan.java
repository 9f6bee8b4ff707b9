package io.vqs.spark;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.expressions.aggregate.AggregateFunc;
import org.apache.spark.sql.connector.expressions.aggregate.Aggregation;
import org.apache.spark.sql.connector.expressions.aggregate.CountStar;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.LocalScan;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownAggregates;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Planning of a JVM read: the scan builder takes the columns Spark needs
 * (SupportsPushDownRequiredColumns: a query touching only value reads only
 * values), the filters on offset and partition it answers exactly by planning
 * narrower ranges (SupportsPushDownFilters, see Bounds), and a plain
 * {@code count()} (SupportsPushDownAggregates: COUNT(*) with no GROUP BY, in
 * path mode), which CountScan answers on the driver from the offsets alone,
 * with no task at all. The batch plans OffsetRanges on the driver, the factory
 * makes columnar readers on executors. Streaming reads take only the pruning
 * (Spark pushes no filter or aggregate into a stream).
 */
final class VqsScan implements Scan, Batch {
    final CaseInsensitiveStringMap options;
    final StructType required;
    final Bounds bounds;

    VqsScan(CaseInsensitiveStringMap options, StructType required, Bounds bounds) {
        this.options = options;
        this.required = required;
        this.bounds = bounds;
    }

    static final class Builder implements ScanBuilder, SupportsPushDownRequiredColumns, SupportsPushDownFilters,
            SupportsPushDownAggregates {
        private final CaseInsensitiveStringMap options;
        private StructType required;
        private final Bounds bounds = new Bounds();
        private Filter[] pushed = new Filter[0];
        private boolean count;

        Builder(CaseInsensitiveStringMap options, StructType schema) {
            this.options = options;
            this.required = schema;
        }

        @Override
        public Filter[] pushFilters(Filter[] filters) {
            List<Filter> done = new ArrayList<>(), rest = new ArrayList<>();
            for (Filter f : filters) {
                if (bounds.addTime(f)) { done.add(f); rest.add(f); } // used to skip batches, evaluated again by Spark
                else (bounds.add(f) ? done : rest).add(f);
            }
            pushed = done.toArray(new Filter[0]);
            return rest.toArray(new Filter[0]);
        }

        @Override
        public Filter[] pushedFilters() { return pushed; }

        /** COUNT(*) alone, no GROUP BY, over a data directory (a server's offsets do not show its gaps). */
        private boolean countOnly(Aggregation a) {
            if (a.groupByExpressions().length != 0 || a.aggregateExpressions().length == 0) return false;
            for (AggregateFunc f : a.aggregateExpressions()) if (!(f instanceof CountStar)) return false;
            String path = options.get("path");
            return path != null && !path.isBlank();
        }

        @Override
        public boolean supportCompletePushDown(Aggregation a) { return countOnly(a); }

        @Override
        public boolean pushAggregation(Aggregation a) {
            count = countOnly(a);
            if (count) counts = a.aggregateExpressions().length;
            return count;
        }

        private int counts;

        @Override
        public void pruneColumns(StructType requiredSchema) {
            // keep the table's order and types; Spark passes a subset of them
            StructType out = new StructType();
            for (var f : required.fields()) if (requiredSchema.getFieldIndex(f.name()).isDefined()) out = out.add(f);
            required = out;
        }

        @Override
        public Scan build() { return count ? new CountScan(options, bounds, counts) : new VqsScan(options, required, bounds); }
    }

    /**
     * A COUNT(*) answered on the driver: the planned ranges' records, counted from the
     * offsets (PartitionLog.count: contiguous but for the gaps the format records), with
     * the same options, pushed filters and data-loss checks as the read it replaces.
     */
    static final class CountScan implements LocalScan {
        final CaseInsensitiveStringMap options;
        final Bounds bounds;
        final int columns;

        CountScan(CaseInsensitiveStringMap options, Bounds bounds, int columns) {
            this.options = options;
            this.bounds = bounds;
            this.columns = columns;
        }

        @Override
        public StructType readSchema() {
            StructType s = new StructType();
            for (int i = 0; i < columns; i++) s = s.add("count" + i, DataTypes.LongType, false);
            return s;
        }

        @Override
        public String description() {
            String b = bounds.toString();
            return "vqs count(*) from offsets " + options.getOrDefault("topic", options.getOrDefault("topics", ""))
                + (b.isEmpty() ? "" : " where " + b);
        }

        @Override
        public InternalRow[] rows() {
            ReadOptions o = ReadOptions.parse(options, false);
            long n = 0;
            try (Source src = Source.of(o)) {
                Source.PathSource ps = (Source.PathSource) src;
                for (OffsetRange r : Planner.planRanges(src, o, bounds)) n += ps.count(r.topic, r.partition, r.start, r.end);
            }
            Object[] row = new Object[columns];
            java.util.Arrays.fill(row, n);
            return new InternalRow[] {new GenericInternalRow(row)};
        }
    }

    @Override
    public StructType readSchema() { return required; }

    @Override
    public String description() {
        String b = bounds.toString();
        return "vqs " + options.getOrDefault("topic", options.getOrDefault("topics", "")) + (b.isEmpty() ? "" : " where " + b);
    }

    @Override
    public Batch toBatch() { return this; }

    @Override
    public org.apache.spark.sql.connector.metric.CustomMetric[] supportedCustomMetrics() { return ReadMetrics.supported(); }

    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
        return new VqsMicroBatchStream(ReadOptions.parse(options, true), required);
    }

    @Override
    public InputPartition[] planInputPartitions() {
        ReadOptions o = ReadOptions.parse(options, false);
        try (Source src = Source.of(o)) {
            List<OffsetRange> ranges = Planner.split(Planner.planRanges(src, o, bounds), o.minPartitions);
            return ranges.toArray(new InputPartition[0]);
        }
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new Factory(ReadOptions.parse(options, false), required, bounds);
    }

    static final class Factory implements PartitionReaderFactory {
        final ReadOptions opts;
        final StructType required;
        final Bounds bounds;

        Factory(ReadOptions opts, StructType required, Bounds bounds) {
            this.opts = opts;
            this.required = required;
            this.bounds = bounds;
        }

        @Override
        public boolean supportColumnarReads(InputPartition partition) { return true; }

        @Override
        public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
            return new RangeReader(opts, (OffsetRange) partition, required, bounds);
        }

        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            throw new UnsupportedOperationException("the vqs JVM reader is columnar");
        }
    }
}
