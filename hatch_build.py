"""Hatchling build hook: put the JVM reader's jar into the wheel when it can be built.

The wheel stays installable without a JDK: where javac or pyspark is missing
(e.g. an isolated build environment) the hook says so and the wheel carries no
jar, and ``vqs.spark.session()`` builds it on first use from the sources the
wheel always carries (``vqs/spark/connector/``) where javac exists, else uses
the Python source. See spark-connector/build.py.
"""

from __future__ import annotations

import importlib.util
import os

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version, build_data):
        if self.target_name != "wheel":
            return
        path = os.path.join(self.root, "spark-connector", "build.py")
        spec = importlib.util.spec_from_file_location("vqs_spark_connector_build", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        for src, dst in mod.wheel_files(self.root).items():  # the sources: an install can build the jar
            build_data["force_include"][src] = dst
        jar = mod.build(quiet=True)
        if jar is not None:
            build_data["force_include"][jar] = "vqs/spark/jars/vqs-spark.jar"
