"""``vqs pipeline``: the Spark pipelines (need the spark extra and Java 17).

The pipelines keep their own argparse front (``python -m vqs.pipelines.*``);
these commands pass every argument through, ``--help`` included.
"""

from __future__ import annotations

import typer

pipeline_app = typer.Typer(help="The Spark pipelines (need the spark extra and Java 17).",
                           no_args_is_help=True)
_PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}


@pipeline_app.command("run", context_settings=_PASS_THROUGH, add_help_option=False)
def pipeline_run(ctx: typer.Context) -> None:
    """Run the camera-statistics Spark job on a topic.

    Reads with --path or --url; --master spark://HOST:PORT runs it on a
    standalone cluster (read with --url there); --help lists its options.
    """
    from ..pipelines import camera

    raise typer.Exit(camera.main(["run", *ctx.args]))


@pipeline_app.command("feed", context_settings=_PASS_THROUGH, add_help_option=False)
def pipeline_feed(ctx: typer.Context) -> None:
    """Append generated camera frame events to a topic.

    Late and dropped frames included; --help lists its options.
    """
    from ..pipelines import camera

    raise typer.Exit(camera.main(["feed", *ctx.args]))


@pipeline_app.command("frames", context_settings=_PASS_THROUGH, add_help_option=False)
def pipeline_frames(ctx: typer.Context) -> None:
    """Run the frame job on a topic of JPEG frames.

    Events per camera to Parquet, alerts to a topic, report.html under --out.
    Reads with --path or --url; --help lists its options.
    """
    from ..pipelines import frames

    raise typer.Exit(frames.main(list(ctx.args)))


@pipeline_app.command("demo", context_settings=_PASS_THROUGH, add_help_option=False)
def pipeline_demo(ctx: typer.Context) -> None:
    """The end-to-end demo (`make demo`): cameras to Spark.

    Cameras, edge queues, a server taken away mid-run, the frame job; the
    detected events checked against the cameras' script. --help lists its
    options.
    """
    from ..pipelines import demo

    raise typer.Exit(demo.main(list(ctx.args)))
