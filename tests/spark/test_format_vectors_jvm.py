"""The golden format vectors (tests/format_vectors/) read by the JVM reader's own classes.

spark-connector/src/test/java/io/vqs/spark/VectorsMain.java (a plain ``main``, no
Spark) reads every vector with ``PartitionLog`` and ``RecordBatch`` and prints what
it found; that must be exactly what each vector's JSON says, as for the Python
reader (tests/storage/test_format_vectors.py). Compiled with javac against the
connector's jar and the pyspark wheel's jars (Jackson, zstd-jni, lz4-java).
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VECTORS = os.path.join(ROOT, "tests", "format_vectors")
MAIN = os.path.join(ROOT, "spark-connector", "src", "test", "java", "io", "vqs", "spark", "VectorsMain.java")
NAMES = sorted(f[:-5] for f in os.listdir(VECTORS) if f.endswith(".json"))


def _build_module():
    spec = importlib.util.spec_from_file_location("vqs_connector_build_vectors",
                                                  os.path.join(ROOT, "spark-connector", "build.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def jvm_output(tmp_path_factory):
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("javac/java are not on PATH (install a JDK 17+): the JVM reader is not checked against the vectors")
    build = _build_module()
    jars = build.spark_jars_dir()
    assert jars is not None  # conftest skipped the module without pyspark
    tmp = tmp_path_factory.mktemp("vectors-jvm")
    # the checkout's jar, the one format("vqs") loads: rebuilt here only if a source is newer
    jar = build.build(quiet=True)
    assert jar is not None
    classes = tmp / "classes"
    cp = os.pathsep.join([jar, os.path.join(jars, "*")])
    subprocess.run(["javac", "--release", "17", "-nowarn", "-Xlint:-options", "-cp", cp, "-d", str(classes), MAIN],
                   check=True, timeout=300)
    out = subprocess.run(["java", "-cp", os.pathsep.join([str(classes), cp]), "io.vqs.spark.VectorsMain",
                          *sorted(glob.glob(os.path.join(VECTORS, "*", "")))],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout)


@pytest.mark.parametrize("name", NAMES)
def test_jvm_reader_reads_the_vector(jvm_output, name):
    with open(os.path.join(VECTORS, f"{name}.json")) as f:
        want = json.load(f)
    got = jvm_output[name]
    keys = ("start_offset", "end_offset", "records", "unreadable", "missing")
    assert {k: got[k] for k in keys} == {k: want[k] for k in keys}
    # COUNT(*) reads no body: every offset a read returns or fails on (no CRC is checked), none of a gap
    assert got["count"] == len(want["records"]) + len(want["unreadable"])
    for msg in got["errors"]:
        assert f"{want['corrupt']['segment']}: invalid batch at position {want['corrupt']['position']}" in msg
    assert len(got["errors"]) == len(want["unreadable"])
