"""A training step that does not fit in GPU memory is refused, by ``predict train`` (and
``predict energy``, which prices its step) and ``simulate train`` alike -- as ``plan train``
drops such rows and ``predict infer`` refuses a ``--tp`` that cannot hold the model: one line
(exit code 2) with the bytes needed and, as the fix, the verb's own options that make it fit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.units import GIB

if TYPE_CHECKING:
    from gpucast.domain.catalog import GpuSpec
    from gpucast.plan.inputs import WorkloadFacts
    from gpucast.predict.memory import MemoryFit


def refuse_unless_fits(
    fit: MemoryFit, *, workload: str, batch: int, setting: str = "", fixes: Sequence[str] = ()
) -> None:
    """Raise when no strategy of ``fit`` (counted at ``batch`` samples per GPU) fits: the
    largest batch that would (and with what) first, then ``fixes`` (the verb's other options).
    ``setting``: how the job runs, for the message (e.g. " with --strategy allreduce")."""
    if fit.fits:
        return
    largest, how = fit.largest_batch(batch)
    options = [f"--batch-size {largest} or less (fits with {how})"] if largest >= 1 else []
    options += list(fixes)
    fix = None
    if options:
        fix = "use " + (
            options[0] if len(options) == 1 else f"{', '.join(options[:-1])} or {options[-1]}"
        )
    raise InvalidSpecError(
        "batch-size",
        f"{workload} at {batch:,} samples per GPU does not fit in {fit.gpu} memory{setting}: "
        f"{fit.reason}",
        got=batch,
        fix=fix,
    )


def simulated_job_memory(
    strategy: str, facts: WorkloadFacts, gpu: GpuSpec, batch: int, gpus: int
) -> MemoryFit:
    """How one GPU of a ``simulate train`` job of ``gpus`` GPUs fits ``batch`` samples, with
    the strategies its ``strategy`` runs: DDP (``allreduce``: the whole model state, its
    activations checkpointed or its optimizer offloaded where that is what fits), FSDP (the
    state sharded over the job's GPUs), a PS worker (no optimizer state: the PS applies the
    update, as ``plan train`` counts it)."""
    from gpucast.predict.memory import (
        DATA_PARALLEL_PLANS,
        FSDP_PLANS,
        PARAMS_OFFLOAD_PLANS,
        fit_memory,
    )

    ps = strategy.startswith("ps")
    plans: tuple[str, ...] = (
        DATA_PARALLEL_PLANS[:2] if ps else DATA_PARALLEL_PLANS + PARAMS_OFFLOAD_PLANS
    )
    if strategy == "fsdp" and gpus > 1:
        plans = FSDP_PLANS
    needs = facts.memory_needs(batch, optimizer_on_gpu=not ps)
    # one GPU: the parameters in host memory too where even they do not fit, as plan train
    return fit_memory(needs, gpu, gpus, plans=plans, params_offload=not ps)


#: The strategy each ``simulate train`` strategy runs when nothing has to give.
PLAIN_PLANS = ("data-parallel", "fsdp")
#: ``--strategy fsdp`` is named as a fix where it fits a batch this many times larger (the
#: activations, not the sharded model state, are what most large batches run out of).
FSDP_WORTH = 1.25


def check_simulated_memory(
    strategy: str,
    workload: str,
    per_gpu: Mapping[str, tuple[WorkloadFacts, GpuSpec]],
    batch: int,
    gpus: int,
) -> list[str]:
    """Refuse a ``simulate train`` job whose batch fits no strategy of its ``strategy`` on one
    of its GPU types (``per_gpu``: the GPU types whose step the roofline priced at ``batch``,
    with their facts), naming ``--batch-size``, ``--strategy fsdp`` where it makes the batch
    fit, and a larger GPU; else a note per GPU type that fits only with activation
    checkpointing or offload (whose slow-down the simulated step leaves out)."""
    notes: list[str] = []
    for facts, spec in per_gpu.values():
        fit = simulated_job_memory(strategy, facts, spec, batch, gpus)
        fixes = []
        if strategy != "fsdp" and gpus > 1 and not fit.fits:
            most = simulated_job_memory("fsdp", facts, spec, batch, gpus).largest_batch(batch)[0]
            if most > FSDP_WORTH * fit.largest_batch(batch)[0]:
                fixes.append(
                    f"--strategy fsdp (shards the model state over the {gpus} GPUs: fits up "
                    f"to batch {most})"
                )
        refuse_unless_fits(
            fit, workload=workload, batch=batch,
            setting=f" with --strategy {strategy} on {gpus} GPU{'s' if gpus > 1 else ''}",
            fixes=[*fixes, f"a GPU with more memory than {spec.name}'s (--gpu, --instance)"],
        )  # fmt: skip
        best = fit.best
        assert best is not None  # refused above otherwise
        if best.strategy not in PLAIN_PLANS:
            notes.append(
                f"memory: batch {batch:,} fits {spec.name} only with {best.strategy} "
                f"({best.bytes_needed / GIB:.1f} of {best.bytes_available / GIB:.1f} GiB usable "
                "per GPU); the simulated step leaves out its slow-down (plan train prices it)"
            )
    return notes
