"""The `gpucast` app with the plan and report verbs (wired here until cli/verbs.py has them)."""

from __future__ import annotations

import typer

from gpucast.cli import app as root


def cli_app() -> typer.Typer:
    groups = {g.name for g in root.app.registered_groups}
    commands = {c.name for c in root.app.registered_commands}
    if "plan" in groups and "report" in commands:
        return root.app
    from gpucast.cli import plan, report

    local = typer.Typer(
        cls=root.GpucastGroup,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    local.callback()(root.root)
    local.add_typer(plan.app, name="plan")
    local.command("report")(report.command)
    return local
