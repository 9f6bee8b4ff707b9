"""VQS: a durable message queue and log for Python."""
