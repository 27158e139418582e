"""`gpucast fit speed|cluster|checkpoint`: fit a performance model and save it as JSON."""

from __future__ import annotations

import typer

from gpucast.cli.cluster_cmds import fit_checkpoint_command, fit_cluster_command
from gpucast.cli.speed_cmds import fit_speed_command

app = typer.Typer(no_args_is_help=True, help="Fit performance models from data.")
app.command("speed")(fit_speed_command)
app.command("cluster")(fit_cluster_command)
app.command("checkpoint")(fit_checkpoint_command)
