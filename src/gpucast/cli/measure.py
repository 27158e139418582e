"""`gpucast measure train|infer WORKLOAD`: time steps on this machine and store the result."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.progress import Progress as RichProgress
from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from gpucast.cli._common import console, emit_json, err_console, state
from gpucast.domain.workload import WorkloadSpec

if TYPE_CHECKING:  # gpucast.domain.measurement pulls in scipy; annotations only here
    from gpucast.domain.measurement import Measurement
    from gpucast.workloads.base import Workload

app = typer.Typer(no_args_is_help=True, help="Time training or inference steps.")


def format_seconds(value: float | None) -> str:
    """A duration with a readable unit: ``812 µs``, ``12.4 ms``, ``1.53 s``."""
    if value is None:
        return "-"
    if value < 1e-3:
        return f"{value * 1e6:.3g} µs"
    if value < 1.0:
        return f"{value * 1e3:.3g} ms"
    return f"{value:.3g} s"


def measurement_table(m: Measurement, *, title: str | None = None) -> Table:
    """A Rich table of a measurement's statistics, environment and telemetry."""
    spec = m.spec
    default_title = (
        f"{m.mode} {escape(spec.name)} · batch {spec.batch_size} · {spec.precision} · {m.device}"
    )
    table = Table(
        title=title or default_title,
        show_header=False,
        title_justify="left",
    )
    table.add_column("what", style="bold")
    table.add_column("value")
    table.add_row("median step", format_seconds(m.median_s))
    table.add_row("mean step", format_seconds(m.mean_s))
    table.add_row(
        f"{m.confidence:.0%} CI of mean",
        f"{format_seconds(m.ci_low_s)} – {format_seconds(m.ci_high_s)} "
        f"(±{m.ci_halfwidth_rel:.2%}, target ±{m.target_ci:.2%})",
    )
    table.add_row("p5 / p95", f"{format_seconds(m.p5_s)} / {format_seconds(m.p95_s)}")
    table.add_row("IQR", f"{format_seconds(m.iqr_s)} ({m.iqr_s / m.median_s:.1%} of median)")
    table.add_row("throughput", f"{m.samples_per_s:,.1f} samples/s")
    table.add_row(
        "samples", f"{m.n_samples} measured, {m.n_warmup} warm-up · stop: {m.stop_reason}"
    )
    env = m.environment
    table.add_row("host", f"{escape(env.host)} · {escape(env.cpu_model)} · {env.cpu_cores} CPUs")
    table.add_row(
        "software",
        f"torch {env.torch_version} ({env.torch_threads} threads)"
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
    table.add_row("created", m.created_at.isoformat(timespec="seconds"))
    return table


def print_warnings(m: Measurement) -> None:
    for warning in m.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False)


def _run(
    ctx: typer.Context,
    mode: str,
    workload: str,
    device: str,
    batch_size: int,
    precision: str,
    target_ci: float,
    max_time_s: float,
    min_samples: int,
    no_save: bool,
    as_json: bool,
) -> None:
    from gpucast.measure import StoppingRule, resolve_device
    from gpucast.store import Store
    from gpucast.workloads import get_workload

    # Check every input before building a model or touching the store.
    spec = WorkloadSpec(name=workload, batch_size=batch_size, precision=precision)  # type: ignore[arg-type]
    StoppingRule(target_ci=target_ci, max_time_s=max_time_s, min_samples=min_samples)
    resolve_device(device)
    chosen = get_workload(workload)
    db_path = db_path_for(ctx)
    store = None if no_save else Store(db_path).open()  # a bad --db fails before measuring

    try:
        result = _measure_with_progress(
            spec, chosen, mode, device, target_ci, max_time_s, min_samples
        )
        run_id = None if store is None else store.save_measurement(result)
    finally:
        if store is not None:
            store.close()

    if as_json:
        emit_json({**result.to_dict(), "run_id": run_id})
        return
    console.print(measurement_table(result))
    print_warnings(result)
    if run_id is not None:
        err_console.print(f"saved as run {run_id} in {escape(str(db_path))}", highlight=False)


def _measure_with_progress(
    spec: WorkloadSpec,
    workload_obj: Workload,
    mode: str,
    device: str,
    target_ci: float,
    max_time_s: float,
    min_samples: int,
) -> Measurement:
    from gpucast.measure import Progress, measure

    workload = spec.name
    with RichProgress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=not err_console.is_terminal,
    ) as bar:
        task = bar.add_task(f"{mode} {workload}: building model", total=None)

        def show(p: Progress) -> None:
            if p.phase == "warmup":
                text = f"{mode} {workload}: warming up ({p.n_warmup} steps)"
            else:
                ci = "-" if p.ci_halfwidth_rel is None else f"±{p.ci_halfwidth_rel:.1%}"
                text = (
                    f"{mode} {workload}: {p.n_samples} samples, CI {ci} (target ±{p.target_ci:.1%})"
                )
            bar.update(task, description=text)

        return measure(
            spec,
            mode=mode,
            device=device,
            target_ci=target_ci,
            max_time_s=max_time_s,
            min_samples=min_samples,
            workload=workload_obj,
            on_progress=show,
        )


