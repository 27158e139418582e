"""Plan the training of a published LLM: which GPUs, how many nodes, which 3D layout.

For every GPU offer (one per instance type and GPU: its cheapest region) and every node count
up to ``max_gpus``, :func:`gpucast.predict.parallel.best_layout` finds the fastest layout that
fits (tensor, pipeline and data parallelism, micro-batch, ZeRO stage, recomputation); the
job's time is a run's one-off warm-up (``efficiency.warmup_s``, fitted on MLPerf's LLM runs) plus
``steps x step time`` (``steps = tokens / (global batch x sequence length)``)
and its cost ``nodes x on-demand price x time``. Networks without RDMA run at the share of
their NIC the fitted TCP collective found (:mod:`gpucast.predict.collective`) and with its
algorithm (NCCL's flat ring: each node's NIC carries the whole ring's share of the
data-parallel bytes, as ``plan train`` prices TCP clusters). Rows that miss
the deadline or the budget are kept but marked; the front is the cost-vs-time Pareto set and
the pick the cheapest row that meets both. Where none does, the plan is ``plan train``'s error
(:class:`NoFeasiblePlanError`): the limit that cut the most rows, and the fastest row (the
cheapest of equally fast ones) or the cheapest in time, with what to relax. Each row
carries the 80% interval of its time (the ``band`` the caller gives: ratios of measured /
predicted that held-out runs earned) and whether the deadline and the budget still hold at its
slow edge; ``safe`` is the cheapest row where they do.

Spot (``spot``, :class:`LlmSpot`): the same shapes on spot servers, through the spot Monte
Carlo of ``plan train`` (:mod:`gpucast.plan.risk`: revocations of any node stop the job, which
resumes from its last checkpoint once a replacement has started; capacity gaps; every stratum
of the step-time interval). A checkpoint writes the state training changes once -- the
optimizer shards and, unless LoRA freezes them, one replica's weights -- spread over the nodes
at the storage's rate, every Young interval; a restart reads every GPU's weights and shard back
and pays the process restart and the run's warm-up again. The first-order estimate ranks the spot
shapes and the front of it is simulated (at most ``max_simulated``). A spot row meets the
deadline when it does with at least ``min_p_meet``; its interval is the fast edge of the step
time without revocations to the simulated 90th percentile.
Pure: numbers in, numbers out (the Monte Carlo is seeded).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpucast.domain.catalog import GpuSpec, Offer
from gpucast.domain.errors import InvalidSpecError, NoFeasiblePlanError
from gpucast.domain.llm import TransformerSpec
from gpucast.domain.parallel import (
    LAYOUT_FLAGS,
    SWITCHED,
    FixedLayout,
    LayoutSpace,
    NodeLinks,
    ParallelAssumptions,
    ParallelStepPrediction,
)
from gpucast.domain.plan import check_pue
from gpucast.domain.units import format_amount, format_duration, format_usd
from gpucast.plan.energy import OBJECTIVE_TIE, PowerSetting, no_figure_error
from gpucast.plan.inputs import RiskInputs
from gpucast.plan.pareto import pareto_front_2d, spread
from gpucast.plan.risk import (
    SpotDelays,
    SpotJob,
    SpotOutcome,
    SpotPart,
    WindowHazards,
    approx_spot_time_s,
    simulate_spots,
    spot_move,
)
from gpucast.plan.uncertainty import p_meet_deadline, strata
from gpucast.predict.collective import CollectiveConstants
from gpucast.predict.parallel import (
    SearchMemo,
    best_layout,
    cluster_shape,
    enumerate_layouts,
    fixed_layout_conflict,
    group_link_gbps,
    with_pcie_figures,
)
from gpucast.predict.revocation import LifetimeDistribution
from gpucast.predict.roofline import RooflineEfficiency
from gpucast.predict.variability import SpeedVariability


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmCandidate:
    """One (offer, node count) with its best layout, time and cost."""

    provider: str
    region: str
    instance_type: str
    gpu: str
    nodes: int
    gpus: int
    layout: str
    network: str  # "rdma" or "tcp"
    step_time_s: float
    tokens_per_s: float
    mfu: float
    memory_gib: float
    bottleneck: str
    time_s: float
    #: the 80% interval of ``time_s`` (the band ``plan_llm`` was given)
    time_low_s: float
    time_high_s: float
    cost_usd: float
    usd_per_hour: float
    meets_deadline: bool
    within_budget: bool
    #: the deadline and the budget still met at the slow edge of the 80% interval
    #: (``time_high_s``, its cost in proportion)
    holds_at_slow_edge: bool
    #: the node price is an estimate, not read from a source (``Offer.price_estimated``)
    price_estimated: bool = False
    #: GPUs paid for but left idle: a node whose GPU count has an odd factor (a 72-GPU NVL72
    #: rack) may run on its largest power of two (64) so that a power-of-two batch divides
    idle_gpus: int = 0
    #: "on-demand" or "spot"; a spot row's time and cost are the simulated means at the
    #: central step time, with these besides (None on demand)
    market: str = "on-demand"
    #: P(the deadline is met): on demand from the row's 80% interval, read as ``plan train``
    #: reads it (:mod:`gpucast.plan.uncertainty`), spot from the Monte Carlo (None: no
    #: deadline). A row meets the deadline with P >= ``min_p_meet`` (on demand: and its
    #: central time within it), as ``plan train`` requires
    p_meet_deadline: float | None = None
    #: on demand: whether the central time is past the deadline (a row that is not misses
    #: it on P(meet) alone); None: not known (a saved row from before this figure)
    late: bool | None = None
    time_p90_s: float | None = None
    revocations_mean: float | None = None
    checkpoint_s: float | None = None
    checkpoint_every_steps: int | None = None
    #: where a spot row's node lifetimes come from
    lifetime_source: str = ""
    #: managed recovery: the region replacements move to and the moves per run (None: stay)
    moved_to: str | None = None
    moves_mean: float | None = None
    #: a GPU's average board power over the step (busy at the power model's draw, idle while
    #: it waits on communication, the bubble and the host), the job's GPU energy x PUE and
    #: its emissions at the region's grid intensity (None: no power facts / no grid figure)
    avg_power_w: float | None = None
    energy_kwh: float | None = None
    co2e_kg: float | None = None

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)

    def where(self) -> str:
        """``aws/us-east-1 2x p5.48xlarge (16 H100-SXM + 0 idle)``: the offer and its GPUs."""
        idle = f" + {self.idle_gpus} idle" if self.idle_gpus else ""
        return (
            f"{self.provider}/{self.region} {self.nodes}x {self.instance_type} "
            f"({self.gpus} {self.gpu}{idle}"
        )

    def missed(self) -> tuple[str, ...]:
        """The limits this row misses, as ``plan train`` names them (empty: it meets both)."""
        return missed_limits(
            meets_deadline=self.meets_deadline, within_budget=self.within_budget,
            market=self.market, late=self.late,
        )  # fmt: skip

    def text(self) -> str:
        """One line: where, time, cost, layout, MFU, memory, energy, a spot row's risk and
        the limits it misses (``-- misses the deadline``: shown, never picked)."""
        missed = self.missed()
        spot = ""
        meet = "" if self.p_meet_deadline is None else f"P(meet) {self.p_meet_deadline:.0%}"
        if self.market == "spot":
            moved = (
                f", replacements move to {self.moved_to} ({self.moves_mean or 0.0:.1f} a run)"
                if self.moved_to
                else ""
            )
            spot = (
                f"; spot: {meet + ', ' if meet else ''}p90 "
                f"{format_duration(self.time_p90_s or math.inf)}, "
                f"{self.revocations_mean or 0.0:.1f} revocations{moved}"
            )
        return (
            f"{self.where()}, {self.network}{', spot' if self.market == 'spot' else ''}): "
            f"{format_duration(self.time_s)}, {format_usd(self.cost_usd)}; {self.layout}; "
            f"MFU {self.mfu:.0%}{' of the fp8 peak' if ' fp8 ' in f' {self.layout} ' else ''}, "
            f"{self.memory_gib:.0f} GiB/GPU"
            + ("" if self.energy_kwh is None else f", {format_amount(self.energy_kwh)} kWh")
            + ("" if self.co2e_kg is None else f", {format_amount(self.co2e_kg)} kgCO2e")
            + (spot or (f"; {meet}" if meet else ""))
            + (f" -- {', '.join(missed)}" if missed else "")
        )


def missed_limits(
    *, meets_deadline: bool, within_budget: bool, market: str, late: bool | None = None
) -> tuple[str, ...]:
    """The limits a row misses, in ``plan train``'s words (its reasons for dropping a row):
    ``misses the deadline`` (an on-demand row whose central time is ``late``), ``P(meet
    deadline) below --min-p-meet`` (a spot row, or an on-demand one on time at its central
    value), ``over budget``."""
    from gpucast.plan.train import R_BUDGET, R_DEADLINE, R_RISK

    risk = market == "spot" or late is False
    deadline = () if meets_deadline else (R_RISK if risk else R_DEADLINE,)
    return deadline + (() if within_budget else (R_BUDGET,))


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmSpot:
    """What the spot rows rest on (module docstring): the spot Monte Carlo's inputs
    (lifetimes, start-ups, capacity gaps, fallback), the durable storage each node writes its
    checkpoint to and reads it back from (GB/s), a restart's fixed cost besides reading the
    checkpoint back (``restart_s``), and how many plans of how many runs to simulate."""

    risk: RiskInputs
    storage_gb_s: float
    restart_s: float
    checkpoint_fixed_s: float = 3.0
    runs: int = 1000
    max_simulated: int = 12
    seed: int = 0
    min_p_meet: float = 0.9

    def __post_init__(self) -> None:
        if not (math.isfinite(self.storage_gb_s) and self.storage_gb_s > 0):
            raise InvalidSpecError("storage_gb_s", "must be > 0", got=self.storage_gb_s)
        for name in ("restart_s", "checkpoint_fixed_s"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise InvalidSpecError(name, "must be >= 0", got=v)
        if not 0.0 <= self.min_p_meet <= 1.0:
            raise InvalidSpecError("min-p-meet", "must be in [0, 1]", got=self.min_p_meet)

    def checkpoint_s(self, found: ParallelStepPrediction, gpus_per_node: int) -> float:
        """One checkpoint: the state training changes, each piece written once (distributed
        checkpointing spreads the writers over the data-parallel replicas): the optimizer
        shards and, unless LoRA freezes them, one replica's weights (ZeRO-3: every GPU's
        shard); the nodes write in parallel, their GPUs sharing the node's bandwidth."""
        mem, lay = found.memory, found.layout
        gpus = lay.tp * lay.pp * lay.cp * lay.dp
        one = gpus // (lay.dp * lay.cp)  # the GPUs of one replica (ZeRO shards over dp x cp)
        unique = mem.optimizer_bytes * (gpus if lay.zero_stage >= 1 else one)
        if not lay.lora:
            unique += mem.weights_bytes * (gpus if lay.zero_stage >= 3 else one)
        nodes = max(1, gpus // max(gpus_per_node, 1))
        return self.checkpoint_fixed_s + unique / nodes / (self.storage_gb_s * 1e9)

    def restart_penalty_s(
        self, found: ParallelStepPrediction, gpus_per_node: int, warmup_s: float
    ) -> float:
        """A restart: the process restart, every GPU's weights and shard read back, and the
        run's warm-up again."""
        mem = found.memory
        read = gpus_per_node * (mem.weights_bytes + mem.optimizer_bytes)
        return self.restart_s + read / (self.storage_gb_s * 1e9) + warmup_s


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmPlan:
    """All rows evaluated, the Pareto front (indices), the pick (index or None), the cheapest
    row that still meets the deadline and the budget at the slow edge of its 80% interval
    (``safe``: index or None), and the shapes that ran no layout at all with the reason of one
    of them."""

    candidates: tuple[LlmCandidate, ...]
    pareto: tuple[int, ...]
    recommended: int | None
    infeasible: tuple[str, ...]
    safe: int | None = None
    #: what became of the spot shapes (estimated, pruned, simulated, never finished); "" none
    spot_summary: str = ""
    #: what the pick minimises among the rows that meet the deadline and the budget
    objective: str = "cheapest"
    #: the shapes a fixed layout left out, by the rule they break (``plan_llm`` ``fixed``):
    #: "tp=8 needs 8 GPUs per node: 12 GPU types left out (...)"
    left_out: tuple[str, ...] = ()


def node_counts(gpus_per_node: int, max_gpus: int) -> list[int]:
    """1, 2, 4, ... nodes up to ``max_gpus`` GPUs (and the largest whole count)."""
    top = max_gpus // gpus_per_node
    counts = [1 << k for k in range(int(math.log2(top)) + 1)] if top >= 1 else []
    if top >= 1 and counts[-1] != top:
        counts.append(top)
    return counts


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeOption:
    """One kind of node to plan on: a catalog offer (:func:`offer_nodes`) or the nodes of a
    cluster the user has. ``usd_per_hour`` is one node's price (0: none given);
    ``intra_node_gbps`` overrides the GPU's NVLink/PCIe figure (a cluster's topology: bridged
    pairs cross PCIe); ``max_nodes`` bounds the count (None: ``max_gpus`` alone); ``node``:
    how the node joins its GPUs where no cluster says (its mesh, bridged pairs and the PCIe
    all-reduce figures a group crossing PCIe reaches,
    :func:`gpucast.predict.parallel.with_pcie_figures`)."""

    provider: str
    region: str
    instance_type: str
    gpu: str
    gpus_per_node: int
    network_gbps: float
    usd_per_hour: float
    rdma: bool
    intra_node_gbps: float | None = None
    max_nodes: int | None = None
    price_estimated: bool = False
    #: the node's links: ``mesh_gpus``, the GPUs of the meshed board its GPUs sit on
    #: (``intra_node: mesh``: joined pairwise, so fewer of them reach fewer links; 0: a switch,
    #: bridges or PCIe), cards ``bridged`` in pairs, the PCIe all-reduce figures
    node: NodeLinks = SWITCHED
    #: one node's spot price (a spot option: its rows are spot rows); None: on demand
    spot_usd_per_hour: float | None = None


def offer_nodes(
    offers: Iterable[Offer], rdma_instances: frozenset[str], *, spot: bool = False
) -> list[NodeOption]:
    """The :class:`NodeOption` of each offer of :func:`cheapest_offers`; with ``spot``, also
    one per (provider, instance type) at its cheapest spot region (:func:`cheapest_offers`
    ``spot``)."""
    chosen: list[tuple[Offer, float | None]] = [(o, None) for o in cheapest_offers(offers)]
    if spot:
        chosen += [(o, o.spot_usd_per_hour) for o in cheapest_offers(offers, spot=True)]
    return [
        NodeOption(
            provider=o.provider,
            region=o.region,
            instance_type=o.instance_type,
            gpu=str(o.gpu),
            gpus_per_node=o.gpus,
            network_gbps=o.network_gbps,
            usd_per_hour=o.on_demand_usd_per_hour,
            rdma=o.instance_type in rdma_instances,
            price_estimated=o.price_estimated,
            spot_usd_per_hour=price,
        )
        for o, price in chosen
    ]


def cheapest_offers(offers: Iterable[Offer], *, spot: bool = False) -> list[Offer]:
    """One offer per (provider, instance type): its cheapest on-demand region (``spot``: its
    cheapest spot region, among the offers sold on spot)."""

    def price(o: Offer) -> float:
        return float(o.spot_usd_per_hour if spot else o.on_demand_usd_per_hour)  # type: ignore[arg-type]

    best: dict[tuple[str, str], Offer] = {}
    for o in offers:
        if o.gpu is None or o.gpus < 1 or (spot and o.spot_usd_per_hour is None):
            continue
        key = (o.provider, o.instance_type)
        if key not in best or price(o) < price(best[key]):
            best[key] = o
    return sorted(best.values(), key=lambda o: (o.provider, o.instance_type))


def power_of_two_part(gpus_per_node: int) -> int:
    """The GPUs of a node a power-of-two batch and tensor-parallel size can use: the largest
    power of two in ``gpus_per_node`` (64 of a 72-GPU rack; the node itself when it is one)."""
    return 1 << (gpus_per_node.bit_length() - 1)


def _node_counts(option: NodeOption, max_gpus: int) -> list[tuple[int, int]]:
    """(GPUs used per node, nodes) to plan: every node whole (:func:`node_counts`), and where
    the node's GPU count has an odd factor (72 = 8 x 9, 6 = 2 x 3), also its largest power of
    two per node (64 of 72), which power-of-two batches and tensor-parallel sizes divide. Both
    bounded by ``max_gpus`` GPUs used and the option's ``max_nodes``."""
    gpn = option.gpus_per_node
    out: list[tuple[int, int]] = []
    for used in dict.fromkeys((gpn, power_of_two_part(gpn))):
        top = max_gpus
        if option.max_nodes is not None:
            top = min(top, option.max_nodes * used)
        out += [(used, nodes) for nodes in node_counts(used, top)]
    return out


def fp8_capable(gpu: GpuSpec, precision: str) -> bool:
    """Whether ``gpu`` can train at ``precision`` (:meth:`GpuSpec.runs`): fp8 needs fp8
    tensor cores (Hopper, Ada, Blackwell, CDNA3), bf16 and fp16 units of their own."""
    return gpu.runs(precision)


def plan_llm(
    spec: TransformerSpec,
    nodes_to_plan: Sequence[NodeOption],
    gpus: dict[str, GpuSpec],
    *,
    tokens: float,
    global_batch: int,
    seq_len: int,
    max_gpus: int,
    space: LayoutSpace,
    efficiency: RooflineEfficiency,
    tcp: CollectiveConstants,
    deadline_s: float | None = None,
    budget_usd: float | None = None,
    band: tuple[float, float] = (1.0, 1.0),
    assumptions: ParallelAssumptions | None = None,
    gpu_bands: Mapping[str, tuple[float, float]] | None = None,
    spot: LlmSpot | None = None,
    energy: LlmEnergy | None = None,
    objective: str = "cheapest",
    variability: SpeedVariability | None = None,
    fixed: FixedLayout | None = None,
    min_p_meet: float = 0.9,
) -> LlmPlan:
    """Every offer x node count (module docstring); ``band``: the (lower, upper) ratios of
    measured / predicted time that each row's 80% interval spans (never narrower than the
    point: an interval holds its prediction), replaced by ``gpu_bands``' for the GPU types
    it names; ``assumptions``: the 3D model's priors
    (:class:`~gpucast.domain.parallel.ParallelAssumptions`, its defaults when None); ``spot``:
    what the spot options' rows rest on (options with a spot price are refused without it);
    ``energy``: how rows price power, energy and emissions (None: they do not); ``objective``:
    what the pick minimises (:data:`LLM_OBJECTIVES`); ``variability``: the GPUs' speed spread
    (a synchronous step runs at its slowest GPU's pace: ``E[max]`` of ``n`` factors; None:
    every GPU at the fitted step time); ``fixed``: the layout choices the user fixed (``space``
    already bounds the searched ones by them): every shape searches only layouts with its
    ``tp`` and ``pp``, and a shape where a fixed choice breaks a rule on its own
    (:func:`~gpucast.predict.parallel.fixed_layout_conflict`) is left out and counted by
    that rule (``left_out``); where none is left, the error names the flags to drop;
    ``min_p_meet``: the P(meet deadline) an on-demand row needs (``plan train``'s
    ``--min-p-meet``; a spot row's is ``spot.min_p_meet``)."""
    if objective not in LLM_OBJECTIVES:
        raise InvalidSpecError(
            "objective", f"must be one of {', '.join(LLM_OBJECTIVES)}", got=objective
        )
    if not (math.isfinite(tokens) and tokens > 0):
        raise InvalidSpecError("tokens", "must be a finite number > 0", got=tokens)
    if not 0.0 <= min_p_meet <= 1.0:
        raise InvalidSpecError("min-p-meet", "must be in [0, 1]", got=min_p_meet)
    bands = dict(gpu_bands or {})
    for given in (band, *bands.values()):
        if not 0.0 < given[0] <= given[1] < math.inf:
            raise InvalidSpecError("band", "must satisfy 0 < lower <= upper", got=given)
    steps = math.ceil(tokens / (global_batch * seq_len))
    rows: list[LlmCandidate] = []
    infeasible: list[str] = []
    # the failed shape with the most GPU memory in all, and why: where nothing runs, the one
    # nearest to fitting says how far the largest shape is from it (not the first tried)
    nearest: tuple[float, str] | None = None
    cache: dict[
        tuple[str, int, float, float, float | None, str, bool, int], ParallelStepPrediction | str
    ]
    cache = {}
    # per GPU count, node and space: its layouts and their peak memory (GPU-independent)
    searches: dict[tuple[int, int, bool, LayoutSpace], SearchMemo] = {}
    opts = assumptions or ParallelAssumptions()
    spot_shapes: list[_SpotShape] = []
    pinned = fixed if fixed is not None and fixed.fixed else None
    only = None if pinned is None or (pinned.tp is None and pinned.pp is None) else pinned.allows
    # shapes by GPU type, and those a fixed choice left out by rule (then GPU type)
    shapes: dict[str, int] = {}
    conflicts: dict[str, dict[str, int]] = {}
    conflict_flags: dict[str, None] = {}
    searched = 0  # shapes a fixed layout let through to the search
    for option in nodes_to_plan:
        if option.spot_usd_per_hour is not None and spot is None:
            raise InvalidSpecError("spot", "a spot option needs the spot inputs (LlmSpot)")
        gpu = gpus[option.gpu]
        if not fp8_capable(gpu, space.precision):  # no fp8 row for it: the app says it skipped
            continue
        network, algorithm = tcp.node_network(option.network_gbps, rdma=option.rdma)
        links = cluster_shape(
            gpu, gpus_per_node=option.gpus_per_node, node_network_gbps=network,
            collective=algorithm, mesh=option.node.mesh_gpus > 1,
        )  # fmt: skip
        if option.intra_node_gbps is not None:
            links = dataclasses.replace(links, intra_node_gbps=option.intra_node_gbps)
        elif option.gpus_per_node < option.node.mesh_gpus:  # part of a board: its GPUs' links
            links = dataclasses.replace(
                links, intra_node_gbps=group_link_gbps(gpu, option.gpus_per_node, option.node)
            )
        for used, nodes in _node_counts(option, max_gpus):
            n = nodes * used
            # the used GPUs keep their own share of the node's NICs (and, in a mesh, links);
            # a group of them crossing PCIe reaches the node's figure for that many GPUs
            shape = with_pcie_figures(links.subset(used), gpu, option.node, used)
            shapes[gpu.name] = shapes.get(gpu.name, 0) + 1
            if pinned is not None:
                conflict = fixed_layout_conflict(
                    spec, pinned, gpus=n, gpus_per_node=used, global_batch=global_batch,
                    allow_cross_node_tp=shape.allow_cross_node_tp,
                )  # fmt: skip
                if conflict is not None:
                    by_gpu = conflicts.setdefault(conflict.rule, {})
                    by_gpu[gpu.name] = by_gpu.get(gpu.name, 0) + 1
                    conflict_flags.update(dict.fromkeys(conflict.flags))
                    continue
                searched += 1
            key = (
                gpu.name,
                used,
                shape.node_network_gbps,
                shape.intra_node_gbps,
                shape.bridge_pcie_gbps,
                shape.collective,
                shape.mesh,
                n,
            )
            if key not in cache:
                # the layouts depend on the GPU count, the node and the space, not the GPU
                # (SearchMemo.sibling): each GPU's search reuses them, their peak memory and
                # their floor table
                shaped = (n, used, shape.allow_cross_node_tp, space)
                try:
                    if shaped not in searches:
                        searches[shaped] = SearchMemo(
                            layouts=enumerate_layouts(
                                spec, n, used, global_batch, seq_len=seq_len, space=space,
                                allow_cross_node_tp=shape.allow_cross_node_tp,
                                allow_uneven_pp=opts.allow_uneven_pp,
                            )
                        )  # fmt: skip
                    memo = searches[shaped].sibling()
                    cache[key] = best_layout(
                        spec, gpu, n, global_batch, seq_len=seq_len, cluster=shape,
                        space=space, efficiency=efficiency, assumptions=opts,
                        only=only, memo=memo,
                    )  # fmt: skip
                except (NoFeasiblePlanError, InvalidSpecError) as exc:
                    cache[key] = str(exc)
            found = cache[key]
            if isinstance(found, str):
                if len(infeasible) < 3 and found not in infeasible:
                    infeasible.append(found)
                if nearest is None or n * gpu.memory_gib > nearest[0]:
                    nearest = (n * gpu.memory_gib, found)
                continue
            busy = 1.0  # the mean GPU's busy share of the paced step's busy time
            if variability is not None:  # the slowest of n GPUs sets the pace
                pace = float(variability.expected_max(n)[0])
                found = _straggled(found, pace)
                # its peers finish early and wait at their idle draw (QA 40 E #14)
                busy = float(variability.busy_share(pace))
            time_s = efficiency.warmup_s + steps * found.step_time_s
            low, high = bands.get(gpu.name, band)
            if option.spot_usd_per_hour is not None:
                spot_shapes.append(
                    _SpotShape(option=option, used=used, nodes=nodes, found=found,
                               train_s=time_s, band=(low, high), busy_share=busy)
                )  # fmt: skip
                continue
            usd_h = nodes * option.usd_per_hour
            cost = usd_h * time_s / 3600.0
            slow = max(high, 1.0)
            # plan train's on-demand rule: on time at the central value, and P(meet) from
            # the interval (its 10th-90th percentiles) at least min_p_meet
            p_meet = (
                None
                if deadline_s is None
                else float(p_meet_deadline(deadline_s, 0.0, [time_s], [low], [high])[0])
            )
            rows.append(
                LlmCandidate(
                    **_shape_fields(option, found, nodes, used),
                    time_s=time_s,
                    time_low_s=time_s * min(low, 1.0),
                    time_high_s=time_s * slow,
                    cost_usd=cost,
                    usd_per_hour=usd_h,
                    meets_deadline=p_meet is None
                    or (time_s <= deadline_s and p_meet >= min_p_meet),  # type: ignore[operator]
                    p_meet_deadline=p_meet,
                    late=None if deadline_s is None else time_s > deadline_s,
                    within_budget=budget_usd is None or cost <= budget_usd,
                    holds_at_slow_edge=(deadline_s is None or time_s * slow <= deadline_s)
                    and (budget_usd is None or cost * slow <= budget_usd),
                    **_energy_fields(
                        energy, found, option, nodes * used, nodes, time_s, busy_share=busy
                    ),
                )
            )
    spot_summary = ""
    if spot is not None and spot_shapes:
        twins = {(r.provider, r.instance_type, r.nodes, r.gpus): r.cost_usd for r in rows}
        spot_rows, spot_summary = _spot_rows(
            spot_shapes, spot, steps=steps, warmup_s=efficiency.warmup_s,
            deadline_s=deadline_s, budget_usd=budget_usd, twins=twins, energy=energy,
        )  # fmt: skip
        rows += spot_rows
    left_out = tuple(_left_out_text(rule, by_gpu, shapes) for rule, by_gpu in conflicts.items())
    if not rows and pinned is not None:
        # every flag a rule named where no shape got through; else every fixed one
        order = [flag for flag in LAYOUT_FLAGS.values() if flag in conflict_flags]
        drop = "/".join(f"--{f}" for f in order) if not searched else pinned.flags()
        why = "; ".join(conflicts) if not searched else (nearest or (0.0, "no layout fits"))[1]
        raise NoFeasiblePlanError(
            # the flag at fault first, as predict llm-train's error (QA 39)
            (f"{order[0]}: " if order and not searched else "")
            + f"no offer of up to {max_gpus} GPUs runs {spec.name} with {pinned.label()} fixed "
            f"at a global batch of {global_batch} sequences of {seq_len} tokens: {why}",
            fix=f"drop {drop} to search {'it' if '/' not in drop else 'them'}",
        )
    if not rows:
        raise NoFeasiblePlanError(
            f"no offer runs {spec.name} with a global batch of {global_batch} sequences of "
            f"{seq_len} tokens on up to {max_gpus} GPUs" + (f" ({nearest[1]})" if nearest else ""),
            fix="raise --max-gpus, "
            + ("use LoRA (--lora-rank) " if space.lora_rank == 0 else "")
            + "or a global batch with more divisors",
        )
    t = np.array([r.time_s for r in rows])
    c = np.array([r.cost_usd for r in rows])
    front = tuple(int(i) for i in sorted(pareto_front_2d(t, c).tolist()))
    ok = [i for i, r in enumerate(rows) if r.meets_deadline and r.within_budget]
    if not ok:
        raise _missed_limits(rows, min_p_meet, deadline_s=deadline_s, budget_usd=budget_usd)

    # the cheapest; where no price is given (all $0), the fewest GPU-hours (idle GPUs count)
    def cheapest(i: int) -> tuple[float, float, float]:
        paid = rows[i].gpus + rows[i].idle_gpus
        return (rows[i].cost_usd, paid * rows[i].time_s, rows[i].time_s)

    def wanted(i: int) -> tuple[float, ...]:
        r = rows[i]
        if objective == "fastest":
            return (r.time_s, *cheapest(i))
        if objective in ("energy", "carbon"):
            value = r.energy_kwh if objective == "energy" else r.co2e_kg
            return (math.inf if value is None else value, *cheapest(i))
        return cheapest(i)

    pick = min(ok, key=wanted) if ok else None
    if pick is not None and objective in ("energy", "carbon") and math.isinf(wanted(pick)[0]):
        # no row has the figure: the pick would be the cheapest, labelled by the objective
        raise no_figure_error(
            sorted({f"{rows[i].provider}/{rows[i].region}" for i in ok
                    if rows[i].energy_kwh is not None and rows[i].co2e_kg is None})
        )  # fmt: skip
    if pick is not None and objective in ("energy", "carbon"):
        # rows within OBJECTIVE_TIE of the least figure are ties the model cannot tell apart
        # (a spot row's start-ups add ~1%): the cheapest of them
        least = wanted(pick)[0]
        tied = [i for i in ok if wanted(i)[0] <= least * (1.0 + OBJECTIVE_TIE)]
        pick = min(tied, key=cheapest)
    held = [i for i, r in enumerate(rows) if r.holds_at_slow_edge]
    safe = min(held, key=cheapest) if held else None
    return LlmPlan(
        candidates=tuple(rows),
        pareto=front,
        recommended=pick,
        infeasible=tuple(infeasible),
        spot_summary=spot_summary,
        objective=objective,
        safe=safe,
        left_out=left_out,
    )


def _missed_limits(
    rows: Sequence[LlmCandidate],
    min_p_meet: float,
    *,
    deadline_s: float | None = None,
    budget_usd: float | None = None,
) -> NoFeasiblePlanError:
    """No row meets the deadline and the budget: ``plan train``'s error, the limit that cut
    the most rows (late, ``P(meet)`` below ``min_p_meet``, over budget) and what to relax,
    naming the fastest row (the cheapest of equally fast ones) or, where the budget cut more,
    the cheapest that meets the deadline. Where some row meets the deadline the budget binds,
    however many rows the deadline cut: ``plan train``'s :func:`binding` says so."""
    from gpucast.plan.infeasible import Limits, binding, deadline_flag, needed_deadline_s
    from gpucast.plan.train import (
        R_BUDGET,
        R_DEADLINE,
        R_RISK,
        binding_error,
        budget_fix,
        deadline_fix,
        no_plan_error,
    )

    on_time = [r for r in rows if r.meets_deadline]  # and over the budget, every one
    counts = {R_DEADLINE: 0, R_RISK: 0, R_BUDGET: len(on_time)}
    for r in rows:
        if not r.meets_deadline:
            counts[r.missed()[0]] += 1
    if on_time:  # the deadline alone does not bind: relaxing it cannot help
        time_s = np.array([r.time_s for r in rows])
        spot = np.array([r.market == "spot" for r in rows])
        need = needed_deadline_s(
            time_s=time_s, train_s=time_s,
            ratio_lower=np.array([r.time_low_s for r in rows]) / time_s,
            ratio_upper=np.array([r.time_high_s for r in rows]) / time_s,
            spot=spot, startup_s=0.0, min_p_meet=min_p_meet,
        )  # fmt: skip
        met = np.array([r.meets_deadline for r in rows])
        # a spot row's need is a lower bound: where revocations made it miss, none is named
        need = np.where(met, np.minimum(need, deadline_s or math.inf), need)
        need = np.where(spot & ~met, math.inf, need)
        limits = Limits.of(
            rows=np.ones(len(rows), dtype=bool),
            time_s=time_s,
            need_s=need,
            cost_usd=np.array([r.cost_usd for r in rows]),
            deadline_s=deadline_s,
            budget_usd=budget_usd,
        )
        binds = binding(limits, deadline_s=deadline_s, budget_usd=budget_usd, min_p_meet=min_p_meet)
        if binds is not None:
            return binding_error(binds, {k: n for k, n in counts.items() if n})

    def named(r: LlmCandidate, then: str) -> str:
        spot = ", spot" if r.market == "spot" else ""
        return (
            f"{r.provider}/{r.region} {r.nodes}x {r.instance_type}, {r.gpus} {r.gpu}{spot}, " + then
        )

    worst = max(counts, key=lambda k: counts[k])  # no_plan_error's worst: the first of equals
    more = "raise --max-gpus (or --nodes on a --cluster)"
    fastest = min(rows, key=lambda r: (r.time_s, r.cost_usd))
    if worst in (R_DEADLINE, R_RISK):
        # the deadline the fastest row meets with P >= min_p_meet, from its interval
        need_s = float(
            needed_deadline_s(
                time_s=np.array([fastest.time_s]), train_s=np.array([fastest.time_s]),
                ratio_lower=np.array([fastest.time_low_s / fastest.time_s]),
                ratio_upper=np.array([fastest.time_high_s / fastest.time_s]),
                spot=np.array([fastest.market == "spot"]), startup_s=0.0, min_p_meet=min_p_meet,
            )[0]
        )  # fmt: skip
        plan = named(fastest, format_usd(fastest.cost_usd))
        fix = (
            deadline_fix(fastest.time_s, plan=plan, more=more)
            if need_s <= fastest.time_s  # its central time is all it needs (--min-p-meet <= 0.5)
            else f"the fastest plan takes {format_duration(fastest.time_s)} ({plan}), P(meet) "
            f"{fastest.p_meet_deadline or 0.0:.0%}: relax --deadline to at least "
            f"{deadline_flag(need_s)} (P(meet) >= {min_p_meet:g} from its interval), lower "
            f"--min-p-meet, or {more}"
        )
    else:
        cheapest = min(on_time, key=lambda r: (r.cost_usd, r.time_s))
        fix = budget_fix(cheapest.cost_usd, plan=named(cheapest, format_duration(cheapest.time_s)))
    return no_plan_error({k: n for k, n in counts.items() if n}, fix=fix)


def _names(gpus: Sequence[str], limit: int = 6) -> str:
    return ", ".join(gpus[:limit]) + (", ..." if len(gpus) > limit else "")


def _left_out_text(rule: str, by_gpu: Mapping[str, int], shapes: Mapping[str, int]) -> str:
    """``rule: 12 GPU types left out (...)``: the GPU types whose every shape (node and GPU
    count) the rule left out, and those it left only some shapes of."""
    whole = sorted(g for g, k in by_gpu.items() if k == shapes[g])
    part = sorted(g for g in by_gpu if g not in whole)
    said = []
    if whole:
        said.append(f"{len(whole)} GPU type{'s' * (len(whole) > 1)} left out ({_names(whole)})")
    if part:
        said.append(
            f"some nodes or GPU counts of {len(part)} "
            + ("more" if whole else f"GPU type{'s' * (len(part) > 1)} left out")
            + f" ({_names(part)})"
        )
    return f"{rule}: {', and '.join(said)}"


#: What ``plan_llm`` can minimise among the rows that meet the deadline and the budget.
LLM_OBJECTIVES: tuple[str, ...] = ("cheapest", "fastest", "energy", "carbon")


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmEnergy:
    """How the LLM planner prices power: the power model at each GPU's default limit
    (:class:`gpucast.plan.energy.PowerSetting`: busy at its draw for the step's compute,
    memory and kernel time, idle while the GPU waits), the facility's PUE and each region's
    grid intensity (gCO2e per kWh, by (provider, region))."""

    power: PowerSetting
    pue: float = 1.0
    grid_gco2e_per_kwh: Mapping[tuple[str, str], float] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        check_pue(self.pue)

    def gpu_power_w(self, found: ParallelStepPrediction) -> tuple[float, float] | None:
        """(average board power over the step, idle draw) of one GPU (W), None without the
        GPU's power facts. Busy: compute, memory-bound (the optimizer's too) and per-kernel
        time at the model's draw; idle: communication, the pipeline bubble, the host."""
        b = found.breakdown
        return self.power.average_w(
            found.gpu,
            compute_s=b.get("compute", 0.0),
            memory_s=b.get("memory_bandwidth", 0.0) + b.get("optimizer", 0.0),
            kernel_s=b.get("kernel_overhead", 0.0),
            wall_s=found.step_time_s,
        )


def _energy_fields(
    energy: LlmEnergy | None,
    found: ParallelStepPrediction,
    option: NodeOption,
    gpus: int,
    nodes: int,
    time_s: float,
    *,
    gpu_s: float | None = None,
    busy_share: float = 1.0,
) -> dict[str, Any]:
    """A row's ``avg_power_w``, ``energy_kwh`` and ``co2e_kg``: its GPUs at the step's average
    power for ``gpu_s`` GPU-seconds (default: ``gpus x time_s``; a spot row's are the Monte
    Carlo's billed ones), the node's idle GPUs at their idle draw, x PUE. ``busy_share``: the
    share of the step's busy time the mean GPU is busy (under a speed spread the others wait
    on the slowest at their idle draw)."""
    if energy is None:
        return {}
    watts = energy.gpu_power_w(found)
    if watts is None or not math.isfinite(time_s):
        return {"avg_power_w": None, "energy_kwh": None, "co2e_kg": None}
    avg, idle = watts
    avg = idle + (avg - idle) * busy_share
    busy_s = gpus * time_s if gpu_s is None else gpu_s
    idle_s = busy_s / gpus * nodes * (option.gpus_per_node - gpus // max(nodes, 1))
    kwh = (avg * busy_s + idle * idle_s) * energy.pue / 3.6e6
    grid = energy.grid_gco2e_per_kwh.get((option.provider, option.region))
    return {
        "avg_power_w": avg,
        "energy_kwh": kwh,
        "co2e_kg": None if grid is None else kwh * grid / 1000.0,
    }


def _straggled(found: ParallelStepPrediction, factor: float) -> ParallelStepPrediction:
    """``found`` run at its slowest GPU's pace: every term of its step ``factor`` times
    longer (the straggler's compute, and its peers' wait on it)."""
    if factor == 1.0:
        return found
    step = found.step_time
    return dataclasses.replace(
        found,
        step_time=dataclasses.replace(
            step,
            value=step.value * factor,
            lower=step.lower * factor,
            upper=step.upper * factor,
            breakdown={k: v * factor for k, v in step.breakdown.items()},
        ),
    )


def _shape_fields(
    option: NodeOption, found: ParallelStepPrediction, nodes: int, used: int
) -> dict[str, Any]:
    """The fields of a row that its offer, node count and layout set, whatever the market."""
    return {
        "provider": option.provider,
        "region": option.region,
        "instance_type": option.instance_type,
        "gpu": option.gpu,
        "nodes": nodes,
        "gpus": nodes * used,
        "layout": found.layout.label(),
        "network": "rdma" if option.rdma else "tcp",
        "step_time_s": found.step_time_s,
        "tokens_per_s": found.tokens_per_s,
        "mfu": found.mfu,
        "memory_gib": found.memory.total_bytes / 2**30,
        "bottleneck": found.bottleneck,
        "price_estimated": option.price_estimated,
        "idle_gpus": nodes * (option.gpus_per_node - used),
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class _SpotShape:
    """A spot option at a node count, with its best layout and its time without revocations."""

    option: NodeOption
    used: int
    nodes: int
    found: ParallelStepPrediction
    train_s: float
    band: tuple[float, float]
    #: the mean GPU's share of the (paced) step's busy time: E[f] / E[max] under a speed spread
    busy_share: float = 1.0


def _spot_rows(
    shapes: Sequence[_SpotShape],
    spot: LlmSpot,
    *,
    steps: int,
    warmup_s: float,
    deadline_s: float | None,
    budget_usd: float | None,
    twins: Mapping[tuple[str, str, int, int], float],
    energy: LlmEnergy | None = None,
) -> tuple[list[LlmCandidate], str]:
    """The spot rows and what became of the shapes: the first-order estimate of every shape
    (:func:`gpucast.plan.risk.approx_spot_time_s`), the Monte Carlo of the front of those that
    may matter -- not stalled (a revocation's start-up, gap and restart longer than the mean
    time between revocations: such runs rarely finish and take the Monte Carlo longest),
    not beyond twice the deadline, and not dearer than 1.25 x the same shape on demand
    (``twins``: cost by provider, instance type, nodes and GPUs), which is faster too."""
    risk = spot.risk
    # per market (gpu, region, provider): its lifetime, one node's hazard over a job's run
    # (young nodes go first where the shape is below 1), the mean gap
    markets: dict[tuple[str, str, str], tuple[LifetimeDistribution, WindowHazards, float]] = {}
    for sh in shapes:
        key3 = (sh.option.gpu, sh.option.region, sh.option.provider)
        if key3 not in markets:
            life = risk.lifetime(*key3)
            gap = risk.gap(*key3)
            mean_gap = float(np.mean(gap(np.random.default_rng(0), 200))) if callable(gap) else gap
            markets[key3] = (life, WindowHazards.of(life), mean_gap)
    ckpt = np.array([spot.checkpoint_s(sh.found, sh.used) for sh in shapes])
    restart = np.array([spot.restart_penalty_s(sh.found, sh.used, warmup_s) for sh in shapes])
    key = [(sh.option.gpu, sh.option.region, sh.option.provider) for sh in shapes]
    hazard = np.array([
        sh.nodes * float(markets[k][1](sh.train_s)) for sh, k in zip(shapes, key, strict=True)
    ])  # fmt: skip
    waits = restart + np.array([markets[k][2] for k in key])  # a restart and its capacity gap
    stalled = hazard * (waits + risk.startup_mean_s) >= 1.0
    approx_t = np.array([
        approx_spot_time_s(np.array([sh.train_s]), hazard[k : k + 1], checkpoint_s=float(ckpt[k]),
                           restart_s=float(waits[k]), startup_s=risk.startup_mean_s)[0]
        for k, sh in enumerate(shapes)
    ])  # fmt: skip
    nodes_usd = np.array([sh.nodes * float(sh.option.spot_usd_per_hour or 0.0) for sh in shapes])
    costs = approx_t / 3600.0 * nodes_usd
    late = ~stalled & (
        np.zeros(len(shapes), bool) if deadline_s is None else approx_t > 2.0 * deadline_s
    )
    twin = np.array([
        twins.get((sh.option.provider, sh.option.instance_type, sh.nodes, sh.nodes * sh.used),
                  math.inf)
        for sh in shapes
    ])  # fmt: skip
    dear = ~stalled & ~late & (costs > 1.25 * twin)
    within = np.flatnonzero(~stalled & ~late & ~dear)
    front = within[pareto_front_2d(approx_t[within], costs[within])]
    chosen = spread(front, spot.max_simulated).tolist()
    candidates = []
    for k in chosen:
        sh = shapes[k]
        o = sh.option
        job = SpotJob(
            key=f"{o.provider}/{o.region}/{o.instance_type}/{sh.nodes}x{sh.used}",
            region=o.region,
            parts=(
                SpotPart(
                    instance_type=o.instance_type, nodes=sh.nodes, gpus_per_node=sh.used,
                    spot_usd_per_hour=float(o.spot_usd_per_hour or 0.0),
                    on_demand_usd_per_hour=o.usd_per_hour,
                    lifetime=markets[key[k]][0],
                ),
            ),
            synchronous=True, steps=steps,
            # the run's one-off warm-up spread over its steps (a restart pays it again)
            speed=np.array([0.0, steps / sh.train_s]),
            ps_shards=0, cpu_usd_per_hour=0.0, deadline_s=deadline_s,
            expected_time_s=sh.train_s, speed_factors=strata(*sh.band),
            checkpoint_s=float(ckpt[k]),
            restart_penalty_s=float(restart[k]),
        )  # fmt: skip
        delays = SpotDelays(
            startup_spot_s=risk.startup_delay(o.gpu, "spot", o.region),
            startup_on_demand_s=risk.startup_delay(o.gpu, "on-demand", o.region),
            capacity_gap_s=risk.gap(o.gpu, o.region, o.provider),
            fallback_after_s=risk.fallback_after_s,
            move=spot_move(risk, job.parts[0], o.gpu, o.region, o.provider),
        )
        candidates.append((job, delays))
    # one batch: the candidates' runs side by side, each with its own checkpoint and restart
    outcomes = simulate_spots(
        candidates, runs=spot.runs, seed=spot.seed, checkpoint_s=0.0, restart_penalty_s=0.0
    )
    rows = []
    never = 0
    for k, (job, _), out in zip(chosen, candidates, outcomes, strict=True):
        sh = shapes[k]
        o = sh.option
        if not math.isfinite(out.time_mean_s):
            never += 1
            continue
        source = str(getattr(markets[key[k]][0], "source", ""))
        rows.append(
            _spot_row(
                sh,
                out,
                job.checkpoint_s or 0.0,
                deadline_s,
                budget_usd,
                spot.min_p_meet,
                source,
                energy,
            )
        )
    summary = (
        f"{len(shapes)} spot shapes estimated: left out {int(stalled.sum())} stalled by "
        "revocations (a revocation's start-up, gap and restart outlast the time between them), "
        f"{int(late.sum())} beyond twice the deadline, {int(dear.sum())} dearer than 1.25 x the "
        f"same shape on demand; {len(chosen)} of the rest's front simulated"
        + (
            f", {never} of them never finishing (revocations come faster than checkpoints "
            "and restarts)"
            if never
            else ""
        )
    )
    return rows, summary


def _spot_row(
    sh: _SpotShape,
    out: SpotOutcome,
    checkpoint_s: float,
    deadline_s: float | None,
    budget_usd: float | None,
    min_p_meet: float,
    lifetime_source: str,
    energy: LlmEnergy | None = None,
) -> LlmCandidate:
    o, found = sh.option, sh.found
    # the GPU-hours the Monte Carlo billed: replacements' start-ups and lost work included
    gpu_s = None if out.gpu_hours_mean is None else out.gpu_hours_mean * 3600.0
    low = min(sh.band[0], 1.0)
    meets = deadline_s is None or (out.p_meet_deadline or 0.0) >= min_p_meet
    return LlmCandidate(
        **_shape_fields(o, found, sh.nodes, sh.used),
        time_s=out.time_mean_s,
        time_low_s=min(sh.train_s * low, out.time_mean_s),
        time_high_s=max(out.time_p90_s, out.time_mean_s),
        cost_usd=out.cost_mean_usd,
        usd_per_hour=sh.nodes * float(o.spot_usd_per_hour or 0.0),
        meets_deadline=meets,
        within_budget=budget_usd is None or out.cost_mean_usd <= budget_usd,
        holds_at_slow_edge=(deadline_s is None or out.time_p90_s <= deadline_s)
        and (budget_usd is None or out.cost_p90_usd <= budget_usd),
        market="spot",
        **_energy_fields(
            energy,
            found,
            o,
            sh.nodes * sh.used,
            sh.nodes,
            out.time_mean_s,
            gpu_s=gpu_s,
            busy_share=sh.busy_share,
        ),
        p_meet_deadline=out.p_meet_deadline,
        time_p90_s=out.time_p90_s,
        revocations_mean=out.revocations_mean,
        checkpoint_s=checkpoint_s,
        checkpoint_every_steps=out.checkpoint_every_steps,
        moved_to=out.moved_to,
        moves_mean=out.moves_mean,
        lifetime_source=lifetime_source,
    )
