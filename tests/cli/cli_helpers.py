"""Running the ``vqs`` command: in this process (typer's CliRunner), or as a real child process.

Most CLI tests check what a command prints and its exit status, which the command
computes the same way in either case: :func:`run_vqs` runs it in-process (no
interpreter start-up, about 0.5 s saved a call). :func:`run_vqs_process` runs
``python -m vqs.cli`` for what only a real process shows: the exit status the
shell sees, signals, a terminal or a pipe on stdin/stdout, argv bytes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace


def run_vqs(*args, input: bytes | None = None, env: dict | None = None, columns: int = 200,
            timeout: float = 120) -> SimpleNamespace:
    """``vqs ARGS`` in this process; returns ``returncode``, ``stdout`` and ``stderr`` (bytes) as
    ``subprocess.run`` does. stdin is ``input`` (never a terminal), stdout and stderr are not
    terminals, ``COLUMNS`` is as given. An exception the command lets escape is raised here (a
    real process would print a traceback and exit 1: either way the test fails)."""
    from typer.testing import CliRunner

    from vqs.cli import app, output

    runner = CliRunner()
    widths = output.out._width, output.err._width
    output.out._width = output.err._width = None  # rich reads COLUMNS (set by the runner's env) at each print
    try:
        r = runner.invoke(app, [str(a) for a in args], input=input, env={"COLUMNS": str(columns), **(env or {})},
                          prog_name="vqs")
    finally:
        output.out._width, output.err._width = widths
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    return SimpleNamespace(returncode=r.exit_code, stdout=r.stdout_bytes, stderr=r.stderr_bytes)


def run_vqs_process(*args, input: bytes | None = None, env: dict | None = None, columns: int = 200,
                    timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m vqs.cli ARGS`` as a child process, output captured, ``COLUMNS`` as given."""
    return subprocess.run([sys.executable, "-m", "vqs.cli", *map(str, args)], input=input, capture_output=True,
                          env={**os.environ, "COLUMNS": str(columns), **(env or {})}, timeout=timeout)
