"""`gpucast predict train|speed|cluster|checkpoint`."""

from __future__ import annotations

import typer

from gpucast.cli.cluster_cmds import predict_checkpoint_command, predict_cluster_command
from gpucast.cli.speed_cmds import predict_speed_command, predict_train_command

app = typer.Typer(no_args_is_help=True, help="Predict step time, cluster speed, overheads.")
app.command("train")(predict_train_command)
app.command("speed")(predict_speed_command)
app.command("cluster")(predict_cluster_command)
app.command("checkpoint")(predict_checkpoint_command)
