"""`gpucast profile WORKLOAD`: static features of a workload, as a table or JSON.

The profile is saved in the measurement store (``--db``, else the default store) unless
``--no-save``; its run id is printed (``run_id`` in the JSON), so that
``gpucast plan train --workload run:ID`` plans from it.
"""

from __future__ import annotations

from typing import Any, cast

import typer
from rich.table import Table

from gpucast.cli._common import console, emit_json, err_console, state
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.profile import WorkloadProfile
from gpucast.domain.units import GIB, MIB
from gpucast.domain.workload import Precision, WorkloadSpec


def parse_option(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` → (key, value); VALUE becomes an int, float or tuple of ints if it can."""
    key, sep, raw = text.partition("=")
    key = key.strip().replace("-", "_")
    if not sep or not key.isidentifier():
        raise InvalidSpecError(
            "--option", "must be KEY=VALUE", got=text, fix="e.g. --option seq_len=128"
        )
    raw = raw.strip()
    value: Any = raw
    try:
        value = int(raw)
    except ValueError:
        try:
            value = float(raw)
        except ValueError:
            if "," in raw:
                try:
                    value = tuple(int(part) for part in raw.split(",") if part.strip())
                except ValueError:
                    value = raw
    return key, value


def _flops(value: float) -> str:
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3f} {unit}FLOP"
    return f"{value:.0f} FLOP"


def _bytes(value: float) -> str:
    if value >= GIB:
        return f"{value / GIB:.2f} GiB"
    return f"{value / MIB:.2f} MiB"


def render(profile: WorkloadProfile) -> None:
    """Print the profile as Rich tables."""
    summary = Table(
        title=f"{profile.workload}  batch {profile.batch_size}  {profile.precision}",
        show_header=False,
    )
    summary.add_column("what")
    summary.add_column("value", justify="right")
    summary.add_row(
        "parameters (trainable)", f"{profile.parameters_total:,} ({profile.parameters_trainable:,})"
    )
    summary.add_row("parameter tensors", f"{profile.parameter_tensors}")
    summary.add_row(
        "tensor size mean / max",
        f"{profile.parameter_tensor_mean_mib:.3f} / {profile.parameter_tensor_max_mib:.3f} MiB",
    )
    summary.add_row("FLOPs forward", _flops(profile.forward_flops))
    summary.add_row("FLOPs forward+backward", _flops(profile.forward_backward_flops))
    summary.add_row("FLOPs inference", _flops(profile.inference_flops))
    summary.add_row("gradient bytes", _bytes(profile.gradient_bytes))
    console.print(summary)

    classes = Table(title="training step by operator class (forward + backward + optimizer)")
    for column in ("class", "calls", "FLOPs", "~uncounted FLOPs", "read", "written", "FLOP/byte"):
        classes.add_column(column, justify="left" if column == "class" else "right")
    for cost in profile.train_step_by_class():
        if cost.calls == 0:
            continue
        classes.add_row(
            cost.op_class,
            f"{cost.calls}",
            _flops(cost.flops),
            _flops(cost.approx_uncounted_flops),
            _bytes(cost.bytes_read),
            _bytes(cost.bytes_written),
            f"{cost.arithmetic_intensity_flop_per_byte:.2f}",
        )
    console.print(classes)

    memory = profile.memory
    mem = Table(title=f"memory estimate ({memory.optimizer})", show_header=False)
    mem.add_column("what")
    mem.add_column("bytes", justify="right")
    for label, value in (
        ("weights", memory.weights_bytes),
        ("gradients", memory.gradients_bytes),
        ("optimizer state", memory.optimizer_state_bytes),
        ("activations (saved for backward)", memory.activations_bytes),
        ("input batch", memory.inputs_bytes),
        ("training peak", memory.train_peak_bytes),
        ("inference peak", memory.inference_peak_bytes),
    ):
        mem.add_row(label, _bytes(value))
    console.print(mem)
    if profile.uncounted_ops:
        console.print(
            "uncounted ops (arithmetic flop_counter does not count): "
            + ", ".join(profile.uncounted_ops),
            highlight=False,
        )
    for note in profile.notes:
        console.print(f"note: {note}", highlight=False)


def command(
    ctx: typer.Context,
    workload: str = typer.Argument(
        ...,
        help="resnet50, cifar-resnetN (N = 15 or 6n+2), shake-shake, bert-base, "
        "gpt2-small, dlrm, gcn, mlp, or a user model as module:factory.",
    ),
    batch_size: int = typer.Option(32, "--batch-size", "-b", help="Samples per step."),
    precision: str = typer.Option("fp32", "--precision", help="fp32, bf16 or fp16."),
    optimizer: str = typer.Option("sgd", "--optimizer", help="sgd (momentum) or adam."),
    option: list[str] = typer.Option(
        [], "--option", "-o", help="Workload option KEY=VALUE (repeatable), e.g. seq_len=128."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    no_save: bool = typer.Option(False, "--no-save", help="Do not write the profile to the store."),
) -> None:
    """Static features of a workload: parameters, FLOPs, bytes per operator class, memory."""
    from rich.markup import escape

    from gpucast.profile import profile
    from gpucast.store import Store, default_db_path
    from gpucast.workloads import get_workload

    options = dict(parse_option(text) for text in option)
    # WorkloadSpec validates the precision and names the choices.
    spec = WorkloadSpec(name=workload, batch_size=batch_size, precision=cast(Precision, precision))
    # every input is checked before the store is touched (an unknown name creates no file)
    chosen = get_workload(workload, **options)
    db_path = state(ctx).db_path or default_db_path()
    store = None if no_save else Store(db_path).open()  # a bad --db fails before profiling
    try:
        result = profile(chosen, spec, optimizer=optimizer)
        run_id = None if store is None else store.save_profile(spec, result.to_dict())
    finally:
        if store is not None:
            store.close()
    if as_json:
        emit_json({**result.to_dict(), "run_id": run_id})
        return
    render(result)
    if run_id is not None:
        err_console.print(
            f"saved as run {run_id} in {escape(str(db_path))} "
            f"(plan from it: gpucast plan train --workload run:{run_id})",
            highlight=False,
        )
