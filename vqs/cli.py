"""The ``vqs`` command (typer + rich).

Every data command works against a server (``--url``, ``VQS_URL``; default
``http://127.0.0.1:8642``) or, where it makes sense, directly on a data
directory (``--data-dir``, ``VQS_DATA_DIR``; this takes the directory's lock,
so not while a server owns it). ``vqs inspect`` reads segment files without
any lock and verifies every batch's CRC.
"""

from __future__ import annotations

import json
import os
import struct
import sys
from contextlib import contextmanager

import typer
from rich.console import Console
from rich.table import Table

from .server.run import serve_command

app = typer.Typer(help="VQS: a durable message queue and log.", no_args_is_help=True,
                  pretty_exceptions_enable=False, add_completion=False)
topic_app = typer.Typer(help="Create, list, describe and delete topics.", no_args_is_help=True)
queue_app = typer.Typer(help="SQS-style queues: create, list, send, receive, delete...", no_args_is_help=True)
group_app = typer.Typer(help="Consumer groups and their lag.", no_args_is_help=True)
app.add_typer(topic_app, name="topic")
app.add_typer(queue_app, name="queue")
app.add_typer(group_app, name="group")

out = Console()
err = Console(stderr=True)

URL = typer.Option(None, "--url", envvar="VQS_URL", help="server URL (default http://127.0.0.1:8642)")
DATA = typer.Option(None, "--data-dir", envvar="VQS_DATA_DIR", help="work on a data directory instead of a server")
TOKEN = typer.Option(None, "--token", envvar="VQS_TOKEN", help="bearer token for the server")
JSON_OUT = typer.Option(False, "--json", help="print JSON")


def _fail(msg: str, code: int = 1):
    err.print(f"[red]error:[/red] {msg}", highlight=False)
    raise typer.Exit(code)


@contextmanager
def _target(url: str | None, data_dir: str | None, token: str | None):
    """A vqs.Client for a URL, or a vqs.Broker for a data directory (same shapes)."""
    from .errors import VQSError

    if url and data_dir:
        _fail("give --url or --data-dir, not both", 2)
    try:
        if data_dir:
            from .broker import Broker

            t = Broker(data_dir)
        else:
            from .client import DEFAULT_URL, Client

            t = Client(url or DEFAULT_URL, token=token)
    except VQSError as e:
        _fail(str(e))
    try:
        yield t
    except VQSError as e:
        _fail(str(e))
    except OSError as e:
        _fail(f"{e}")
    except Exception as e:
        import httpx

        if isinstance(e, httpx.HTTPError):
            _fail(f"cannot reach the server at {getattr(t, 'url', url)}: {e}")
        raise
    finally:
        t.close()


def _print_json(obj) -> None:
    out.print_json(json.dumps(obj, default=str))


# ------------------------------------------------------------------------------ serve
# the server owns its command line (python -m vqs.server runs the same command)
app.command("serve")(serve_command)


# ------------------------------------------------------------------------------ topics
@topic_app.command("create")
def topic_create(name: str, partitions: int = typer.Option(1, "--partitions", "-p"),
                 retention_ms: int | None = typer.Option(None), retention_bytes: int | None = typer.Option(None),
                 segment_bytes: int | None = typer.Option(None), compression: str | None = typer.Option(None),
                 url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN):
    """Create a topic."""
    with _target(url, data_dir, token) as t:
        t.create_topic(name, partitions=partitions, retention_ms=retention_ms, retention_bytes=retention_bytes,
                       segment_bytes=segment_bytes, compression=compression)
    out.print(f"created topic [bold]{name}[/bold] with {partitions} partition(s)")



def _print_names(names: list[str], as_json: bool) -> None:
    """A list of names: JSON, or one per line."""
    if as_json:
        _print_json(names)
    else:
        for n in names:
            out.print(n, highlight=False)

@topic_app.command("list")
def topic_list(url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN,
               as_json: bool = JSON_OUT):
    """List topics."""
    with _target(url, data_dir, token) as t:
        names = t.topics()
    _print_names(names, as_json)


