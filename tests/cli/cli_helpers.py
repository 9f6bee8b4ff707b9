"""Running the real ``vqs`` command in a child process (stdout and stderr are pipes, not a terminal)."""

from __future__ import annotations

import os
import subprocess
import sys


def run_vqs(*args, input: bytes | None = None, env: dict | None = None, columns: int = 200,
            timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m vqs.cli ARGS`` with output captured, ``COLUMNS`` as given."""
    return subprocess.run([sys.executable, "-m", "vqs.cli", *map(str, args)], input=input, capture_output=True,
                          env={**os.environ, "COLUMNS": str(columns), **(env or {})}, timeout=timeout)
