"""``predict train --learners K``: Crossbow's learners sharing one GPU, priced against one
learner at ``K x batch`` (:mod:`gpucast.predict.crossbow`), with their memory and B_noise."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucast.domain.convergence import BELOW_ONE_SAMPLE, noise_batch_text
from gpucast.domain.errors import InvalidSpecError

if TYPE_CHECKING:
    from gpucast.app.predict import PredictTrainRequest
    from gpucast.domain.catalog import GpuSpec
    from gpucast.plan.inputs import WorkloadFacts


def crossbow_estimate(
    request: PredictTrainRequest,
    facts: WorkloadFacts,
    spec: GpuSpec,
    small: Any,
    calibration: Any,
    efficiency: Any,
    store: Path,
    usable_bytes: float,
) -> dict[str, Any]:
    """``--learners K``: Crossbow on this GPU (:mod:`gpucast.predict.crossbow`); learners
    whose model replicas do not fit its memory are refused."""
    if request.learners == 1:
        return {}
    _check_learners_fit(request, facts, spec, usable_bytes)
    from gpucast.domain.provenance import Assumption
    from gpucast.plan.efficiency import workload_family
    from gpucast.predict.crossbow import crossbow
    from gpucast.predict.roofline import predict_step_time

    k, b = request.learners, request.batch
    large = predict_step_time(
        facts.roofline_workload(k * b),
        spec,
        request.precision,
        calibration=None if calibration is None else calibration.value,
        efficiency=efficiency,
    )
    fam = workload_family(request.workload)
    noise, source = crossbow_noise_batch(request, fam, store)
    est = crossbow(
        learners=k,
        batch=b,
        small_breakdown_s=dict(small.breakdown),
        single_step_s=large.value,
        weights_bytes=facts.weights_bytes,
        bandwidth_bytes_per_s=spec.memory_bandwidth_gbps * 1e9 * efficiency.bandwidth_efficiency,
        noise_batch=noise,
    )
    said = Assumption(
        name="crossbow",
        value=f"{k} learners on CUDA streams (SMs and bandwidth shared), model averaging "
        f"every iteration; statistical efficiency from B_noise {noise_batch_text(noise)} "
        "(range: SMA keeps each learner's small-batch efficiency .. progresses like one "
        f"batch of {k * b:,})" + (f"; B_noise is {BELOW_ONE_SAMPLE}" if noise < 1 else ""),
        source=source,
        override="--critical-batch (gpucast measure train --noise-scale measures it)",
    )
    return {"crossbow": est, "crossbow_assumption": said}


def _check_learners_fit(
    request: PredictTrainRequest, facts: WorkloadFacts, spec: GpuSpec, usable_bytes: float
) -> None:
    """K learners keep a model replica each (QA 39 Y #16: 8 BERT-large learners were priced
    on one T4, as plan train's learners would refuse): one line, exit 2, where they do not
    fit; the fix names the most that do."""
    from gpucast.plan.learners import replicas_bytes

    b = request.batch

    def need(k: int) -> float:
        return replicas_bytes(facts, k, facts.activation_bytes_per_sample * k * b)

    k = request.learners
    if need(k) <= usable_bytes:
        return
    # the most that fit, by bisection: need grows with the learners (a linear scan down
    # from --learners 1000000000 took 3 minutes to say so)
    lo, hi = 1, k  # need(lo) may not fit; need(hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if need(mid) <= usable_bytes else (lo, mid)
    fits = [lo] if lo >= 2 and need(lo) <= usable_bytes else []
    gib = 2.0**30
    raise InvalidSpecError(
        "learners",
        f"{k} learners of {b} need {need(k) / gib:.1f} GiB on one {spec.name} (a model "
        f"replica each, one optimizer state), {usable_bytes / gib:.1f} GiB usable",
        got=k,
        fix=f"use --learners {fits[0]} or fewer"
        if fits
        else "use a smaller --batch-size or a GPU with more memory (--gpu)",
    )


def crossbow_noise_batch(request: PredictTrainRequest, fam: Any, store: Path) -> tuple[float, str]:
    """B_noise for ``--learners`` and where it came from, in plan train's order:
    ``--critical-batch``, else the noise scale ``measure train --noise-scale`` stored for the
    workload, else the workload family's prior."""
    from gpucast.inputs.convergence import stored_noise_scale

    if request.critical_batch is not None:
        return request.critical_batch, "--critical-batch"
    noise = stored_noise_scale(store, request.workload)
    if noise is not None:
        early = " (at initialisation: it grows as training proceeds)"
        said = f"measured: {noise.value.text()} [{noise.source}]"
        return noise.value.noise_scale, said + (early if noise.value.at_initialisation else "")
    return fam.critical_batch, f"the {fam.family} family's prior: {fam.source}"
