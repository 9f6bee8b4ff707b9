"""How the ``vqs`` command fails: exit codes, and every error as one line in CLI words.

Exit codes (the same for every command, ``vqs serve`` included; ``vqs --help``
and docs/cli.md list them):

* 0 - success;
* 1 - error: the request was refused (no such topic, queue or partition, it
  already exists, a value out of range, a missing data directory, a file
  that cannot be read);
* 2 - usage: a bad command line (unknown option, missing argument, wrong type)
  or settings ``vqs serve`` refuses; nothing was done;
* 3 - unavailable: the server cannot be reached or failed (5xx), or a data
  directory or port is held by another process (``vqs serve`` cannot start);
* 4 - corrupt: stored data failed verification (``vqs inspect`` found a bad
  CRC, a read hit one, on a data directory or on the server: its 500
  ``corrupt_data``);
* 130 - interrupted (Ctrl-C).

Invariant: a user error never shows a traceback. ``CLIGroup`` (the root
command's class) turns every VQSError, OSError, unreachable server and Ctrl-C
raised by any command into ``fail()``: ``error: <one line>`` on stderr (never
wrapped, whatever the terminal width) and its exit code. ``explain`` words the
embedded API's messages for a shell user: no Python names but the command to
type ("create it with `vqs topic create NAME`"). A bug (any other
exception) keeps its traceback: it is ours to fix, and the traceback says where.
"""

from __future__ import annotations

import os
import re
import sys

import typer
from typer.core import TyperGroup

from .output import err

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
EXIT_CORRUPT = 4
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = (
    "Exit status: 0 success; 1 error (the request was refused: no such topic or queue, "
    "a bad value, a missing data directory); 2 bad usage; 3 unavailable (the server cannot "
    "be reached, or a port or data directory is held by another process); 4 corrupt data "
    "found; 130 interrupted."
)


