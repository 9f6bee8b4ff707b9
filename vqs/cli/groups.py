"""``vqs group``: consumer groups, their committed offsets and lag."""

from __future__ import annotations

import typer

from .failures import EXIT_USAGE, fail
from .output import (
    DATA,
    JSON_OUT,
    TOKEN,
    URL,
    YES,
    changes_from,
    confirm_destructive,
    err,
    new_table,
    print_json,
    print_line,
    print_names,
    print_table,
)
from .target import target

group_app = typer.Typer(help="Consumer groups: lag, offset resets, configs, deletion.", no_args_is_help=True)


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


@group_app.command("delete")
def group_delete(group: str, url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN,
                 yes: bool = YES):
    """Forget a group's committed offsets (refused while it has members).

    Asks first on a terminal; with --yes, or when stdin is not a terminal (a script), it does not ask.
    """
    confirm_destructive(f"delete the committed offsets of group {group}?", yes)
    with target(url, data_dir, token) as t:
        existed = t.delete_group(group)
    if not existed:
        fail(f"group {group!r} has no committed offsets")
    print_line(f"deleted group {group}")


@group_app.command("config")
def group_config(group: str,
                 set_: list[str] = typer.Option([], "--set", "-s", help="key=value: a group config by Kafka's "
                                                "name (consumer.session.timeout.ms, share.record.lock.duration.ms, "
                                                "...); repeat it"),
                 reset: list[str] = typer.Option([], "--reset", "-r", help="a config back to the server's"),
                 validate_only: bool = typer.Option(False, help="check the changes, change nothing"),
                 url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN,
                 as_json: bool = JSON_OUT):
    """A group id's configs: each in force ("own": the group's, else the server's); --set and
    --reset change the group's own."""
    changes = changes_from(set_, reset, numbers=False)
    with target(url, data_dir, token) as t:
        if changes:
            t.alter_group_configs(group, changes, validate_only=validate_only)
        values = t.group_config_values(group)
    if as_json:
        print_json({k: {"value": v, "own": own} for k, (v, own) in values.items()})
        return
    tab = new_table("config", "value", "source")
    for k, (v, own) in values.items():
        tab.add_row(k, v, "group" if own else "server")
    print_table(tab)


@group_app.command("reset-offsets")
def group_reset_offsets(
        group: str,
        topic: str = typer.Option(..., "--topic", "-t", help="the topic whose offsets to reset"),
        partition: int | None = typer.Option(None, "--partition", help="only this partition"),
        to_earliest: bool = typer.Option(False, "--to-earliest", help="each partition's start offset"),
        to_latest: bool = typer.Option(False, "--to-latest", help="each partition's end offset"),
        to_offset: int | None = typer.Option(None, "--to-offset", min=0, help="this offset (within each partition)"),
        to_datetime: str | None = typer.Option(None, "--to-datetime",
                                               help="the first offset at or after this ISO-8601 time (or epoch ms)"),
        shift_by: int | None = typer.Option(None, "--shift-by", help="the committed offset moved by N (negative: back)"),
        execute: bool = typer.Option(False, "--execute", help="commit the new offsets (without it: only show them)"),
        url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN, as_json: bool = JSON_OUT):
    """Move a group's committed offsets, as kafka-consumer-groups --reset-offsets does.

    Shows the plan (committed now, new offset per partition) and commits it only with --execute.
    Refused while the group has live members: stop its consumers first. New offsets are kept
    within each partition's start and end offsets.
    """
    chosen = [n for n, v in (("--to-earliest", to_earliest), ("--to-latest", to_latest),
                             ("--to-offset", to_offset is not None), ("--to-datetime", to_datetime is not None),
                             ("--shift-by", shift_by is not None)) if v]
    if len(chosen) != 1:
        fail("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by"
             + (f" (not {' and '.join(chosen)})" if chosen else ""), EXIT_USAGE)
    ts = _time_ms(to_datetime) if to_datetime is not None else None
    with target(url, data_dir, token, topic=topic) as t:
        rows = t.offsets(topic, timestamp_ms=ts)
        committed = t.group_offsets(group)  # {(topic, partition): offset}
        plan = []
        for r in rows:
            p = r["partition"]
            if partition is not None and p != partition:
                continue
            start, end = r["start_offset"], r["end_offset"]
            now = committed.get((topic, p))
            if to_earliest:
                new = start
            elif to_latest:
                new = end
            elif to_offset is not None:
                new = to_offset
            elif ts is not None:
                new = end if r.get("offset_for_time") is None else r["offset_for_time"]
            else:
                new = (start if now is None else now) + shift_by
            plan.append((p, now, min(max(new, start), end)))
        if partition is not None and not plan:
            fail(f"topic {topic!r} has no partition {partition}", EXIT_USAGE)
        if execute:
            t.commit_offsets(group, {(topic, p): new for p, _now, new in plan})
    if as_json:
        print_json({"group": group, "topic": topic, "executed": execute,
                    "partitions": [{"partition": p, "committed": now, "new_offset": new} for p, now, new in plan]})
    else:
        tab = new_table("topic", "partition:num", "committed:num", "new_offset:num")
        for p, now, new in plan:
            tab.add_row(topic, str(p), "-" if now is None else str(now), str(new))
        print_table(tab)
    print_line(f"committed the new offsets of group {group}" if execute
               else "not committed: run again with --execute to commit these offsets", err)


def _time_ms(text: str) -> int:
    from datetime import datetime

    if text.isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        fail(f"--to-datetime must be an ISO-8601 time (2026-12-05T10:00:00Z) or epoch milliseconds, not {text!r}",
             EXIT_USAGE)
    if when.tzinfo is None:
        when = when.astimezone()  # local time, as the CLI prints times
    return int(when.timestamp() * 1000)
