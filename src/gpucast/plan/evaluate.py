"""Vectorised evaluation of candidate rows: step time, time to target, cost, bottleneck, fit.

Everything is an array over candidates; there is no per-candidate Python loop. Per row:

* **compute**: the roofline step time of one worker at its per-worker batch
  (:class:`~gpucast.plan.inputs.GpuTable`, linear in the batch), times 1.33 when the batch
  only fits with activation checkpointing.
* **memory** (per GPU, as :func:`gpucast.predict.memory.fit_memory` counts it): DDP holds
  weights + gradients + optimizer state + activations; FSDP shards the first three over the
  workers and adds a gather buffer of twice the largest tensor; a PS worker keeps no optimizer
  state (the PS applies the update). Usable memory is :func:`~gpucast.predict.memory.usable_bytes`.
* **DDP / FSDP** (synchronous): the gradient all-reduce (FSDP: two all-gathers and a
  reduce-scatter) as NCCL runs it, :func:`gpucast.predict.comm.hierarchical_collective_s`:
  an intra-node phase over NVLink/PCIe, then the nodes exchange shards through their NICs
  as a ring or a log-depth tree, whichever is faster. Up to ``overlap_fraction`` of it hides
  under the backward pass.
* **PS** (asynchronous, CM-DARE style): exact mean value analysis of the closed network of
  ``n`` workers and the busiest of ``k`` CPU shards, a push station (NIC ingress + apply)
  and a pull station (NIC egress) (:func:`gpucast.predict.comm.ps_async_table`, every
  ``n`` in one pass); a worker's own node NIC, carrying every shard's bytes, adds a delay
  where it is the slower end and bounds the node's update rate (a node-NIC bound).
* **statistical efficiency**: the global batch (``n x b`` synchronous, ``b`` asynchronous)
  sets the samples needed (:class:`Work`: a fitted
  :class:`~gpucast.predict.convergence.ConvergenceCurve`, else
  :func:`gpucast.plan.efficiency.epochs_needed`).
* **time** = start-up + samples needed / samples per second; **cost** = time x (instances x
  US$/h + PS shards x CPU US$/h).
* **interval**: ``train_ratio_lower`` / ``train_ratio_upper`` scale the training time to the
  ends of the step-time model's interval: the compute at the roofline's interval with, at
  the same end, +-``collective_uncertainty`` on a DDP/FSDP row's exposed communication, or a
  PS row's stations and NICs at the PS model's residual quantiles (an asynchronous PS row
  solves its network again at each end: a PS-bound row gains little from faster GPUs and
  loses much to slower ones, whose compute the PS no longer hides); and, with a fitted
  convergence curve, the run-to-run spread of the samples to target (:meth:`Work.widen`).
  :mod:`gpucast.plan.uncertainty` reads them as the 10th / 90th percentiles of the run's
  speed factor.
* **mixed GPU types** (rows with a second part): :func:`evaluate_mixed`, the formulas of
  :mod:`gpucast.plan.hetero`.

Pure: numbers in, numbers out.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from gpucast.domain.evaluation import EvaluationCost
from gpucast.domain.offload import streamed_bytes_per_param
from gpucast.plan.efficiency import epochs_needed
from gpucast.plan.hetero import (
    SPLIT_EQUAL,
    SPLIT_PROPORTIONAL,
    capped_batches,
    col_argmax,
    col_max,
    col_min,
    col_sum,
    equal_batches,
    equivalent_think_time_s,
    proportional_batches,
    update_shares,
)
from gpucast.plan.inputs import (
    CHECKPOINTING_SLOWDOWN,
    TERMS,
    GpuTable,
    OffloadSetting,
    PerfParams,
    WorkloadFacts,
)
from gpucast.plan.space import DDP, FSDP, PS, PS_SYNC, Space, twin_source
from gpucast.predict import comm
from gpucast.predict.convergence import ConvergenceCurve
from gpucast.predict.offload import zero_offload_step_s
from gpucast.predict.variability import PROBE_S

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpucast.plan.energy import PowerSetting
    from gpucast.plan.train import PlanContext, SearchResult

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


def _power(
    params: PerfParams,
    terms: FloatArray,
    g: IntArray,
    gpus: GpuTable,
    batch: FloatArray,
    memo: EvalMemo | None = None,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """(compute slowdown, GPU power while computing W, limit W, idle power W) per row at the
    plan's power setting."""
    if params.power is None:
        nan = np.full(len(g), np.nan)
        return np.ones(len(g)), nan, nan.copy(), nan.copy()
    if memo is None or len(g) == 0:
        return params.power.at(terms, g, gpus.names, batch)
    return memo.power_at(params.power, terms, g, gpus.names, batch)


def _average_power(
    busy_w: FloatArray, idle_w: FloatArray, compute_s: FloatArray, step_s: FloatArray
) -> FloatArray:
    """A GPU's draw over its step: computing for ``compute_s`` of each ``step_s``, idle (waiting
    on the all-reduce or the parameter server) for the rest."""
    with np.errstate(divide="ignore", invalid="ignore"):
        busy = np.where(np.isfinite(step_s) & (step_s > 0), compute_s / step_s, 1.0)
    busy = np.clip(busy, 0.0, 1.0)
    return np.asarray(idle_w + (busy_w - idle_w) * busy, dtype=np.float64)


def ps_demands(
    facts: WorkloadFacts, ps_network_gbps: FloatArray, shards: FloatArray, params: PerfParams
) -> tuple[FloatArray, FloatArray]:
    """Per update, at the busiest of ``shards`` shards: (push, pull) seconds
    (:func:`gpucast.predict.comm.shard_demands_s`)."""
    net = facts.gradient_bytes * 8.0 / (ps_network_gbps * params.ps_network_efficiency * 1e9)
    cpu = np.full_like(net, params.ps_per_tensor_cost_s * facts.n_tensors)
    largest = min(facts.max_tensor_bytes / facts.gradient_bytes, 1.0)
    return comm.shard_demands_s(net, cpu, shards, largest)


