"""The ``vqs`` command (typer + rich): the app and the registration of every command.

Every data command works against a server (``--url``, ``VQS_URL``; default
``http://127.0.0.1:8642``) or, where it makes sense, directly on a data
directory (``--data-dir``, ``VQS_DATA_DIR``; this takes the directory's lock,
so not while a server owns it). ``vqs inspect`` reads segment files without
any lock and verifies every batch's CRC.

One module per concept: ``target`` (shared helpers), ``topics``, ``stream``
(produce/consume), ``groups``, ``queues``, ``inspect``, ``pipelines``. The
modules never import this package; it imports them and registers their
commands here, in the order ``vqs --help`` lists them.
"""

from __future__ import annotations

import typer

from ..server.run import serve_command
from . import inspect as inspect_cmd
from . import stream
from .groups import group_app
from .inspect import inspect_path, inspect_segment
from .pipelines import pipeline_app
from .queues import queue_app
from .topics import topic_app

__all__ = ["app", "inspect_path", "inspect_segment"]

app = typer.Typer(help="VQS: a durable message queue and log.", no_args_is_help=True,
                  pretty_exceptions_enable=False, add_completion=False)
app.add_typer(topic_app, name="topic")
app.add_typer(queue_app, name="queue")
app.add_typer(group_app, name="group")

# the server owns its command line (python -m vqs.server runs the same command)
app.command("serve")(serve_command)
app.command("produce")(stream.produce)
app.command("consume")(stream.consume)
app.command("inspect")(inspect_cmd.inspect_command)
app.add_typer(pipeline_app, name="pipeline")
