"""The wheel: it builds from the source tree, holds the package and nothing else, and the
library and the `vqs` command work from it in a fresh virtualenv without any extra.

Offline and quick (about 5 s): the wheel is built without build isolation (hatchling
is in the dev extra), installed with ``--no-deps --no-index`` into a venv made without
pip (this interpreter's pip installs into it with ``--python``), and the core
dependencies are the ones installed here, exposed to the fresh venv through a ``.pth``
file that lists only them (the dependency closure of vqs's non-extra requirements),
so server and Spark packages stay out of its reach.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import subprocess
import sys
import zipfile

import pytest

pytest.importorskip("hatchling")
Requirement = pytest.importorskip("packaging.requirements").Requirement

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(*cmd, cwd=None, input=None):
    p = subprocess.run(cmd, cwd=cwd, input=input, capture_output=True, timeout=300,
                       env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")})
    assert p.returncode == 0, f"{cmd}\n{p.stdout.decode()}\n{p.stderr.decode()}"
    return p.stdout.decode()


def core_closure(dest: str) -> set[str]:
    """Symlink into ``dest`` the top-level files of vqs's core dependencies (no extras)
    and of what they need, as installed here; return their names."""
    todo, seen = list(md.requires("vqs") or []), set()
    while todo:
        req = Requirement(todo.pop())
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        key = req.name.lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        dist = md.distribution(req.name)
        todo += dist.requires or []
        for top in {str(f).split("/")[0] for f in dist.files or ()}:
            src = os.path.join(str(dist.locate_file("")), top)
            dst = os.path.join(dest, top)
            if top not in ("..", "__pycache__") and os.path.exists(src) and not os.path.exists(dst):
                os.symlink(src, dst)
    return seen


def test_wheel_installs_the_library_and_cli_without_extras(tmp_path):
    dist = tmp_path / "dist"
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
        "-w", str(dist), ROOT)
    [wheel] = [str(dist / f) for f in os.listdir(dist)]
    assert os.path.basename(wheel).startswith("vqs-") and wheel.endswith("-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert all(n.startswith(("vqs/", "vqs-")) for n in names), [n for n in names if not n.startswith("vqs")]
    assert {"vqs/__init__.py", "vqs/cli/__init__.py", "vqs/server/app.py", "vqs/spark/__init__.py"} <= set(names)
    assert not any(n.startswith(("tests/", "bench/", "examples/")) for n in names)
    # the JVM reader's sources and build script: an install without the jar builds it (tests/spark/test_jar_build.py)
    assert {"vqs/spark/connector/build.py",
            "vqs/spark/connector/src/main/java/io/vqs/spark/VqsProvider.java"} <= set(names)
    for extra in ("server", "spark", "dev"):
        assert f"Provides-Extra: {extra}" in meta
    requires = [Requirement(line.split(":", 1)[1].strip()) for line in meta.splitlines()
                if line.startswith("Requires-Dist:")]
    core = {r.name for r in requires if r.marker is None}
    assert core == {"crc32c", "zstandard", "lz4", "typer", "rich"}
    assert {"fastapi", "uvicorn"} <= {r.name for r in requires if r.marker and r.marker.evaluate({"extra": "server"})}
    assert "pyspark" in {r.name for r in requires if r.marker and r.marker.evaluate({"extra": "spark"})}

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", str(venv))
    py = str(venv / "bin" / "python")
    run(sys.executable, "-m", "pip", "--python", py, "install", "--quiet", "--no-deps", "--no-index", wheel)
    deps = tmp_path / "core-deps"
    deps.mkdir()
    names = core_closure(str(deps))
    assert {"crc32c", "zstandard", "lz4", "typer", "rich"} <= names
    assert not names & {"fastapi", "uvicorn", "pyspark", "httpx", "pyarrow"}
    site = run(py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
    with open(os.path.join(site, "core-deps.pth"), "w") as f:
        f.write(str(deps) + "\n")

    work = tmp_path / "work"
    work.mkdir()
    out = run(py, "-c", """
import importlib.util, vqs
assert vqs.__file__.startswith(%r), vqs.__file__
for extra in ("fastapi", "uvicorn", "pyspark", "httpx"):
    assert importlib.util.find_spec(extra) is None, extra
with vqs.Broker("data") as b:
    b.create_topic("t")
    b.producer().send("t", b"hello")
    print([r.value for r in b.consumer("t").poll(timeout=1)])
with vqs.HybridQueue("hq") as q:
    q.put({"a": 1})
    print(q.get())
""" % site, cwd=str(work))
    assert out.split("\n")[:2] == ["[b'hello']", "{'a': 1}"]
    vqs_cmd = str(venv / "bin" / "vqs")
    assert "Usage" in run(vqs_cmd, "--help")
    run(vqs_cmd, "topic", "create", "lines", "--data-dir", "d2", cwd=str(work))
    run(vqs_cmd, "produce", "lines", "--data-dir", "d2", "--no-progress", cwd=str(work), input=b"x\ny\n")
    assert run(vqs_cmd, "consume", "lines", "--data-dir", "d2", cwd=str(work)) == "x\ny\n"
    assert run(vqs_cmd, "topic", "list", "--data-dir", "d2", cwd=str(work)).split() == ["lines"]


def _dockerignored(rel: str, patterns: list[str]) -> bool:
    import fnmatch

    return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(rel, p + "/*") or rel.startswith(p.rstrip("/") + "/")
               for p in patterns)


def test_the_dockerfile_copies_everything_its_build_needs(tmp_path):
    """Replays the Dockerfile's COPY steps (what the build context, less .dockerignore, gives
    them) into an empty directory and builds the wheel there as its pip install does: a file
    the build needs and the Dockerfile does not copy fails here, without a Docker engine."""
    import shutil

    with open(os.path.join(ROOT, ".dockerignore")) as f:
        ignored = [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]
    ignored = [p[3:] if p.startswith("**/") else p for p in ignored]
    src = tmp_path / "src"
    src.mkdir()
    copies = 0
    with open(os.path.join(ROOT, "Dockerfile")) as f:
        for line in f:
            parts = line.split()
            if not parts or parts[0] != "COPY":
                continue
            *sources, dest = parts[1:]
            assert not any(s.startswith("--") for s in sources), line  # only plain context copies
            for s in sources:
                assert not _dockerignored(s, ignored), f"{s} is copied but .dockerignore leaves it out"
                target = src / dest / os.path.basename(s) if dest.endswith("/") or len(sources) > 1 else src / dest
                origin = os.path.join(ROOT, s)
                if os.path.isdir(origin):
                    shutil.copytree(origin, target, ignore=shutil.ignore_patterns("__pycache__", "*.jar"))
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(origin, target)
                copies += 1
    assert copies >= 2
    dist = tmp_path / "dist"
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
        "-w", str(dist), str(src))
    [whl] = os.listdir(dist)
    with zipfile.ZipFile(dist / whl) as z:
        names = set(z.namelist())
    assert "vqs/__init__.py" in names and "vqs/spark/connector/build.py" in names
