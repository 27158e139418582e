"""What an evaluation reads and returns: the work to target (:class:`Work`), the per-row
results (:class:`Evaluation`), what evaluations keep across calls (:class:`EvalMemo`),
the bottleneck labels and a row's memory plan name. Split from
:mod:`gpucast.plan.evaluate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from gpucast.domain.evaluation import EvaluationCost
from gpucast.plan.efficiency import epochs_needed
from gpucast.plan.inputs import TERMS
from gpucast.plan.space import FSDP, PS, PS_SYNC
from gpucast.predict import comm
from gpucast.predict.convergence import ConvergenceCurve

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpucast.plan.energy import PowerSetting


FloatArray = npt.NDArray[np.float64]


IntArray = npt.NDArray[np.int64]


BoolArray = npt.NDArray[np.bool_]


#: Bottleneck labels; a row's ``bottleneck`` is an index into this tuple.
BOTTLENECKS: tuple[str, ...] = (
    *TERMS,  # compute, memory_bandwidth, overhead (the roofline's terms)
    "allreduce",
    "fsdp_comm",
    "ps_network",
    "ps_cpu",
    "worker_network",
    "cpu_offload",  # the host's optimizer step / PCIe transfers of ZeRO-Offload
    "nvme_offload",  # ZeRO-Infinity's reads and writes of the state on local NVMe (QA 39)
)


_B = {name: i for i, name in enumerate(BOTTLENECKS)}


#: The 90th percentile of a standard normal: the planner's intervals are 10th-90th.
Z80 = 1.2815515655446004


@dataclass(frozen=True, slots=True, kw_only=True)
class Work:
    """The amount of work: samples to the target at the reference batch, and the
    statistical-efficiency constants."""

    samples_at_reference: float
    reference_batch: float
    critical_batch: float
    dataset_size: float | None
    #: samples to target at every global batch, with a run's spread (None: the rule above)
    curve: ConvergenceCurve | None = None
    #: evaluations the timed run holds (an MLPerf target: its rules); None: none counted
    evaluation: EvaluationCost | None = None

    def evaluation_s(
        self, samples: FloatArray, global_batch: FloatArray, step_work_s: FloatArray
    ) -> FloatArray:
        """Seconds of evaluation in each row's run (zeros without :attr:`evaluation`)."""
        if self.evaluation is None:
            return np.zeros(np.shape(samples))
        return self.evaluation.seconds(samples, global_batch, step_work_s)

    def curve_or_rule(self) -> ConvergenceCurve:
        """The curve, or the rule above as a curve (no spread)."""
        if self.curve is not None:
            return self.curve
        return ConvergenceCurve.from_reference(
            samples_at_reference=self.samples_at_reference,
            reference_batch=self.reference_batch,
            noise_batch=self.critical_batch,
        )

    def samples_needed(self, global_batch: FloatArray) -> FloatArray:
        if self.curve is not None:
            return self.curve.samples(global_batch)
        return epochs_needed(
            global_batch,
            epochs_at_reference=self.samples_at_reference,
            reference_batch=self.reference_batch,
            critical_batch=self.critical_batch,
        )

    def widen(
        self, lower: FloatArray, upper: FloatArray, global_batch: FloatArray
    ) -> tuple[FloatArray, FloatArray]:
        """The training-time ratios ``lower``/``upper`` (10th/90th percentiles of the speed
        factor) with the run-to-run spread of the samples to target folded in (independent,
        in log space); unchanged without a curve or where it has no spread."""
        if self.curve is None or not (
            self.curve.sigma_model > 0 or any(s > 0 for s in self.curve.knot_sigma_log)
        ):
            return lower, upper
        spread = Z80 * self.curve.sigma_log(global_batch)
        ln_lo, ln_hi = np.abs(np.log(lower)), np.abs(np.log(upper))
        lo = lower * np.exp(-(np.sqrt(ln_lo**2 + spread**2) - ln_lo))
        hi = upper * np.exp(np.sqrt(ln_hi**2 + spread**2) - ln_hi)
        return lo, hi


