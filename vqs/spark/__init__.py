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

from .jvm import jar_path, jvm_reader_loaded, session
from .options import ReadOptions, WriteOptions, parse_read_options, parse_write_options
from .schema import arrow_schema, source_schema
from .source import VQSDataSource, VQSPythonDataSource

__all__ = [
    "ReadOptions",
    "VQSDataSource",
    "WriteOptions",
    "arrow_schema",
    "jar_path",
    "jvm_reader_loaded",
    "parse_read_options",
    "parse_write_options",
    "register",
    "session",
    "source_schema",
]


def register(spark) -> None:
    """Register the ``vqs`` format with ``spark`` (a SparkSession).

    When the session loaded the JVM reader (:func:`session` puts its jar on
    ``spark.jars``), that reader owns the name ``vqs`` and the Python source is
    registered as ``vqs_python``, which the JVM provider hands writes to (and
    reads with option ``reader`` = ``python``); otherwise the Python source is
    ``vqs``. Either way exactly one source claims ``vqs``.

    Spark runs the source in Python worker processes started with the session's
    Python (``PYSPARK_PYTHON``, else ``python3`` from PATH), which may lack vqs and
    its dependencies (a virtualenv not activated). In local mode, with no
    ``PYSPARK_PYTHON`` set, the workers run this interpreter (``sys.executable``)
    instead: they are on this machine, and it is the one that imported vqs.
    """
    _local_workers_use_this_python(spark)
    if jvm_reader_loaded(spark):
        spark.dataSource.register(VQSPythonDataSource)
    else:
        spark.dataSource.register(VQSDataSource)


def _local_workers_use_this_python(spark) -> None:
    import os
    import sys

    sc = getattr(spark, "sparkContext", None)  # None on Spark Connect: its server runs the workers
    if sc is None or os.environ.get("PYSPARK_PYTHON") or not sys.executable:
        return
    try:
        local = sc.master.startswith("local")
    except Exception:
        return
    if local and getattr(sc, "pythonExec", None) == "python3":
        sc.pythonExec = sys.executable
