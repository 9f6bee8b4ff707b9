"""VQS as a Spark source and sink: format ``vqs``.

::

    import vqs.spark
    spark = vqs.spark.session("local[*]")   # the JVM reader's jar on spark.jars, then register()
    df = spark.read.format("vqs").option("path", "data").option("topic", "events").load()

Reads run in the JVM reader (spark-connector/, see jvm.py) when the session
loaded its jar, else in the PySpark Python data source; writes always run in
the Python source (its exactly-once sink).

Needs the ``spark`` extra (pyspark >= 4.2, pyarrow, pandas < 3); ``import vqs``
does not import this package. See docs/spark.md for the options.
"""

from __future__ import annotations

from .jvm import _local_workers_use_this_python as _local_workers_use_this_python  # tests use it
from .jvm import cache_jar_path, ensure_jar, jar_path, jvm_reader_loaded, register, session
from .options import ReadOptions, WriteOptions, parse_read_options, parse_write_options
from .schema import arrow_schema, source_schema
from .source import VQSDataSource, VQSPythonDataSource

__all__ = [
    "ReadOptions",
    "VQSDataSource",
    "VQSPythonDataSource",
    "WriteOptions",
    "arrow_schema",
    "cache_jar_path",
    "ensure_jar",
    "jar_path",
    "jvm_reader_loaded",
    "parse_read_options",
    "parse_write_options",
    "register",
    "session",
    "source_schema",
]
