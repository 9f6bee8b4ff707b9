"""The JVM reader's jar where the install did not build it.

``pip install ".[spark]"`` (and ``pip wheel .``) build the wheel in an isolated
environment without pyspark, so the build hook cannot compile the jar; the wheel
then carries the Java sources and spark-connector/build.py, and
``vqs.spark.session()`` (through ``ensure_jar``) builds the jar on first use.
These tests lay out an installed package the way the wheel does (the hook's own
``wheel_files`` mapping) and build from it, without starting Spark.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONNECTOR = os.path.join(ROOT, "spark-connector")


def _build_module():
    spec = importlib.util.spec_from_file_location("vqs_connector_build_t", os.path.join(CONNECTOR, "build.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK (javac) to build the jar")
def test_an_install_without_the_jar_builds_it_from_the_sources_the_wheel_carries(tmp_path):
    site = tmp_path / "site"
    shutil.copytree(os.path.join(ROOT, "vqs"), site / "vqs", ignore=shutil.ignore_patterns("jars", "__pycache__"))
    for src, dst in _build_module().wheel_files(ROOT).items():
        (site / dst).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if os.path.isdir(src) else shutil.copy)(src, site / dst)
    code = """
import vqs.spark.jvm as j
assert j.__file__.startswith(%r), j.__file__
assert j.jar_path() is None
first = j.ensure_jar()
print(first)
assert j.ensure_jar() == first == j.jar_path() == j.cache_jar_path()
""" % str(site)
    before = sorted(str(p) for p in site.rglob("*"))
    env = dict(os.environ, PYTHONPATH=str(site), XDG_CACHE_HOME=str(tmp_path / "cache"))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=240)
    assert p.returncode == 0, p.stderr
    jar = p.stdout.strip()
    from vqs import __version__

    # Into the user's versioned cache, never into the installed package: pip
    # uninstall removes what it installed and nothing of ours is left there.
    assert jar == str(tmp_path / "cache" / "vqs" / f"vqs-spark-{__version__}.jar")
    assert sorted(str(p) for p in site.rglob("*") if "__pycache__" not in str(p)) == [
        p for p in before if "__pycache__" not in p]
    assert p.stderr.count("building the JVM reader's jar") == 1  # the second call found it
    with zipfile.ZipFile(jar) as z:
        names = set(z.namelist())
        service = z.read("META-INF/services/org.apache.spark.sql.sources.DataSourceRegister").decode()
    assert "io/vqs/spark/VqsProvider.class" in names
    assert "io.vqs.spark.VqsProvider" in service


def test_the_build_hook_finds_pyspark_of_the_interpreter_outside_an_isolated_build():
    # python -S: no site-packages, as in pip's isolated build environment (pyspark not importable)
    code = "import sys; sys.path.insert(0, %r); import build; print(build.spark_jars_dir())" % CONNECTOR
    env = {k: v for k, v in os.environ.items() if k != "SPARK_HOME"}
    p = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    import pyspark

    assert p.stdout.strip() == os.path.join(os.path.dirname(pyspark.__file__), "jars")
