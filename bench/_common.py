"""Helpers every benchmark in bench/ shares: where vqs comes from, what a run
records about itself, scratch space, timing, rounds, and Markdown output.

Invariants:

* **Which vqs is measured.** Importing this module decides it, once, before
  any ``import vqs``: if a ``$PYTHONPATH`` entry holds a ``vqs`` package, that
  one (``bench/ab.py`` points PYTHONPATH at a base and a new tree and runs the
  same bench script against each); otherwise the tree this file is in, ahead
  of any installed copy (an editable install of another worktree included).
  Child processes a bench starts get the same tree: ``child_env()`` puts it
  first on their PYTHONPATH and ``vqs_home()`` names it for ``cwd``.
* **What a run records.** ``run_info()`` is the head of every bench's JSON:
  the date (UTC), the exact command line (and PYTHONPATH when set), the git
  commit and dirty flag of the vqs tree measured (and of the bench scripts
  when they live in another tree), and the machine (CPU model, cores, memory,
  kernel, Python). ``run_header_md()`` renders the same as lines to paste
  above a result table in bench/RESULTS.md.
* **Figures.** ``figure()`` rows in a JSON's ``figures`` list are what
  ``bench/ab.py`` compares: a unique name, a value, its unit, and which way is
  better. Rows of peers (queuelib, litequeue, ...) are kept with
  ``vqs=False``: the same code on both sides of an A/B, so their change is the
  session's noise.
* Scratch directories are removed on exit from ``scratch_dir()``, error or not.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import gc
import json
import os
import platform
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)  # the tree the bench scripts are in
MiB = 1 << 20


# ------------------------------------------------------------------ which vqs


def _pythonpath_provides_vqs() -> bool:
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if entry and os.path.isfile(os.path.join(entry, "vqs", "__init__.py")):
            return True
    return False


def _choose_vqs() -> None:
    # PYTHONPATH entries already precede site-packages (and the editable
    # install's .pth entry) on sys.path; only the fallback needs a push.
    if not _pythonpath_provides_vqs() and ROOT not in sys.path[:1]:
        sys.path.insert(0, ROOT)


_choose_vqs()


def vqs_home() -> str:
    """The directory holding the ``vqs`` package this process imports."""
    import vqs

    return os.path.dirname(os.path.dirname(os.path.abspath(vqs.__file__)))


def child_env() -> dict:
    """os.environ with the measured tree first on PYTHONPATH (for children)."""
    env = dict(os.environ)
    rest = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = vqs_home() + (os.pathsep + rest if rest else "")
    return env


# --------------------------------------------------------------- what a run is


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _mem_total_gib() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / (1 << 20), 1)
    except OSError:
        pass
    return None


def machine() -> dict:
    """CPU model, cores, memory, kernel, Python, and the load at the start."""
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count()
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "cores_usable": usable,
        "memory_gib": _mem_total_gib(),
        "kernel": f"{platform.system()} {platform.release()} ({platform.machine()})",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "loadavg_at_start": load,
    }


def git_state(path: str) -> dict | None:
    """{"commit", "dirty"} of the git work tree at ``path``; None outside git.
    Dirty means tracked files differ from the commit (untracked files, such as
    a bench's JSON output, do not count)."""

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", path, *args], capture_output=True, text=True,
                              check=True, timeout=30).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": dirty}


def command_line(argv: Sequence[str] | None, script: str) -> str:
    """The command as typed when ``argv`` is None (main() called by the
    script itself), else the equivalent command for a programmatic call."""
    if argv is None and getattr(sys, "orig_argv", None):
        cmd = shlex.join(sys.orig_argv)
    else:
        args = sys.argv[1:] if argv is None else list(argv)
        cmd = shlex.join([sys.executable, os.path.relpath(script), *args])
    pp = os.environ.get("PYTHONPATH")
    return f"PYTHONPATH={shlex.quote(pp)} {cmd}" if pp else cmd


def run_info(bench: str, argv: Sequence[str] | None, script: str) -> dict:
    """The head of a bench's JSON (see the module docstring)."""
    home = vqs_home()
    info = {
        "bench": bench,
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": command_line(argv, script),
        "vqs_path": home,
        "git": git_state(home),
    }
    if os.path.realpath(home) != os.path.realpath(ROOT):
        info["bench_git"] = git_state(ROOT)
    info["machine"] = machine()
    return info


def commit_text(g: dict | None) -> str:
    if g is None:
        return "not a git tree"
    return g["commit"][:10] + (" (dirty)" if g["dirty"] else "")


