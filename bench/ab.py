#!/usr/bin/env python
"""Before/after comparison of the benchmarks, interleaved in one session
(issue 10's judged check: "bench/queue_bench.py and bench/log_bench.py before
and after in one session, interleaved — no figure more than 5 % worse").

    python bench/ab.py --base 51f5473 --bench log,queue --rounds 3
    python bench/ab.py --bench queue --rounds 1 -- --quick --only queue
    python bench/ab.py --base v1 --new v2 --bench log -- --sizes 100B

How it works:

* The base tree is a detached ``git worktree`` of ``--base`` (default: the
  merge-base of HEAD and ``--against``, default ``main``) in a temporary
  directory, removed at the end. The new tree is this work tree as it is,
  uncommitted changes included, or a second worktree with ``--new REV``.
* Every run executes the SAME bench script, this tree's ``bench/<name>_bench.py``,
  with ``PYTHONPATH`` set to one tree; bench/_common.py then imports vqs from
  that tree ahead of any installed copy, and each run's JSON records the
  tree it imported (checked here). Only the code under test differs.
* Runs alternate: round 1 runs base then new, round 2 new then base, and so on,
  so a drift in the machine's speed hits both sides alike.
* Arguments after ``--`` go to every bench script (``--bench-args NAME=ARGS``
  to one only); ``--json`` is set by this script.

For each bench it prints a Markdown table: every figure's median over the
rounds on each side, the speed of new relative to base (>1 is faster; for
figures in seconds, base/new), and a flag when new is more than
``--threshold`` (5 %) worse. Figures of peers (queuelib, litequeue, ...) run
the same code on both sides: they are listed as controls, and their change is
the session's noise. Writes everything to JSON (default bench/ab.json).
With ``--strict`` the exit status is 1 when a vqs figure is flagged.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

import _common as C

BENCHES = {
    "kafka": "kafka_bench.py",
    "log": "log_bench.py",
    "queue": "queue_bench.py",
    "server": "server_bench.py",
    "spark": "spark_bench.py",
}


def git(*args: str, cwd: str = C.ROOT) -> str:
    return subprocess.run(["git", "-C", cwd, *args], capture_output=True, text=True, check=True).stdout.strip()


def resolve(rev: str) -> str:
    try:
        return git("rev-parse", "--verify", f"{rev}^{{commit}}")
    except subprocess.CalledProcessError:
        raise SystemExit(f"ab.py: {rev!r} is not a commit here") from None


@contextlib.contextmanager
def worktree(rev: str, path: str):
    """A detached worktree of ``rev`` at ``path``, removed on exit."""
    git("worktree", "add", "--detach", "--quiet", path, rev)
    try:
        yield path
    finally:
        subprocess.run(["git", "-C", C.ROOT, "worktree", "remove", "--force", path], capture_output=True)


def run_bench(name: str, tree: str, args: list[str], out_json: str, log_path: str) -> dict:
    """Run this tree's bench script with vqs from ``tree``; its JSON document."""
    script = os.path.join(C.HERE, BENCHES[name])
    cmd = [sys.executable, script, *args, "--json", out_json]
    env = dict(os.environ, PYTHONPATH=tree)
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        p = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=C.ROOT)
    if p.returncode != 0:
        with open(log_path) as f:
            tail = f.read()[-3000:]
        raise SystemExit(f"ab.py: {' '.join(cmd)} (PYTHONPATH={tree}) exited {p.returncode}:\n{tail}")
    with open(out_json) as f:
        doc = json.load(f)
    if os.path.realpath(doc["vqs_path"]) != os.path.realpath(tree):
        raise SystemExit(f"ab.py: {name} bench imported vqs from {doc['vqs_path']}, not {tree}")
    doc["_wall_s"] = round(time.monotonic() - t0, 1)
    return doc


def compare(base_runs: list[dict], new_runs: list[dict], threshold: float) -> list[dict]:
    """One row per figure present on both sides, in the bench's order."""
    def collect(runs):
        vals: dict[str, list[float]] = {}
        meta: dict[str, dict] = {}
        for doc in runs:
            for f in doc["figures"]:
                vals.setdefault(f["name"], []).append(f["value"])
                meta.setdefault(f["name"], f)
        return vals, meta

    bv, meta = collect(base_runs)
    nv, _ = collect(new_runs)
    rows = []
    for name, f in meta.items():
        if name not in nv:
            continue
        b, n = C.median(bv[name]), C.median(nv[name])
        if f["better"] == "higher":
            speed = n / b if b else None
        else:
            speed = b / n if n else None
        worse = speed is not None and speed < 1 - threshold
        rows.append({
            "figure": name, "unit": f["unit"], "better": f["better"], "vqs": f["vqs"],
            "base": bv[name], "new": nv[name], "base_median": b, "new_median": n, "speed": speed,
            "worse": worse and f["vqs"],
            "verdict": ("control" if not f["vqs"] else
                        f"**> {threshold:.0%} worse**" if worse else "ok"),
        })
    return rows


def spread(xs: list[float]) -> str:
    lo, hi = min(xs), max(xs)
    return "-" if len(xs) < 2 or lo <= 0 else f"{hi / lo:.2f}x"