#: Tensors of the parameters' buffer on the GPU when they live on the host (the layer in use
#: and the next one, prefetched): ZeRO-3 offload's working set.
_PARAM_BUFFER_TENSORS = 2.0


def _offload_gpu_state(space: Space, facts: WorkloadFacts, nf: FloatArray) -> FloatArray:
    """GPU bytes of a ZeRO-Offload row before activations: the weights and gradients
    (DDP), or their shards plus the gather buffer (FSDP); the optimizer state is on the host."""
    wg = facts.weights_bytes + facts.gradient_bytes
    return np.asarray(
        np.where(space.strategy == FSDP, wg / nf + 2.0 * facts.max_tensor_bytes, wg),
        dtype=np.float64,
    )


def _offload_memory(
    space: Space,
    facts: WorkloadFacts,
    gpus: GpuTable,
    g: IntArray,
    acts: FloatArray,
    nf: FloatArray,
    fits: BoolArray,
    setting: OffloadSetting | None,
) -> tuple[BoolArray, BoolArray, BoolArray, FloatArray, BoolArray]:
    """(rows that fit only with the optimizer off the GPU and whose instance has the host
    memory, rows of those that also need the parameters on the host, rows of those whose
    optimizer state is on NVMe, host bytes per GPU those rows need, rows whose host memory
    is short). ZeRO-Offload partitions the host state over the data-parallel ranks: fp32
    master weights, gradients and optimizer state, ``(w + g + o) / n`` per GPU, against the
    instance's memory per GPU. Where even the weights and gradients do not fit (ZeRO-3 /
    ZeRO-Infinity offload of the parameters: FSDP rows, or one GPU), the GPU keeps a
    two-layer buffer (``2 x`` the largest tensor) and the activations, and the host also the
    rank's parameters, ``w / n``. Without ``setting`` nothing is offloaded. Where that host
    state does not fit and the setting gives the node's NVMe, the master weights and
    optimizer state go there (ZeRO-Infinity) and the host keeps the rank's gradients, ``g /
    n`` (and ``w / n`` with the parameters)."""
    rows = len(space)
    none = np.zeros(rows, dtype=bool)
    off = space.offers
    if setting is None or gpus.pcie_gbytes_per_s is None:
        return none, none, none, np.zeros(rows), none
    candidate = ~fits & ((space.strategy == DDP) | (space.strategy == FSDP))
    if not candidate.any():
        return none, none, none, np.zeros(rows), none
    usable = gpus.usable_bytes[g]
    ckpt_acts = acts * facts.checkpoint_fraction
    gpu_state = _offload_gpu_state(space, facts, nf)
    on_gpu = candidate & (gpu_state + ckpt_acts <= usable)
    params = (
        candidate
        & ~on_gpu
        & ((space.strategy == FSDP) | (nf == 1))
        & (_PARAM_BUFFER_TENSORS * facts.max_tensor_bytes + ckpt_acts <= usable)
    )
    host_state = (facts.weights_bytes + facts.gradient_bytes + facts.optimizer_bytes) / nf
    need = np.where(on_gpu, host_state, np.where(params, host_state + facts.weights_bytes / nf, 0))
    host = (
        np.full(rows, np.inf)
        if off.host_bytes_per_gpu is None
        else np.asarray(off.host_bytes_per_gpu[space.offer], dtype=np.float64)
    )
    ok = need <= host
    either = on_gpu | params
    nvme_need = (facts.gradient_bytes + np.where(params, facts.weights_bytes, 0.0)) / nf
    short = either & ~ok & (setting.nvme_gbps is not None)  # the host keeps only g (+ w)
    need = np.where(short, nvme_need, need)
    on_nvme = short & (nvme_need <= host)
    placed = either & (ok | on_nvme)
    return placed, params & placed, on_nvme, need, either & ~placed


def _offload_step(
    compute: FloatArray,
    offload: BoolArray,
    params_off: BoolArray,
    nvme_off: BoolArray,
    space: Space,
    facts: WorkloadFacts,
    gpus: GpuTable,
    g: IntArray,
    nf: FloatArray,
    params: PerfParams,
) -> tuple[FloatArray, FloatArray, BoolArray]:
    """(the step of offload rows by :func:`gpucast.predict.offload.zero_offload_step_s`,
    other rows unchanged; the seconds the host side adds; the rows whose host-side step is
    the NVMe traffic rather than the CPU's Adam step). Each rank sends its gradient
    partition down and gets its weight partition back over PCIe; the host's Adam step over
    ``params / n`` parameters in ``tensors / n`` tensors is the CPU Adam model's. Rows with
    the parameters on the host (``params_off``) also upload the rank's weights before the
    forward and again before the backward, overlapped with them: ``F' = max(F, w / n /
    pcie)``, likewise ``B'``. Rows with the optimizer state on NVMe read and write the rank's
    master weights and state each step, chunked under the CPU's work: ``C' = max(C, 2 (w + o)
    / n / nvme)``, the node's NVMe bandwidth shared by its GPUs."""
    setting = params.offload
    assert setting is not None and gpus.pcie_gbytes_per_s is not None
    pcie = gpus.pcie_gbytes_per_s[g] * 1e9
    backward = compute * params.backward_fraction
    forward = compute - backward
    upload = np.where(params_off, facts.weights_bytes / nf / pcie, 0.0)
    n_params = facts.weights_bytes / 4.0  # fp32 weights under autocast (GpuTable)
    cpu = setting.cpu_adam.predict_s(
        n_params / nf,
        np.maximum(1.0, facts.n_tensors / nf),
        streamed_bytes_per_param(facts.optimizer_bytes / n_params, 4.0),
    )
    nvme_bound = np.zeros(len(compute), dtype=bool)
    if setting.nvme_gbps is not None and nvme_off.any():
        per_gpu = setting.nvme_gbps * 1e9 / space.offers.gpus_per_node[space.offer]
        state_io = 2.0 * (facts.weights_bytes + facts.optimizer_bytes) / nf / per_gpu
        nvme_bound = nvme_off & (state_io > cpu)
        cpu = np.where(nvme_off, np.maximum(cpu, state_io), cpu)
    step = zero_offload_step_s(
        np.maximum(forward, upload),
        np.maximum(backward, upload),
        facts.gradient_bytes / nf / pcie,
        facts.weights_bytes / nf / pcie,
        cpu,
        delayed_update=setting.delayed_update,
    )
    out = np.where(offload, step, compute)
    return np.asarray(out, dtype=np.float64), np.where(offload, out - compute, 0.0), nvme_bound