def fail(msg: str, code: int = EXIT_ERROR):
    """Say what went wrong on stderr, on one line, and exit with ``code`` (no traceback)."""
    from rich.markup import escape

    err.print(f"[red]error:[/red] {escape(msg)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


# Python hints in the embedded API's messages, and what a shell user types instead
_HINTS = [
    (re.compile(r"topic '([^']+)' does not exist$"),
     r"topic '\1' does not exist (create it with `vqs topic create \1`)"),
]


def explain(exc: BaseException, url: str | None = None, names: dict | None = None) -> tuple[int, str]:
    """(exit code, one line in CLI words) for an error a command raised."""
    from .. import errors as E

    names = names or {}
    if isinstance(exc, E.ServerUnreachable):
        return EXIT_UNAVAILABLE, unreachable(exc.url or url, exc.__cause__ or exc)
    if isinstance(exc, E.LogLockedError):
        who = f"pid {exc.holder_pid}" if exc.holder_pid else "another process"
        return EXIT_UNAVAILABLE, (f"data dir {exc.path} is locked by {who} (one process owns a data dir; "
                                  "if a server runs on it, use --url instead of --data-dir)")
    if isinstance(exc, E.TopicDoesNotExist):
        name = exc.name or names.get("topic")
        if name is None:
            m = re.search(r"topic '([^']+)'", str(exc))
            name = m.group(1) if m else "NAME"
        return EXIT_ERROR, f"topic {name!r} does not exist (create it with `vqs topic create {name}`)"
    if isinstance(exc, E.QueueDoesNotExist):
        name = exc.name or names.get("queue")
        if name is None:
            return EXIT_ERROR, "the queue does not exist (create it with `vqs queue create NAME`)"
        return EXIT_ERROR, f"queue {name!r} does not exist (create it with `vqs queue create {name}`)"
    if isinstance(exc, E.OffsetOutOfRange) and exc.offset >= 0 and exc.start_offset >= 0:
        m = re.match(r"(\S+\[\d+\]): ", str(exc))
        where = f" of {m.group(1)}" if m else ""
        return EXIT_ERROR, (f"offset {exc.offset}{where} is out of range: valid offsets are "
                            f"{exc.start_offset}..{exc.end_offset} (start..end; give --offset in that range, "
                            "or use --from-end)")
    if isinstance(exc, E.CorruptRecordError):
        if getattr(exc, "path", None) is None and url:  # the server's stored data (its 500 corrupt_data)
            return EXIT_CORRUPT, (f"the server at {url}: {exc} (check its data dir with `vqs inspect` while it is "
                                  "stopped; docs/server.md, Recovery from corruption)")
        return EXIT_CORRUPT, f"{exc} (check the data with `vqs inspect`)"
    if isinstance(exc, E.RemoteError):
        if exc.status >= 500:
            return EXIT_UNAVAILABLE, f"the server at {url} failed: {exc} (its log has the details)"
        if exc.status in (401, 403):
            return EXIT_ERROR, f"{exc} (give a token with --token or VQS_TOKEN)"
        return EXIT_ERROR, str(exc)
    if isinstance(exc, E.VQSError):
        msg = str(exc)
        for pattern, repl in _HINTS:
            msg = pattern.sub(repl, msg)
        return EXIT_ERROR, msg
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return EXIT_ERROR, f"{where}{exc.strerror or exc}"
    return EXIT_ERROR, str(exc)


def http_error(exc: BaseException) -> bool:
    httpx = sys.modules.get("httpx")
    return httpx is not None and isinstance(exc, httpx.HTTPError)


def _request_url(exc: BaseException) -> str | None:
    try:
        return str(exc.request.url.copy_with(path="/", query=None)).rstrip("/")
    except (AttributeError, RuntimeError):  # httpx raises RuntimeError when no request is set
        return None


def unreachable(url: str | None, exc: BaseException) -> str:
    what = type(exc).__name__
    detail = str(exc) or what
    return (f"cannot reach the server at {url} ({detail}); start one with `vqs serve`, "
            "or work on a data dir with --data-dir DIR")


class CLIGroup(TyperGroup):
    """The root command: runs a command and turns what it raised into an exit code.

    ``target()`` explains errors with the command's context (URL, names); this is the
    net for everything else (a file that cannot be opened, Ctrl-C, a closed pipe)."""

    def invoke(self, ctx):
        from ..errors import VQSError

        try:
            return super().invoke(ctx)
        except typer.BadParameter as e:
            words = bound_words(e.__cause__)
            if words is not None:
                e.message = words
            raise
        except KeyboardInterrupt:
            err.print("interrupted", highlight=False)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except BrokenPipeError:
            # `vqs consume t | head`: the reader left; say nothing, as cat does
            _silence_stdout()
            raise typer.Exit(EXIT_OK) from None
        except (VQSError, OSError) as e:
            code, msg = explain(e)
            fail(msg, code)
        except Exception as e:
            if http_error(e):
                fail(unreachable(_request_url(e), e), EXIT_UNAVAILABLE)
            raise


_BOUNDS = {"less_than_equal": ("at most", "le"), "less_than": ("less than", "lt"),
           "greater_than_equal": ("at least", "ge"), "greater_than": ("more than", "gt")}
_KINDS = {"int_parsing": "a whole number", "int_from_float": "a whole number", "float_parsing": "a number",
          "bool_parsing": "true or false"}


def bound_words(cause) -> str | None:
    """A refused option value in the words the REST API uses ("must be at most 20, not 60"), for
    the validation error typer raised (pydantic's "Input should be less than or equal to 20");
    None for any other cause (click's own message stays)."""
    errors = getattr(cause, "errors", None)
    if not callable(errors):
        return None
    try:
        first = errors()[0]
        kind, given = first["type"], first.get("input")
        if kind in _BOUNDS:
            words, key = _BOUNDS[kind]
            return f"must be {words} {first['ctx'][key]}, not {given}"
        if kind in _KINDS:
            return f"must be {_KINDS[kind]}, not {given!r}"
    except (LookupError, TypeError):
        pass
    return None


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
