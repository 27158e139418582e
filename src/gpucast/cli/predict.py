"""`gpucast predict train|energy|speed|cluster|checkpoint`.

The flags are the fields of the requests in :mod:`gpucast.app.predict`; the work happens there.
The published-model predictions (`llm-train`, `infer`, `gnn`) join this group from
:mod:`gpucast.cli.predict_models` (:data:`gpucast.cli.verbs.JOINS`).
"""

from __future__ import annotations

import typer

from gpucast.app.energy import PredictEnergyRequest
from gpucast.app.predict import (
    PredictCheckpointRequest,
    PredictClusterRequest,
    PredictSpeedRequest,
    PredictTrainRequest,
)
from gpucast.cli._command import request_command
from gpucast.cli._common import (
    JSON_OPTION_HELP,
    console,
    emit_json,
    emit_result,
    print_warnings,
    state,
)
from gpucast.domain.units import count_of, format_amount, format_duration

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="Predict step time, cluster speed, overheads."
)


@app.command("train")
@request_command(PredictTrainRequest)
def train(
    ctx: typer.Context,
    request: PredictTrainRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Predict the training step time of a workload on one GPU (no data needed); with
    --cluster, also the synchronous data-parallel step on its GPUs (--gpus, default all).

    A stored training measurement of the workload (any batch, any device) calibrates the
    prediction, as it calibrates `gpucast plan train`.
    """
    from gpucast.app import predict_train

    result = predict_train(request, db=state(ctx).db_path)
    if json_out:
        emit_json(result.to_dict())
        return
    est = result.estimate
    console.print(
        f"{result.workload} (batch {result.batch_size}"
        + (f", {result.batch_source}" if result.batch_source else "")
        + f", {result.precision_text}) on {result.gpu}: "
        + f"{est.value * 1e3:.1f} ms/step [{est.lower * 1e3:.1f}, {est.upper * 1e3:.1f}], "
        f"{result.samples_per_s:,.0f} samples/s, bound by {est.bottleneck} ({est.source})",
        highlight=False,
    )
    for note in est.notes:
        console.print(f"  {note}", highlight=False)
    console.print(f"  setup: {result.setup}", highlight=False, markup=False)
    console.print(f"  calibration: {result.calibration_source}", highlight=False)
    if result.profile_source:
        console.print(f"  profile: {result.profile_source}", highlight=False, markup=False)
    console.print(f"  validated: {result.validation.text()}", highlight=False)
    if result.cluster is not None:
        console.print(f"  cluster: {result.cluster.text()}", highlight=False, markup=False)
    if result.precision_assumption is not None:
        console.print(
            f"  precision: {result.precision_assumption.text()}", highlight=False, markup=False
        )
    memory = result.memory_text()
    if memory is not None:
        console.print(f"  memory: {memory}", highlight=False, markup=False)
    if result.embeddings_assumption is not None:
        console.print(
            f"  embeddings: {result.embeddings_assumption.text()}", highlight=False, markup=False
        )
    if result.crossbow is not None:
        console.print(f"  crossbow: {result.crossbow.text()}", highlight=False, markup=False)
        if result.crossbow_assumption is not None:
            console.print(f"  {result.crossbow_assumption.text()}", highlight=False, markup=False)
    if result.data_parallel is not None:
        for line in result.data_parallel.lines():
            console.print(line, highlight=False, markup=False)


@app.command("energy")
@request_command(PredictEnergyRequest)
def energy(
    ctx: typer.Context,
    request: PredictEnergyRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Predict step time, average GPU power and energy of a training step under a power
    limit, and the sweep over the GPU's limits (the power model fitted on the Zeus traces)."""
    from rich.table import Table

    from gpucast.app import predict_energy

    r = predict_energy(request, db=state(ctx).db_path)
    if json_out:
        emit_json(r.to_dict())
        return
    # a clock within 0.5% of the default keeps a decimal: not "throttled to 100% clock"
    clock = format(r.clock_fraction, ".0%" if r.clock_fraction < 0.995 else ".1%")
    console.print(
        f"{r.workload} (batch {r.batch_size}, {r.precision_text}) on {r.gpu} at "
        f"{r.power_limit_w:g} W"
        f"{' (auto)' if r.auto else ''}: {r.step_time_s * 1e3:.1f} ms/step "
        f"[{r.step_time_lower_s * 1e3:.1f}, {r.step_time_upper_s * 1e3:.1f}], "
        f"{r.avg_power_w:.0f} W [{r.avg_power_lower_w:.0f}, {r.avg_power_upper_w:.0f}], "
        f"{r.energy_j_per_step:.1f} J/step"
        f"{', throttled to ' + clock + ' clock' if r.throttled else ''}",
        highlight=False,
    )
    epoch = r.to_dict()["epoch"]
    if epoch is not None:
        console.print(
            f"  per epoch ({count_of(epoch['steps'], 'step')}): "
            f"{format_duration(epoch['time_s'])}, {format_amount(epoch['energy_kwh'])} kWh",
            highlight=False,
        )
    table = Table(title=f"power-limit sweep (eta {r.eta:g})", show_edge=False)
    for column in ("limit W", "ms/step", "power W", "J/step", "clock", "Zeus cost J"):
        table.add_column(column, justify="right")
    for p in r.sweep:
        mark = ""
        if p.power_limit_w == r.energy_optimal_power_limit_w:
            mark += " least energy"
        if p.power_limit_w == r.zeus_optimal_power_limit_w:
            mark += " Zeus pick"
        table.add_row(
            f"{p.power_limit_w:g}{mark}",
            f"{p.step_time_s * 1e3:.1f}",
            f"{p.avg_power_w:.0f}",
            f"{p.energy_j_per_step:.1f}",
            f"{p.clock_fraction:.0%}",
            f"{p.zeus_cost_j:.1f}",
        )
    console.print(table)
    for a in r.assumptions:
        console.print(f"  {a.name}: {a.text()}", highlight=False, markup=False)
    console.print(f"  validated: {r.validation.text()}", highlight=False)
    if r.memory_text is not None:
        console.print(f"  memory: {r.memory_text}", highlight=False, markup=False)
    for note in r.notes:
        console.print(f"  note: {note}", highlight=False)


@app.command("speed")
@request_command(PredictSpeedRequest)
def speed(
    request: PredictSpeedRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Predict single-GPU step time for each row; GPUs without training data use the catalog.

    Adds `Predicted Step Time (s)`, `Lower (s)`, `Upper (s)` and `Bottleneck` to a copy of the
    input rows. `GPU TFLOPS` may be empty: the catalog supplies the GPU's peak.
    """
    from gpucast.app import predict_speed

    result = predict_speed(request)
    unseen = [f"{gpu} by {result.peak_sources[gpu]}" for gpu in result.gpus_from_catalog_only]
    emit_result(
        result.to_dict(),
        f"predicted {count_of(result.rows, 'row')} -> {result.output}"
        + (f" ({', '.join(unseen)}: no training data)" if unseen else ""),
        as_json=json_out,
    )
    print_warnings(result.warnings)


@app.command("cluster")
@request_command(PredictClusterRequest)
def cluster(
    request: PredictClusterRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Predict cluster speed for each input row; adds Predicted Speed and Bottleneck."""
    from gpucast.app import predict_cluster

    result = predict_cluster(request)
    print_warnings(result.warnings)
    emit_result(
        result.to_dict(),
        f"predicted {count_of(result.rows, 'row')} -> {result.output}",
        as_json=json_out,
    )


@app.command("checkpoint")
@request_command(PredictCheckpointRequest)
def checkpoint(
    request: PredictCheckpointRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Predict checkpoint duration per row; adds Predicted Duration (s), Lower (s), Upper (s)."""
    from gpucast.app import predict_checkpoint

    result = predict_checkpoint(request)
    text = f"predicted {count_of(result.rows, 'row')}"
    if result.output is not None:
        text += f" -> {result.output}"
    else:
        text += "".join(
            f"\n  row {i}: {p['duration_s']:.2f} s [{p['lower_s']:.2f}, {p['upper_s']:.2f}]"
            for i, p in enumerate(result.predictions(), start=1)
        )
    emit_result(result.to_dict(), text, as_json=json_out)
