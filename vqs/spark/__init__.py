"""VQS as a Spark source and sink: the PySpark Python data source ``vqs``.

::

    import vqs.spark
    vqs.spark.register(spark)
    df = spark.read.format("vqs").option("path", "data").option("topic", "events").load()

Needs the ``spark`` extra (pyspark >= 4.2, pyarrow, pandas < 3); ``import vqs``
does not import this package. See docs/spark.md for the options.
"""

from __future__ import annotations

from .options import ReadOptions, WriteOptions, parse_read_options, parse_write_options
from .schema import arrow_schema, source_schema
from .source import VQSDataSource

__all__ = [
    "ReadOptions",
    "VQSDataSource",
    "WriteOptions",
    "arrow_schema",
    "parse_read_options",
    "parse_write_options",
    "register",
    "source_schema",
]


def register(spark) -> None:
    """Register the ``vqs`` format with ``spark`` (a SparkSession)."""
    spark.dataSource.register(VQSDataSource)
