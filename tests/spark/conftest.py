"""One local SparkSession for the whole test session (a cold start costs ~10 s)."""

from __future__ import annotations

import os
import sys

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")



@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import vqs.spark

    session = (
        SparkSession.builder.master("local[2]")
        .appName("vqs-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
        .config("spark.driver.extraJavaOptions", "-Dderby.system.home=" + str(tmp_path_factory.mktemp("derby")))
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    vqs.spark.register(session)
    yield session
    session.stop()
