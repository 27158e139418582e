"""`gpucast profile WORKLOAD`: static features of a workload, as a table or JSON.

The flags are the fields of :class:`gpucast.app.profile.ProfileRequest`; the work happens in
:func:`gpucast.app.profile.profile_workload`. The profile is saved in the measurement store
(``--db``, else the default store) unless ``--no-save``; its run id is printed (``run_id`` in
the JSON), so that ``gpucast plan train --workload run:ID`` plans from it.
"""

from __future__ import annotations

import typer
from rich.markup import escape
from rich.table import Table

from gpucast.app.profile import ProfileRequest
from gpucast.cli._command import request_command
from gpucast.cli._common import JSON_OPTION_HELP, console, emit_json, err_console, state, working
from gpucast.domain.profile import WorkloadProfile
from gpucast.domain.units import GIB, MIB


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


@request_command(ProfileRequest)
def command(
    ctx: typer.Context,
    request: ProfileRequest,
    as_json: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Static features of a workload: parameters, FLOPs, bytes per operator class, memory."""
    from gpucast.app import profile_workload
    from gpucast.cli._common import say_new_store

    with working(f"profiling {request.workload} (one step under fake tensors)"):
        result = profile_workload(request, db=state(ctx).db_path)
    say_new_store(result.new_store)
    if as_json:
        emit_json(result.to_dict())
        return
    render(result.profile)
    if result.precision_note is not None:
        err_console.print(f"precision: {escape(result.precision_note)}", highlight=False)
    if result.run_id is not None:
        err_console.print(
            f"saved as run {result.run_id} in {escape(str(result.db))} "
            f"(plan from it: gpucast plan train --workload run:{result.run_id})",
            highlight=False,
        )
