"""`gpucast measure train|infer WORKLOAD`: time steps on this machine and store the result.

The flags are the fields of :class:`~gpucast.app.measure.MeasureTrainRequest` and
``MeasureInferRequest``; the work happens in :func:`gpucast.app.measure.measure_train` /
``measure_infer``. This module renders a progress line while measuring, then a table of the
measurement (``runs show`` reuses it); ``infer-curve`` joins it in :mod:`gpucast.cli.verbs`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.table import Table

from gpucast.app.measure import MeasureInferRequest, MeasureResult, MeasureTrainRequest
from gpucast.cli._command import request_command
from gpucast.cli._common import (
    JSON_OPTION_HELP,
    console,
    emit_json,
    err_console,
    state,
    working,
)
from gpucast.cli._progress import progress_line
from gpucast.domain.units import count_of, format_seconds, percent_text

if TYPE_CHECKING:  # gpucast.domain.measurement pulls in numpy; annotations only here
    from collections.abc import Set

    from gpucast.domain.distributed import DistributedMeasurement
    from gpucast.domain.measurement import Measurement

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="Time training or inference steps."
)


def measurement_table(m: Measurement, *, title: str | None = None, prefix: str = "") -> Table:
    """A Rich table of a measurement's statistics, environment and telemetry; ``prefix``
    goes before the default title (what was measured: workload, batch, precision, device)."""
    spec = m.spec
    default_title = (
        f"{prefix}{m.mode} {escape(spec.label)} · batch {spec.batch_size} · {spec.precision} · "
        f"{m.device}"
    )
    table = Table(title=title or default_title, show_header=False, title_justify="left")
    table.add_column("what", style="bold")
    table.add_column("value")
    table.add_row("median step", format_seconds(m.median_s))
    table.add_row("mean step", format_seconds(m.mean_s))
    table.add_row(
        f"{m.confidence:.0%} CI of mean",
        f"{format_seconds(m.ci_low_s)} – {format_seconds(m.ci_high_s)} "
        f"(±{m.ci_halfwidth_rel:.2%}, target ±{percent_text(m.target_ci, 2)})",
    )
    table.add_row("p5 / p95", f"{format_seconds(m.p5_s)} / {format_seconds(m.p95_s)}")
    table.add_row("IQR", f"{format_seconds(m.iqr_s)} ({m.iqr_s / m.median_s:.1%} of median)")
    table.add_row("throughput", f"{m.samples_per_s:,.0f} samples/s (batch / mean step)")
    table.add_row(
        "samples", f"{m.n_samples} measured, {m.n_warmup} warm-up · stop: {m.stop_reason}"
    )
    env = m.environment
    table.add_row("host", f"{escape(env.host)} · {escape(env.cpu_model)} · {env.cpu_cores} CPUs")
    table.add_row(
        "software",
        f"torch {env.torch_version} ({count_of(env.torch_threads, 'thread')})"
        + (f" · CUDA {env.cuda_version}" if env.cuda_version else "")
        + (f" · driver {env.driver_version}" if env.driver_version else ""),
    )
    if env.gpu_name:
        table.add_row("GPU", escape(env.gpu_name))
    t = m.telemetry
    if t is not None:

        def pair(mean: float | None, peak: float | None, unit: str, scale: float = 1.0) -> str:
            if mean is None or peak is None:
                return "-"
            return f"{mean / scale:.1f} {unit} mean, {peak / scale:.1f} {unit} max"

        table.add_row("GPU utilisation", pair(t.gpu_util_mean_pct, t.gpu_util_max_pct, "%"))
        table.add_row(
            "GPU memory",
            pair(t.memory_used_mean_bytes, t.memory_used_max_bytes, "GiB", scale=1024**3),
        )
        table.add_row("power", pair(t.power_mean_w, t.power_max_w, "W"))
        table.add_row("SM clock", pair(t.sm_clock_mean_mhz, t.sm_clock_max_mhz, "MHz"))
    e = m.energy
    if e is not None:
        if e.gpu_energy_j_per_step is not None:
            limit = "" if e.power_limit_w is None else f", limit {e.power_limit_w:g} W"
            table.add_row(
                "GPU energy",
                f"{e.gpu_energy_j_per_step:.3g} J/step, {e.gpu_avg_power_w:.1f} W mean "
                f"({e.gpu_method}{limit})",
            )
        if e.cpu_energy_j_per_step is not None:
            table.add_row(
                "CPU energy",
                f"{e.cpu_energy_j_per_step:.3g} J/step, "
                f"{e.cpu_energy_j / e.elapsed_s:.1f} W mean ({e.cpu_method}, all packages)",
            )
    if m.gradient_noise is not None:
        table.add_row("gradient noise scale", m.gradient_noise.text())
    table.add_row("created", m.created_at.isoformat(timespec="seconds"))
    return table


def print_warnings(m: Measurement | DistributedMeasurement, shown: Set[str] = frozenset()) -> None:
    for warning in (w for w in m.warnings if w not in shown):  # shown: printed live already
        console.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.3g} ms"


def distributed_table(d: DistributedMeasurement) -> Table:
    """A Rich table of a DistributedMeasurement: summary, then one row per rank."""
    c = d.config
    title = (
        f"train {escape(d.spec.label)} · {c.label} · {count_of(c.n_workers, 'worker')}"
        + (f" + {c.n_ps} PS" if c.n_ps else "")
        + f" · {d.spec.precision}"
    )
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("what", style="bold")
    table.add_column("value")
    table.add_row("step (median / mean)", f"{_ms(d.median_step_s)} / {_ms(d.mean_step_s)}")
    table.add_row("compute", _ms(d.compute_s))
    table.add_row("communication (alone)", _ms(d.communication_s))
    table.add_row(
        "exposed / overlapped",
        f"{_ms(d.exposed_communication_s)} / {_ms(d.overlapped_communication_s)}",
    )
    table.add_row("bytes sent per worker step", f"{d.bytes_per_step / 1e6:,.2f} MB")
    table.add_row(
        "throughput",
        f"{d.samples_per_s:,.0f} samples/s ({d.worker_steps_per_s:.2f} worker steps/s)",
    )
    table.add_row("skew", f"{d.skew:.1%} (slowest: rank {d.straggler_rank})")
    if d.ps_utilization is not None:
        table.add_row("busiest PS shard", f"{d.ps_utilization:.0%} busy")
    ranks = Table(title="ranks", title_justify="left")
    for column in ("rank", "role", "device", "batch", "step", "compute", "comm", "PS busy"):
        ranks.add_column(column, justify="right" if column not in ("role", "device") else "left")
    for r in d.ranks:
        ranks.add_row(
            str(r.rank),
            r.role,
            escape(r.device),
            str(r.batch_size or "-"),
            _ms(r.median_step_s) if r.role == "worker" else "-",
            _ms(r.median_compute_s) if r.role == "worker" else "-",
            _ms(r.median_comm_s) if r.role == "worker" else "-",
            "-" if r.ps_utilization is None else f"{r.ps_utilization:.0%}",
        )
    outer = Table.grid()
    outer.add_row(table)
    outer.add_row(ranks)
    return outer


def render(result: MeasureResult, *, as_json: bool, shown: Set[str] = frozenset()) -> None:
    """Print a measure verb's result: JSON, or the table, its warnings and where it was saved."""
    from gpucast.cli._common import say_new_store
    from gpucast.domain.measurement import Measurement

    say_new_store(result.new_store)
    if as_json:
        emit_json(result.to_dict())
        return
    m = result.measurement
    if m is None:
        err_console.print(
            f"node {result.node_rank} done; rank 0 (node 0) holds and stores the result",
            highlight=False,
        )
        return
    for point in result.sweep:
        assert isinstance(point.measurement, Measurement)
        console.print(
            measurement_table(
                point.measurement,
                title=f"train {escape(point.measurement.spec.label)} at a "
                f"{point.power_limit_w:g} W power limit",
            )
        )
    if not result.sweep:
        console.print(measurement_table(m) if isinstance(m, Measurement) else distributed_table(m))
    if (trace := result.kernels) is not None:
        err_console.print(
            f"kernels: {len(trace.operators)} distinct operators, "
            f"{trace.calls_per_step:.0f} calls and "
            f"{trace.operator_time_s_per_step * 1e3:.4g} ms of operator time per step "
            f"({trace.activity} times over {trace.steps} profiled steps)",
            highlight=False,
        )
        if (energy := trace.energy_j_per_step) is not None:
            err_console.print(
                f"energy ({trace.energy_source}, each call replayed): {energy:.4g} J of "
                f"operators per step, {energy / max(trace.operator_time_s_per_step, 1e-12):.4g}"
                " W while they run",
                highlight=False,
            )
        if trace.energy_note:
            err_console.print(escape(trace.energy_note), highlight=False)
    for what, note in (("precision", result.precision_note), ("options", result.options_note)):
        if note is not None:
            err_console.print(f"{what}: {escape(note)}", highlight=False)
    print_warnings(m, shown)
    if result.run_id is not None:
        err_console.print(
            f"saved as run {result.run_id} in {escape(str(result.db))}", highlight=False
        )


