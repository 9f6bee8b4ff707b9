"""The JVM reader: where its jar is, whether a session loaded it, a session built with it,
and the registration of format ``vqs`` that follows from it (:func:`register`).

``format("vqs")`` has two readers. The JVM one (spark-connector/, Java: a
DataSource V2 with columnar, pruned scans) runs when its jar is on the
session's classpath; its provider (``io.vqs.spark.VqsProvider``) then claims the
short name ``vqs`` and hands writes (and reads with option ``reader=python``)
to the Python source, which :func:`vqs.spark.register` registers as
``vqs_python``. Without the jar the Python source is ``vqs`` itself. Exactly
one source claims ``vqs`` either way: Spark refuses a short name that a
``DataSourceRegister`` and a Python data source both claim.

The jar must be on ``spark.jars`` before the JVM starts (:func:`session` does
that); it is built by ``spark-connector/build.py`` (``make spark-jar``, or the
wheel's build hook) and ships as ``vqs/spark/jars/vqs-spark.jar``. Where it
was not built (a wheel built in an isolated environment without pyspark, as
``pip install ".[spark]"`` does; a checkout before ``make spark-jar``; sources
newer than the jar), :func:`ensure_jar` builds it with the same script from
the sources of the checkout or of the wheel (``vqs/spark/connector/``): a
checkout's into ``vqs/spark/jars/`` (its build output, as ``make spark-jar``),
an installed wheel's into the user's cache, ``~/.cache/vqs/vqs-spark-VERSION.jar``
(``XDG_CACHE_HOME``; :func:`cache_jar_path`), never into the installed package:
``pip uninstall`` removes exactly what it installed, and the cached jar (a
file of the user's, named by version, so an upgrade builds its own) stays
until removed by hand (docs/spark.md). Without javac it builds nothing, says
so once on stderr, and the Python source serves.
"""

from __future__ import annotations

import os
import shutil
import sys

PROVIDER = "io.vqs.spark.VqsProvider"
PYTHON_NAME = "vqs_python"  # VqsProvider.PYTHON_NAME
JAR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jars", "vqs-spark.jar")


def jar_path() -> str | None:
    """The JVM reader's jar: the one this install ships (or a checkout built),
    else the one :func:`ensure_jar` built into the user's cache for this
    version; None when there is neither."""
    if os.path.isfile(JAR):
        return JAR
    found = _connector_build_script()
    if found is not None and not found[1]:
        cached = cache_jar_path()
        if os.path.isfile(cached):
            return cached
    return None


def _connector_build_script() -> tuple[str, bool] | None:
    """(build.py, is_checkout): spark-connector/build.py of a checkout (an editable
    install), else the copy the wheel carries (vqs/spark/connector/)."""
    here = os.path.dirname(os.path.abspath(__file__))
    checkout = os.path.join(os.path.dirname(os.path.dirname(here)), "spark-connector", "build.py")
    if os.path.isfile(checkout):
        return checkout, True
    shipped = os.path.join(here, "connector", "build.py")
    return (shipped, False) if os.path.isfile(shipped) else None


def cache_jar_path() -> str:
    """Where :func:`ensure_jar` builds the jar for an installed wheel that has
    none: ``$XDG_CACHE_HOME/vqs/vqs-spark-VERSION.jar`` (default
    ``~/.cache/vqs/``). Not part of the install: ``pip uninstall`` leaves it."""
    from .. import __version__

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "vqs", f"vqs-spark-{__version__}.jar")


def ensure_jar() -> str | None:
    """The JVM reader's jar, built first where this install has none.

    In a checkout (an editable install) it is rebuilt when a source is newer,
    as ``make spark-jar`` does. An installed wheel's jar is used as it is; a
    wheel built without one (no pyspark in its build environment) builds it from
    the sources it carries into :func:`cache_jar_path` (never into the
    installed package, so ``pip uninstall`` leaves nothing of its own behind
    there; the cached jar is the user's to remove). Building needs javac
    (JDK 17+) and pyspark; without them it says why on stderr and returns None
    (format ``vqs`` is then the Python source).
    """
    found = _connector_build_script()
    if found is None:
        return jar_path()
    script, checkout = found
    if not checkout:
        for target in (JAR, cache_jar_path()):
            if os.path.isfile(target):
                return target
    import importlib.util

    spec = importlib.util.spec_from_file_location("vqs_spark_connector_build", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if checkout and mod.up_to_date(JAR):
        return JAR
    target = JAR if checkout else cache_jar_path()
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if shutil.which("javac"):
        print(f"vqs: building the JVM reader's jar {target} (once, about 10 s)", file=sys.stderr)
    try:
        return mod.build(target, quiet=True) or jar_path()
    except Exception as e:  # javac failed: the Python source still serves
        print(f"vqs: could not build the JVM reader's jar ({e}); format('vqs') uses the Python source",
              file=sys.stderr)
        return jar_path()


def jvm_reader_loaded(spark) -> bool:
    """True if ``spark`` (a classic SparkSession) can load the JVM reader's provider."""
    sc = getattr(spark, "sparkContext", None)
    if sc is None:  # Spark Connect: the server decides what it loads
        return False
    try:
        jvm = sc._jvm
        loader = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
        jvm.java.lang.Class.forName(PROVIDER, False, loader)
        return True
    except Exception:
        return False


def session(master: str = "local[*]", app: str = "vqs", conf: dict | None = None, *, jvm_reader: bool = True):
    """A SparkSession (``getOrCreate``) with ``format("vqs")`` registered.

    Before the JVM starts it puts the JVM reader's jar on ``spark.jars`` (when
    ``jvm_reader`` is true; built first by :func:`ensure_jar` if this install
    has none yet and javac exists) and sets
    ``spark.pyspark.python`` to this interpreter, so Python workers, on this
    machine or a cluster's, run the Python that has VQS. ``conf`` adds Spark
    settings. A session that already exists is reused as it is (its classpath
    can no longer change): check :func:`jvm_reader_loaded`.
    """
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    b = SparkSession.builder.master(master).appName(app)
    b = b.config("spark.pyspark.python", sys.executable)
    extra = dict(conf or {})
    jar = ensure_jar() if jvm_reader else None
    if jar:
        jars = [j for j in str(extra.pop("spark.jars", "")).split(",") if j]
        extra["spark.jars"] = ",".join([*jars, jar])
    for k, v in extra.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    register(spark)
    return spark


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
        from .source import VQSPythonDataSource

        spark.dataSource.register(VQSPythonDataSource)
    else:
        from .source import VQSDataSource

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
