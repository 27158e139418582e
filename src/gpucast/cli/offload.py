"""`gpucast measure optimizer`: CPU AdamW steps timed here (issue #16, offload).

The flags are the fields of :class:`gpucast.app.offload.MeasureOptimizerRequest`; the work
happens in :mod:`gpucast.app`. The command joins the ``measure`` group in :mod:`gpucast.cli.verbs`.
"""

from __future__ import annotations

import typer

from gpucast.app.offload import MeasureOptimizerRequest
from gpucast.cli._command import request_command
from gpucast.cli._common import JSON_OPTION_HELP, console, emit_json, say_new_store, state, working
from gpucast.domain.units import count_of


def _say(text: str) -> None:
    console.print(text, highlight=False, markup=False)


@request_command(MeasureOptimizerRequest)
def measure_command(
    ctx: typer.Context,
    request: MeasureOptimizerRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Time torch's AdamW step on this CPU (fp32 weights, gradients and moments, as
    ZeRO-Offload keeps them) at each size, store it, and fit the CPU Adam model."""
    from gpucast.app import measure_optimizer

    with working(f"timing AdamW on the CPU at {len(request.sizes)} sizes"):
        result = measure_optimizer(request, db=state(ctx).db_path)
    say_new_store(result.new_store)
    d = result.to_dict()
    if json_out:
        emit_json(d)
        return
    predicted = d["model"]["predicted_s"] if d["model"] is not None else None
    for i, m in enumerate(d["measurements"]):
        fitted = "" if predicted is None else f", model {predicted[i] * 1e3:,.1f} ms"
        _say(
            f"AdamW ({m['implementation']}, {count_of(m['threads'], 'thread')}) "
            f"{m['n_params']:,} params in "
            f"{m['n_tensors']} tensors: fastest {m['fastest_s'] * 1e3:,.1f} ms, median "
            f"{m['median_s'] * 1e3:,.1f} ms ({m['streamed_bytes_per_s'] / 1e9:.1f} GB/s "
            f"streamed, {len(m['step_times_s'])} steps{fitted})"
        )
        for w in m["warnings"]:
            _say(f"  warning: {w}")
    if d["model"] is not None:
        c = d["model"]["state"]["coef"]
        _say(
            f"model: {c['fixed_s'] * 1e3:.2f} ms + {c['per_tensor_s'] * 1e6:.1f} us/tensor + "
            f"28 B/param at {d['model']['bandwidth_bytes_per_s'] / 1e9:.1f} GB/s"
        )
    if d["run_ids"]:
        ids = d["run_ids"]
        _say(f"stored as run{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))} in {d['db']}")
