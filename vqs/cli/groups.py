"""``vqs group``: consumer groups, their committed offsets and lag."""

from __future__ import annotations

import typer
from rich.table import Table

from .target import DATA, JSON_OUT, TOKEN, URL, out, print_json, print_names, target

group_app = typer.Typer(help="Consumer groups and their lag.", no_args_is_help=True)


@group_app.command("list")
def group_list(url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN,
               as_json: bool = JSON_OUT):
    """List consumer groups."""
    with target(url, data_dir, token) as t:
        names = t.groups()
    print_names(names, as_json)


@group_app.command("describe")
def group_describe(group: str, url: str | None = URL, data_dir: str | None = DATA,
                   token: str | None = TOKEN, as_json: bool = JSON_OUT):
    """Committed offsets and lag per partition (every partition of the group's topics; "-": never
    committed, its lag counted from the start offset, where the group's consumers start)."""
    with target(url, data_dir, token) as t:
        rows = t.describe_group(group)
    if as_json:
        print_json([r._asdict() for r in rows])
        return
    tab = Table(title=f"group {group}")
    for c in ("topic", "partition", "committed", "start_offset", "end_offset", "lag"):
        tab.add_column(c, justify="right" if c != "topic" else "left")
    for r in rows:
        committed = "-" if r.committed is None else str(r.committed)
        tab.add_row(r.topic, str(r.partition), committed, str(r.start_offset), str(r.end_offset), str(r.lag))
    out.print(tab)
    out.print(f"total lag: {sum(r.lag for r in rows)}", highlight=False)
