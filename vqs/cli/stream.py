"""``vqs produce`` and ``vqs consume``: messages between a topic and stdin/stdout.

Framing is the same both ways: ``line`` (one message per line) or ``length``
(4-byte big-endian length prefix; ``0xFFFFFFFF``, Kafka's -1, is a null
value); ``consume`` also prints ``json`` (one object per line, binary
keys/values as ``key_b64``/``value_b64``, a null value as ``null``). ``line``
prints a null value as an empty line. A truncated
input ends ``produce`` with an error after sending every complete message
before it. ``consume --group`` commits as it goes and once more on the way out.
"""

from __future__ import annotations

import json
import os
import struct
import sys

import typer

from ..errors import VQSError
from .failures import EXIT_INTERRUPTED, EXIT_USAGE, explain, fail
from .output import DATA, TOKEN, URL, err, print_line, progress
from .target import target

_NULL_LENGTH = 0xFFFFFFFF  # a null value in ``length`` framing


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
            if n == _NULL_LENGTH:
                yield None
                continue
            data = stream.read(n)
            if len(data) < n:
                raise ValueError(f"truncated record: expected {n} bytes, got {len(data)}")
            yield data
    else:
        raise ValueError(f"framing must be line or length, not {framing!r}")



class Interrupt:
    """SIGINT during ``produce``: raised at once while input is awaited, deferred while a request
    is in flight (a batch is sent whole or not at all, and the count said is exact)."""

    def __init__(self):
        self.sending = False
        self.pending = False
        self._old = None

    def __enter__(self):
        import signal

        self._old = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc):
        import signal

        signal.signal(signal.SIGINT, self._old)

    def _on_sigint(self, signum, frame):
        if self.sending:
            self.pending = True
        else:
            raise KeyboardInterrupt

    def send(self, fn, done=None):
        """``fn()`` with SIGINT deferred, then ``done(result)`` (what the caller records of a request
        that went through: counts, printed ids) still deferred; a SIGINT that came meanwhile is
        raised after both, so the count said is what the target stored."""
        self.sending = True
        try:
            result = fn()
            if done is not None:
                done(result)
            return result
        finally:
            self.sending = False
            if self.pending:
                self.pending = False
                raise KeyboardInterrupt


def produce(topic: str,
            file: str | None = typer.Option(None, "--file", "-f", help="read from a file (default stdin)"),
            framing: str = typer.Option("line", "--framing", help="line (one message per line) or length (4-byte big-endian length prefix)"),
            key: str | None = typer.Option(None, "--key", help="key for every message"),
            partition: int | None = typer.Option(None, "--partition"),
            batch_size: int = typer.Option(500, "--batch-size", help="messages per request (on a terminal each line is sent as typed)"),
            skip: int = typer.Option(0, "--skip", min=0, help="skip the first N messages of the input (resume a run that stopped after N)"),
            show_progress: bool = typer.Option(True, "--progress/--no-progress",
                                               help="a progress bar on stderr (only on a terminal)"),
            url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN):
    """Send messages read from stdin or a file.

    On a terminal each line is sent as it is typed; from a file or a pipe, in batches. A batch is
    sent whole or not at all: on an error or Ctrl-C the command says how many messages were sent
    and how many were read but not sent, and --skip N resumes after the N sent.
    """
    from rich.progress import BarColumn, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    if framing not in ("line", "length"):
        fail(f"--framing must be line or length, not {framing!r}", EXIT_USAGE)
    if batch_size < 1:
        fail(f"--batch-size must be at least 1, not {batch_size}", EXIT_USAGE)
    if file:
        try:
            stream = open(file, "rb")
        except OSError as e:
            fail(f"cannot read {file}: {e.strerror}")
    else:
        stream = sys.stdin.buffer
        if stream.isatty():
            batch_size = 1  # typed lines go out as they are typed
    total = os.fstat(stream.fileno()).st_size if file and os.path.isfile(file) else None
    unit = "line" if framing == "line" else "message"
    sent = 0       # messages of the input sent (after the skipped ones)
    batch: list = []
    first = skip + 1  # the input's number (1-based) of batch[0]
    try:
        with Interrupt() as intr, target(url, data_dir, token, topic=topic) as t:
            p = t.producer()
            kb = os.fsencode(key) if key is not None else None  # the argument's bytes, as the shell gave them
            columns = [TextColumn("[bold]{task.fields[n]}[/bold] messages"), BarColumn(), TransferSpeedColumn()]
            if total is not None:
                columns.append(TimeRemainingColumn())
            with progress(*columns, enabled=show_progress) as prog:
                task = prog.add_task("produce", total=total, n=0)
                nbytes = 0

                def sent_n(n: int):
                    def done(_):
                        nonlocal sent, first, batch
                        sent, first, batch = sent + n, first + n, batch[n:]
                    return done

                def send(recs):
                    intr.send(lambda: p.send_batch(topic, recs, keys=None if kb is None else [kb] * len(recs),
                                                   partition=partition), sent_n(len(recs)))

                def flush_batch():
                    nonlocal nbytes, batch
                    if not batch:
                        return
                    try:
                        send(batch)
                    except VQSError as e:
                        if len(batch) == 1 or not refused_whole(e):
                            raise _Failed(first, first + len(batch) - 1, e) from e
                        for rec in list(batch):  # nothing of it was appended: find the message it refused
                            try:
                                send([rec])
                            except VQSError as e1:
                                raise _Failed(first, first, e1) from e1
                    prog.update(task, advance=nbytes, n=sent)
                    batch, nbytes = [], 0

                try:
                    for i, rec in enumerate(_frames(stream, framing)):
                        if i < skip:
                            continue
                        batch.append(rec)
                        nbytes += len(rec) + (1 if framing == "line" else 4)
                        if len(batch) >= batch_size:
                            flush_batch()
                    flush_batch()
                except ValueError as e:
                    flush_batch()
                    fail(f"{e} (after {sent} messages)")
            intr.send(p.flush)
    except KeyboardInterrupt:
        print_line(f"interrupted: sent {sent} message(s) to {topic}; {len(batch)} read but not sent"
                   + (f" (resume with --skip {skip + sent})" if file else ""), err)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except _Failed as f:
        where = f"{unit} {f.first}" if f.first == f.last else f"{unit}s {f.first}-{f.last}"
        code, why = explain(f.error)  # its exit code too: an unreachable server is 3, not 1
        fail(f"{where}: {why.rstrip('.')}; sent {sent} message(s) to {topic} before it"
             + (f" (fix the input and resume with --skip {skip + sent})" if file else ""), code)
    finally:
        if file:
            stream.close()
    print_line(f"sent {sent} message(s) to {topic}", err)