@topic_app.command("describe")
def topic_describe(name: str, url: str | None = URL, data_dir: str | None = DATA,
                   token: str | None = TOKEN, as_json: bool = JSON_OUT):
    """Partitions, offsets, sizes and config of a topic."""
    with _target(url, data_dir, token) as t:
        d = t.topic(name).describe()
    if as_json:
        _print_json(d)
        return
    tab = Table(title=f"topic {name}")
    for c in ("partition", "start_offset", "end_offset", "messages", "size_bytes", "segments"):
        tab.add_column(c, justify="right")
    for p in d["partition_info"]:
        tab.add_row(str(p["partition"]), str(p["start_offset"]), str(p["end_offset"]),
                    str(p["end_offset"] - p["start_offset"]), str(p["size_bytes"]), str(p["segments"]))
    out.print(tab)
    out.print("config: " + json.dumps(d.get("config", {})), highlight=False)


@topic_app.command("delete")
def topic_delete(name: str, url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN,
                 yes: bool = typer.Option(False, "--yes", "-y", help="do not ask")):
    """Delete a topic and its data."""
    if not yes and sys.stdin.isatty():
        typer.confirm(f"delete topic {name} and all its messages?", abort=True)
    with _target(url, data_dir, token) as t:
        t.delete_topic(name)
    out.print(f"deleted topic [bold]{name}[/bold]")


# ------------------------------------------------------------------------------ produce
def _frames(stream, framing: str):
    if framing == "line":
        for line in stream:
            yield line[:-1] if line.endswith(b"\n") else line
    elif framing == "length":
        while True:
            head = stream.read(4)
            if not head:
                return
            if len(head) < 4:
                raise ValueError("truncated length prefix at the end of the input")
            (n,) = struct.unpack(">I", head)
            data = stream.read(n)
            if len(data) < n:
                raise ValueError(f"truncated record: expected {n} bytes, got {len(data)}")
            yield data
    else:
        raise ValueError(f"framing must be line or length, not {framing!r}")


@app.command()
def produce(topic: str,
            file: str | None = typer.Option(None, "--file", "-f", help="read from a file (default stdin)"),
            framing: str = typer.Option("line", "--framing", help="line (one message per line) or length (4-byte big-endian length prefix)"),
            key: str | None = typer.Option(None, "--key", help="key for every message"),
            partition: int | None = typer.Option(None, "--partition"),
            batch_size: int = typer.Option(500, "--batch-size", help="messages per request"),
            progress: bool = typer.Option(True, "--progress/--no-progress"),
            url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN):
    """Send messages read from stdin or a file."""
    from rich.progress import BarColumn, Progress, TextColumn, TransferSpeedColumn

    stream = open(file, "rb") if file else sys.stdin.buffer
    total = os.path.getsize(file) if file else None
    sent = 0
    try:
        with _target(url, data_dir, token) as t:
            p = t.producer()
            kb = key.encode() if key is not None else None
            with Progress(TextColumn("[bold]{task.fields[n]}[/bold] messages"), BarColumn(), TransferSpeedColumn(),
                          console=err, disable=not progress, transient=False) as prog:
                task = prog.add_task("produce", total=total, n=0)
                batch: list = []
                nbytes = 0

                def flush_batch():
                    nonlocal sent, nbytes, batch
                    if batch:
                        p.send_batch(topic, batch, keys=None if kb is None else [kb] * len(batch), partition=partition)
                        sent += len(batch)
                        prog.update(task, advance=nbytes, n=sent)
                        batch, nbytes = [], 0

                try:
                    for rec in _frames(stream, framing):
                        batch.append(rec)
                        nbytes += len(rec) + (1 if framing == "line" else 4)
                        if len(batch) >= batch_size:
                            flush_batch()
                    flush_batch()
                except ValueError as e:
                    flush_batch()
                    _fail(f"{e} (after {sent} messages)")
            p.flush()
    finally:
        if file:
            stream.close()
    err.print(f"sent {sent} message(s) to {topic}", highlight=False)


