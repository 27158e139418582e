"""`gpucast measure train --distributed ...`: launch, print, store (called from cli.measure)."""

from __future__ import annotations

from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from gpucast.cli._common import console, emit_json, err_console
from gpucast.domain.errors import InvalidSpecError


def _split(option: str, text: str | None, cast: type) -> tuple[Any, ...] | None:
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise InvalidSpecError(option, "must list at least one value", got=text)
    try:
        return tuple(cast(p) for p in parts)
    except ValueError:
        raise InvalidSpecError(
            option, f"must be a comma-separated list of {cast.__name__}", got=text
        ) from None


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.3g} ms"


def distributed_table(d: Any) -> Table:
    """A Rich table of a DistributedMeasurement: summary, then one row per rank."""
    c = d.config
    title = (
        f"train {escape(d.spec.name)} · {c.label} · {c.n_workers} worker(s)"
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
        f"{d.samples_per_s:,.1f} samples/s ({d.worker_steps_per_s:.2f} worker steps/s)",
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


def run_distributed(
    ctx: typer.Context,
    *,
    workload: str,
    strategy: str,
    device: str,
    batch_size: int,
    precision: str,
    nproc: int,
    nnodes: int,
    node_rank: int,
    master_addr: str,
    master_port: int | None,
    ps_shards: int,
    sync: bool,
    batch_sizes: str | None,
    devices: str | None,
    steps: int,
    warmup_steps: int,
    no_save: bool,
    as_json: bool,
) -> None:
    from gpucast.cli.measure import db_path_for
    from gpucast.domain.distributed import DistributedConfig
    from gpucast.domain.workload import WorkloadSpec
    from gpucast.measure.distributed.launcher import launch, validate
    from gpucast.store import Store
    from gpucast.store.campaigns import save_distributed

    per_worker_batch = _split("--batch-sizes", batch_sizes, int) or (batch_size,)
    per_worker_device = _split("--devices", devices, str) or (device,)
    config = DistributedConfig(
        strategy=strategy,  # type: ignore[arg-type]
        nproc_per_node=nproc,
        batch_sizes=per_worker_batch,
        devices=per_worker_device,
        nnodes=nnodes,
        node_rank=node_rank,
        master_addr=master_addr,
        master_port=master_port,
        ps_shards=ps_shards,
        sync=sync,
        steps=steps,
        warmup_steps=warmup_steps,
    )
    spec = WorkloadSpec(name=workload, batch_size=per_worker_batch[0], precision=precision)  # type: ignore[arg-type]
    validate(spec, config)
    db_path = db_path_for(ctx)
    store = None if no_save or node_rank != 0 else Store(db_path).open()
    try:
        with (
            err_console.status(
                f"{config.label} {workload}: {config.world_size} processes", spinner="dots"
            )
            if err_console.is_terminal
            else _null()
        ):
            result = launch(spec, config)
        run_id = None if store is None or result is None else save_distributed(store, result)
    finally:
        if store is not None:
            store.close()
    if result is None:
        err_console.print(
            f"node {node_rank} done; rank 0 (node 0) holds and stores the result", highlight=False
        )
        return
    if as_json:
        emit_json({**result.to_dict(), "run_id": run_id})
        return
    console.print(distributed_table(result))
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False)
    if run_id is not None:
        err_console.print(f"saved as run {run_id} in {escape(str(db_path))}", highlight=False)


def _null() -> Any:
    import contextlib

    return contextlib.nullcontext()
