package io.vqs.spark;

/**
 * A bad option or schema; the message names it (as vqs.errors.ConfigError does in
 * the Python source). Not an IllegalArgumentException: PySpark would turn that
 * into its own exception type and drop the class name, which tells the user
 * the error is vqs's.
 */
public final class ConfigError extends RuntimeException {
    public ConfigError(String message) { super(message); }
}
