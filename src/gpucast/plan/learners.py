"""Crossbow in plans: small-batch learners sharing each GPU of the recommended plan.

When the plan's global batch is large against the critical batch, a large batch wastes
samples; Crossbow (Koliousis et al., VLDB 2019) trains ``k`` learners of ``b / k`` samples on
every GPU (the same samples per step), averaging their models every iteration (SMA). The
planner prices it on the recommended plan's hardware for ``k`` in :data:`LEARNER_COUNTS`
(:func:`gpucast.predict.crossbow.crossbow`: the learners take turns on the device and fill
each other's launch gaps, plus the averaging), with the plan's own communication per step,
and gives the time to target as a range: SMA keeping each learner's small-batch efficiency
(Crossbow's claim, the low end) .. progressing like the plan's global batch (the high end).
It is **considered** -- priced and shown -- where the plan's global batch is at least
:data:`CONSIDER_FROM` of the critical batch (below it a smaller batch gains little: the
samples to target change by less than 25%), on data-parallel (DDP) plans of one GPU type
without offload or recomputation. It is **recommended** -- the sentence says so -- only when
even its high end beats the plan; the plan's figures stay the plan's.

Memory: every learner keeps its own weights and gradients beside the central model and the
optimizer state: ``(k + 1) weights + k gradients + optimizer + activations of b``.

Pure: arrays in, values out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from gpucast.domain.convergence import noise_batch_text
from gpucast.domain.plan import LearnerOption
from gpucast.plan.space import DDP
from gpucast.predict.crossbow import crossbow

if TYPE_CHECKING:
    from gpucast.plan.inputs import WorkloadFacts
    from gpucast.plan.train import SearchResult

#: Learners per GPU priced (each one's batch a whole number of samples).
LEARNER_COUNTS: tuple[int, ...] = (2, 4, 8)
#: Crossbow is considered from this share of the critical batch (E(B) >= 1.25 E_min).
CONSIDER_FROM = 0.25
_GIB = 2.0**30


def replicas_bytes(facts: WorkloadFacts, learners: int, activations_bytes: float) -> float:
    """GPU memory of ``learners`` model replicas sharing one GPU: one optimizer state and
    master weights, each learner's weights and gradients, and the activations of all their
    samples (``activations_bytes``)."""
    shared = facts.optimizer_bytes + facts.weights_bytes
    return shared + learners * (facts.weights_bytes + facts.gradient_bytes) + activations_bytes


def learner_choice(
    res: SearchResult,
    row: int,
    facts: WorkloadFacts,
    bandwidth_bytes_per_s: float,
) -> tuple[tuple[LearnerOption, ...], str]:
    """Crossbow's options on ``row``'s hardware and one sentence on them (module docstring);
    ``((), why not)`` where it is not considered."""
    ev, space, gpus = res.evaluation, res.space, res.gpus
    curve = res.work.curve_or_rule()
    noise = curve.noise_batch
    gb = float(ev.global_batch[row])
    if gb < CONSIDER_FROM * noise:
        return (), (
            f"Crossbow not considered: global batch {gb:,.0f} is under {CONSIDER_FROM:.0%} of "
            f"the critical batch {noise_batch_text(noise)} (smaller learners would save under "
            "25% of the samples)"
        )
    if space.mixed[row] or space.strategy[row] != DDP or ev.offload[row] or ev.checkpointing[row]:
        return (), (
            "Crossbow not considered: it is priced for data-parallel plans of one GPU type "
            "without offload or recomputation"
        )
    g = np.array([int(space.offers.gpu[space.offer[row]])])
    b = int(ev.batch[row])
    n = int(ev.workers[row])
    compute = float(ev.compute_s[row])
    roof = float(np.sum(gpus.step_terms(g, np.array([float(b)]))[0]))
    scale = compute / roof if roof > 0 else 1.0  # calibration, slow-downs, power
    exposed = float(ev.exposed_s[row])
    startup = float(ev.time_s[row] - ev.train_s[row])
    train = float(ev.train_s[row])
    need_plan = float(curve.samples([gb])[0])
    acts = float(gpus.activation_bytes_per_sample[g[0]]) * b
    usable = float(gpus.usable_bytes[g[0]])
    options = []
    for k in LEARNER_COUNTS:
        if b % k:
            continue
        small = b // k
        terms = gpus.step_terms(g, np.array([float(small)]))[0] * scale
        est = crossbow(
            learners=k,
            batch=small,
            small_breakdown_s={
                "compute": float(terms[0]),
                "memory_bandwidth": float(terms[1]),
                "overhead": float(terms[2]),
            },
            single_step_s=compute,
            weights_bytes=facts.weights_bytes,
            bandwidth_bytes_per_s=bandwidth_bytes_per_s,
            noise_batch=noise,
        )
        step = est.iteration_s + exposed
        speed_ratio = step / float(ev.step_s[row])
        low = float(curve.samples([float(small)])[0]) / need_plan
        memory = replicas_bytes(facts, k, acts)
        reason = (
            f"{k} model replicas need {memory / _GIB:.1f} GiB, the GPU has {usable / _GIB:.1f}"
            if memory > usable
            else ""
        )
        options.append(
            LearnerOption(
                learners=k,
                batch_per_learner=small,
                samples_per_s=n * b / step,
                time_s_low=startup + train * speed_ratio * min(low, 1.0),
                time_s_high=startup + train * speed_ratio,
                memory_bytes=memory,
                reason=reason,
            )
        )
    return tuple(options), learners_why(tuple(options), float(ev.time_s[row]), noise)


def learners_why(options: tuple[LearnerOption, ...], plan_time_s: float, noise: float) -> str:
    """One sentence: the best learner count's time to target against the plan's."""
    ok = [o for o in options if not o.reason]
    if not ok:
        why = "; ".join(o.reason for o in options) or "the per-GPU batch does not split"
        return f"Crossbow does not fit: {why}"
    best = min(ok, key=lambda o: o.time_s_high)
    # the verdict as the ratios read: x1.00 is no gain (QA 41 QT: a 1e-7 lead was "worth trying")
    low, high = (round(t / plan_time_s, 2) for t in (best.time_s_low, best.time_s_high))
    verdict = (
        "faster even if SMA progresses like the large batch: worth trying"
        if high < 1.0
        else "faster only if SMA keeps the small batches' efficiency"
        if low < 1.0
        else "slower either way"
        if low > 1.0
        else "no faster either way"
    )
    return (
        f"Crossbow {best.learners} learners x {best.batch_per_learner} per GPU: "
        f"{best.samples_per_s:,.0f} samples/s, time to target x{low:.2f}"
        f"..x{high:.2f} of this plan's at critical batch "
        f"{noise_batch_text(noise)} ({verdict})"
    )