def machine_text(m: dict) -> str:
    mem = f", {m['memory_gib']:g} GiB RAM" if m.get("memory_gib") else ""
    load = m.get("loadavg_at_start")
    load_s = f"; load {load[0]:g} at start" if load else ""
    return f"{m['cpu']}, {m['cores']} cores{mem}, {m['kernel']}, {m['python']}{load_s}"


def run_header_md(info: dict) -> str:
    """Date, machine, command and commit as Markdown lines for RESULTS.md."""
    lines = [
        f"- date: {info['date'].replace('T', ' ').replace('+00:00', ' UTC')}",
        f"- machine: {machine_text(info['machine'])}",
        f"- command: `{info['command']}`",
        f"- commit: {commit_text(info['git'])} (vqs from `{os.path.relpath(info['vqs_path'])}`)",
    ]
    if "bench_git" in info:
        lines.append(f"- bench scripts: {commit_text(info['bench_git'])}")
    return "\n".join(lines)


def stop_process(proc: subprocess.Popen, sig: int = signal.SIGTERM, grace_s: float = 60) -> int:
    """Stop a server the bench started, by its pid: ``sig`` (SIGTERM), then SIGKILL
    after ``grace_s``; its exit status."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def write_json(path: str | None, doc: dict) -> None:
    if not path:
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    note(f"wrote {os.path.relpath(path)}")


# ----------------------------------------------------------------- the work


def note(msg: str) -> None:
    """Progress to stderr, so stdout holds only the tables."""
    print(msg, file=sys.stderr, flush=True)


@contextlib.contextmanager
def scratch_dir(prefix: str, parent: str | None = None) -> Iterator[str]:
    """A new temporary directory (under ``parent`` if given), removed on exit."""
    if parent:
        os.makedirs(parent, exist_ok=True)
    path = tempfile.mkdtemp(prefix=prefix, dir=parent)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def fresh_dir(base: str, name: str) -> str:
    """``base/name``, emptied and created."""
    p = os.path.join(base, name)
    shutil.rmtree(p, ignore_errors=True)
    os.makedirs(p)
    return p


def drop(path: str | None) -> None:
    if path:
        shutil.rmtree(path, ignore_errors=True)


def timed(fn: Callable[[], object]) -> float:
    """Seconds ``fn()`` takes, after a full collection (so no earlier garbage
    is collected on its clock)."""
    gc.collect()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def rate(n: float, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


def best_of_rounds(rows: Iterable[dict], key: Callable[[dict], object], rate_key: str) -> list[dict]:
    """The fastest round of each workload (by ``rate_key``), in first-seen
    order, with every round's rate in ``rounds`` and the spread in ``note``.
    Load from other users of a shared machine only ever slows a round down."""
    order: list = []
    runs: dict = {}
    for r in rows:
        k = key(r)
        if k not in runs:
            order.append(k)
            runs[k] = []
        runs[k].append(r)
    out = []
    for k in order:
        rs = runs[k]
        best = dict(max(rs, key=lambda r: r[rate_key]))
        rates = [r[rate_key] for r in rs]
        best["rounds"] = [round(x, 1) for x in rates]
        if len(rs) > 1:
            spread = f"best of {len(rs)} (worst {min(rates) / max(rates):.2f}x)"
            best["note"] = f"{best['note']}; {spread}" if best.get("note") else spread
        out.append(best)
    return out


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


# ---------------------------------------------------------------- output


def figure(name: str, value: float, unit: str, *, better: str = "higher", vqs: bool = True) -> dict:
    """One comparable figure (see the module docstring)."""
    assert better in ("higher", "lower"), better
    return {"name": name, "value": value, "unit": unit, "better": better, "vqs": vqs}


def fmt_num(x: float | None, digits: int = 0) -> str:
    if x is None:
        return "-"
    if x == float("inf"):
        return "inf"
    return f"{x:,.{digits}f}"


def fmt_ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def markdown_table(head: Sequence[str], rows: Iterable[Sequence[object]],
                   right: Iterable[int] = ()) -> str:
    """A Markdown table; columns whose index is in ``right`` align right."""
    right = set(right)
    rows = [[str(c).replace("|", "\\|") for c in r] for r in rows]
    sep = ["---:" if i in right else "---" for i in range(len(head))]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(sep) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def bars_table(bars: Sequence[dict]) -> str:
    """Bars as {"bar", "value", "target", "ok"} (ok: True, False or None)."""
    def value(v):
        if v is None:
            return "-"
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"

    return markdown_table(
        ["bar", "value", "target", "result"],
        [[b["bar"], value(b["value"]), b["target"], {True: "pass", False: "**fail**", None: "n/a"}[b["ok"]]]
         for b in bars],
        right=[1],
    )


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the benches' servers bind it next)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 30) -> None:
    """Return once something accepts connections on 127.0.0.1:``port``; RuntimeError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")
