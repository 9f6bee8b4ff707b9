"""Every Python and shell snippet of README.md and docs/*.md runs as written.

A page's blocks run in order, in a fresh temporary directory, the way a reader
pastes them after ``source .venv/bin/activate`` (this interpreter's bin directory
first on PATH):

* ``python`` blocks run in a fresh Python process per page (tests/docs_kernel.py),
  in one namespace (a block may use what an earlier block of the page defined, as a
  reader's Python session would). The pages that use Spark share one directory and
  one process, hence one SparkSession.
* ``sh`` blocks run in ``bash -e``. A block that is only a ``vqs serve ...`` command
  starts that server in the background (a reader leaves it running in a terminal):
  the next blocks run once it answers ``/health/ready``, and it is stopped at the
  end of the page. A block that talks to ``127.0.0.1:8642`` with no server running
  gets one (``vqs serve`` on the page's ``server-data``).
* The pages show the documented ports (8642 HTTP, 8643 gRPC, 9092 Kafka, 8644 native) so that
  they paste as they are; the test runs them on free ports instead (a page's own
  set), substituting each where the code names it (``host:port``, ``--port N``,
  ``--grpc-port N``, ``--kafka-port N``, ``--native-port N``), and sets ``VQS_PORT`` (a ``vqs serve``
  without ``--port``) and, for a shell block without ``--data-dir``, ``VQS_URL`` (a
  command without ``--url``), so that nothing runs on the documented ports.
* ``<!-- not-run: reason -->`` on the line before a block skips it (signatures,
  installs, commands that would recurse into the test suite, Docker).
* README.md's blocks run twice over (its tours can be run again as they are).
* A shell block using the AWS CLI is skipped, with a warning, where ``aws`` is
  not installed (it is not a dependency of VQS).

Every fenced block names its language; ``text`` (and other non-code tags) are not
run. The test fails on the first block that fails, naming the page and line.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import warnings

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("boto3")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir(os.path.join(ROOT, "docs"))
                               if f.endswith(".md"))
RUN = {"python", "sh"}
KNOWN = RUN | {"text", "toml", "json", "http", "ini"}
FENCE = re.compile(r"^```")
NOT_RUN = re.compile(r"^<!--\s*not-run:\s*\S.*-->\s*$")
PORT = 8642  # the documented HTTP port; 8643 (gRPC), 9092 (Kafka) and 8644 (native) below
DOC_PORTS = (PORT, 8643, 9092, 8644)
RUN_TWICE = {"README.md"}  # its tours can be run again in the same directory
OPTIONAL_TOOLS = ("aws",)  # blocks using them are skipped (with a warning) where they are not installed
BIN = os.path.dirname(sys.executable)


def blocks(page: str):
    """``(lang, first_line, code, not_run)`` for each fenced block of a page."""
    lines = open(os.path.join(ROOT, page), encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        if FENCE.match(lines[i]):
            lang = lines[i][3:].strip()
            prev = next((ln for ln in reversed(lines[:i]) if ln.strip()), "")
            j = i + 1
            while j < len(lines) and not FENCE.match(lines[j]):
                j += 1
            assert j < len(lines), f"{page}:{i + 1}: unclosed code block"
            out.append((lang, i + 1, "\n".join(lines[i + 1:j]) + "\n", bool(NOT_RUN.match(prev.strip()))))
            i = j + 1
        else:
            i += 1
    return out


def test_every_block_names_its_language():
    bad = [f"{page}:{line} ```{lang}" for page in PAGES for lang, line, _, _ in blocks(page) if lang not in KNOWN]
    assert not bad, "blocks with no or an unknown language (use text for output and diagrams): " + ", ".join(bad)


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _on_ports(code: str, ports: dict[int, int]) -> str:
    """``code`` with each documented port where it names one (after ``:``, ``port `` or
    ``port=``) replaced by the page's free port."""
    for doc, real in ports.items():
        code = re.sub(rf"(?:(?<=:)|(?<=port )|(?<=port=)){doc}(?!\d)", str(real), code)
    return code


def _ready(port: int, timeout: float = 0.5) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/ready", timeout=timeout) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


