"""Build the JVM reader's jar (vqs/spark/jars/vqs-spark.jar) with plain javac.

    python spark-connector/build.py          # from a checkout: `make spark-jar` runs this

No Maven and no downloads: the sources compile with ``javac --release 17``
against the jars the pyspark wheel ships (Spark, Jackson, zstd-jni, lz4-java),
found next to the ``pyspark`` package this interpreter imports (or in
``$SPARK_HOME/jars``). The jar holds only our classes and the service file
that registers the ``vqs`` short name; everything else is already on Spark's
classpath. Rebuilt only when a source is newer than the jar. Without javac or
pyspark it prints why and builds nothing (exit status 0: the Python source
still works); ``--strict`` makes that an error.

Also used by the hatchling build hook (hatch_build.py), so a wheel built where
javac and pyspark exist carries the jar; elsewhere the wheel is built without it.
Every wheel also carries this script and the sources (:func:`wheel_files`, as
``vqs/spark/connector/``): ``pip install ".[spark]"`` builds the wheel in an
isolated environment that has no pyspark, so ``vqs.spark.session()`` builds the
jar on first use instead, where javac exists (vqs/spark/jvm.py, ``ensure_jar``).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = os.path.join(HERE, "src", "main")
JAR = os.path.join(os.path.dirname(HERE), "vqs", "spark", "jars", "vqs-spark.jar")


def _invoking_pyspark_jars() -> str | None:
    """pyspark's jars as this interpreter sees them *outside* an isolated build
    environment: pip runs the build hook with the virtualenv's own python but a
    sys.path without its site-packages; ``-I`` drops pip's PYTHONPATH again."""
    code = ("import importlib.util as u, os; s = u.find_spec('pyspark'); "
            "print(os.path.join(next(iter(s.submodule_search_locations)), 'jars') if s else '')")
    try:
        out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    d = out.stdout.strip()
    return d if out.returncode == 0 and d and os.path.isdir(d) else None


def spark_jars_dir() -> str | None:
    """The directory of Spark's jars: the pyspark package's (this interpreter's, else
    the one the build hook was started from), else $SPARK_HOME/jars."""
    spec = importlib.util.find_spec("pyspark")
    if spec is not None and spec.submodule_search_locations:
        d = os.path.join(next(iter(spec.submodule_search_locations)), "jars")
        if os.path.isdir(d):
            return d
    d = _invoking_pyspark_jars()
    if d is not None:
        return d
    home = os.environ.get("SPARK_HOME")
    if home and os.path.isdir(os.path.join(home, "jars")):
        return os.path.join(home, "jars")
    return None


def _sources() -> list[str]:
    out = []
    for root, _dirs, files in os.walk(SOURCES):
        out += [os.path.join(root, f) for f in files]
    return sorted(out)


def wheel_files(root: str = os.path.dirname(HERE)) -> dict[str, str]:
    """What the wheel carries besides the package: {path in ``root``: path in the wheel}.
    This script and the Java sources, so an installed wheel can build its jar."""
    here = os.path.join(root, "spark-connector")
    return {os.path.join(here, "build.py"): "vqs/spark/connector/build.py",
            os.path.join(here, "src"): "vqs/spark/connector/src"}


def up_to_date(jar: str = JAR) -> bool:
    if not os.path.exists(jar):
        return False
    t = os.path.getmtime(jar)
    return all(os.path.getmtime(s) <= t for s in _sources())


def build(jar: str = JAR, *, quiet: bool = False) -> str | None:
    """Build ``jar`` if needed; returns its path, or None (with the reason
    printed) when javac or Spark's jars are missing."""
    if up_to_date(jar):
        return jar
    javac = shutil.which("javac")
    jars = spark_jars_dir()
    if javac is None or jars is None:
        why = "javac is not on PATH (install a JDK 17+)" if javac is None else "pyspark is not installed"
        print(f"vqs: not building the JVM reader jar: {why}; format('vqs') uses the Python source", file=sys.stderr)
        return None
    java_files = [s for s in _sources() if s.endswith(".java")]
    with tempfile.TemporaryDirectory() as classes:
        subprocess.run(
            [javac, "--release", "17", "-nowarn", "-Xlint:-options", "-cp", os.path.join(jars, "*"), "-d", classes,
             *java_files],
            check=True,
        )
        os.makedirs(os.path.dirname(jar), exist_ok=True)
        tmp = f"{jar}.{os.getpid()}.tmp"  # two processes building at once each write their own
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: vqs spark-connector/build.py\n")
            for root, _dirs, files in os.walk(classes):
                for f in sorted(files):
                    p = os.path.join(root, f)
                    z.write(p, os.path.relpath(p, classes))
            res = os.path.join(SOURCES, "resources")
            for root, _dirs, files in os.walk(res):
                for f in sorted(files):
                    p = os.path.join(root, f)
                    z.write(p, os.path.relpath(p, res))
        os.replace(tmp, jar)
    if not quiet:
        print(f"vqs: built {jar}", file=sys.stderr)
    return jar


if __name__ == "__main__":
    built = build()
    sys.exit(1 if built is None and "--strict" in sys.argv else 0)