def evaluate_like(space: Space, res: SearchResult, ctx: PlanContext) -> Evaluation:
    """``space`` (rows derived from a search: what-ifs, the same offer at other node counts)
    evaluated with that search's facts, GPU table, work and parameters."""
    return evaluate(
        space,
        facts=ctx.facts,
        gpus=res.gpus,
        params=ctx.perf,
        work=res.work,
        startup_s=ctx.risk.startup_mean_s,
    )


def evaluate(
    space: Space,
    *,
    facts: WorkloadFacts,
    gpus: GpuTable,
    params: PerfParams,
    work: Work,
    startup_s: float,
    memo: EvalMemo | None = None,
    twin: IntArray | None = None,
) -> Evaluation:
    """Evaluate every row of ``space`` (see the module docstring). ``memo`` keeps the PS
    networks solved by earlier calls (the planner's chunks): the same numbers, sooner. With
    ``twin`` (:func:`gpucast.plan.space.market_twins` of ``space``), a spot row of one GPU
    type whose on-demand twin is in ``space`` takes the twin's numbers and prices only its
    market (:func:`_single_prices`): the same arrays for half the work."""
    if twin is not None:
        source = twin_source(space, twin)
        derived = source != np.arange(len(space))
        if derived.any():
            return _priced_twins(
                space, source, derived, facts=facts, gpus=gpus, params=params, work=work,
                startup_s=startup_s, memo=memo,
            )  # fmt: skip
    mixed = space.mixed
    if not mixed.any():
        return _evaluate_single(
            space, facts=facts, gpus=gpus, params=params, work=work, startup_s=startup_s,
            memo=memo,
        )  # fmt: skip
    k = int(np.argmax(mixed))  # first mixed row
    if not mixed[:k].any() and mixed[k:].all():
        # the usual layout (build_space puts mixed rows last): slices, no gathers
        single: IntArray | slice = slice(0, k)
        multi: IntArray | slice = slice(k, len(space))
    else:
        single, multi = np.flatnonzero(~mixed), np.flatnonzero(mixed)
    one = _evaluate_single(
        space.take(single), facts=facts, gpus=gpus, params=params, work=work, startup_s=startup_s,
        memo=memo,
    )  # fmt: skip
    two = evaluate_mixed(
        space.take(multi), facts=facts, gpus=gpus, params=params, work=work, startup_s=startup_s
    )
    out: dict[str, np.ndarray] = {}
    for f in fields(Evaluation):
        a, b = getattr(one, f.name), getattr(two, f.name)
        if isinstance(single, slice):
            out[f.name] = np.concatenate([a, b.astype(a.dtype, copy=False)])
        else:
            arr = np.zeros((len(space), *a.shape[1:]), dtype=a.dtype)
            arr[single] = a
            arr[multi] = b
            out[f.name] = arr
    return Evaluation(**out)


def _probe_usd(
    params: PerfParams,
    nodes: npt.ArrayLike,
    sync: BoolArray,
    usd_per_node_hour: FloatArray,
    startup_s: float,
) -> FloatArray:
    """What the nodes started to drop the slowest cost (``exclude_slowest``): each extra node
    billed for its start-up and :data:`~gpucast.predict.variability.PROBE_S` at the price of
    a node (a mixed cluster's dearer one), then released."""
    extra = params.probe_nodes(nodes, sync)
    return np.asarray(extra * usd_per_node_hour * (startup_s + PROBE_S) / 3600.0, dtype=np.float64)


def _single_prices(
    space: Space, params: PerfParams, time_s: FloatArray, has_cpu: BoolArray, startup_s: float
) -> tuple[BoolArray, FloatArray, FloatArray, FloatArray]:
    """(has a market, US$/h, probe US$, cost US$) of rows of one GPU type taking
    ``time_s``: the only numbers of a row its market changes."""
    off = space.offers
    o = space.offer
    sync = space.strategy != PS
    price = np.where(space.spot, off.spot_usd_per_hour[o], off.on_demand_usd_per_hour[o])
    has_market = ~np.isnan(price)
    cpu_price = np.where(~sync & has_cpu, off.cpu_usd_per_hour[o] * space.shards, 0.0)
    usd_per_hour = space.nodes * np.nan_to_num(price, nan=0.0) + cpu_price
    probe = _probe_usd(params, space.nodes, sync, np.nan_to_num(price, nan=0.0), startup_s)
    cost = time_s / 3600.0 * usd_per_hour + probe
    return has_market, usd_per_hour, probe, cost


def _priced_twins(
    space: Space,
    source: IntArray,
    derived: BoolArray,
    *,
    params: PerfParams,
    startup_s: float,
    **kw: object,
) -> Evaluation:
    """:func:`evaluate` with ``twin``: the rows not ``derived`` evaluated, the others copied
    from their ``source`` row and priced in their own market."""
    base = np.flatnonzero(~derived)
    ev = evaluate(space.take(base), params=params, startup_s=startup_s, **kw)  # type: ignore[arg-type]
    at = np.zeros(len(space), dtype=np.int64)
    at[base] = np.arange(base.size)
    # np.take: a gather of rows of a 2-D column is ~10x faster than indexing with an array
    cols = {f.name: np.take(getattr(ev, f.name), at[source], axis=0) for f in fields(Evaluation)}
    rows = np.flatnonzero(derived)
    priced = _single_prices(
        space.take(rows), params, cols["time_s"][rows], cols["has_cpu"][rows], startup_s
    )
    for name, values in zip(
        ("has_market", "usd_per_hour", "probe_usd", "cost_usd"), priced, strict=True
    ):
        cols[name][rows] = values
    return Evaluation(**cols)


