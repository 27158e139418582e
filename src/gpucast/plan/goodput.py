"""Goodput: throughput x statistical efficiency, and the choice of the global batch.

Pollux (Qiao et al., OSDI 2021) schedules by *goodput*: the samples per second a configuration
processes, times the statistical efficiency of its global batch -- the samples to target at the
reference batch over those at this batch (:meth:`gpucast.plan.evaluate.Work.samples_needed`).
Goodput is progress in reference-batch samples per second, so the time to target is the
reference samples over the goodput; a larger batch raises throughput (fewer, fuller steps, less
communication per sample) and lowers efficiency past the critical batch, and the best global
batch on given hardware is where their product peaks.

``plan train --objective goodput`` picks the plan with the highest goodput (ties: faster, then
cheaper) and searches per-worker batches over :data:`gpucast.domain.plan.GOODPUT_BATCHES`
unless ``--batch-sizes`` is given (as ``--objective fastest`` does). Every plan reports, for
its recommended hardware, the goodput of each global batch evaluated there (:func:`batch_choice`)
and why the chosen one (:func:`batch_why`), naming the per-worker batches searched.

Pure: arrays in, values out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from gpucast.domain.plan import BatchOption

if TYPE_CHECKING:
    from gpucast.plan.train import SearchResult

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# Per-worker batches searched with ``--objective goodput`` or ``fastest`` (unless
# --batch-sizes is given): the fastest plan is often a batch above the default grid's 256;
# ``cheapest`` (and the energy and carbon objectives) keep the narrow grid -- twice the rows
# would slow every plan -- and each plan says which per-worker batches it searched. The rule
# is the request's (:attr:`gpucast.domain.plan.TrainRequest.searched_batch_sizes`).


def efficiency_and_goodput(res: SearchResult, rows: IntArray) -> tuple[FloatArray, FloatArray]:
    """(statistical efficiency, goodput in reference samples per second) of ``rows``."""
    ev = res.evaluation
    eff = res.work.samples_at_reference / ev.samples_needed[rows]
    return np.asarray(eff, dtype=np.float64), np.asarray(ev.samples_per_s[rows] * eff)


def same_hardware(res: SearchResult, row: int) -> IntArray:
    """Rows of the space on ``row``'s hardware, strategy and market (any batch)."""
    s = res.space
    same = (
        (s.offer == s.offer[row])
        & (s.nodes == s.nodes[row])
        & (s.strategy == s.strategy[row])
        & (s.shards == s.shards[row])
        & (s.part2 == s.part2[row])
        & (s.count2 == s.count2[row])
        & (s.spot == s.spot[row])
    )
    return np.flatnonzero(same).astype(np.int64)


def batch_choice(res: SearchResult, row: int) -> tuple[BatchOption, ...]:
    """Every global batch evaluated on ``row``'s hardware, in batch order (one per batch)."""
    rows = same_hardware(res, row)
    ev = res.evaluation
    eff, good = efficiency_and_goodput(res, rows)
    by_batch: dict[int, list[int]] = {}
    for k, i in enumerate(rows.tolist()):
        by_batch.setdefault(int(ev.global_batch[i]), []).append(k)
    out = []
    for gb in sorted(by_batch):
        ks = by_batch[gb]
        chosen = [k for k in ks if rows[k] == row]
        ok = [k for k in ks if not res.reason[rows[k]]]
        k = (chosen or ok or ks)[0]
        i = int(rows[k])
        out.append(
            BatchOption(
                global_batch=gb,
                per_worker_batch=int(ev.batch[i]),
                samples_per_s=float(ev.samples_per_s[i]),
                statistical_efficiency=float(eff[k]),
                goodput_samples_per_s=float(good[k]),
                time_s=float(ev.time_s[i]),
                cost_usd=float(ev.cost_usd[i]),
                reason=str(res.reason[i]),
                chosen=i == row,
            )
        )
    return tuple(out)


def batch_why(options: tuple[BatchOption, ...], objective: str) -> str:
    """One sentence: why the chosen global batch, against its neighbours on this hardware."""
    chosen = next((o for o in options if o.chosen), None)
    if chosen is None:
        return ""
    feasible = [o for o in options if not o.reason]
    eff = chosen.statistical_efficiency
    # relative to the reference batch, not Pollux's <= 1 against the smallest (QA 35 E #26)
    above = "; above 1: fewer samples to target than at it" if round(eff, 2) > 1 else ""
    head = (
        f"global batch {chosen.global_batch:,}: {chosen.samples_per_s:,.0f} samples/s x "
        f"statistical efficiency {eff:.2f} (vs the reference batch{above}) = goodput "
        f"{chosen.goodput_samples_per_s:,.0f} reference samples/s"
    )
    best = max(feasible, key=lambda o: o.goodput_samples_per_s, default=chosen)
    per_worker = sorted({o.per_worker_batch for o in options})
    searched = (
        f"per-worker batch {per_worker[0]:,}"
        if len(per_worker) == 1
        else f"per-worker batches {per_worker[0]:,}-{per_worker[-1]:,}"
    )
    if best is chosen:
        head += f" (the most on this hardware of the {searched} searched"
    else:
        head += (
            f" (global batch {best.global_batch:,} has more, "
            f"{best.goodput_samples_per_s:,.0f}, but ranks lower by {objective}; {searched} "
            "searched"
        )
    head += ")"
    parts = []
    larger = [o for o in options if o.global_batch > chosen.global_batch]
    smaller = [o for o in options if o.global_batch < chosen.global_batch]
    for label, pool in (("larger", larger[:1]), ("smaller", smaller[-1:])):
        for o in pool:
            if o.reason:
                parts.append(f"{label} {o.global_batch:,}: {o.reason}")
                continue
            cost = f", {o.cost_usd / chosen.cost_usd:.2f}x the cost" if chosen.cost_usd > 0 else ""
            parts.append(
                f"{label} {o.global_batch:,}: {o.samples_per_s / chosen.samples_per_s:.2f}x "
                f"the samples/s at efficiency {o.statistical_efficiency:.2f} -> "
                f"{o.goodput_samples_per_s / chosen.goodput_samples_per_s:.2f}x the goodput"
                f"{cost}"
            )
    return head + ("; " + "; ".join(parts) if parts else "")
