"""``vqs queue``: SQS-style queues (create, list, describe, send, receive, delete...)."""

from __future__ import annotations

import json
import sys

import typer

from .failures import EXIT_INTERRUPTED, EXIT_USAGE, fail
from .output import (
    DATA,
    JSON_OUT,
    TOKEN,
    URL,
    UTC_OUT,
    YES,
    confirm_destructive,
    err,
    iso_time,
    new_table,
    print_json,
    print_line,
    print_names,
    print_table,
)
from .target import target

queue_app = typer.Typer(help="SQS-style queues: create, send, receive, delete.", no_args_is_help=True)


@queue_app.command("create")
def queue_create(name: str,
                 visibility_timeout: int = typer.Option(30), delay_seconds: int = typer.Option(0),
                 receive_wait_seconds: int = typer.Option(0), retention_seconds: int = typer.Option(345600),
                 max_message_bytes: int = typer.Option(1048576),
                 dead_letter_queue: str | None = typer.Option(None, help="move a message here after --max-receive-count receives"),
                 max_receive_count: int | None = typer.Option(None, min=1, max=1000,
                                                              help="receives before a message moves to --dead-letter-queue"),
                 fifo: bool = typer.Option(False), content_based_deduplication: bool = typer.Option(False),
                 url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN):
    """Create a queue."""
    kw = dict(visibility_timeout=visibility_timeout, delay_seconds=delay_seconds,
              receive_wait_seconds=receive_wait_seconds, retention_seconds=retention_seconds,
              max_message_bytes=max_message_bytes, fifo=fifo, content_based_deduplication=content_based_deduplication)
    if (dead_letter_queue is None) != (max_receive_count is None):
        fail("--dead-letter-queue and --max-receive-count go together (a message moves to the dead-letter "
             "queue after that many receives)", EXIT_USAGE)
    if dead_letter_queue is not None:
        kw["dead_letter_queue"] = dead_letter_queue
        kw["max_receive_count"] = max_receive_count
    with target(url, data_dir, token, creates=True, queue=dead_letter_queue) as t:  # the one that may be missing
        t.create_queue(name, **kw)
    print_line(f"created queue {name}")


@queue_app.command("list")
def queue_list(prefix: str | None = typer.Option(None, "--prefix"), url: str | None = URL,
               data_dir: str | None = DATA, token: str | None = TOKEN, as_json: bool = JSON_OUT):
    """List queues."""
    with target(url, data_dir, token) as t:
        names = t.queues(prefix)
    print_names(names, as_json)


@queue_app.command("describe")
def queue_describe(name: str, url: str | None = URL, data_dir: str | None = DATA,
                   token: str | None = TOKEN, as_json: bool = JSON_OUT, utc: bool = UTC_OUT):
    """A queue's attributes and approximate counts."""
    with target(url, data_dir, token, queue=name) as t:
        attrs = t.queue(name).get_attributes()
    if as_json:
        print_json(attrs)
        return
    print_line(f"queue {name}")
    tab = new_table("attribute", "value:text")
    for k, v in sorted(attrs.items()):
        if k in _TIME_ATTRIBUTES and str(v).isdigit():
            v = iso_time(int(v) * 1000, utc)
        tab.add_row(str(k), str(v))
    print_table(tab)


_TIME_ATTRIBUTES = ("CreatedTimestamp", "LastModifiedTimestamp")  # SQS: epoch seconds


@queue_app.command("delete")
def queue_delete(name: str, url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN,
                 yes: bool = YES):
    """Delete a queue and its messages.

    Asks first on a terminal; with --yes, or when stdin is not a terminal (a script), it does
    not ask.
    """
    confirm_destructive(f"delete queue {name} and all its messages?", yes)
    with target(url, data_dir, token, queue=name) as t:
        t.delete_queue(name)
    print_line(f"deleted queue {name}")


@queue_app.command("purge")
def queue_purge(name: str, url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN,
                yes: bool = YES):
    """Delete every message of a queue.

    Asks first on a terminal; with --yes, or when stdin is not a terminal (a script), it does
    not ask.
    """
    confirm_destructive(f"delete every message of queue {name}?", yes)
    with target(url, data_dir, token, queue=name) as t:
        t.queue(name).purge()
    print_line(f"purged queue {name}")


