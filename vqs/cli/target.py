"""Where a data command works: a server (``vqs.Client``) or a data directory (``vqs.Broker``).

A command works on a server (``--url``, ``VQS_URL``; default
``http://127.0.0.1:8642``) or on a data directory (``--data-dir``,
``VQS_DATA_DIR``; this takes the directory's lock, so not while a server owns
it). ``target()`` yields a ``vqs.Client`` or a ``vqs.Broker`` (same shapes)
and turns every VQSError, OSError and unreachable server into ``fail()`` with
the command's context (the URL, the topic or queue named): one line on stderr
and the exit code of failures.py, never a traceback.

Invariant: only a command that creates data (``topic create``, ``queue
create``) may create a data directory. Every other command refuses a missing
directory, and a non-empty one that holds no VQS data, before opening
anything: a mistyped ``--data-dir`` is an error, not a new empty directory.
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager

from ..broker import layout
from ..broker.names import validate_name
from .failures import EXIT_UNAVAILABLE, EXIT_USAGE, explain, fail, http_error, unreachable


def check_data_dir(data_dir: str) -> None:
    """Refuse a data directory that does not exist, or that holds files but no VQS data."""
    if not os.path.exists(data_dir):
        fail(f"data dir {data_dir} does not exist (check the path; `vqs topic create NAME --data-dir "
             f"{data_dir}` or `vqs serve --data-dir {data_dir}` makes a new one)")
    if not os.path.isdir(data_dir):
        fail(f"data dir {data_dir} is not a directory")
    if layout.someone_elses(os.listdir(data_dir)):
        fail(f"{data_dir} is not a VQS data dir (it has files, but no topics/, queues/ or groups/)")


@contextmanager
def target(url: str | None, data_dir: str | None, token: str | None, *, creates: bool = False,
           topic: str | None = None, queue: str | None = None):
    """A vqs.Client for a URL, or a vqs.Broker for a data directory (same shapes).

    ``creates``: the command makes data, so it may create the data directory.
    ``topic``/``queue``: the names the command works on (for its error messages)."""
    from ..errors import VQSError

    if url and data_dir:
        fail("give --url or --data-dir, not both", EXIT_USAGE)
    names = {"topic": topic, "queue": queue}
    where = None
    made = bool(data_dir) and creates and not os.path.exists(data_dir)
    try:
        for kind, name in names.items():  # before anything is opened or made for it
            if name is not None:
                validate_name(name, f"{kind} name")
        if data_dir:
            from ..broker import Broker

            if not creates:
                check_data_dir(data_dir)
            elif os.path.exists(data_dir) and not os.path.isdir(data_dir):
                fail(f"data dir {data_dir} is a file, not a directory")
            t = Broker(data_dir)
        else:
            from ..client import DEFAULT_URL, Client

            where = url or DEFAULT_URL
            t = Client(where, token=token)
    except (VQSError, OSError) as e:
        fail(*_explained(e, where, names))
    ok = False
    try:
        yield t
        ok = True
    except BrokenPipeError:  # stdout's reader left (`| head`): not an error of the request
        raise
    except (VQSError, OSError) as e:
        fail(*_explained(e, where, names))
    except Exception as e:
        if http_error(e):
            fail(unreachable(where, e), EXIT_UNAVAILABLE)
        raise
    finally:
        t.close()
        if made and not ok:
            _remove_if_empty(data_dir)


def _remove_if_empty(data_dir: str) -> None:
    """Remove a data directory this command made, when its failure left nothing in it but the
    empty skeleton a Broker opens with (the lock file, empty subdirectories)."""
    for root, _dirs, files in os.walk(data_dir):
        if any(not (root == data_dir and f == ".lock") for f in files):
            return
    shutil.rmtree(data_dir, ignore_errors=True)


def _explained(e: BaseException, url: str | None, names: dict) -> tuple[str, int]:
    code, msg = explain(e, url, names)
    return msg, code
