"""The SQS-compatible API: AWS JSON 1.0 and the query protocol on ``POST /``."""