@dataclass(frozen=True, slots=True, kw_only=True)
class Evaluation:
    """Per-row results (arrays aligned with the evaluated :class:`Space`)."""

    workers: IntArray
    batch: IntArray  # per-worker batch actually used
    global_batch: IntArray  # the batch that sets statistical efficiency
    valid_batch: BoolArray  # False: global batch smaller than the worker count
    mem_bytes: FloatArray
    fits: BoolArray
    checkpointing: BoolArray
    offload: BoolArray  # the optimizer state on the host (ZeRO-Offload): fits only so
    params_offload: BoolArray  # ... and the parameters too (ZeRO-3 / ZeRO-Infinity offload)
    nvme_offload: BoolArray  # ... the optimizer state (and master weights) on local NVMe
    host_bytes: FloatArray  # host memory per GPU the offload needs (0 without offload)
    host_short: BoolArray  # would fit with offload, but the instance's host memory is short
    compute_s: FloatArray  # one worker's step compute (with checkpointing and offload_s)
    #: of compute_s, the time the host side of an offload row adds (the CPU's Adam step, PCIe,
    #: NVMe traffic not hidden under the GPU's work); 0 without offload (QA 39 O #15)
    offload_s: FloatArray
    #: collective time per step (DDP, FSDP); a PS row's push and pull as loaded: queueing,
    #: service and the worker's NIC (none of it hides under compute, so it equals exposed_s)
    comm_s: FloatArray
    exposed_s: FloatArray  # the communication not hidden under compute
    step_s: FloatArray  # time of one global step (sync) / one worker step (async)
    samples_per_s: FloatArray
    samples_needed: FloatArray
    steps: IntArray
    train_s: FloatArray  # training time to target, evaluations (eval_s) included
    eval_s: FloatArray  # of which evaluations (0 unless the target's rules require them)
    time_s: FloatArray
    time_lower_s: FloatArray
    time_upper_s: FloatArray
    usd_per_hour: FloatArray
    cost_usd: FloatArray  # probe_usd included
    #: the nodes started beside the job to drop the slowest, billed until released (0 unless
    #: exclude_slowest; already in cost_usd, which a spot row's Monte Carlo replaces)
    probe_usd: FloatArray
    bottleneck: IntArray
    ps_utilization: FloatArray
    has_cpu: BoolArray
    has_market: BoolArray
    train_ratio_lower: FloatArray  # training time at the interval's lower end / central
    train_ratio_upper: FloatArray
    part_batch: IntArray  # (rows, 2): per-worker batch of each part (part 2: 0 if none)
    part_extra: IntArray  # (rows, 2): workers of the part with one more sample
    part_compute_s: FloatArray  # (rows, 2): one worker's step compute, largest batch of part
    batch_split: IntArray  # how a mixed synchronous row splits its batch (hetero.SPLIT_*)
    equal_compute_s: FloatArray  # its step compute with equal per-worker batches
    gpu_power_w: FloatArray  # one GPU's average board power (NaN: no power facts / model)
    power_limit_w: FloatArray  # the power limit it runs at (NaN: none set)


class EvalMemo:
    """What :func:`evaluate` works out per PS network
    (:class:`~gpucast.predict.comm.AsyncTableMemo`) and per GPU type and batch (the power
    model's answer), kept across calls: the planner's chunks ask the same again. Keyed by the
    exact bits of the inputs: the same numbers."""

    def __init__(self, max_workers: int) -> None:
        self.ps = comm.AsyncTableMemo(max_workers)
        self._power: dict[bytes, tuple[float, float, float, float]] = {}

    def power_at(
        self,
        power: PowerSetting,
        terms: FloatArray,
        g: IntArray,
        names: Sequence[str],
        batch: FloatArray,
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """``power.at(terms, g, names, batch)``, asking it only about GPU and batch pairs (and
        their terms) not seen before."""  # fmt: skip
        pair = np.asarray(g, dtype=np.int64) * (1 << 32) + np.asarray(batch).astype(np.int64)
        _, first, inverse = np.unique(pair, return_index=True, return_inverse=True)
        keys = [np.r_[float(g[i]), terms[i]].tobytes() for i in first.tolist()]
        new = [j for j, k in enumerate(keys) if k not in self._power]
        if new:
            rows = first[new]
            answers = power.at(terms[rows], np.asarray(g)[rows], names, np.asarray(batch)[rows])
            for j, values in zip(new, zip(*answers, strict=True), strict=True):
                self._power[keys[j]] = tuple(float(v) for v in values)  # type: ignore[assignment]
        table = np.array([self._power[k] for k in keys], dtype=np.float64).reshape(-1, 4)
        inverse = inverse.reshape(-1)
        return (table[inverse, 0], table[inverse, 1], table[inverse, 2], table[inverse, 3])


def memory_plan_name(
    strategy: int,
    checkpointing: bool,
    offload: bool,
    params_offload: bool = False,
    nvme_offload: bool = False,
) -> str:
    """The memory plan's name, as :mod:`gpucast.predict.memory` names its strategies
    (``nvme-offload``: the optimizer state on local NVMe, ZeRO-Infinity)."""
    if strategy in (PS, PS_SYNC):
        base = "parameter-server"
    else:
        base = "fsdp" if strategy == FSDP else ("" if offload else "data-parallel")
    parts = [p for p in (base, "checkpointing" if checkpointing else "") if p]
    if offload:
        parts.append("nvme-offload" if nvme_offload else "cpu-offload")
    if params_offload:
        parts.append("params")
    return "+".join(parts)