def table(rows: list[dict]) -> str:
    def num(x, unit):
        return f"{x:.4f}" if unit == "s" else C.fmt_num(x)

    return C.markdown_table(
        ["figure", "unit", "base median", "new median", "new vs base (speed)", "base spread", "new spread", "verdict"],
        [[r["figure"], r["unit"], num(r["base_median"], r["unit"]), num(r["new_median"], r["unit"]),
          C.fmt_ratio(r["speed"]), spread(r["base"]), spread(r["new"]), r["verdict"]] for r in rows],
        right=[2, 3, 4, 5, 6])


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    own, passthrough = split_argv(argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 usage="%(prog)s [options] [-- bench args ...]",
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--base", help="the base commit (default: merge-base of HEAD and --against)")
    ap.add_argument("--against", default="main", help="branch whose merge-base with HEAD is the default base (default main)")
    ap.add_argument("--new", help="the new commit (default: this work tree as it is, uncommitted changes included)")
    ap.add_argument("--bench", default="log,queue", help=f"benches to run, of {','.join(BENCHES)} (default log,queue)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds; medians are compared (default 3)")
    ap.add_argument("--threshold", type=float, default=0.05, help="flag a vqs figure worse by more than this (default 0.05)")
    ap.add_argument("--bench-args", action="append", default=[], metavar="NAME=ARGS",
                    help="extra arguments for one bench only, e.g. log='--sizes 100B' (after those given after --)")
    ap.add_argument("--json", default=os.path.join(C.HERE, "ab.json"), help="JSON output (default bench/ab.json; '' for none)")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a vqs figure is flagged")
    args = ap.parse_args(own)

    names = [b for b in args.bench.split(",") if b]
    for b in names:
        if b not in BENCHES:
            ap.error(f"--bench {b!r}: one of {', '.join(BENCHES)}")
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    per_bench: dict[str, list[str]] = {b: list(passthrough) for b in names}
    for spec in args.bench_args:
        b, _, rest = spec.partition("=")
        if b not in per_bench:
            ap.error(f"--bench-args {spec!r}: {b!r} is not among --bench")
        per_bench[b] += shlex.split(rest)

    if args.base:
        base_rev = resolve(args.base)
    else:
        try:
            base_rev = git("merge-base", "HEAD", args.against)
        except subprocess.CalledProcessError:
            ap.error(f"no merge-base of HEAD and {args.against!r}: give --base REV")
    new_rev = resolve(args.new) if args.new else None
    new_desc = new_rev or f"work tree {C.ROOT} ({C.commit_text(C.git_state(C.ROOT))})"
    if new_rev is None and base_rev == git("rev-parse", "HEAD") and not C.git_state(C.ROOT)["dirty"]:
        C.note(f"ab.py: warning: base {base_rev[:10]} is HEAD and the tree is clean: both sides are the same code")

    info = C.run_info("ab", argv, __file__)
    C.note(f"ab.py: base {base_rev[:10]} vs new {new_desc}; {args.rounds} round(s) of {', '.join(names)}")
    runs: list[dict] = []
    docs: dict[tuple[str, str], list[dict]] = {(b, s): [] for b in names for s in ("base", "new")}
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="vqs-ab-"))
        trees = {"base": stack.enter_context(worktree(base_rev, os.path.join(tmp, "base")))}
        trees["new"] = (stack.enter_context(worktree(new_rev, os.path.join(tmp, "new"))) if new_rev else C.ROOT)
        for side, tree in trees.items():
            if not os.path.isfile(os.path.join(tree, "vqs", "__init__.py")):
                raise SystemExit(f"ab.py: no vqs package in the {side} tree {tree}")
        for r in range(args.rounds):
            order = ("base", "new") if r % 2 == 0 else ("new", "base")
            for b in names:
                for side in order:
                    stem = os.path.join(tmp, f"{b}-{side}-{r + 1}")
                    C.note(f"  round {r + 1}/{args.rounds}: {b} on {side} ...")
                    doc = run_bench(b, trees[side], per_bench[b], stem + ".json", stem + ".log")
                    docs[(b, side)].append(doc)
                    runs.append({"bench": b, "side": side, "round": r + 1, "command": doc["command"],
                                 "date": doc["date"], "vqs_path": doc["vqs_path"], "git": doc["git"],
                                 "wall_s": doc["_wall_s"],
                                 "figures": doc["figures"]})

    print(f"## A/B: bench/ab.py\n\n{C.run_header_md(info)}")
    print(f"- base: {base_rev[:10]}; new: {new_desc}")
    print(f"- {args.rounds} alternating round(s); medians; flag: a vqs figure more than {args.threshold:.0%} worse\n")
    tables, flagged = {}, []
    for b in names:
        rows = compare(docs[(b, "base")], docs[(b, "new")], args.threshold)
        tables[b] = rows
        flagged += [f"{b}: {r['figure']}" for r in rows if r["worse"]]
        controls = [r["speed"] for r in rows if not r["vqs"] and r["speed"]]
        print(f"### {b}: `{BENCHES[b]} {shlex.join(per_bench[b])}`\n")
        print(table(rows))
        if controls:
            print(f"\nControls (peers, the same code on both sides) moved {min(controls):.2f}x to "
                  f"{max(controls):.2f}x: differences of that size are noise.")
        print()
    verdict = (f"no vqs figure more than {args.threshold:.0%} worse" if not flagged
               else f"{len(flagged)} vqs figure(s) more than {args.threshold:.0%} worse: " + "; ".join(flagged))
    print(f"**Verdict:** {verdict}.")
    C.write_json(args.json, {**info, "base": base_rev, "new": new_rev or "work tree", "rounds": args.rounds,
                             "threshold": args.threshold, "bench_args": per_bench, "runs": runs,
                             "tables": tables, "flagged": flagged})
    return 1 if args.strict and flagged else 0


if __name__ == "__main__":
    sys.exit(main())
