"""The package's shape, checked: no import cycles, no overlong modules, the layer contract.

* Cycles: the import graph of ``vqs`` (grimp, the engine of import-linter),
  imports under ``if TYPE_CHECKING:`` left out, must have no strongly
  connected component of more than one module (nor a module importing
  itself). Only explicit imports are edges: that importing ``vqs.a.b`` first
  runs ``vqs/a/__init__.py`` is not one, or every package re-exporting its own
  submodules would be a cycle. A lazy import inside a function is an edge
  like any other: a cycle hidden in a function body is still a cycle.
* Size: no module in vqs/ over 800 lines; one over 500 says why at its top
  (a line containing "over 500 lines:" and the reason, in its docstring or leading comment).
* Layers: ``lint-imports`` (the contract in pyproject.toml) passes.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "vqs")
HARD_LIMIT = 800
SOFT_LIMIT = 500
WHY = "over 500 lines:"


def _strongly_connected(nodes, edges_of) -> list[list[str]]:
    """Tarjan's algorithm, iterative; the components that are cycles (size > 1 or a self-import)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges_of(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges_of(w)))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in edges_of(v):
                    cycles.append(sorted(comp))
    return cycles


def test_strongly_connected_finds_cycles_and_only_them():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}, "f": set()}
    assert sorted(_strongly_connected(graph, graph.__getitem__)) == [["a", "b", "c"], ["e"]]


def test_no_import_cycles():
    import grimp  # installed with import-linter (the dev extra)

    graph = grimp.build_graph("vqs", exclude_type_checking_imports=True)
    modules = {m for m in graph.modules if m == "vqs" or m.startswith("vqs.")}

    def edges_of(m):
        return {w for w in graph.find_modules_directly_imported_by(m) if w in modules}

    cycles = _strongly_connected(modules, edges_of)
    report = []
    for comp in cycles:
        members = set(comp)
        report.append("cycle: " + ", ".join(comp))
        for importer in comp:
            for imported in sorted(edges_of(importer) & members):
                lines = sorted({d["line_number"] for d in graph.get_import_details(
                    importer=importer, imported=imported)})
                report.append(f"    {importer} -> {imported} (line {', '.join(map(str, lines))})")
    assert not cycles, "import cycles between vqs modules:\n" + "\n".join(report)


def _modules():
    for root, dirs, files in os.walk(PACKAGE):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__pycache__")))
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.join(root, name)


def _says_why(source: str) -> bool:
    """The module docstring, or the comment lines before the first statement, give the reason."""
    doc = ast.get_docstring(ast.parse(source)) or ""
    lead = []
    for line in source.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            break
        lead.append(line)
    return WHY in doc.lower() or WHY in "\n".join(lead).lower()


def test_module_sizes():
    too_long, unexplained = [], []
    for path in _modules():
        with open(path, encoding="utf-8") as f:
            source = f.read()
        n = len(source.splitlines())
        rel = os.path.relpath(path, ROOT)
        if n > HARD_LIMIT:
            too_long.append(f"    {rel}: {n} lines (limit {HARD_LIMIT})")
        elif n > SOFT_LIMIT and not _says_why(source):
            unexplained.append(f"    {rel}: {n} lines, and its top does not say '{WHY}'")
    problems = []
    if too_long:
        problems += ["modules over the hard limit:", *too_long]
    if unexplained:
        problems += [f"modules over {SOFT_LIMIT} lines without a reason:", *unexplained]
    assert not problems, "\n".join(problems)


def test_says_why_reads_docstring_and_leading_comments():
    assert _says_why('"""A module.\n\nWhy over 500 lines: one hot loop."""\nx = 1\n')
    assert _says_why("# Why over 500 lines: generated tables.\nx = 1\n")
    assert not _says_why('"""A module."""\n# Why over 500 lines: too late, after code\nx = 1\n')


def test_import_layers_contract():
    exe = shutil.which("lint-imports", path=os.path.dirname(sys.executable)) or shutil.which("lint-imports")
    assert exe is not None, "lint-imports is not installed (pip install -e '.[dev]')"
    proc = subprocess.run([exe, "--no-cache", "--no-logo"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"lint-imports failed:\n{proc.stdout}\n{proc.stderr}"