# ------------------------------------------------------------------------------ consume
@app.command()
def consume(topic: str,
            partition: int | None = typer.Option(None, "--partition", help="only this partition"),
            offset: int | None = typer.Option(None, "--offset", help="start here (needs --partition or a 1-partition topic)"),
            from_end: bool = typer.Option(False, "--from-end", help="start at the end (new messages only)"),
            group: str | None = typer.Option(None, "--group", "-g", help="start at the group's committed offsets; commit as we go"),
            follow: bool = typer.Option(False, "--follow", "-F", help="keep waiting for new messages"),
            max_messages: int | None = typer.Option(None, "--max", "-n", help="stop after this many"),
            framing: str = typer.Option("line", "--framing", help="line, length, or json (one object per line)"),
            url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN):
    """Print messages of a topic (from an offset, the beginning, the end, or a group's position)."""
    import base64

    w = sys.stdout.buffer
    n = 0
    with _target(url, data_dir, token) as t:
        c = t.consumer(None, group=group, auto_offset_reset="latest" if from_end else "earliest")
        try:
            nparts = t.topic(topic).partitions
            parts = [partition] if partition is not None else list(range(nparts))
            tps = [(topic, p) for p in parts]
            c.assign(tps)
            if offset is not None:
                if len(parts) != 1:
                    _fail("--offset needs --partition (the topic has several partitions)", 2)
                c.seek(tps[0], offset)
            elif from_end:
                c.seek_to_end(tps)
            while max_messages is None or n < max_messages:
                want = 500 if max_messages is None else min(500, max_messages - n)
                recs = c.poll(max_records=want, timeout=1.0 if follow else 0.0)
                if not recs:
                    if follow:
                        continue
                    break
                for r in recs:
                    if framing == "length":
                        w.write(struct.pack(">I", len(r.value)) + r.value)
                    elif framing == "json":
                        d = {"topic": r.topic, "partition": r.partition, "offset": r.offset,
                             "timestamp_ms": r.timestamp_ms}
                        for name, v in (("key", r.key), ("value", r.value)):
                            if v is None:
                                d[name] = None
                                continue
                            try:
                                d[name] = v.decode("utf-8")
                            except UnicodeDecodeError:
                                d[name + "_b64"] = base64.b64encode(v).decode()
                        w.write(json.dumps(d).encode() + b"\n")
                    else:
                        w.write(r.value + b"\n")
                n += len(recs)
                w.flush()
                if group is not None:
                    c.commit()
        except KeyboardInterrupt:
            pass
        finally:
            if group is not None:
                try:
                    c.commit()
                except Exception as e:  # keep the error that ended the loop; say this one
                    err.print(f"[yellow]warning:[/yellow] the final commit of group {group!r} failed: {e}",
                              highlight=False)
            c.close()
    err.print(f"read {n} message(s)", highlight=False)


# ------------------------------------------------------------------------------ groups
@group_app.command("list")
def group_list(url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN,
               as_json: bool = JSON_OUT):
    """List consumer groups."""
    with _target(url, data_dir, token) as t:
        names = t.groups()
    _print_names(names, as_json)


@group_app.command("describe")
def group_describe(group: str, url: str | None = URL, data_dir: str | None = DATA,
                   token: str | None = TOKEN, as_json: bool = JSON_OUT):
    """Committed offsets and lag per partition."""
    with _target(url, data_dir, token) as t:
        rows = t.describe_group(group)
    if as_json:
        _print_json([r._asdict() for r in rows])
        return
    tab = Table(title=f"group {group}")
    for c in ("topic", "partition", "committed", "start_offset", "end_offset", "lag"):
        tab.add_column(c, justify="right" if c != "topic" else "left")
    for r in rows:
        tab.add_row(r.topic, str(r.partition), str(r.committed), str(r.start_offset), str(r.end_offset), str(r.lag))
    out.print(tab)
    out.print(f"total lag: {sum(r.lag for r in rows)}", highlight=False)