class _Failed(Exception):
    """A batch (input numbers ``first``..``last``) the target refused."""

    def __init__(self, first: int, last: int, error: Exception):
        self.first, self.last, self.error = first, last, error


def refused_whole(e: Exception) -> bool:
    """True when the error refuses a request before anything of it is appended (a message too
    large, an invalid request), so each message of the batch can be tried alone."""
    from ..errors import MessageTooLarge, RemoteError

    return isinstance(e, MessageTooLarge) or (isinstance(e, RemoteError) and e.status in (400, 413, 422))


def consume(topic: str,
            partition: int | None = typer.Option(None, "--partition", help="only this partition"),
            offset: int | None = typer.Option(None, "--offset", help="start here (needs --partition or a 1-partition topic)"),
            from_end: bool = typer.Option(False, "--from-end", help="start at the end (new messages only)"),
            group: str | None = typer.Option(None, "--group", "-g", help="start at the group's committed offsets; commit as we go"),
            follow: bool = typer.Option(False, "--follow", "-F", help="keep waiting for new messages"),
            max_messages: int | None = typer.Option(None, "--max", "-n", help="stop after this many"),
            framing: str = typer.Option("line", "--framing", help="line, length, or json (one object per line)"),
            url: str | None = URL, data_dir: str | None = DATA, token: str | None = TOKEN):
    """Print messages of a topic.

    From the beginning (default), an offset, the end, or a group's committed position.
    """
    import base64

    w = sys.stdout.buffer
    n = 0
    if framing not in ("line", "length", "json"):
        fail(f"--framing must be line, length or json, not {framing!r}", EXIT_USAGE)
    with target(url, data_dir, token, topic=topic) as t:
        c = t.consumer(None, group=group, auto_offset_reset="latest" if from_end else "earliest")
        try:
            nparts = t.topic(topic).partitions
            parts = [partition] if partition is not None else list(range(nparts))
            tps = [(topic, p) for p in parts]
            c.assign(tps)
            if offset is not None:
                if len(parts) != 1:
                    fail("--offset needs --partition (the topic has several partitions)", EXIT_USAGE)
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
                        w.write(struct.pack(">I", _NULL_LENGTH) if r.value is None
                                else struct.pack(">I", len(r.value)) + r.value)
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
                        w.write((r.value or b"") + b"\n")
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
                    print_line(f"warning: the final commit of group {group!r} failed: {e}", err)
            c.close()
    print_line(f"read {n} message(s)", err)