_DEVICE = typer.Option("auto", "--device", help="cpu, cuda, cuda:N, or auto (a GPU if any).")
_BATCH = typer.Option(32, "--batch-size", help="Samples per step (>= 1).")
_PRECISION = typer.Option("fp32", "--precision", help="fp32, bf16 or fp16.")
_TARGET_CI = typer.Option(
    0.02, "--target-ci", help="Stop when the 95% CI half-width is within this share of the mean."
)
_MAX_TIME = typer.Option(
    60.0,
    "--max-time-s",
    help="Wall-clock budget, warm-up included (at least --min-samples steps always run).",
)
_MIN_SAMPLES = typer.Option(10, "--min-samples", help="Measured steps before stopping (>= 2).")
_NO_SAVE = typer.Option(False, "--no-save", help="Do not write the result to the store.")
_JSON = typer.Option(False, "--json", help="Print one JSON object instead of a table.")


@app.command("train")
def train(
    ctx: typer.Context,
    workload: str = typer.Argument(..., help="A built-in workload name or module:factory."),
    device: str = _DEVICE,
    batch_size: int = _BATCH,
    precision: str = _PRECISION,
    target_ci: float = _TARGET_CI,
    max_time_s: float = _MAX_TIME,
    min_samples: int = _MIN_SAMPLES,
    no_save: bool = _NO_SAVE,
    as_json: bool = _JSON,
    distributed: str | None = typer.Option(
        None, "--distributed", help="ddp, fsdp or ps: a multi-process run via torch.distributed."
    ),
    nproc: int = typer.Option(2, "--nproc", help="Processes on this node (--distributed)."),
    nnodes: int = typer.Option(1, "--nnodes", help="Nodes in the job (--distributed)."),
    node_rank: int = typer.Option(0, "--node-rank", help="This node's rank (--distributed)."),
    master_addr: str = typer.Option("127.0.0.1", "--master-addr", help="Rendezvous host."),
    master_port: int | None = typer.Option(None, "--master-port", help="Rendezvous port."),
    ps_shards: int = typer.Option(1, "--ps-shards", help="Parameter-server shards (ps)."),
    sync: bool = typer.Option(True, "--sync/--async", help="Synchronous or asynchronous PS."),
    batch_sizes: str | None = typer.Option(
        None, "--batch-sizes", help="Per-worker batch sizes, e.g. 32,64 (heterogeneous runs)."
    ),
    devices: str | None = typer.Option(
        None, "--devices", help="Per-worker devices, e.g. cuda:0,cpu (heterogeneous runs)."
    ),
    steps: int = typer.Option(20, "--steps", help="Measured steps per rank (--distributed)."),
    warmup_steps: int = typer.Option(5, "--warmup-steps", help="Warm-up steps (--distributed)."),
) -> None:
    """Time training steps (forward, backward, optimizer) of WORKLOAD.

    With --distributed, launch --nproc processes (torchrun-compatible; NCCL on GPUs, gloo on
    the CPU) and measure step, compute and communication time, bytes and per-rank skew.
    """
    if distributed is not None:
        from gpucast.cli.distributed import run_distributed

        run_distributed(
            ctx, workload=workload, strategy=distributed, device=device, batch_size=batch_size,
            precision=precision, nproc=nproc, nnodes=nnodes, node_rank=node_rank,
            master_addr=master_addr, master_port=master_port, ps_shards=ps_shards, sync=sync,
            batch_sizes=batch_sizes, devices=devices, steps=steps, warmup_steps=warmup_steps,
            no_save=no_save, as_json=as_json,
        )  # fmt: skip
        return
    _run(ctx, "train", workload, device, batch_size, precision, target_ci, max_time_s,
         min_samples, no_save, as_json)  # fmt: skip


@app.command("infer")
def infer(
    ctx: typer.Context,
    workload: str = typer.Argument(..., help="A built-in workload name or module:factory."),
    device: str = _DEVICE,
    batch_size: int = _BATCH,
    precision: str = _PRECISION,
    target_ci: float = _TARGET_CI,
    max_time_s: float = _MAX_TIME,
    min_samples: int = _MIN_SAMPLES,
    no_save: bool = _NO_SAVE,
    as_json: bool = _JSON,
) -> None:
    """Time inference steps (forward pass, no gradients) of WORKLOAD."""
    _run(ctx, "infer", workload, device, batch_size, precision, target_ci, max_time_s,
         min_samples, no_save, as_json)  # fmt: skip


def db_path_for(ctx: typer.Context) -> Path:
    from gpucast.store import default_db_path

    return state(ctx).db_path or default_db_path()