# ------------------------------------------------------------------------------ queues
@queue_app.command("create")
def queue_create(name: str,
                 visibility_timeout: int = typer.Option(30), delay_seconds: int = typer.Option(0),
                 receive_wait_seconds: int = typer.Option(0), retention_seconds: int = typer.Option(345600),
                 max_message_bytes: int = typer.Option(1048576),
                 dead_letter_queue: str | None = typer.Option(None), max_receive_count: int | None = typer.Option(None),
                 fifo: bool = typer.Option(False), content_based_deduplication: bool = typer.Option(False),
                 url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN):
    """Create a queue."""
    kw = dict(visibility_timeout=visibility_timeout, delay_seconds=delay_seconds,
              receive_wait_seconds=receive_wait_seconds, retention_seconds=retention_seconds,
              max_message_bytes=max_message_bytes, fifo=fifo, content_based_deduplication=content_based_deduplication)
    if dead_letter_queue is not None:
        kw["dead_letter_queue"] = dead_letter_queue
        kw["max_receive_count"] = max_receive_count
    with _target(url, data_dir, token) as t:
        t.create_queue(name, **kw)
    out.print(f"created queue [bold]{name}[/bold]")


@queue_app.command("list")
def queue_list(prefix: str | None = typer.Option(None, "--prefix"), url: str | None = URL,
               data_dir: str | None = DATA, token: str | None = TOKEN, as_json: bool = JSON_OUT):
    """List queues."""
    with _target(url, data_dir, token) as t:
        names = t.queues(prefix)
    _print_names(names, as_json)


@queue_app.command("describe")
def queue_describe(name: str, url: str | None = URL, data_dir: str | None = DATA,
                   token: str | None = TOKEN, as_json: bool = JSON_OUT):
    """A queue's attributes and approximate counts."""
    with _target(url, data_dir, token) as t:
        attrs = t.queue(name).get_attributes()
    if as_json:
        _print_json(attrs)
        return
    tab = Table(title=f"queue {name}")
    tab.add_column("attribute")
    tab.add_column("value")
    for k, v in sorted(attrs.items()):
        tab.add_row(str(k), str(v))
    out.print(tab)


@queue_app.command("delete")
def queue_delete(name: str, url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN):
    """Delete a queue and its messages."""
    with _target(url, data_dir, token) as t:
        t.delete_queue(name)
    out.print(f"deleted queue [bold]{name}[/bold]")


@queue_app.command("purge")
def queue_purge(name: str, url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN):
    """Delete every message of a queue."""
    with _target(url, data_dir, token) as t:
        t.queue(name).purge()
    out.print(f"purged queue [bold]{name}[/bold]")


@queue_app.command("send")
def queue_send(name: str, body: str | None = typer.Argument(None, help="message body (default: one message per stdin line)"),
               delay_seconds: int | None = typer.Option(None), group_id: str | None = typer.Option(None),
               dedup_id: str | None = typer.Option(None),
               url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN):
    """Send a message (or one per line of stdin)."""
    bodies = [body] if body is not None else [ln.rstrip("\n") for ln in sys.stdin]
    with _target(url, data_dir, token) as t:
        q = t.queue(name)
        for b in bodies:
            mid = q.send(b, delay_seconds=delay_seconds, group_id=group_id, dedup_id=dedup_id)
            out.print(mid, highlight=False)


