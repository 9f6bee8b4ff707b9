"""The ``vqs`` command (typer + rich): the app and the registration of every command.

Every data command works against a server (``--url``, ``VQS_URL``; default
``http://127.0.0.1:8642``) or, where it makes sense, directly on a data
directory (``--data-dir``, ``VQS_DATA_DIR``; this takes the directory's lock,
so not while a server owns it). ``vqs inspect`` reads segment files without
any lock and verifies every batch's CRC.

One module per concept: ``failures`` (exit codes, errors in CLI words),
``output`` (tables that never cut a name, times, progress), ``target``
(server or data directory), ``topics``, ``stream`` (produce/consume),
``groups``, ``queues``, ``inspect``, ``pipelines``. The modules never import
this package; it imports them and registers their commands here, in the
order ``vqs --help`` lists them.

Help is click's plain layout (``rich_markup_mode=None``): it wraps
descriptions and never cuts an option's name, at any width or in a pipe.
Shell completion is typer's (``--install-completion``, ``--show-completion``).
"""

from __future__ import annotations

import typer

from ..server.run import EXIT_CODES_HELP as SERVE_EXIT_CODES_HELP
from ..server.run import serve_command
from . import inspect as inspect_cmd
from . import stream
from .failures import EXIT_CODES_HELP, CLIGroup
from .groups import group_app
from .inspect import inspect_path, inspect_segment
from .pipelines import pipeline_app
from .queues import queue_app
from .share import share_app
from .topics import topic_app

__all__ = ["app", "inspect_path", "inspect_segment"]

app = typer.Typer(help="VQS: a durable message queue and log.", epilog=EXIT_CODES_HELP, cls=CLIGroup,
                  no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
                  context_settings={"help_option_names": ["-h", "--help"]})


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"vqs {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True,
                                       help="print the version and exit")) -> None:
    """VQS: a durable message queue and log."""


app.add_typer(topic_app, name="topic")
app.add_typer(queue_app, name="queue")
app.add_typer(group_app, name="group")
app.add_typer(share_app, name="share")

# the server owns its command line (python -m vqs.server runs the same command)
app.command("serve", epilog=SERVE_EXIT_CODES_HELP)(serve_command)
app.command("produce")(stream.produce)
app.command("consume")(stream.consume)
app.command("inspect")(inspect_cmd.inspect_command)
app.add_typer(pipeline_app, name="pipeline")
