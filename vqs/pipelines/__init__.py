"""Runnable data pipelines built on VQS and its Spark connector.

``vqs.pipelines.camera``: video-frame events per camera -> a VQS topic ->
Structured Streaming windowed statistics (Parquet) and alerts (a VQS topic);
``vqs.pipelines.chart``: their picture (a self-contained HTML page);
``vqs.pipelines.demo``: ``make demo``, all of it against a local server.
Importing this package does not import pyspark.
"""
