"""One local SparkSession for the whole test session (a cold start costs ~10 s).

The session loads the JVM reader's jar (built here if it is missing and javac
exists), so ``format("vqs")`` reads run in the JVM; modules that use the
``reader`` fixture run each test over both readers (the session conf
``spark.vqs.reader``: ``jvm`` or ``python``).
"""

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

    jar = _jar()
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
        .config("spark.jars", jar or "")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    vqs.spark.register(session)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def jvm_jar():
    """The JVM reader's jar (built here if missing and javac exists), or None, without
    starting a SparkSession: for tests whose Spark runs in processes of their own."""
    return _jar()


def _jar():
    import importlib.util

    import vqs.spark

    if vqs.spark.jar_path() is None:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        spec = importlib.util.spec_from_file_location("vqs_connector_build", os.path.join(root, "spark-connector", "build.py"))
        if spec is not None and os.path.exists(spec.origin):
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            mod.build(quiet=True)
    return vqs.spark.jar_path()


def _use_reader(spark, name: str):
    """Force ``format("vqs")`` to one reader for a test (skipped where the JVM one is not built)."""
    import vqs.spark

    if name == "jvm" and not vqs.spark.jvm_reader_loaded(spark):
        pytest.skip("the JVM reader is not built here (javac missing): only the Python source runs")
    spark.conf.set("spark.vqs.reader", name)
    yield name
    spark.conf.unset("spark.vqs.reader")


@pytest.fixture(params=["jvm", "python"])
def reader(request, spark):
    """Run the test over both readers of format("vqs")."""
    yield from _use_reader(spark, request.param)


@pytest.fixture
def jvm(spark):
    """Run the test over the JVM reader only (what only it does: vectors=arrow, timestamp pushdown)."""
    yield from _use_reader(spark, "jvm")
