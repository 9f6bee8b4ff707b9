"""Runnable data pipelines built on VQS and its Spark connector.

The frame pipeline (``make demo``): ``scene`` renders synthetic cameras (JPEG
frames, scripted events as ground truth); ``edge`` buffers each camera's frames
in a HybridQueue and forwards them to a VQS topic; ``frames`` is the Structured
Streaming job (decode, features, per-camera event detection in Spark state,
Parquet, alerts to a VQS topic); ``detect`` its numpy core; ``report`` its
page; ``demo`` runs it all against a local server.

The camera-statistics job on frame metadata: ``camera`` (the job), ``chart``
(its page), ``cluster`` (a standalone cluster on loopback, ``make demo-cluster``).
Importing this package does not import pyspark.
"""