class Server:
    """A `vqs serve` a page started (or one the test started for the page)."""

    def __init__(self, port: int):
        self.port = port  # where it listens (the page's free port for the documented 8642)
        self.proc: subprocess.Popen | None = None
        self.log = None
        self.auto = False  # started by the test, not by the page

    def start(self, command: str, cwd: str, env: dict, where: str) -> None:
        assert self.proc is None, f"{where}: a second server on port {self.port}"
        assert not _ready(self.port), f"port {self.port} is taken by another server"
        self.log = open(os.path.join(cwd, ".server.log"), "w+b")
        self.proc = subprocess.Popen(["bash", "-c", "exec " + command], cwd=cwd, env=env,
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        # ready when this process says so (exec: the server keeps bash's pid), then answers: the
        # port was free when picked, not held, so another test's server may answer on it a moment
        mine = re.compile(rf'(pid {self.proc.pid}\b|"pid": ?{self.proc.pid}\b)'.encode())

        def said_ready() -> bool:
            with open(self.log.name, "rb") as f:
                return mine.search(f.read()) is not None

        while not (said_ready() and _ready(self.port)):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.log.seek(0)
                raise AssertionError(f"{where}: `{command}` did not start:\n{self.log.read().decode()}")
            time.sleep(0.1)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait()
            self.proc = None
        self.auto = False
        if self.log is not None:
            self.log.close()
            self.log = None


def _is_serve(code: str) -> bool:
    cmds = [ln for ln in code.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return len(cmds) == 1 and cmds[0].lstrip().startswith("vqs serve")


def _missing_tool(code: str) -> str | None:
    """An outside program the block runs (the AWS CLI) that this machine lacks."""
    for tool in OPTIONAL_TOOLS:
        if re.search(rf"(^|\s){tool}\s", code) and shutil.which(tool) is None:
            return tool
    return None


class Kernel:
    """A Python process (tests/docs_kernel.py) running snippets in a directory."""

    def __init__(self, cwd: str, env: dict):
        self.log_path = os.path.join(cwd, ".python.log")
        self.proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "docs_kernel.py"), self.log_path],
                                     cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True)

    def run(self, page: str, where: str, code: str, timeout: float = 600) -> None:
        self.proc.stdin.write(json.dumps({"page": page, "where": where, "code": code}) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.close()
            raise AssertionError(f"{where}: no answer in {timeout:.0f} s (or the process died)\n{code}\n"
                                 f"{self.tail()}")
        reply = json.loads(line)
        assert reply["ok"], f"{where} failed:\n{code}\n{reply['error']}\nits output:\n{self.tail()}"

    def tail(self, n: int = 4000) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()[-n:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def _env() -> dict:
    """The environment after `source .venv/bin/activate`, without VQS_ or PYSPARK_ settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VQS_", "PYSPARK_"))}
    env.update(PATH=BIN + os.pathsep + env.get("PATH", ""), VIRTUAL_ENV=os.path.dirname(BIN))
    env.pop("PYTHONHOME", None)
    return env


def _uses_spark(page: str) -> bool:
    return any(lang == "python" and "pyspark" in code for lang, _, code, skip in blocks(page) if not skip)


@pytest.fixture(scope="module")
def spark_kernel(tmp_path_factory):
    """The pages that use Spark share one directory and one Python process: one
    SparkSession (started by the first, got again by ``getOrCreate`` in the next;
    its Python workers keep the directory they started in)."""
    made = {}

    def get():
        if "k" not in made:
            work = tmp_path_factory.mktemp("spark-pages")
            made["k"] = (str(work), Kernel(str(work), _env()))
        return made["k"]

    yield get
    if "k" in made:
        made["k"][1].close()


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_page_snippets_run(page, tmp_path, spark_kernel):
    todo = [b for b in blocks(page) if b[0] in RUN and not b[3]]
    if not todo:
        pytest.skip(f"{page} has no runnable snippet")
    ports = dict(zip(DOC_PORTS, _free_ports(len(DOC_PORTS))))
    env = {**_env(), "VQS_PORT": str(ports[PORT])}
    if _uses_spark(page):
        pytest.importorskip("pyspark")
        work, kernel = spark_kernel()
    else:
        work = str(tmp_path)
        kernel = Kernel(work, env)
    server = Server(ports[PORT])
    first = len(todo)
    if page in RUN_TWICE:  # a second pass, as a reader trying the tours again (the server still running)
        todo = todo + [(lang, line, code, skip) for lang, line, code, skip in todo if not _is_serve(code)]
    try:
        for n, (lang, line, code, _) in enumerate(todo):
            where = f"{page}:{line}" + (" (second run)" if n >= first else "")
            talks_to_server = f":{PORT}" in code
            code = _on_ports(code, ports)
            if talks_to_server and not server.running and not _is_serve(code):
                server.start(f"vqs serve --data-dir server-data --port {server.port}", work, env, where)
                server.auto = True
            if lang == "sh" and _is_serve(code):
                if server.auto:  # the page starts its own now
                    server.stop()
                server.start(code.strip().split("#")[0].strip(), work, env, where)
            elif lang == "sh" and (tool := _missing_tool(code)):
                warnings.warn(f"{where}: skipped, {tool!r} is not installed here", stacklevel=1)
            elif lang == "sh":
                # VQS_URL: a command without --url reaches the page's server (not with --data-dir:
                # the CLI refuses both)
                sh_env = env if "--data-dir" in code else {**env, "VQS_URL": f"http://127.0.0.1:{server.port}"}
                p = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code], cwd=work, env=sh_env,
                                   capture_output=True, timeout=600)
                assert p.returncode == 0, (f"{where}: exit {p.returncode}\n{code}\nstdout:\n{p.stdout.decode()}"
                                           f"\nstderr:\n{p.stderr.decode()}")
            else:
                kernel.run(page, where, code)
    finally:
        if not _uses_spark(page):
            kernel.close()
        server.stop()


def test_documented_ports_are_substituted_where_code_names_them():
    ports = {PORT: 40001, 8643: 40002, 9092: 40003}
    code = ("curl -s localhost:8642/topics http://127.0.0.1:8642/x\nvqs serve --port 8642 --grpc-port 8643 "
            "--kafka-port=9092\nkcat -b 127.0.0.1:9092 -o 86420 -c 8642\n")
    assert _on_ports(code, ports) == (
        "curl -s localhost:40001/topics http://127.0.0.1:40001/x\nvqs serve --port 40001 --grpc-port 40002 "
        "--kafka-port=40003\nkcat -b 127.0.0.1:40003 -o 86420 -c 8642\n")
