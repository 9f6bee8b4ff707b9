"""Runnable data pipelines built on VQS and its Spark connector.

``vqs.pipelines.camera``: video-frame events per camera -> a VQS topic ->
Structured Streaming windowed statistics (Parquet) and alerts (a VQS topic).
Importing this package does not import pyspark.
"""
