"""Elastic synchronous training on a shrinking and growing cluster: the batch re-planned at
every count of ready GPUs, Pollux-style (goodput = throughput x statistical efficiency).

A synchronous job planned for ``N`` GPUs at ``b`` samples per GPU (global batch ``G = N b``)
that loses workers can go on with the ``k`` that are left, two ways:

* **keep the per-GPU batch**: global batch ``k b``, the ``k``-GPU cluster's step time; a
  smaller batch needs fewer samples per unit of progress (``S(k b) <= S(G)``), so part of
  the lost throughput comes back as statistical efficiency;
* **keep the global batch**: ``G / k`` samples per GPU (rounded; only where it fits in GPU
  memory), the same samples to target, each step longer.

The progress rate is measured in steps *of the planned job* (``total_steps = S(G) / G``) per
second, so the job ends when it has made ``total_steps`` whatever batches it ran at:
``rate = throughput / S(B) x S(G) / G`` (samples/s over samples to target at the batch
actually used). Every count of ready GPUs takes the better of the two; at ``k = N`` both
are the planned job itself.

Pure: numbers in, numbers out; vectorised over the cells of a speed table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: ``ElasticTable.choice``: keep the per-GPU batch, keep the global batch, nothing runs
KEEP_PER_GPU, KEEP_GLOBAL, IDLE = 0, 1, -1


def rebalanced_batch(global_batch: int, gpus: IntArray) -> IntArray:
    """Per-GPU batch that keeps the global batch on ``gpus`` GPUs (rounded, at least 1;
    0 where no GPU is ready)."""
    g = np.asarray(gpus, dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        b = np.where(g > 0, np.maximum(np.rint(global_batch / np.maximum(g, 1)), 1), 0)
    return np.asarray(b, dtype=np.int64)


@dataclass(frozen=True, slots=True, kw_only=True)
class ElasticTable:
    """Per cell of the ready-worker table: the progress rate (steps of the planned job per
    second), the policy chosen (``KEEP_*``), the global batch and per-GPU batch it runs, its
    statistical efficiency relative to the planned global batch, and its samples/s."""

    progress_steps_per_s: FloatArray
    choice: IntArray
    global_batch: IntArray
    per_gpu_batch: IntArray
    efficiency: FloatArray
    samples_per_s: FloatArray


def elastic_table(
    *,
    keep_steps_per_s: FloatArray,
    same_steps_per_s: FloatArray,
    gpus: IntArray,
    batch: int,
    full_gpus: int,
    samples_to_target: Callable[[FloatArray], FloatArray],
) -> ElasticTable:
    """The elastic policy over every cell (see the module docstring).

    ``keep_steps_per_s``: global steps/s of the ready GPUs at ``batch`` per GPU;
    ``same_steps_per_s``: global steps/s at :func:`rebalanced_batch` per GPU (``nan`` where
    that batch does not fit); ``gpus``: ready GPUs per cell; ``samples_to_target(B)``:
    samples to the quality target at global batch ``B`` (the convergence curve).
    """
    keep = np.asarray(keep_steps_per_s, dtype=np.float64)
    same = np.asarray(same_steps_per_s, dtype=np.float64)
    k = np.asarray(gpus, dtype=np.int64)
    planned = batch * full_gpus
    b_same = rebalanced_batch(planned, k)
    g_keep = (k * batch).astype(np.float64)
    g_same = (k * b_same).astype(np.float64)
    s_full = float(np.asarray(samples_to_target(np.array([float(planned)])))[0])
    per_planned_step = s_full / planned  # samples to target per sample of one planned step

    def rate(steps_per_s: FloatArray, global_batch: FloatArray) -> tuple[FloatArray, FloatArray]:
        safe = np.maximum(global_batch, 1.0)
        need = np.asarray(samples_to_target(safe), dtype=np.float64)
        thr = steps_per_s * global_batch
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(global_batch > 0, thr / need * per_planned_step, 0.0)
        return np.nan_to_num(r, nan=-1.0), need

    r_keep, need_keep = rate(keep, g_keep)
    r_same, need_same = rate(same, g_same)
    r_same = np.where(np.isfinite(same) & (k > 0), r_same, -1.0)
    use_same = r_same > r_keep
    progress = np.maximum(np.where(use_same, r_same, r_keep), 0.0)
    choice = np.where(k > 0, np.where(use_same, KEEP_GLOBAL, KEEP_PER_GPU), IDLE)
    g_used = np.where(use_same, g_same, g_keep)
    need = np.where(use_same, need_same, need_keep)
    with np.errstate(divide="ignore", invalid="ignore"):
        # statistical efficiency of the batch used relative to the planned one: planned
        # samples to target over this batch's, per sample of each
        eff = np.where(k > 0, s_full / need, 0.0)
        sps = np.where(use_same, same * g_same, keep * g_keep)
    progress = np.where(k > 0, progress, 0.0)
    return ElasticTable(
        progress_steps_per_s=np.asarray(progress, dtype=np.float64),
        choice=np.asarray(choice, dtype=np.int64),
        global_batch=np.asarray(np.where(k > 0, g_used, 0), dtype=np.int64),
        per_gpu_batch=np.asarray(np.where(use_same, b_same, np.where(k > 0, batch, 0))).astype(
            np.int64
        ),
        efficiency=np.asarray(eff, dtype=np.float64),
        samples_per_s=np.asarray(np.nan_to_num(sps), dtype=np.float64),
    )
