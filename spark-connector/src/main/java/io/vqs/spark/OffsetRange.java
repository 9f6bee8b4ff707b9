package io.vqs.spark;

import org.apache.spark.sql.connector.read.InputPartition;

/** Records [start, end) of one topic partition: one Spark task (vqs/spark/reader.OffsetRange). */
final class OffsetRange implements InputPartition {
    final String topic;
    final int partition;
    final long start, end;

    OffsetRange(String topic, int partition, long start, long end) {
        this.topic = topic;
        this.partition = partition;
        this.start = start;
        this.end = end;
    }

    long size() { return end - start; }

    @Override
    public String toString() { return "OffsetRange(" + topic + "/" + partition + " [" + start + ", " + end + "))"; }
}
