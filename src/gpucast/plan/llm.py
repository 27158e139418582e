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
the pick the cheapest row that meets both. Each row carries the 80% interval of its time
(the ``band`` the caller gives: ratios of measured / predicted that held-out runs earned) and
whether the deadline and the budget still hold at its slow edge; ``safe`` is the cheapest row
where they do.

On-demand only: a multi-week LLM job on spot capacity is not modelled here.
Pure: numbers in, numbers out.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from gpucast.domain.catalog import GpuSpec, Offer
from gpucast.domain.errors import InvalidSpecError, NoFeasiblePlanError
from gpucast.domain.llm import TransformerSpec
from gpucast.domain.parallel import (
    LayoutSpace,
    NodeLinks,
    ParallelAssumptions,
    ParallelStepPrediction,
)
from gpucast.plan.pareto import pareto_front_2d
from gpucast.predict.collective import CollectiveConstants
from gpucast.predict.parallel import best_layout, cluster_shape, group_link_gbps
from gpucast.predict.roofline import RooflineEfficiency


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

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


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
    pairs cross PCIe); ``max_nodes`` bounds the count (None: ``max_gpus`` alone)."""

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
    #: GPUs of the meshed board the node's GPUs sit on (``intra_node: mesh``: joined pairwise,
    #: so fewer of them reach fewer links); 0: a switch, bridges or PCIe
    mesh_gpus: int = 0


def offer_nodes(offers: Iterable[Offer], rdma_instances: frozenset[str]) -> list[NodeOption]:
    """The :class:`NodeOption` of each offer of :func:`cheapest_offers`."""
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
        )
        for o in cheapest_offers(offers)
    ]


def cheapest_offers(offers: Iterable[Offer]) -> list[Offer]:
    """One offer per (provider, instance type): its cheapest on-demand region."""
    best: dict[tuple[str, str], Offer] = {}
    for o in offers:
        if o.gpu is None or o.gpus < 1:
            continue
        key = (o.provider, o.instance_type)
        if key not in best or o.on_demand_usd_per_hour < best[key].on_demand_usd_per_hour:
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
    """Whether ``gpu`` can train at ``precision``: fp8 needs fp8 tensor cores (Hopper, Ada,
    Blackwell, CDNA3); every other precision is any GPU's."""
    return precision != "fp8" or gpu.has_units("fp8")


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
) -> LlmPlan:
    """Every offer x node count (module docstring); ``band``: the (lower, upper) ratios of
    measured / predicted time that each row's 80% interval spans (never narrower than the
    point: an interval holds its prediction), replaced by ``gpu_bands``' for the GPU types
    it names; ``assumptions``: the 3D model's priors
    (:class:`~gpucast.domain.parallel.ParallelAssumptions`, its defaults when None)."""
    if not (math.isfinite(tokens) and tokens > 0):
        raise InvalidSpecError("tokens", "must be a finite number > 0", got=tokens)
    bands = dict(gpu_bands or {})
    for given in (band, *bands.values()):
        if not 0.0 < given[0] <= given[1] < math.inf:
            raise InvalidSpecError("band", "must satisfy 0 < lower <= upper", got=given)
    steps = math.ceil(tokens / (global_batch * seq_len))
    bf16_space = dataclasses.replace(space, precision="bf16")
    rows: list[LlmCandidate] = []
    infeasible: list[str] = []
    cache: dict[tuple[str, int, float, float, str, bool, int], ParallelStepPrediction | str]
    cache = {}
    for option in nodes_to_plan:
        gpu = gpus[option.gpu]
        # fp8 where the GPU has fp8 tensor cores; the others train in bf16 (the row says which)
        gpu_space = space if fp8_capable(gpu, space.precision) else bf16_space
        network = option.network_gbps * (1.0 if option.rdma else tcp.network_efficiency)
        links = cluster_shape(
            gpu, gpus_per_node=option.gpus_per_node, node_network_gbps=network,
            collective="hierarchical" if option.rdma else tcp.algorithm,
            mesh=option.mesh_gpus > 1,
        )  # fmt: skip
        if option.intra_node_gbps is not None:
            links = dataclasses.replace(links, intra_node_gbps=option.intra_node_gbps)
        elif option.gpus_per_node < option.mesh_gpus:  # part of a board: its GPUs' links only
            links = dataclasses.replace(
                links,
                intra_node_gbps=group_link_gbps(
                    gpu, option.gpus_per_node, NodeLinks(mesh_gpus=option.mesh_gpus)
                ),
            )
        for used, nodes in _node_counts(option, max_gpus):
            n = nodes * used
            # the used GPUs keep their own share of the node's NICs (and, in a mesh, links)
            shape = links.subset(used)
            key = (
                gpu.name,
                used,
                shape.node_network_gbps,
                shape.intra_node_gbps,
                shape.collective,
                shape.mesh,
                n,
            )
            if key not in cache:
                try:
                    cache[key] = best_layout(
                        spec, gpu, n, global_batch, seq_len=seq_len, cluster=shape,
                        space=gpu_space, efficiency=efficiency, assumptions=assumptions,
                    )  # fmt: skip
                except (NoFeasiblePlanError, InvalidSpecError) as exc:
                    cache[key] = str(exc)
            found = cache[key]
            if isinstance(found, str):
                if len(infeasible) < 3 and found not in infeasible:
                    infeasible.append(found)
                continue
            time_s = efficiency.warmup_s + steps * found.step_time_s
            usd_h = nodes * option.usd_per_hour
            cost = usd_h * time_s / 3600.0
            low, high = bands.get(gpu.name, band)
            slow = max(high, 1.0)
            rows.append(
                LlmCandidate(
                    provider=option.provider,
                    region=option.region,
                    instance_type=option.instance_type,
                    gpu=gpu.name,
                    nodes=nodes,
                    gpus=n,
                    layout=found.layout.label(),
                    network="rdma" if option.rdma else "tcp",
                    step_time_s=found.step_time_s,
                    tokens_per_s=found.tokens_per_s,
                    mfu=found.mfu,
                    memory_gib=found.memory.total_bytes / 2**30,
                    bottleneck=found.bottleneck,
                    time_s=time_s,
                    time_low_s=time_s * min(low, 1.0),
                    time_high_s=time_s * slow,
                    cost_usd=cost,
                    usd_per_hour=usd_h,
                    meets_deadline=deadline_s is None or time_s <= deadline_s,
                    within_budget=budget_usd is None or cost <= budget_usd,
                    holds_at_slow_edge=(deadline_s is None or time_s * slow <= deadline_s)
                    and (budget_usd is None or cost * slow <= budget_usd),
                    price_estimated=option.price_estimated,
                    idle_gpus=nodes * (option.gpus_per_node - used),
                )
            )
    if not rows:
        raise NoFeasiblePlanError(
            f"no offer runs {spec.name} with a global batch of {global_batch} sequences of "
            f"{seq_len} tokens on up to {max_gpus} GPUs"
            + (f" ({infeasible[0]})" if infeasible else ""),
            fix="raise --max-gpus, use LoRA (--lora-rank) or a global batch with more divisors",
        )
    t = np.array([r.time_s for r in rows])
    c = np.array([r.cost_usd for r in rows])
    front = tuple(int(i) for i in sorted(pareto_front_2d(t, c).tolist()))
    ok = [i for i, r in enumerate(rows) if r.meets_deadline and r.within_budget]

    # the cheapest; where no price is given (all $0), the fewest GPU-hours (idle GPUs count)
    def cheapest(i: int) -> tuple[float, float, float]:
        paid = rows[i].gpus + rows[i].idle_gpus
        return (rows[i].cost_usd, paid * rows[i].time_s, rows[i].time_s)

    pick = min(ok, key=cheapest) if ok else None
    held = [i for i, r in enumerate(rows) if r.holds_at_slow_edge]
    safe = min(held, key=cheapest) if held else None
    return LlmPlan(
        candidates=tuple(rows),
        pareto=front,
        recommended=pick,
        infeasible=tuple(infeasible),
        safe=safe,
    )
