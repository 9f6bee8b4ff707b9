"""How the ``vqs`` command prints: results on stdout, messages and progress on stderr.

Invariants:
- a name or a path is never cut or wrapped: tables made by ``new_table`` keep
  their name and number columns whole and print wider than the terminal (or
  than 80 columns, when stdout is a pipe) rather than cut one with "…"; only
  free-text columns wrap. Lines that carry a name (``print_line``) are never
  broken by the printer either (soft wrap: the terminal folds them on screen,
  a copy gets one line);
- times are ISO-8601 in local time with the offset (``--utc``: UTC, ``Z``);
  raw epoch numbers appear only in JSON output;
- progress bars go to stderr and only to a terminal (never into a pipe or a
  log), and disappear when done.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

out = Console()
err = Console(stderr=True)

YES = typer.Option(False, "--yes", "-y", help="do not ask (without a terminal on stdin it never asks)")


def confirm_destructive(question: str, yes: bool) -> None:
    """Ask ``question`` before a command destroys data, on a terminal only: with ``--yes``, or
    when stdin is not a terminal (a script, a pipe), the command acts without asking, as
    ``rm`` does. A "no" aborts with exit code 1."""
    import sys

    if not yes and sys.stdin.isatty():
        typer.confirm(question, abort=True)


URL = typer.Option(None, "--url", envvar="VQS_URL", help="server URL (default http://127.0.0.1:8642)")
DATA = typer.Option(None, "--data-dir", envvar="VQS_DATA_DIR", help="work on a data directory instead of a server")
TOKEN = typer.Option(None, "--token", envvar="VQS_TOKEN", help="bearer token for the server")
JSON_OUT = typer.Option(False, "--json", help="print JSON (times as epoch milliseconds)")
UTC_OUT = typer.Option(False, "--utc", envvar="VQS_UTC", help="print times in UTC (default: local time)")

_TEXT_ROOM = 32  # a free-text column gets at least this many cells before the table outgrows the screen


def changes_from(set_: list[str], reset: list[str], *, numbers: bool = True) -> dict:
    """The settings ``--set key=value`` and ``--reset key`` (None: back to the default) of a
    command that alters them. ``numbers``: a value that reads as a number is taken as one (an
    int, else a float: a topic's typed settings); else every value is the text as typed (Kafka's
    configs, which the server parses: ``007`` stays a name)."""
    out: dict = {}
    for text in set_:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"{text!r}: give key=value (e.g. retention_ms=3600000)", param_hint="--set")
        for kind in (int, float) if numbers else ():
            try:
                out[key.strip()] = kind(value)
                break
            except ValueError:
                pass
        else:
            out[key.strip()] = value
    out.update(dict.fromkeys(reset))
    return out


def print_json(obj) -> None:
    out.print_json(json.dumps(obj, default=str))


def print_line(text: str, console: Console = out) -> None:
    """One line of plain text (no markup), never broken by the printer."""
    console.print(text, highlight=False, markup=False, soft_wrap=True)


def print_names(names: list[str], as_json: bool) -> None:
    """A list of names: JSON, or one per line."""
    if as_json:
        print_json(names)
    else:
        for n in names:
            print_line(n)


def new_table(*columns: str, title: str | None = None) -> Table:
    """A table whose columns are ``"header"`` (a name or path: never cut, never wrapped),
    ``"header:num"`` (right-aligned, never wrapped) or ``"header:text"`` (free text: may wrap)."""
    t = Table(title=title)
    for spec in columns:
        header, _, kind = spec.partition(":")
        if kind == "text":
            t.add_column(header, overflow="fold")
        else:
            t.add_column(header, no_wrap=True, justify="right" if kind == "num" else "left")
    return t


def _cell_len(cell) -> int:
    if isinstance(cell, str):
        cell = Text.from_markup(cell)
    if isinstance(cell, Text):
        return max((len(line) for line in cell.plain.splitlines()), default=0)
    return 0


def print_table(table: Table, console: Console = out) -> None:
    """Print ``table`` whole: as wide as its names and numbers need, even past the screen."""
    for col in table.columns:
        longest = max([_cell_len(col.header), *(_cell_len(c) for c in col.cells)])
        col.min_width = longest if col.no_wrap else min(longest, _TEXT_ROOM)
    need = Measurement.get(console, console.options.update_width(1 << 16), table).minimum
    if need <= console.width:
        console.print(table)
        return
    saved = console._width  # rich has no public way to print one renderable wider than the console
    console.width = need
    try:
        console.print(table)
    finally:
        console._width = saved


def iso_time(ms: int | float | None, utc: bool = False) -> str:
    """An epoch-milliseconds time as ISO-8601: local time with its offset, or UTC with ``Z``."""
    if ms is None:
        return "-"
    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    if utc:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(ms) % 1000:03d}Z"
    return dt.astimezone().isoformat(timespec="milliseconds")


def progress(*columns, enabled: bool = True):
    """A rich Progress on stderr, shown only when stderr is a terminal (and ``enabled``)."""
    from rich.progress import Progress

    return Progress(*columns, console=err, disable=not (enabled and err.is_terminal), transient=True)
