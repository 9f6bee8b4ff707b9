"""``vqs topic``: create, alter, grow, list, describe and delete topics."""

from __future__ import annotations

import json

import typer

from .output import (
    DATA,
    JSON_OUT,
    TOKEN,
    URL,
    YES,
    changes_from,
    confirm_destructive,
    new_table,
    out,
    print_json,
    print_line,
    print_names,
    print_table,
)
from .target import target

topic_app = typer.Typer(help="Create, alter, grow, list, describe and delete topics.", no_args_is_help=True)


@topic_app.command("create")
def topic_create(name: str, partitions: int = typer.Option(1, "--partitions", "-p"),
                 retention_ms: int | None = typer.Option(None), retention_bytes: int | None = typer.Option(None),
                 segment_bytes: int | None = typer.Option(None),
                 compression: str | None = typer.Option(None, help="zstd, lz4 or gzip (none by default)"),
                 cleanup_policy: str | None = typer.Option(None, help="delete, compact or compact,delete"),
                 delete_retention_ms: int | None = typer.Option(None, help="compacted: how long tombstones stay"),
                 min_cleanable_dirty_ratio: float | None = typer.Option(None),
                 min_compaction_lag_ms: int | None = typer.Option(None),
                 flush: str | None = typer.Option(None, help="always (a record is acknowledged once fsynced), "
                                                             "interval or never (default: the server's)"),
                 flush_interval_ms: int | None = typer.Option(None, help="interval: fsync every this many ms"),
                 url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN):
    """Create a topic."""
    settings = {k: v for k, v in (("cleanup_policy", cleanup_policy), ("delete_retention_ms", delete_retention_ms),
                                  ("min_cleanable_dirty_ratio", min_cleanable_dirty_ratio),
                                  ("min_compaction_lag_ms", min_compaction_lag_ms), ("flush", flush),
                                  ("flush_interval_ms", flush_interval_ms)) if v is not None}
    with target(url, data_dir, token, creates=True, topic=name) as t:
        t.create_topic(name, partitions=partitions, retention_ms=retention_ms, retention_bytes=retention_bytes,
                       segment_bytes=segment_bytes, compression=compression, **settings)
    print_line(f"created topic {name} with {partitions} partition(s)")


@topic_app.command("alter")
def topic_alter(name: str,
                set_: list[str] = typer.Option([], "--set", "-s", help="key=value: a setting of create's "
                                               "(retention_ms, flush, cleanup_policy, ...); repeat it"),
                reset: list[str] = typer.Option([], "--reset", "-r", help="a setting back to the server's default"),
                replace: bool = typer.Option(False, help="every setting not given returns to its default"),
                validate_only: bool = typer.Option(False, help="check the settings, change nothing"),
                url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN):
    """Change a topic's own settings.

    As Kafka's kafka-configs.sh --alter. Checked as create checks them (nothing changes if
    one is refused); in force for what is written next."""
    changes = changes_from(set_, reset)
    if not changes and not replace:
        raise typer.BadParameter("nothing to change: give --set key=value, --reset key or --replace")
    with target(url, data_dir, token, topic=name) as t:
        t.alter_topic(name, changes, replace=replace, validate_only=validate_only)
    print_line(f"{'checked' if validate_only else 'altered'} topic {name}: "
               + (", ".join(f"{k}={'default' if v is None else v}" for k, v in changes.items()) or "all defaults"))


@topic_app.command("add-partitions")
def topic_add_partitions(name: str, partitions: int = typer.Option(..., "--partitions", "-p",
                                                                   help="the new count in total"),
                         url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN):
    """Grow a topic to more partitions.

    Its records stay where they are; keys map to partitions by the new count from now on."""
    with target(url, data_dir, token, topic=name) as t:
        t.create_partitions(name, partitions)
    print_line(f"topic {name} has {partitions} partition(s)")


@topic_app.command("list")
def topic_list(url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN,
               as_json: bool = JSON_OUT,
               show_all: bool = typer.Option(False, "--all", "-a",
                                             help="include internal topics (names starting with '__')")):
    """List topics (--all: internal ones too)."""
    from ..broker.names import is_internal

    with target(url, data_dir, token) as t:
        names = t.topics()
    print_names(names if show_all else [n for n in names if not is_internal(n)], as_json)


@topic_app.command("describe")
def topic_describe(name: str, url: str | None = URL, data_dir: str | None = DATA,
                   token: str | None = TOKEN, as_json: bool = JSON_OUT):
    """Partitions, offsets, sizes and config of a topic."""
    with target(url, data_dir, token, topic=name) as t:
        d = t.topic(name).describe()
    if as_json:
        print_json(d)
        return
    print_line(f"topic {name}")
    tab = new_table(*(f"{c}:num" for c in ("partition", "start_offset", "end_offset", "messages", "size_bytes",
                                            "segments")))
    for p in d["partition_info"]:
        tab.add_row(str(p["partition"]), str(p["start_offset"]), str(p["end_offset"]),
                    str(p["end_offset"] - p["start_offset"]), str(p["size_bytes"]), str(p["segments"]))
    print_table(tab)
    out.print("config: " + json.dumps(d.get("config", {})), highlight=False, markup=False)


@topic_app.command("delete")
def topic_delete(name: str, url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN,
                 yes: bool = YES):
    """Delete a topic and its data.

    Asks first on a terminal; with --yes, or when stdin is not a terminal (a script), it does
    not ask.
    """
    confirm_destructive(f"delete topic {name} and all its messages?", yes)
    with target(url, data_dir, token, topic=name) as t:
        t.delete_topic(name)
    print_line(f"deleted topic {name}")
