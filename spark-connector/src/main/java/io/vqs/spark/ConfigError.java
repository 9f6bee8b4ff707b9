package io.vqs.spark;

/**
 * A bad option or schema; the message names it and the value given (as
 * vqs.errors.ConfigError does in the Python source). An IllegalArgumentException,
 * so PySpark raises it as {@code pyspark.errors.IllegalArgumentException} whose
 * first line is this message (any other class reaches Python as a Py4JJavaError
 * whose first line names the Py4J call, e.g. "An error occurred while calling
 * o44.load").
 */
public final class ConfigError extends IllegalArgumentException {
    public ConfigError(String message) { super(message); }
}