@queue_app.command("receive")
def queue_receive(name: str, max_messages: int = typer.Option(1, "--max", "-n"),
                  wait_seconds: int | None = typer.Option(None, "--wait"),
                  visibility_timeout: int | None = typer.Option(None),
                  delete: bool = typer.Option(False, "--delete", help="delete what was received"),
                  url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN):
    """Receive messages (printed as JSON lines with their receipt handles)."""
    with _target(url, data_dir, token) as t:
        q = t.queue(name)
        msgs = q.receive(max_messages=max_messages, wait_seconds=wait_seconds, visibility_timeout=visibility_timeout)
        for m in msgs:
            body = m.body.decode("utf-8", "replace") if isinstance(m.body, (bytes, bytearray)) else m.body
            sys.stdout.write(json.dumps({"id": m.id, "body": body, "receipt_handle": m.receipt_handle,
                                         "receive_count": m.receive_count}) + "\n")
            if delete:
                q.delete(m.receipt_handle)


@queue_app.command("delete-message")
def queue_delete_message(name: str, receipt_handle: str, url: str | None = URL,
                         data_dir: str | None = DATA, token: str | None = TOKEN):
    """Delete (acknowledge) a received message by its receipt handle."""
    with _target(url, data_dir, token) as t:
        t.queue(name).delete(receipt_handle)


# ------------------------------------------------------------------------------ inspect
@app.command()
def inspect(path: str = typer.Argument(..., help="a data directory, a partition/log directory, or a .log segment"),
            batches: bool = typer.Option(False, "--batches", help="list every batch"),
            records: bool = typer.Option(False, "--records", help="print every record"),
            as_json: bool = JSON_OUT):
    """Dump segment files, verify every batch's CRC, report corruption (exit 1 if any)."""
    report = inspect_path(path, want_batches=batches or records, want_records=records)
    if as_json:
        _print_json(report)
    else:
        _print_report(report, batches or records, records)
    if report["corrupt"]:
        raise typer.Exit(1)


def _segment_files(path: str) -> list[str]:
    if os.path.isfile(path):
        return [path]
    if not os.path.isdir(path):
        _fail(f"{path}: no such file or directory", 2)
    found = []
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for f in sorted(files):
            if f.endswith(".log") and f[:-4].isdigit():
                found.append(os.path.join(root, f))
    return found


def inspect_segment(file: str, want_batches: bool = False, want_records: bool = False) -> dict:
    """Walk one segment file batch by batch (storage's scanner verifies bounds
    and CRC of each); report what it found."""
    from .storage.record_batch import CODEC_NAMES
    from .storage.segment_scan import scan_segment_file

    info = {"file": file, "batches": 0, "records": 0, "first_offset": None, "last_offset": None,
            "bytes": os.path.getsize(file), "status": "ok", "problems": [], "corrupt": False}
    if want_batches:
        info["batch_list"] = []
    for item in scan_segment_file(file):
        kind, pos, b = item.kind, item.position, item.batch
        if kind == "batch":
            info["batches"] += 1
            info["records"] += b.count
            if info["first_offset"] is None:
                info["first_offset"] = b.base_offset
            info["last_offset"] = b.last_offset
            if want_batches:
                bd = {"position": pos, "base_offset": b.base_offset, "last_offset": b.last_offset,
                      "count": b.count, "size": b.size_bytes, "codec": CODEC_NAMES.get(b.codec) or "none",
                      "first_timestamp_ms": b.first_timestamp_ms, "max_timestamp_ms": b.max_timestamp_ms}
                if want_records:
                    bd["records"] = [repr(r) for r in b.records()]
                info["batch_list"].append(bd)
            continue
        info["problems"].append(_SCAN_PROBLEM[kind](item))
        if item.corrupt:
            info["status"] = "CORRUPT"
            info["corrupt"] = True
        elif kind != "gap":
            info["status"] = "torn tail"
    return info


