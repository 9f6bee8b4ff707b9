"""``vqs group``: consumer groups, their committed offsets and lag."""

from __future__ import annotations

import typer

from .output import DATA, JSON_OUT, TOKEN, URL, new_table, print_json, print_line, print_names, print_table
from .target import target

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
    """Live members and their partitions (if any), then committed offsets and lag per partition
    (every partition of the group's topics; "-": never committed, its lag counted from the start
    offset, where the group's consumers start). --json prints what REST's GET /groups/{group} returns."""
    with target(url, data_dir, token) as t:
        rows = t.describe_group(group)
        members = t.group_members(group)
    if as_json:  # the document of REST's GET /groups/{group}, field for field
        parts = [r._asdict() for r in rows]
        print_json({"group": group, "partitions": parts, "total_lag": sum(r["lag"] for r in parts), **members})
        return
    print_line(f"group {group}")
    if members["members"]:
        print_line(f"{members['state']}, generation {members['generation']}, {len(members['members'])} member(s)"
                   f" ({members['protocol_type']} protocol)")
        mtab = new_table("member", "client", "host", "partitions")
        for m in members["members"]:
            parts = ", ".join(f"{a['topic']}[{a['partition']}]" for a in m.get("assignment", [])) or "-"
            mtab.add_row(m["member_id"], m["client_id"], m["client_host"], parts)
        print_table(mtab)
    tab = new_table("topic", *(f"{c}:num" for c in ("partition", "committed", "start_offset", "end_offset", "lag")))
    for r in rows:
        committed = "-" if r.committed is None else str(r.committed)
        tab.add_row(r.topic, str(r.partition), committed, str(r.start_offset), str(r.end_offset), str(r.lag))
    print_table(tab)
    print_line(f"total lag: {sum(r.lag for r in rows)}")
