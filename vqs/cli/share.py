"""``vqs share``: share groups (Kafka's KIP-932), their members and records in flight."""

from __future__ import annotations

import typer

from .failures import fail
from .output import DATA, JSON_OUT, TOKEN, URL, new_table, print_json, print_line, print_names, print_table
from .target import target

share_app = typer.Typer(help="Share groups: members, records in flight, delivery counts.", no_args_is_help=True)


@share_app.command("list")
def share_list(url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN,
               as_json: bool = JSON_OUT):
    """List share groups (with members now, or stored state)."""
    with target(url, data_dir, token) as t:
        names = t.share_group_names()
    print_names(names, as_json)


@share_app.command("describe")
def share_describe(group: str, url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN,
                   as_json: bool = JSON_OUT):
    """Members and their partitions, then per share partition: its start offset (every record
    below is settled), the first offset never acquired, the records acquired and available now,
    and how many records in flight have each delivery count. --json prints what REST's
    GET /share-groups/{group} returns."""
    with target(url, data_dir, token) as t:
        d = t.describe_share_group(group)
    if d is None:
        fail(f"share group {group!r} has no members or stored state")
    if as_json:
        print_json(d)
        return
    print_line(f"share group {group}: {d['state']}, epoch {d['epoch']}, {len(d['members'])} member(s)")
    if d["members"]:
        mtab = new_table("member", "client", "epoch:num", "partitions")
        for m in d["members"]:
            parts = ", ".join(f"{t}[{p}]" for t, ps in sorted(m["assignment"].items()) for p in ps) or "-"
            mtab.add_row(m["member_id"], m["client_id"] or "-", str(m["epoch"]), parts)
        print_table(mtab)
    tab = new_table("topic", "partition:num", "start_offset:num", "cursor:num", "acquired:num", "available:num",
                    "delivery counts")
    for r in d["partitions"]:
        counts = " ".join(f"{k}:{v}" for k, v in r["delivery_counts"].items()) or "-"
        tab.add_row(r["topic"], str(r["partition"]), str(r["start_offset"]), str(r["cursor"]), str(r["acquired"]),
                    str(r["available"]), counts)
    print_table(tab)
