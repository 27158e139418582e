"""``simulate train --elastic``: the progress table of a job that re-plans its batch at every
count of ready workers (:mod:`gpucast.plan.elastic`), equal shares of the global batch on one
GPU type and shares in proportion to speed on a mixed cluster (:mod:`gpucast.plan.hetero`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gpucast.domain.provenance import Assumption
from gpucast.domain.units import count_of

#: Fewer ready GPUs making at least this share of the full cluster's progress (101% as
#: printed) mean the cluster is slower than they are: said, with what to change
SLOWER_CLUSTER_RATIO = 1.005

if TYPE_CHECKING:
    from gpucast.app.simulation import SimulateTrainRequest
    from gpucast.domain.simulation import WorkerGroup


def elastic_speed(
    request: SimulateTrainRequest,
    groups: Sequence[WorkerGroup],
    gpus_per_node: int,
    keep: Any,
    curve: Any,
    works: dict[str, Any],
    by_gpu: dict[str, str],
    single: dict[str, Any],
    catalog: Any,
    efficiency: Any,
    table_at: Any,
) -> tuple[Any, tuple[Assumption, ...], str]:
    """``--elastic``: the progress table (steps of the planned job per second) at every count
    of ready workers, re-planned by :func:`gpucast.plan.elastic.elastic_table`, with its
    assumption and a note of what it does at a few counts."""
    import numpy as np

    from gpucast.plan.elastic import KEEP_GLOBAL, elastic_table, rebalanced_batch
    from gpucast.predict.memory import usable_bytes
    from gpucast.predict.roofline import predict_step_time
    from gpucast.simulate.transient import SpeedTable

    b = request.batch_size
    full = sum(g.count for g in groups) * gpus_per_node
    planned = b * full
    facts = {g.gpu: works[by_gpu[g.gpu]].facts for g in groups}
    measured = [g.gpu for g in groups if facts[g.gpu] is None]
    cache: dict[tuple[str, int], float] = {}

    def roof_s(gpu: str, batch: int) -> float:
        """Roofline step time of one GPU at ``batch`` (only its ratio between batches is
        used: the single-worker time, measured or modelled, is scaled by it)."""
        if (gpu, batch) not in cache:
            f = facts[gpu]
            state = f.weights_bytes + f.gradient_bytes + f.optimizer_bytes
            spec = catalog.gpu(gpu)
            if state + f.activation_bytes_per_sample * batch > usable_bytes(spec):
                cache[gpu, batch] = math.inf
            else:
                cache[gpu, batch] = predict_step_time(
                    f.roofline_workload(batch), spec, by_gpu[gpu],
                    efficiency=efficiency,
                ).value  # fmt: skip
        return cache[gpu, batch]

    mixed = len({g.gpu for g in groups}) > 1

    def scale(alive: Sequence[int]) -> list[float]:
        """Per group, its step time at the re-planned batch over its step at ``b``: the
        same global batch in equal shares, or on a mixed cluster in proportion to each
        GPU's speed (:func:`gpucast.plan.hetero.proportional_batches`)."""
        live = int(sum(alive)) * gpus_per_node
        if mixed:
            shares = proportional_shares(alive)
            return [
                roof_s(g.gpu, int(x)) / roof_s(g.gpu, b) if n else 1.0
                for g, x, n in zip(groups, shares, alive, strict=True)
            ]
        b_same = int(rebalanced_batch(planned, np.array([live]))[0])
        return [roof_s(g.gpu, b_same) / roof_s(g.gpu, b) for g in groups]

    def proportional_shares(alive: Sequence[int]) -> list[int]:
        """The largest per-GPU batch of each group when ``planned`` is split over the ready
        GPUs in proportion to speed (the step time of each group's worker: its single-worker
        time at ``b`` times the roofline's ratio, linear in the batch)."""
        from gpucast.plan.hetero import proportional_batches

        lo, hi = max(b // 2, 1), b
        per: list[float] = []
        fixed: list[float] = []
        for g in groups:
            k = single[g.gpu].step_time_s / roof_s(g.gpu, b)
            c = (roof_s(g.gpu, hi) - roof_s(g.gpu, lo)) / max(hi - lo, 1) * k
            per.append(max(c, 1e-12))
            fixed.append(max(roof_s(g.gpu, b) * k - c * b, 0.0))
        counts = np.array([[n * gpus_per_node for n in alive]], dtype=np.int64)
        base, extra = proportional_batches(
            np.array([fixed]), np.array([per]), counts, np.array([planned], dtype=np.int64)
        )
        return [int(x + (e > 0)) for x, e in zip(base[0], extra[0], strict=True)]

    shape = keep.table.shape
    gpus = np.indices(shape).sum(axis=0).reshape(-1) * gpus_per_node
    if measured:
        same = np.full(gpus.size, np.nan)
    else:
        same = np.asarray(table_at(scale).table, dtype=np.float64).reshape(-1)
        same = np.where(same > 0, same, np.nan)
    el = elastic_table(
        keep_steps_per_s=keep.table.reshape(-1),
        same_steps_per_s=same,
        gpus=gpus,
        batch=b,
        full_gpus=full,
        samples_to_target=curve.samples,
    )
    # a few counts of ready GPUs (all groups shrinking together) to show
    shown = sorted({full - gpus_per_node, max(full // 2, 1), gpus_per_node} - {full, 0})
    full_rate = float(el.progress_steps_per_s[-1])
    parts = []
    if mixed:
        counts = tuple(g.count for g in groups)
        keep_rate = float(keep.table[counts])
        shares = ", ".join(
            f"{g.gpu} {x}" for g, x in zip(groups, proportional_shares(counts), strict=True)
        )
        parts.append(
            f"all {full} GPUs: per-GPU batches in proportion to speed ({shares}; global "
            f"{planned:,}), {full_rate / keep_rate:.2f}x the progress of {b} on every GPU"
            if el.choice[-1] == KEEP_GLOBAL
            else f"all {full} GPUs: {b} on every GPU (proportional batches do not fit or "
            "do not pay)"
        )
    faster: int | None = None  # the fewest shown GPUs that out-run the full cluster
    for k in reversed(shown):
        cell = int(np.flatnonzero(gpus == k)[-1])  # (the last such cell: the most of group 0)
        alive = [int(x) for x in np.unravel_index(cell, shape)]
        per_gpu = (
            ", ".join(
                f"{g.gpu} {x}"
                for g, x, n in zip(groups, proportional_shares(alive), alive, strict=True)
                if n
            )
            if mixed
            else f"{int(el.per_gpu_batch[cell])}"
        )
        how = (
            f"global batch {planned:,} kept ({per_gpu} per GPU)"
            if el.choice[cell] == KEEP_GLOBAL
            else f"{b} per GPU (global {int(el.global_batch[cell]):,}, statistical "
            f"efficiency x{float(el.efficiency[cell]):.2f})"
        )
        ratio = float(el.progress_steps_per_s[cell]) / full_rate
        parts.append(
            f"{count_of(k, 'GPU')}: {how}, {ratio:.0%} of the full cluster's progress"
            + (f" (more than all {full} make)" if ratio >= SLOWER_CLUSTER_RATIO else "")
        )
        if ratio >= SLOWER_CLUSTER_RATIO:
            faster = k
    why = (
        f" (keeping the global batch needs the roofline: {', '.join(measured)} has a "
        "measured step time only)"
        if measured
        else ""
    )
    slower = (
        f". The full cluster is slower than {count_of(faster, 'GPU')}: its synchronisation "
        f"costs more than its other GPUs add; run fewer GPUs, or give it a faster network"
        if faster is not None
        else ""
    )
    text = (
        "--elastic re-plans the batch as nodes come and go: " + "; ".join(parts) + why + slower
        if parts
        else "--elastic: one node, nothing to re-plan (without it the job waits for its "
        "replacement either way)"
    )
    assumption = Assumption(
        name="elastic batch",
        value=f"at each count of ready GPUs the better goodput of the same global batch "
        f"{planned:,} (where it fits in memory) or {b} per GPU",
        source=f"samples to target at each batch: {curve.source}; memory: weights, gradients, "
        "optimizer state and activations vs the GPU's usable memory",
        override="--target, --batch-size, --reshard-s, drop --elastic",
    )
    return SpeedTable(el.progress_steps_per_s.reshape(shape)), (assumption,), text