@app.command("train")
@request_command(MeasureTrainRequest)
def train(
    ctx: typer.Context,
    request: MeasureTrainRequest,
    as_json: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Time training steps (forward, backward, optimizer) of WORKLOAD.

    With --distributed, launch --nproc processes (torchrun-compatible; NCCL on GPUs, gloo on
    the CPU) and measure step, compute and communication time, bytes and per-rank skew.
    """
    from gpucast.app import measure_train

    config = request.distributed_config()
    shown: set[str] = set()  # notes printed live, left out of the result's warnings
    if config is not None:
        with working(f"{config.label} {escape(request.workload)}: {config.world_size} processes"):
            result = measure_train(request, db=state(ctx).db_path)
    else:
        with progress_line(f"train {request.workload}", shown) as show:
            result = measure_train(request, db=state(ctx).db_path, on_progress=show)
    render(result, as_json=as_json, shown=shown)


@app.command("infer")
@request_command(MeasureInferRequest)
def infer(
    ctx: typer.Context,
    request: MeasureInferRequest,
    as_json: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Time inference steps (forward pass, no gradients) of WORKLOAD."""
    from gpucast.app import measure_infer

    shown: set[str] = set()
    with progress_line(f"infer {request.workload}", shown) as show:
        result = measure_infer(request, db=state(ctx).db_path, on_progress=show)
    render(result, as_json=as_json, shown=shown)
