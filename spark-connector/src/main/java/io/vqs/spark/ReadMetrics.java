package io.vqs.spark;

import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomSumMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;

/**
 * The scan's own SQL metrics (Scan.supportedCustomMetrics, summed over tasks and
 * shown on the scan node in the Spark UI and in executedPlan().metrics()): what a
 * read cost, so that the pushed time range's skipping can be seen and tested.
 * Spark instantiates these by class name on the driver, hence public.
 */
public final class ReadMetrics {
    private ReadMetrics() {}

    static final String DECODED = "vqsBatchesDecoded", SKIPPED = "vqsBatchesSkipped", BYTES = "vqsBytesRead";

    /** Log batches decoded (CRC-verified) by the readers. */
    public static final class Decoded extends CustomSumMetric {
        @Override public String name() { return DECODED; }
        @Override public String description() { return "vqs log batches decoded"; }
    }

    /** Log batches stepped over by a pushed timestamp range, by their headers alone. */
    public static final class Skipped extends CustomSumMetric {
        @Override public String name() { return SKIPPED; }
        @Override public String description() { return "vqs log batches skipped by timestamp"; }
    }

    /** Bytes read from segment and index files (path mode) or the server (url mode). */
    public static final class Bytes extends CustomSumMetric {
        @Override public String name() { return BYTES; }
        @Override public String description() { return "vqs bytes read"; }
    }

    static CustomMetric[] supported() { return new CustomMetric[] {new Decoded(), new Skipped(), new Bytes()}; }

    static CustomTaskMetric value(String name, long v) {
        return new CustomTaskMetric() {
            @Override public String name() { return name; }
            @Override public long value() { return v; }
        };
    }
}
