"""What every data command shares: where it works, how it fails, how it prints.

A command works on a server (``--url``, ``VQS_URL``; default
``http://127.0.0.1:8642``) or on a data directory (``--data-dir``,
``VQS_DATA_DIR``; this takes the directory's lock, so not while a server owns
it). ``target()`` yields a ``vqs.Client`` or a ``vqs.Broker`` (same shapes) and
turns every VQSError, OSError and unreachable server into ``fail()``: a red
message on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import json
from contextlib import contextmanager

import typer
from rich.console import Console

out = Console()
err = Console(stderr=True)

URL = typer.Option(None, "--url", envvar="VQS_URL", help="server URL (default http://127.0.0.1:8642)")
DATA = typer.Option(None, "--data-dir", envvar="VQS_DATA_DIR", help="work on a data directory instead of a server")
TOKEN = typer.Option(None, "--token", envvar="VQS_TOKEN", help="bearer token for the server")
JSON_OUT = typer.Option(False, "--json", help="print JSON")


def fail(msg: str, code: int = 1):
    """Say what went wrong on stderr and exit with ``code`` (no traceback)."""
    err.print(f"[red]error:[/red] {msg}", highlight=False)
    raise typer.Exit(code)


@contextmanager
def target(url: str | None, data_dir: str | None, token: str | None):
    """A vqs.Client for a URL, or a vqs.Broker for a data directory (same shapes)."""
    from ..errors import VQSError

    if url and data_dir:
        fail("give --url or --data-dir, not both", 2)
    try:
        if data_dir:
            from ..broker import Broker

            t = Broker(data_dir)
        else:
            from ..client import DEFAULT_URL, Client

            t = Client(url or DEFAULT_URL, token=token)
    except VQSError as e:
        fail(str(e))
    try:
        yield t
    except VQSError as e:
        fail(str(e))
    except OSError as e:
        fail(f"{e}")
    except Exception as e:
        import httpx

        if isinstance(e, httpx.HTTPError):
            fail(f"cannot reach the server at {getattr(t, 'url', url)}: {e}")
        raise
    finally:
        t.close()


def print_json(obj) -> None:
    out.print_json(json.dumps(obj, default=str))


def print_names(names: list[str], as_json: bool) -> None:
    """A list of names: JSON, or one per line."""
    if as_json:
        print_json(names)
    else:
        for n in names:
            out.print(n, highlight=False)