@queue_app.command("send")
def queue_send(name: str, body: str | None = typer.Argument(None, help="message body (default: one message per stdin line)"),
               delay_seconds: int | None = typer.Option(None), group_id: str | None = typer.Option(None),
               dedup_id: str | None = typer.Option(None),
               url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN):
    """Send a message (or one per line of stdin).

    From stdin, each line is sent as it is typed on a terminal; from a file or a pipe, in batches of
    up to 10 (SQS's batch). A batch is sent whole or not at all: on an error or Ctrl-C the command
    says how many messages were sent and how many were read but not sent. Each message id is
    printed as it is sent.
    """
    fields = {k: v for k, v in (("delay_seconds", delay_seconds), ("group_id", group_id), ("dedup_id", dedup_id))
              if v is not None}
    if body is not None:
        with target(url, data_dir, token, queue=name) as t:
            print_line(str(t.queue(name).send(body, **fields)))
        return
    _send_lines(name, sys.stdin.buffer, fields, url, data_dir, token)


_BATCH_BYTES = 256 * 1024  # a batch's bodies stay under SQS's smallest batch payload limit


def _send_lines(name: str, stream, fields: dict, url, data_dir, token) -> None:
    """One message per line of ``stream``: sent as typed on a terminal, else in batches; the count
    said on an error or Ctrl-C is exact (a request in flight finishes first: stream.Interrupt)."""
    from ..errors import MessageTooLarge, QueueError, VQSError
    from .failures import explain
    from .stream import Interrupt, refused_whole

    size = 1 if stream.isatty() else 10
    sent, batch, nbytes, first = 0, [], 0, 1  # first: the input line of batch[0]
    try:
        with Interrupt() as intr, target(url, data_dir, token, queue=name) as t:
            q = t.queue(name)

            def stored(ids: list) -> None:  # (run before a deferred Ctrl-C is raised: stream.Interrupt)
                nonlocal sent, batch, first
                for mid in ids:
                    print_line(str(mid))
                sent, first, batch = sent + len(ids), first + len(ids), batch[len(ids):]

            def send_one(b: str) -> None:
                try:
                    intr.send(lambda: q.send(b, **fields), lambda mid: stored([mid]))
                except VQSError as e:
                    raise _LineFailed(f"line {first}", *explain(e)) from e

            def flush() -> None:
                nonlocal nbytes
                if len(batch) > 1:
                    try:
                        intr.send(lambda: q.send_batch([{"body": b, **fields} for b in batch]), stored)
                    except VQSError as e:
                        # refused before anything was sent (the queue validates a batch whole):
                        # each line alone finds the one refused; anything else is said as it is
                        if not (isinstance(e, (QueueError, MessageTooLarge)) or refused_whole(e)):
                            raise _LineFailed(f"lines {first}-{first + len(batch) - 1}", *explain(e)) from e
                for b in list(batch):
                    send_one(b)
                nbytes = 0

            for n, raw in enumerate(stream, 1):
                line = raw[:-1] if raw.endswith(b"\n") else raw
                try:
                    text = line.decode("utf-8")
                except UnicodeDecodeError as e:
                    flush()
                    raise _LineFailed(f"line {n}", 1, f"not UTF-8 text (byte {e.start + 1})") from None
                if batch and nbytes + len(line) > _BATCH_BYTES:
                    flush()
                batch.append(text)
                nbytes += len(line)
                if len(batch) >= size:
                    flush()
            flush()
    except KeyboardInterrupt:
        print_line(f"interrupted: sent {sent} message(s) to {name}; {len(batch)} read but not sent", err)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except _LineFailed as f:
        fail(f"{f.where}: {f.message.rstrip('.')}; sent {sent} message(s) to {name} before it", f.code)
    print_line(f"sent {sent} message(s) to {name}", err)


class _LineFailed(Exception):
    """An input line (or lines) the queue refused, and why in CLI words."""

    def __init__(self, where: str, code: int, message: str):
        self.where, self.code, self.message = where, code, message


