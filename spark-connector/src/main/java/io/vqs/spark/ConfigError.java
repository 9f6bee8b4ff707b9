package io.vqs.spark;

/** A bad option or schema; the message names it (as vqs.errors.ConfigError does in the Python source). */
public final class ConfigError extends IllegalArgumentException {
    public ConfigError(String message) { super(message); }
}
