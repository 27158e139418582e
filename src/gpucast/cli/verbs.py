"""The list of verbs, in the order ``gpucast --help`` shows them. The only place that lists them."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    from gpucast.cli import (
        campaign,
        catalog,
        curves,
        fit,
        llm_serve,
        measure,
        plan,
        predict,
        profile,
        report,
        runs,
        simulate,
        validate,
    )

    # Serving verbs (cli.serve, cli.curves) join the groups of their capability here.
    # `--model LLM` dispatches to the LLM serving verbs (cli.llm_serve wraps cli.serve)
    plan.app.command("serve")(llm_serve.plan_command())
    simulate.app.command("serve")(llm_serve.simulate_command())
    measure.app.command("infer-curve")(curves.command)

    app.add_typer(plan.app, name="plan", help="Plan training and serving: time, cost, risk.")
    app.add_typer(catalog.app, name="catalog", help="GPU specs and cloud offers with prices.")
    app.command("profile")(profile.command)
    app.add_typer(measure.app, name="measure", help="Time training or inference steps.")
    app.add_typer(runs.app, name="runs", help="List, show and export stored measurements.")
    app.add_typer(campaign.app, name="campaign", help="Run resumable measurement sweeps.")
    app.add_typer(fit.app, name="fit", help="Fit performance models from data.")
    app.add_typer(predict.app, name="predict", help="Predict step time, cluster speed, overheads.")
    app.command("validate")(validate.command)
    app.add_typer(
        simulate.app,
        name="simulate",
        help="Simulate training on transient clusters and inference serving.",
    )
    app.command("report")(report.command)