@queue_app.command("receive")
def queue_receive(name: str, max_messages: int = typer.Option(1, "--max", "-n"),
                  wait_seconds: int | None = typer.Option(None, "--wait", min=0, max=20,
                                                          help="long poll up to this many seconds (0-20, as SQS)"),
                  visibility_timeout: int | None = typer.Option(None, min=0, max=43_200,
                                                                help="seconds (0-43200, as SQS)"),
                  delete: bool = typer.Option(False, "--delete", help="delete what was received"),
                  url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN):
    """Receive messages.

    Printed as JSON lines, each with its receipt handle.
    """
    with target(url, data_dir, token, queue=name) as t:
        q = t.queue(name)
        msgs = q.receive(max_messages=max_messages, wait_seconds=wait_seconds, visibility_timeout=visibility_timeout)
        for m in msgs:
            body = m.body.decode("utf-8", "replace") if isinstance(m.body, (bytes, bytearray)) else m.body
            sys.stdout.write(json.dumps({"id": m.id, "body": body, "receipt_handle": m.receipt_handle,
                                         "receive_count": m.receive_count}) + "\n")
            if delete:
                q.delete(m.receipt_handle)


@queue_app.command("peek")
def queue_peek(name: str, max_messages: int = typer.Option(10, "--max", "-n", min=1, max=100,
                                                          help="at most this many (1-100)"),
               from_offset: int = typer.Option(0, "--from", min=0, help="from this position (a row's offset + 1)"),
               url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN):
    """Show pending messages without receiving them.

    Nothing changes: no lease, no receive count. JSON lines: id, offset, state (visible, in_flight,
    delayed, moving), receive_count, body.
    """
    with target(url, data_dir, token, queue=name) as t:
        rows = t.queue(name).peek(max_messages, from_offset)
    for p in rows:
        m = p.message
        body = m.body.decode("utf-8", "replace") if isinstance(m.body, (bytes, bytearray)) else m.body
        sys.stdout.write(json.dumps({"id": m.id, "offset": m.offset, "state": p.state,
                                     "receive_count": p.receive_count, "visible_at_ms": p.visible_at_ms,
                                     "body": body}) + "\n")


@queue_app.command("redrive")
def queue_redrive(name: str = typer.Argument(..., help="the dead-letter queue"),
                  to: str | None = typer.Option(None, "--to", help="move into this queue (default: where each came from)"),
                  max_per_second: int | None = typer.Option(None, "--max-per-second", min=1, max=500),
                  wait: bool = typer.Option(True, "--wait/--no-wait",
                                            help="wait until the move ends (--no-wait: a server keeps moving)"),
                  url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN):
    """Move a dead-letter queue's messages back.

    The move is SQS's StartMessageMoveTask. With --data-dir the command always waits: the move runs in this process.
    """
    import time

    with target(url, data_dir, token, queue=name) as t:
        task = t.redrive(name, to, max_per_second=max_per_second)
        print_line(f"moving {task.to_move} message(s) out of {name} (task {task.handle})", err)
        if not wait and not data_dir:
            return
        while task.active:
            time.sleep(0.2)
            [task] = [x for x in t.redrive_tasks(name) if x.handle == task.handle] or [task]
    if task.status != "COMPLETED":
        fail(f"the move out of {name} ended {task.status}: {task.failure_reason or 'no reason given'} "
             f"({task.moved} moved)")
    print_line(f"moved {task.moved} message(s) out of {name}", err)
    if not to and task.moved < task.to_move:
        print_line(f"{task.to_move - task.moved} message(s) stayed in {name}: no source queue is known for them "
                   "(sent to it directly, or their queue was deleted); move them with --to QUEUE", err)


@queue_app.command("delete-message")
def queue_delete_message(name: str, receipt_handle: str, url: str | None = URL,
                         data_dir: str | None = DATA, token: str | None = TOKEN):
    """Delete (acknowledge) a received message.

    By the receipt handle `vqs queue receive` printed.
    """
    with target(url, data_dir, token, queue=name) as t:
        t.queue(name).delete(receipt_handle)