_SCAN_PROBLEM = {
    "zero_tail": lambda i: f"{i.size} zero byte(s) after the last batch at position {i.position} (torn tail)",
    "incomplete_tail": lambda i: f"incomplete batch of {i.size} byte(s) at position {i.position} (torn tail: "
                                 "recovery truncates it)",
    "bad_header": lambda i: f"impossible batch header at position {i.position} ({i.size} bytes unreadable)",
    "invalid_batch": lambda i: i.detail + (" (last batch of the file: a torn write if the log "
                                           "was not flushed)" if i.at_end else ""),
    "below_segment_base": lambda i: f"batch at {i.position} has base offset {i.batch.base_offset} below the "
                                    f"segment base {i.expected}",
    "offset_goes_back": lambda i: f"batch at {i.position}: base offset {i.batch.base_offset} goes back "
                                  f"(expected >= {i.expected})",
    "gap": lambda i: f"gap: offsets {i.expected}..{i.batch.base_offset - 1} missing before position {i.position}",
}


def inspect_path(path: str, want_batches: bool = False, want_records: bool = False) -> dict:
    files = _segment_files(path)
    segs = [inspect_segment(f, want_batches, want_records) for f in files]
    if os.path.isdir(path):
        for sg in segs:
            sg["file"] = os.path.relpath(sg["file"], path)
    return {"path": path, "files": len(files), "segments": segs,
            "batches": sum(s["batches"] for s in segs), "records": sum(s["records"] for s in segs),
            "corrupt": any(s["corrupt"] for s in segs)}


def _print_report(report: dict, show_batches: bool, show_records: bool) -> None:
    tab = Table(title=f"segments under {report['path']}")
    for c in ("segment", "batches", "records", "first", "last", "bytes", "status"):
        tab.add_column(c, justify="left" if c in ("segment", "status") else "right")
    for s in report["segments"]:
        status = s["status"]
        style = {"ok": "green", "torn tail": "yellow"}.get(status, "red")
        tab.add_row(s["file"], str(s["batches"]), str(s["records"]), str(s["first_offset"]), str(s["last_offset"]),
                    str(s["bytes"]), f"[{style}]{status}[/{style}]")
    out.print(tab)
    for s in report["segments"]:
        for p in s["problems"]:
            err.print(f"[red]{s['file']}[/red]: {p}", highlight=False)
        if show_batches:
            for b in s.get("batch_list", []):
                out.print(f"  {s['file']} @{b['position']}: offsets {b['base_offset']}..{b['last_offset']} "
                          f"({b['count']} records, {b['size']} bytes, codec {b['codec']}, ts {b['first_timestamp_ms']}"
                          f"..{b['max_timestamp_ms']})", highlight=False)
                for r in b.get("records", []):
                    out.print(f"    {r}", highlight=False)
    verdict = "[red]CORRUPT[/red]" if report["corrupt"] else "[green]all CRCs verified[/green]"
    out.print(f"{report['files']} segment file(s), {report['batches']} batches, {report['records']} records: {verdict}")


# --------------------------------------------------------------------- pipeline
# The Spark pipelines keep their own argparse front (python -m vqs.pipelines.*);
# these commands pass every argument through, --help included.

pipeline_app = typer.Typer(help="The Spark pipelines (need the spark extra and Java 17).",
                           no_args_is_help=True)
app.add_typer(pipeline_app, name="pipeline")
_PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}


@pipeline_app.command("run", context_settings=_PASS_THROUGH, add_help_option=False)
def pipeline_run(ctx: typer.Context) -> None:
    """Run the camera-statistics Structured Streaming job on a topic (--path or --url)."""
    from .pipelines import camera

    raise typer.Exit(camera.main(["run", *ctx.args]))


@pipeline_app.command("feed", context_settings=_PASS_THROUGH, add_help_option=False)
def pipeline_feed(ctx: typer.Context) -> None:
    """Append generated camera frame events (late and dropped frames included) to a topic."""
    from .pipelines import camera

    raise typer.Exit(camera.main(["feed", *ctx.args]))


@pipeline_app.command("demo", context_settings=_PASS_THROUGH, add_help_option=False)
def pipeline_demo(ctx: typer.Context) -> None:
    """The end-to-end demo (`make demo`): server, feed, pipeline, summary."""
    from .pipelines import demo

    raise typer.Exit(demo.main(list(ctx.args)))


if __name__ == "__main__":
    app()