def _evaluate_single(
    space: Space,
    *,
    facts: WorkloadFacts,
    gpus: GpuTable,
    params: PerfParams,
    work: Work,
    startup_s: float,
    memo: EvalMemo | None = None,
) -> Evaluation:
    """Rows of one GPU type (see the module docstring)."""
    off = space.offers
    o = space.offer
    gpn = off.gpus_per_node[o]
    n = space.nodes * gpn
    nf = n.astype(np.float64)
    g = off.gpu[o]
    sync = space.strategy != PS
    if space.global_batch is not None:
        per_worker = np.where(space.batch > 0, space.batch, space.global_batch // n)
    else:
        per_worker = space.batch.copy()
    valid_batch = per_worker >= 1
    b = np.maximum(per_worker, 1).astype(np.float64)

    # -- memory ----------------------------------------------------------------------------
    state = np.where(
        space.strategy == DDP,
        facts.weights_bytes + facts.gradient_bytes + facts.optimizer_bytes,
        np.where(
            space.strategy == FSDP,
            (facts.weights_bytes + facts.gradient_bytes + facts.optimizer_bytes) / nf
            + 2.0 * facts.max_tensor_bytes,
            facts.weights_bytes + facts.gradient_bytes,
        ),
    )
    acts = gpus.activation_bytes_per_sample[g] * b
    usable = gpus.usable_bytes[g]
    plain_fits = state + acts <= usable
    ckpt_fits = state + acts * facts.checkpoint_fraction <= usable
    checkpointing = ~plain_fits & ckpt_fits
    fits = plain_fits | ckpt_fits
    mem_bytes = np.where(checkpointing, state + acts * facts.checkpoint_fraction, state + acts)

    offload, params_off, nvme_off, host_need, host_short = _offload_memory(
        space, facts, gpus, g, acts, nf, fits, params.offload
    )
    if offload.any():
        gpu_state = np.where(
            params_off,
            _PARAM_BUFFER_TENSORS * facts.max_tensor_bytes,
            _offload_gpu_state(space, facts, nf),
        )
        off_plain = gpu_state + acts <= usable
        checkpointing = np.where(offload, ~off_plain, checkpointing)
        mem_bytes = np.where(
            offload,
            gpu_state + np.where(off_plain, acts, acts * facts.checkpoint_fraction),
            mem_bytes,
        )
        fits = fits | offload

    # -- compute ---------------------------------------------------------------------------
    terms = gpus.step_terms(g, b)
    slow = np.where(checkpointing, CHECKPOINTING_SLOWDOWN, 1.0)
    spread = params.gpu_slowdown(nf, sync, gpn)
    compute = col_sum(terms) * slow * spread
    power_slow, busy_power, power_limit, idle_power = _power(params, terms, g, gpus, b, memo)
    compute = compute * power_slow
    roof_bottleneck = col_argmax(terms)
    offload_s = np.zeros(len(space))
    if offload.any():
        compute, offload_s, nvme_bound = _offload_step(
            compute, offload, params_off, nvme_off, space, facts, gpus, g, nf, params
        )
        host_side = np.where(nvme_bound, _B["nvme_offload"], _B["cpu_offload"])
        roof_bottleneck = np.where(offload_s > 0, host_side, roof_bottleneck)

    # -- synchronous collectives -----------------------------------------------------------
    rdma = np.isin(np.asarray(off.instance_type), list(params.rdma_instances))[o]
    coll, exposed_sync = params.sync_collective(
        facts.gradient_bytes,
        nf,
        gpn,
        off.intra_link_gbps(o, gpus.intra_node_gbps[g]),
        off.network_gbps[o],
        compute,
        rdma=rdma,
        nvlink=off.nvlink_rows(o, gpus.nvlink[g]),
        passes=np.where(space.strategy == FSDP, 3.0, 2.0),
    )
    step_sync = compute + exposed_sync

    # -- asynchronous parameter server -----------------------------------------------------
    has_cpu = ~np.isnan(off.cpu_usd_per_hour[o])
    shards = np.maximum(space.shards, 1).astype(np.float64)
    ps_gbps = np.where(has_cpu, off.cpu_network_gbps[o], 1.0)
    push, pull = ps_demands(facts, ps_gbps, shards, params)
    # a worker's own node NIC carries every shard's bytes: a delay where it is the slower end
    worker_s = facts.gradient_bytes * 8.0 / (off.network_gbps[o] * params.ps_network_efficiency)
    worker_s = worker_s / 1e9
    lo_ratio, hi_ratio = gpus.interval_ratios(g, b)
    x_ps = np.zeros(len(space))
    x_fast = np.zeros(len(space))  # at the fast end of the step model's interval
    x_slow = np.zeros(len(space))  # ... and at its slow end
    util = np.zeros(len(space))
    nic_bound = np.zeros(len(space), dtype=bool)
    is_ps = ~sync
    if is_ps.any():
        sel = np.flatnonzero(is_ps)
        # rows share an MVA solution when GPU, batch, checkpointing, shards, PS NIC and node
        # NIC agree: solve each distinct one once, for every population up to the largest
        # (a code per distinct PS NIC and per node NIC, combined: far faster than unique rows)
        _, ps_code = np.unique(ps_gbps[sel], return_inverse=True)
        _, node_code = np.unique(off.network_gbps[o[sel]], return_inverse=True)
        pair = ps_code.reshape(-1).astype(np.int64) * (int(node_code.max()) + 1) + node_code
        _, net_idx = np.unique(pair.reshape(-1), return_inverse=True)
        net_idx = net_idx.reshape(-1)
        n_gpus = len(gpus.names)
        key = (
            ((b[sel].astype(np.int64) * n_gpus + g[sel]) * 2 + checkpointing[sel])
            * (int(shards[sel].max()) + 1)
            + shards[sel].astype(np.int64)
        ) * (int(net_idx.max()) + 1) + net_idx
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        u = sel[first]
        delay = comm.worker_nic_delay_s(pull[u], worker_s[u])
        nic_rate = (
            space.nodes[sel]
            * off.network_gbps[o[sel]]
            * params.ps_network_efficiency
            * 1e9
            / (8.0 * facts.gradient_bytes)
        )

        def rate(compute_ratio: FloatArray, ps_ratio: float) -> tuple[FloatArray, BoolArray]:
            """Updates/s of the PS rows with the compute x ``compute_ratio`` and every PS
            and NIC time x ``ps_ratio``; and where the node NICs bound them."""
            think = compute[u] * compute_ratio[u] + delay * ps_ratio
            solve = comm.ps_async_table if memo is None else memo.ps.table
            table = solve(think, push[u] * ps_ratio, pull[u] * ps_ratio, int(n[sel].max()))
            x_mva = table[inverse.reshape(-1), n[sel] - 1]
            return np.minimum(x_mva, nic_rate / ps_ratio), nic_rate / ps_ratio < x_mva

        x_ps[sel], nic_bound[sel] = rate(np.ones(len(space)), 1.0)
        util[sel] = x_ps[sel] * push[sel]
        # the interval: the same network solved with the compute at the ends of the step
        # model's interval and the PS at the ends of its residual band, both at once (as a
        # DDP row's compute and exposed all-reduce): a PS-bound row gains little from faster
        # GPUs and loses much to slower ones, whose compute the PS no longer hides
        x_fast[sel], _ = rate(lo_ratio, float(np.exp(-params.ps_log_residual_q90)))
        x_slow[sel], _ = rate(hi_ratio, float(np.exp(-params.ps_log_residual_q10)))
    step_async = np.where(x_ps > 0, nf / np.where(x_ps > 0, x_ps, 1.0), np.inf)

    # -- throughput, work, time, cost ------------------------------------------------------
    samples_per_s = np.where(sync, nf * b / step_sync, x_ps * b)
    global_batch = np.where(sync, nf * b, b)
    samples = work.samples_needed(global_batch)
    steps = np.ceil(samples / global_batch).astype(np.int64)
    eval_s = work.evaluation_s(samples, np.maximum(nf * b, 1.0), compute)
    train_s = samples / samples_per_s + eval_s
    time_s = startup_s + train_s
    unc = params.collective_uncertainty
    lo_sync = (compute * lo_ratio + exposed_sync * (1.0 - unc)) / step_sync
    hi_sync = (compute * hi_ratio + exposed_sync * (1.0 + unc)) / step_sync
    ps_bound = util >= params.ps_bottleneck_utilization
    lo_async = np.where(x_fast > 0, x_ps / np.where(x_fast > 0, x_fast, 1.0), lo_ratio)
    hi_async = np.where(x_slow > 0, x_ps / np.where(x_slow > 0, x_slow, 1.0), hi_ratio)
    ratio_lower = np.where(sync, lo_sync, lo_async)
    ratio_upper = np.where(sync, hi_sync, hi_async)
    ratio_lower, ratio_upper = work.widen(ratio_lower, ratio_upper, global_batch)
    time_lower = startup_s + train_s * ratio_lower
    time_upper = startup_s + train_s * ratio_upper

    has_market, usd_per_hour, probe, cost = _single_prices(
        space, params, time_s, has_cpu, startup_s
    )

    comm_term = np.where(space.strategy == FSDP, _B["fsdp_comm"], _B["allreduce"])
    sync_bn = np.where(exposed_sync > compute, comm_term, roof_bottleneck)
    ps_term = np.where(pull >= push - pull, _B["ps_network"], _B["ps_cpu"])
    async_bn = np.where(
        nic_bound, _B["worker_network"], np.where(ps_bound, ps_term, roof_bottleneck)
    )
    bottleneck = np.where(sync, sync_bn, async_bn).astype(np.int64)

    exposed_async = np.maximum(np.where(x_ps > 0, step_async - compute, 0.0), 0.0)
    return Evaluation(
        workers=n,
        batch=per_worker,
        global_batch=global_batch.astype(np.int64),
        valid_batch=valid_batch,
        mem_bytes=mem_bytes,
        fits=fits,
        checkpointing=checkpointing,
        offload=offload,
        params_offload=params_off,
        nvme_offload=nvme_off,
        host_bytes=host_need,
        host_short=host_short,
        compute_s=compute,
        offload_s=offload_s,
        comm_s=np.where(sync, coll, exposed_async),
        exposed_s=np.where(sync, exposed_sync, exposed_async),
        step_s=np.where(sync, step_sync, step_async),
        samples_per_s=samples_per_s,
        samples_needed=samples,
        steps=steps,
        train_s=train_s,
        eval_s=eval_s,
        time_s=time_s,
        time_lower_s=time_lower,
        time_upper_s=time_upper,
        usd_per_hour=usd_per_hour,
        cost_usd=cost,
        probe_usd=probe,
        bottleneck=bottleneck,
        ps_utilization=util,
        has_cpu=has_cpu,
        has_market=has_market,
        train_ratio_lower=ratio_lower,
        train_ratio_upper=ratio_upper,
        part_batch=np.stack([per_worker, np.zeros_like(per_worker)], axis=1),
        part_extra=np.zeros((len(space), 2), dtype=np.int64),
        part_compute_s=np.stack([compute, np.zeros_like(compute)], axis=1),
        batch_split=np.full(len(space), SPLIT_EQUAL, dtype=np.int64),
        equal_compute_s=compute,
        gpu_power_w=_average_power(
            busy_power,
            idle_power,
            compute * params.gpu_busy_share(spread, sync),
            np.where(sync, step_sync, step_async),
        ),
        power_limit_w=power_limit,
    )


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


def _sync_split(
    a: FloatArray,
    c: FloatArray,
    counts: IntArray,
    g_sync: IntArray,
    state: FloatArray,
    act_per_sample: FloatArray,
    usable: FloatArray,
    checkpoint_fraction: float,
) -> tuple[IntArray, IntArray, IntArray, FloatArray]:
    """The per-worker batches of a synchronous mixed row: the fastest step of three splits of
    its global batch -- in proportion to speed, the same with a part over its memory held at
    the largest batch that fits (the rest to the other part), and equal batches (which the
    slowest GPU paces). Each is priced by its slowest part's compute ``a + c b`` (x the
    activation-checkpointing slowdown where only that fits; ``inf`` where nothing fits).
    Returns ``(base, extra, split, equal_ratio)``: ``equal_ratio`` = the equal split's step
    compute over the chosen one's."""
    base_p, extra_p = proportional_batches(a, c, counts, g_sync)
    with np.errstate(divide="ignore", invalid="ignore"):
        room = (usable - state) / np.maximum(act_per_sample, 1e-300)
    cap = np.floor(np.clip(room, 0.0, 2.0**40)).astype(np.int64)
    base_c, extra_c, capped = capped_batches(base_p, extra_p, counts, g_sync, cap)
    base_e, extra_e = equal_batches(c, counts, g_sync)

    def step(base: IntArray, extra: IntArray) -> FloatArray:
        top = base + (extra > 0)
        acts = act_per_sample * top
        plain = state + acts <= usable
        ckpt = state + acts * checkpoint_fraction <= usable
        t = (a + c * top) * np.where(plain, 1.0, CHECKPOINTING_SLOWDOWN)
        t = np.where(counts > 0, np.where(plain | ckpt, t, np.inf), 0.0)
        return col_max(t)

    # in proportion to each part's speed with its recomputation where its share needs it (QA 39
    # Y #11: a V100 part at 357 ran 1.33x slower with checkpointing than the split assumed,
    # its K80 part idle 25.6% of the step)
    top_p = base_p + (extra_p > 0)
    slow = np.where(state + act_per_sample * top_p <= usable, 1.0, CHECKPOINTING_SLOWDOWN)
    base_r, extra_r = proportional_batches(a * slow, c * slow, counts, g_sync)

    t_e = step(base_e, extra_e)
    times = np.stack(
        [
            step(base_p, extra_p),
            np.where(capped, step(base_c, extra_c), np.inf),
            t_e,
            step(base_r, extra_r),
        ]
    )
    best = np.argmin(times, axis=0)  # ties: proportional first, the recomputation-aware last
    pick = best[:, None]
    base = np.choose(pick, [base_p, base_c, base_e, base_r])
    extra = np.choose(pick, [extra_p, extra_c, extra_e, extra_r])
    # both proportional splits read "proportional to speed"
    split = np.where(best == 3, SPLIT_PROPORTIONAL, best).astype(np.int64)
    chosen = times[best, np.arange(best.size)]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(np.isfinite(chosen) & (chosen > 0), t_e / chosen, 1.0)
    return base, extra, split, ratio


def evaluate_mixed(
    space: Space,
    *,
    facts: WorkloadFacts,
    gpus: GpuTable,
    params: PerfParams,
    work: Work,
    startup_s: float,
) -> Evaluation:
    """Rows with two GPU types (``offer`` x ``nodes`` and ``offer2`` x ``nodes2``).

    * DDP and ``ps-sync``: the global batch (``workers x batch``, or ``--global-batch``) is
      split in proportion to speed (:func:`~gpucast.plan.hetero.proportional_batches`); the
      step's compute is the slowest worker's at its batch. DDP's ring crosses both instance
      types: its slowest link is the smallest of their NICs and intra-node links.
      ``ps-sync`` then waits for all ``n`` pushes and then all ``n`` pulls: each phase's
      transfer for the busiest shard's NIC (``n`` shares) or the slowest node NIC (its
      workers' bytes), whichever is longer, plus the busiest shard's apply of ``n`` shares.
    * ``ps`` (asynchronous): every worker trains on ``batch``; exact MVA with the equivalent
      think time, each part's node NICs bounding the updates it sends.
    """
    off = space.offers
    rows = len(space)
    oa, ob = space.offer, space.part2
    gpn = np.stack([off.gpus_per_node[oa], off.gpus_per_node[ob]], axis=1)
    nodes = np.stack([space.nodes, space.count2], axis=1)
    counts = nodes * gpn
    n = col_sum(counts)
    nf = n.astype(np.float64)
    g = np.stack([off.gpu[oa], off.gpu[ob]], axis=1)
    strat = space.strategy
    sync = strat != PS
    fixed = gpus.fixed_s[g]  # (rows, 2, terms)
    per = gpus.per_sample_s[g]
    a = col_sum(fixed)
    c = col_sum(per)

    # -- batches -----------------------------------------------------------------------------
    if space.global_batch is not None:
        mean_b = np.where(space.batch > 0, space.batch, space.global_batch // n)
        g_sync = np.where(space.batch > 0, space.batch * n, space.global_batch)
    else:
        mean_b = space.batch.copy()
        g_sync = space.batch * n
    state = np.where(
        strat == DDP,
        facts.weights_bytes + facts.gradient_bytes + facts.optimizer_bytes,
        facts.weights_bytes + facts.gradient_bytes,
    )[:, None]
    act_per_sample = gpus.activation_bytes_per_sample[g]
    usable = gpus.usable_bytes[g]
    base_sync, extra_sync, split, split_ratio = _sync_split(
        a, c, counts, g_sync, state, act_per_sample, usable, facts.checkpoint_fraction
    )
    base = np.where(sync[:, None], base_sync, np.maximum(mean_b, 1)[:, None])
    extra = np.where(sync[:, None], extra_sync, 0)
    valid_batch = np.where(sync, g_sync >= n, mean_b >= 1)
    top = (base + (extra > 0)).astype(np.float64)  # the largest batch in each part

    # -- memory per part ---------------------------------------------------------------------
    acts = act_per_sample * top
    plain = state + acts <= usable
    ckpt_fits = state + acts * facts.checkpoint_fraction <= usable
    ckpt = ~plain & ckpt_fits
    fits = col_min(plain | ckpt_fits)
    mem_bytes = col_max(np.where(ckpt, state + acts * facts.checkpoint_fraction, state + acts))

    # -- compute per part --------------------------------------------------------------------
    terms = (fixed + per * top[:, :, None]) * gpus.term_scales(g, top)
    part_compute = col_sum(terms) * np.where(ckpt, CHECKPOINTING_SLOWDOWN, 1.0)
    # dropping the slowest (exclude_slowest) by the coarser part's nodes
    spread = params.gpu_slowdown(nf, sync, col_max(gpn))
    part_compute = part_compute * spread[:, None]
    power_parts = [_power(params, terms[:, k], g[:, k], gpus, top[:, k]) for k in range(2)]
    part_compute = part_compute * np.stack([p[0] for p in power_parts], axis=1)
    part_watts = np.stack([p[1] for p in power_parts], axis=1)
    part_idle = np.stack([p[3] for p in power_parts], axis=1)
    power_limit = np.where(power_parts[0][2] == power_parts[1][2], power_parts[0][2], np.nan)
    slowest = col_argmax(part_compute)
    r = np.arange(rows)
    compute = part_compute[r, slowest]
    roof_bottleneck = col_argmax(terms[r, slowest])

    # -- DDP ring over both instance types ---------------------------------------------------
    types = np.asarray(off.instance_type)
    rdma = np.isin(types[oa], list(params.rdma_instances)) & np.isin(
        types[ob], list(params.rdma_instances)
    )
    coll, exposed_ddp = params.sync_collective(
        facts.gradient_bytes,
        nf,
        np.minimum(off.gpus_per_node[oa], off.gpus_per_node[ob]),
        np.minimum(gpus.intra_node_gbps[g[:, 0]], gpus.intra_node_gbps[g[:, 1]]),
        np.minimum(off.network_gbps[oa], off.network_gbps[ob]),
        compute,
        rdma=rdma,
        nvlink=gpus.nvlink[g[:, 0]] & gpus.nvlink[g[:, 1]],
    )

    # -- parameter server (both modes) -------------------------------------------------------
    has_cpu = ~np.isnan(off.cpu_usd_per_hour[oa])
    shards = np.maximum(space.shards, 1).astype(np.float64)
    ps_gbps = np.where(has_cpu, off.cpu_network_gbps[oa], 1.0)
    push, pull = ps_demands(facts, ps_gbps, shards, params)
    demand = push + pull  # the busiest shard's stations: a worker's wait on an idle PS
    nic = np.stack([off.network_gbps[oa], off.network_gbps[ob]], axis=1)
    per_node_update_s = facts.gradient_bytes * 8.0 / (nic * params.ps_network_efficiency * 1e9)
    nic_delay = comm.worker_nic_delay_s(pull[:, None], per_node_update_s)  # (rows, parts)
    # sync: all n push (the busiest shard receives and applies n shares), then all pull;
    # each phase's transfer waits for the busiest shard's NIC or the slowest node NIC
    ps_serve = nf * push
    node_nic = col_max(gpn * per_node_update_s)
    exposed_psync = nf * (push - pull) + 2.0 * np.maximum(nf * pull, node_nic)
    # async: equivalent think time, exact MVA, each part's node NICs bound its update rate
    is_async = strat == PS
    lo_parts, hi_parts = gpus.interval_ratios(g, top)
    lo_ratio = col_min(lo_parts)  # the wider of the two GPUs' intervals
    hi_ratio = col_max(hi_parts)
    x_ps = np.zeros(rows)
    x_fast = np.zeros(rows)  # at the ends of the step model's interval (as _evaluate_single)
    x_slow = np.zeros(rows)
    nic_bound = np.zeros(rows, dtype=bool)
    if is_async.any():
        sel = np.flatnonzero(is_async)

        def rate(compute_ratio: FloatArray, ps_ratio: float) -> tuple[FloatArray, BoolArray]:
            """Updates/s with the compute x ``compute_ratio`` and every PS and NIC time x
            ``ps_ratio``; and where the node NICs bound them."""
            think = part_compute[sel] * compute_ratio[sel, None] + nic_delay[sel] * ps_ratio
            d = demand[sel] * ps_ratio
            z_eq = equivalent_think_time_s(think, counts[sel], d)
            x_mva, _ = comm.ps_async_throughput(
                z_eq, push[sel] * ps_ratio, pull[sel] * ps_ratio, n[sel]
            )
            share = update_shares(think, counts[sel], d)
            # updates/s each part's NICs carry
            part_nic_rate = nodes[sel] / (per_node_update_s[sel] * ps_ratio)
            nic_rate = col_min(part_nic_rate / np.maximum(share, 1e-300))
            return np.minimum(x_mva, nic_rate), nic_rate < x_mva

        x_ps[sel], nic_bound[sel] = rate(np.ones(rows), 1.0)
        x_fast[sel], _ = rate(lo_ratio, float(np.exp(-params.ps_log_residual_q90)))
        x_slow[sel], _ = rate(hi_ratio, float(np.exp(-params.ps_log_residual_q10)))
    step_async = np.where(x_ps > 0, nf / np.where(x_ps > 0, x_ps, 1.0), np.inf)

    exposed_sync = np.where(strat == DDP, exposed_ddp, exposed_psync)
    step_sync = compute + exposed_sync
    g_stat = np.where(sync, g_sync, np.maximum(mean_b, 1)).astype(np.float64)
    samples_per_s = np.where(sync, g_stat / step_sync, x_ps * g_stat)
    util = np.where(sync, np.where(strat == PS_SYNC, ps_serve / step_sync, 0.0), x_ps * push)
    samples = work.samples_needed(g_stat)
    steps = np.ceil(samples / g_stat).astype(np.int64)
    eval_s = work.evaluation_s(samples, np.where(sync, g_stat, nf * g_stat), compute)
    train_s = samples / samples_per_s + eval_s
    time_s = startup_s + train_s

    unc = params.collective_uncertainty
    comm_unc = np.where(strat == DDP, unc, 0.0)
    lo_sync = (compute * lo_ratio + exposed_sync * (1.0 - comm_unc)) / step_sync
    hi_sync = (compute * hi_ratio + exposed_sync * (1.0 + comm_unc)) / step_sync
    q90, q10 = np.exp(-params.ps_log_residual_q90), np.exp(-params.ps_log_residual_q10)
    lo_psync = (compute * lo_ratio + exposed_sync * q90) / step_sync
    hi_psync = (compute * hi_ratio + exposed_sync * q10) / step_sync
    lo_async = np.where(x_fast > 0, x_ps / np.where(x_fast > 0, x_fast, 1.0), lo_ratio)
    hi_async = np.where(x_slow > 0, x_ps / np.where(x_slow > 0, x_slow, 1.0), hi_ratio)
    ratio_lower = np.where(strat == DDP, lo_sync, np.where(strat == PS_SYNC, lo_psync, lo_async))
    ratio_upper = np.where(strat == DDP, hi_sync, np.where(strat == PS_SYNC, hi_psync, hi_async))
    ratio_lower, ratio_upper = work.widen(ratio_lower, ratio_upper, g_stat)

    spot = space.spot
    price_a = np.where(spot, off.spot_usd_per_hour[oa], off.on_demand_usd_per_hour[oa])
    price_b = np.where(spot, off.spot_usd_per_hour[ob], off.on_demand_usd_per_hour[ob])
    has_market = ~np.isnan(price_a) & ~np.isnan(price_b)
    is_ps = strat != DDP
    cpu_price = np.where(is_ps & has_cpu, off.cpu_usd_per_hour[oa] * space.shards, 0.0)
    usd_per_hour = (
        space.nodes * np.nan_to_num(price_a, nan=0.0)
        + space.count2 * np.nan_to_num(price_b, nan=0.0)
        + cpu_price
    )
    probe = _probe_usd(
        params,
        space.nodes + space.count2,
        sync,
        np.maximum(np.nan_to_num(price_a, nan=0.0), np.nan_to_num(price_b, nan=0.0)),
        startup_s,
    )
    cost = time_s / 3600.0 * usd_per_hour + probe

    ps_bound = util >= params.ps_bottleneck_utilization
    ps_term = np.where(pull >= push - pull, _B["ps_network"], _B["ps_cpu"])
    ddp_bn = np.where(exposed_ddp > compute, _B["allreduce"], roof_bottleneck)
    psync_bn = np.where(
        exposed_psync > compute,
        np.where(node_nic > nf * pull, _B["worker_network"], ps_term),
        roof_bottleneck,
    )
    async_bn = np.where(
        nic_bound, _B["worker_network"], np.where(ps_bound, ps_term, roof_bottleneck)
    )
    bottleneck = np.where(
        strat == DDP, ddp_bn, np.where(strat == PS_SYNC, psync_bn, async_bn)
    ).astype(np.int64)
    exposed_async = np.maximum(np.where(x_ps > 0, step_async - compute, 0.0), 0.0)
    exposed = np.where(sync, exposed_sync, exposed_async)
    return Evaluation(
        workers=n,
        batch=np.where(sync, g_sync // np.maximum(n, 1), mean_b).astype(np.int64),
        global_batch=g_stat.astype(np.int64),
        valid_batch=valid_batch,
        mem_bytes=mem_bytes,
        fits=fits,
        checkpointing=col_max(ckpt),
        offload=np.zeros(rows, dtype=bool),
        params_offload=np.zeros(rows, dtype=bool),
        nvme_offload=np.zeros(rows, dtype=bool),
        host_bytes=np.zeros(rows),
        host_short=np.zeros(rows, dtype=bool),
        compute_s=compute,
        offload_s=np.zeros(rows),
        comm_s=np.where(strat == DDP, coll, exposed),
        exposed_s=exposed,
        step_s=np.where(sync, step_sync, step_async),
        samples_per_s=samples_per_s,
        samples_needed=samples,
        steps=steps,
        train_s=train_s,
        eval_s=eval_s,
        time_s=time_s,
        time_lower_s=startup_s + train_s * ratio_lower,
        time_upper_s=startup_s + train_s * ratio_upper,
        usd_per_hour=usd_per_hour,
        cost_usd=cost,
        probe_usd=probe,
        bottleneck=bottleneck,
        ps_utilization=util,
        has_cpu=has_cpu,
        has_market=has_market,
        train_ratio_lower=ratio_lower,
        train_ratio_upper=ratio_upper,
        part_batch=base.astype(np.int64),
        part_extra=extra.astype(np.int64),
        part_compute_s=part_compute,
        batch_split=np.where(sync, split, SPLIT_EQUAL).astype(np.int64),
        equal_compute_s=np.where(sync, compute * split_ratio, compute),
        # one GPU's mean draw over the cluster (its parts weighted by their GPU counts)
        gpu_power_w=col_sum(
            _average_power(
                part_watts,
                part_idle,
                part_compute * params.gpu_busy_share(spread, sync)[:, None],
                np.where(sync, step_sync, step_async)[:, None],
            )
            * counts
        )
        / np.maximum(col_sum(counts), 1),
        power_limit_w=power_limit,
    )
