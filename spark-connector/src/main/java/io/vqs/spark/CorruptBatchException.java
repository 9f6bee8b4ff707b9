package io.vqs.spark;

/** A batch failed a check of docs/FORMAT.md ("Validity"); the message names the file and position. */
final class CorruptBatchException extends RuntimeException {
    final long position;

    CorruptBatchException(String message, long position) {
        super(message);
        this.position = position;
    }
}
