package io.vqs.spark;

/** Offsets a query needs are gone and failOnDataLoss is true (vqs.spark.reader.DataLossError). */
public final class DataLossError extends IllegalStateException {
    public DataLossError(String message) { super(message); }
}
