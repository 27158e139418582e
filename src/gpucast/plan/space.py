"""The search space as arrays: one row per candidate configuration.

A row is (offer, nodes, market, strategy, PS shards, per-worker batch). Offers come from the
catalog after the user's filters (provider, region, GPU); every whole number of instances up
to ``--max-gpus`` GPUs is a candidate, on demand and on spot, with DDP, FSDP (two or more
GPUs) and an asynchronous parameter server with 1..k CPU shards.

Mixed-GPU rows (``--allow-mixed``) add a second part, ``offer2`` x ``nodes2`` (``-1`` / ``0``
on ordinary rows). The search stays bounded: pairs of GPU types within one provider and
region, each on its smallest instance (fewest GPUs per node, then cheapest per GPU), node
counts per part on the grid :data:`MIXED_NODES`, both parts in the same market, and the
strategies DDP and ``ps-sync`` (both with proportional batches, :mod:`gpucast.plan.hetero`)
and asynchronous PS. For these rows ``batch`` is the *mean* per-worker batch of the
synchronous strategies (the global batch is ``workers x batch``) and every worker's batch of
the asynchronous PS. Pure: numbers in, numbers out.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpucast.domain.catalog import PCIE_X16_GBIT_PER_S, GpuSpec, Offer
from gpucast.domain.limits import check_work
from gpucast.domain.plan import STRATEGIES, TrainRequest
from gpucast.domain.systems import ClusterSpec
from gpucast.domain.units import GIB

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

DDP, FSDP, PS = (STRATEGIES.index(s) for s in ("ddp", "fsdp", "ps"))
#: Synchronous PS with proportional batches: planned for mixed-GPU clusters only (the PS
#: model was fitted on asynchronous runs, which is what homogeneous PS plans use).
PS_SYNC = len(STRATEGIES)
#: Label of each strategy code (``STRATEGIES`` plus the mixed-only ``ps-sync``).
STRATEGY_LABELS: tuple[str, ...] = (*STRATEGIES, "ps-sync")
#: Node counts per part tried for mixed clusters.
MIXED_NODES: tuple[int, ...] = (1, 2, 4, 8)


@dataclass(frozen=True, slots=True, kw_only=True)
class OfferTable:
    """GPU offers as columns, with the cheapest CPU server of the same provider and region
    (the parameter-server shard; ``nan`` price where there is none).

    ``intra_node_gbps`` (Gbit/s per GPU of the all-reduce inside one instance, ``nan`` = the
    GPU's datasheet link) is set for a user's cluster and, where the app gives the figures
    (:attr:`gpucast.plan.train.PlanContext.node_link_gbps`), for catalog offers; ``nvlink``
    (whether that link is NVLink/NVSwitch rather than PCIe) and ``max_nodes`` (most instances
    of the offer) are set for a user's cluster; ``None`` for catalog offers.
    """

    provider: tuple[str, ...]
    region: tuple[str, ...]
    instance_type: tuple[str, ...]
    gpu_name: tuple[str, ...]
    gpu: IntArray  # index into the GpuTable
    gpus_per_node: IntArray
    network_gbps: FloatArray
    on_demand_usd_per_hour: FloatArray
    spot_usd_per_hour: FloatArray  # nan: no spot market
    cpu_instance: tuple[str, ...]
    cpu_usd_per_hour: FloatArray  # nan: no CPU server in this region
    cpu_network_gbps: FloatArray
    intra_node_gbps: FloatArray | None = None
    nvlink: BoolArray | None = None
    max_nodes: IntArray | None = None
    #: host memory per GPU, bytes (instance memory / GPUs per instance; None: unknown)
    host_bytes_per_gpu: FloatArray | None = None
    #: the offer's (and its PS server's) prices are estimates, not read from a source
    #: (:attr:`gpucast.domain.catalog.Offer.price_estimated`; None: all read)
    price_estimated: BoolArray | None = None
    cpu_price_estimated: BoolArray | None = None

    def __len__(self) -> int:
        return len(self.instance_type)

    def intra_link_gbps(self, offer: IntArray, gpu_link_gbps: FloatArray) -> FloatArray:
        """Intra-node Gbit/s per GPU of ``offer`` rows: the offer's own figure where it has
        one (a user's cluster), else the GPU's (``gpu_link_gbps``, the same rows)."""
        if self.intra_node_gbps is None:
            return gpu_link_gbps
        own = self.intra_node_gbps[offer]
        return np.asarray(np.where(np.isnan(own), gpu_link_gbps, own), dtype=np.float64)

    def nvlink_rows(self, offer: IntArray, gpu_nvlink: BoolArray) -> BoolArray:
        """Whether the intra-node link of ``offer`` rows is NVLink: the offer's own kind where
        it states one (a user's cluster), else the GPU's (``gpu_nvlink``, the same rows)."""
        if self.nvlink is None:
            return gpu_nvlink
        return np.asarray(self.nvlink[offer], dtype=np.bool_)

    @staticmethod
    def build(
        gpu_offers: list[Offer],
        cpu_offers: list[Offer],
        gpu_index: dict[str, int],
        node_link_gbps: Mapping[tuple[str, int], float] | None = None,
    ) -> OfferTable:
        """The catalog's GPU offers as columns; ``node_link_gbps`` (Gbit/s per GPU of the
        all-reduce inside a node, by GPU type and GPUs per instance) sets
        :attr:`intra_node_gbps` (``nan`` where it gives none: the datasheet link)."""
        cheapest_cpu: dict[tuple[str, str], Offer] = {}
        for o in cpu_offers:
            if o.vcpus < 4:  # a PS shard needs a few cores (CM-DARE used 4 vCPUs)
                continue
            key = (o.provider, o.region)
            best = cheapest_cpu.get(key)
            if best is None or o.on_demand_usd_per_hour < best.on_demand_usd_per_hour:
                cheapest_cpu[key] = o
        cpu = [cheapest_cpu.get((o.provider, o.region)) for o in gpu_offers]
        nan = float("nan")
        return OfferTable(
            provider=tuple(o.provider for o in gpu_offers),
            region=tuple(o.region for o in gpu_offers),
            instance_type=tuple(o.instance_type for o in gpu_offers),
            gpu_name=tuple(str(o.gpu) for o in gpu_offers),
            gpu=np.array([gpu_index[str(o.gpu)] for o in gpu_offers], dtype=np.int64),
            gpus_per_node=np.array([o.gpus for o in gpu_offers], dtype=np.int64),
            network_gbps=np.array([o.network_gbps for o in gpu_offers], dtype=np.float64),
            on_demand_usd_per_hour=np.array(
                [o.on_demand_usd_per_hour for o in gpu_offers], dtype=np.float64
            ),
            spot_usd_per_hour=np.array(
                [nan if o.spot_usd_per_hour is None else o.spot_usd_per_hour for o in gpu_offers],
                dtype=np.float64,
            ),
            cpu_instance=tuple("" if c is None else c.instance_type for c in cpu),
            cpu_usd_per_hour=np.array(
                [nan if c is None else c.on_demand_usd_per_hour for c in cpu], dtype=np.float64
            ),
            cpu_network_gbps=np.array(
                [nan if c is None else c.network_gbps for c in cpu], dtype=np.float64
            ),
            host_bytes_per_gpu=np.array(
                [o.memory_gib * GIB / max(o.gpus, 1) for o in gpu_offers], dtype=np.float64
            ),
            intra_node_gbps=None
            if not node_link_gbps
            else np.array(
                [node_link_gbps.get((str(o.gpu), o.gpus), nan) for o in gpu_offers],
                dtype=np.float64,
            ),
            price_estimated=np.array([o.price_estimated for o in gpu_offers], dtype=np.bool_),
            cpu_price_estimated=np.array(
                [c is not None and c.price_estimated for c in cpu], dtype=np.bool_
            ),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Space:
    """Candidate rows. ``batch`` is the per-worker batch; 0 means "global batch / workers"."""

    offers: OfferTable
    offer: IntArray
    nodes: IntArray
    spot: BoolArray
    strategy: IntArray
    shards: IntArray
    batch: IntArray
    global_batch: int | None = None
    offer2: IntArray | None = None  # second part's offer, -1 on single-type rows
    nodes2: IntArray | None = None  # second part's instances, 0 on single-type rows

    def __post_init__(self) -> None:
        if self.offer2 is None:
            object.__setattr__(self, "offer2", np.full(self.offer.size, -1, dtype=np.int64))
        if self.nodes2 is None:
            object.__setattr__(self, "nodes2", np.zeros(self.offer.size, dtype=np.int64))

    def __len__(self) -> int:
        return int(self.offer.size)

    @property
    def part2(self) -> IntArray:
        """``offer2`` as a non-optional array."""
        assert self.offer2 is not None
        return self.offer2

    @property
    def count2(self) -> IntArray:
        """``nodes2`` as a non-optional array."""
        assert self.nodes2 is not None
        return self.nodes2

    @property
    def mixed(self) -> BoolArray:
        return np.asarray(self.part2 >= 0)

    @property
    def workers(self) -> IntArray:
        gpn = self.offers.gpus_per_node
        second = np.where(self.mixed, self.count2 * gpn[np.maximum(self.part2, 0)], 0)
        return np.asarray(self.nodes * gpn[self.offer] + second, dtype=np.int64)

    def take(self, index: IntArray | BoolArray | slice) -> Space:
        return Space(
            offers=self.offers,
            offer=self.offer[index],
            nodes=self.nodes[index],
            spot=self.spot[index],
            strategy=self.strategy[index],
            shards=self.shards[index],
            batch=self.batch[index],
            global_batch=self.global_batch,
            offer2=self.part2[index],
            nodes2=self.count2[index],
        )

    def replace(self, **arrays: npt.NDArray[np.generic]) -> Space:
        """A copy with some columns replaced (for what-if variants of a few rows)."""
        cols = {
            "offer": self.offer,
            "nodes": self.nodes,
            "spot": self.spot,
            "strategy": self.strategy,
            "shards": self.shards,
            "batch": self.batch,
            "offer2": self.part2,
            "nodes2": self.count2,
        }
        cols.update(arrays)
        return Space(offers=self.offers, global_batch=self.global_batch, **cols)  # type: ignore[arg-type]


#: Estimated bytes a row of the space costs the planner: it evaluates the space a chunk at a
#: time and keeps only the rows a plan can show or simulate (:func:`gpucast.plan.train.search`),
#: so the rows bound the time (~1.2 M rows/s, 2026-12-06) more than the memory.
BYTES_PER_ROW = 16


def space_size(request: TrainRequest, offers: OfferTable) -> int:
    """How many rows :func:`build_space` makes, counted without building them."""
    kmax = _most_nodes(request, offers)
    n_strategies = len(set(request.strategies))
    variants = (
        n_strategies
        - ("ps" in request.strategies)
        + (request.max_ps_shards if "ps" in request.strategies else 0)
    )
    if request.batch_size is not None or request.global_batch is not None:
        batches = 1
    else:
        batches = len(set(request.searched_batch_sizes))
    markets = 2 if request.allow_spot else 1
    rows = int(np.sum(kmax, dtype=np.float64)) * markets * variants * batches
    if request.allow_mixed:
        mixed_variants = ("ddp" in request.strategies) + 2 * request.max_ps_shards * (
            "ps" in request.strategies
        )
        rows += len(_mixed_pairs(request, offers)) * markets * mixed_variants * batches
    return rows


def check_space_size(request: TrainRequest, offers: OfferTable) -> None:
    """Refuse a search space too large to hold (e.g. a typo in ``--max-gpus``) before it is
    built (:func:`gpucast.domain.limits.check_work`)."""
    check_work(
        "max-gpus",
        space_size(request, offers),
        what=f"candidate configurations (--max-gpus {request.max_gpus:,}, "
        f"--max-ps-shards {request.max_ps_shards:,})",
        bytes_per_item=BYTES_PER_ROW,
        allow_large=request.allow_large,
        fix="lower --max-gpus or --max-ps-shards, or narrow --provider/--region/--gpu",
    )


def build_space(request: TrainRequest, offers: OfferTable) -> tuple[Space, dict[str, int]]:
    """Every (offer, nodes, market, strategy, shards, batch) row; plus rows never generated
    because an instance alone has more GPUs than ``max_gpus`` (reason -> count)."""
    chunks, dropped = space_chunks(request, offers)
    return concat(*chunks), dropped


#: Rows a chunk of :func:`space_chunks` holds at most (one base row's block is never split).
CHUNK_ROWS = 1 << 16


def _variants(request: TrainRequest) -> list[tuple[int, int]]:
    variants: list[tuple[int, int]] = []
    for name in request.strategies:
        code = STRATEGIES.index(name)
        if code == PS:
            variants += [(PS, h) for h in range(1, request.max_ps_shards + 1)]
        else:
            variants.append((code, 0))
    return variants


def _batches(request: TrainRequest) -> list[int]:
    if request.batch_size is not None:
        return [request.batch_size]
    if request.global_batch is not None:
        return [0]
    return sorted(set(request.searched_batch_sizes))


def space_chunks(
    request: TrainRequest,
    offers: OfferTable,
    *,
    rows: int = CHUNK_ROWS,
    part: tuple[int, int] | None = None,
    mixed_only: bool = False,
) -> tuple[Iterator[Space], dict[str, int]]:
    """The rows of :func:`build_space`, in the same order, as chunks of about ``rows`` rows
    (the planner evaluates a chunk at a time, so memory does not grow with the space).

    Each base configuration (offer x nodes, or a mixed pair) keeps its whole block in one
    chunk: on demand first, then spot, the same (strategy, shards, batch) sequence in both
    (see :func:`market_twins`). Also returns the rows never generated (reason -> count).
    ``part=(k, n)``: the ``k``-th of ``n`` runs of the single-type chunks, in order, and no
    mixed rows (what one worker process evaluates; :func:`single_chunk_count`);
    ``mixed_only``: the mixed rows' chunks alone.
    """
    check_space_size(request, offers)
    dropped: dict[str, int] = {}
    kmax = _most_nodes(request, offers)
    too_big = int(np.sum(kmax == 0))
    variants = _variants(request)
    batches = _batches(request)
    markets = [False, True] if request.allow_spot else [False]
    per_offer = len(markets) * len(variants) * len(batches)
    if too_big:
        dropped["instance has more GPUs than --max-gpus"] = too_big * per_offer
    offer_idx = np.repeat(np.arange(len(offers), dtype=np.int64), kmax)
    starts = np.repeat(np.cumsum(kmax) - kmax, kmax)
    nodes = np.arange(offer_idx.size, dtype=np.int64) - starts + 1
    step = max(1, rows // max(per_offer, 1))
    starts_at = range(0, offer_idx.size, step)
    if part is not None:
        k, n = part
        starts_at = starts_at[k * len(starts_at) // n : (k + 1) * len(starts_at) // n]
    elif mixed_only:
        starts_at = range(0)

    def generate() -> Iterator[Space]:
        yielded = part is not None or mixed_only  # a part or the mixed rows may be empty
        for lo in starts_at:
            yielded = True
            yield _single_rows(
                request, offers, offer_idx[lo : lo + step], nodes[lo : lo + step],
                variants, batches, markets,
            )  # fmt: skip
        if request.allow_mixed and part is None:
            mixed = build_mixed(request, offers, batches, markets)
            if mixed is not None:
                yielded = True
                yield from _split_rows(mixed, rows)
        if not yielded:  # an empty space still has a (empty) chunk
            yield _single_rows(request, offers, offer_idx, nodes, variants, batches, markets)

    return generate(), dropped


def single_chunk_count(request: TrainRequest, offers: OfferTable, *, rows: int = CHUNK_ROWS) -> int:
    """How many single-type chunks :func:`space_chunks` yields (the runs ``part`` divides)."""
    per_offer = (2 if request.allow_spot else 1) * len(_variants(request)) * len(_batches(request))
    step = max(1, rows // max(per_offer, 1))
    return len(range(0, int(np.sum(_most_nodes(request, offers))), step))


def _most_nodes(request: TrainRequest, offers: OfferTable) -> IntArray:
    """Per offer, the most instances ``--max-gpus`` (and the offer's own cap) allows."""
    kmax = request.max_gpus // offers.gpus_per_node
    if offers.max_nodes is not None:
        kmax = np.minimum(kmax, offers.max_nodes)
    return np.asarray(kmax, dtype=np.int64)


def ps_prototypes(request: TrainRequest, offers: OfferTable) -> Space | None:
    """One on-demand row per offer an instance of which fits ``--max-gpus``, per PS shard
    count and batch, on one instance; None without PS rows or with a global batch (whose
    per-worker batch moves with the count). A PS row's network (think time, push, pull) does
    not move with its node count, so evaluating these first solves at once every network the
    search meets (:class:`gpucast.plan.evaluate.EvalMemo`) instead of a few per chunk."""
    variants = [v for v in _variants(request) if v[0] == PS]
    batches = _batches(request)
    kmax = _most_nodes(request, offers)
    idx = np.flatnonzero(kmax >= 1)
    if not variants or 0 in batches or not idx.size:
        return None
    ones = np.ones(idx.size, dtype=np.int64)
    return _single_rows(request, offers, idx, ones, variants, batches, [False])


def _split_rows(space: Space, rows: int) -> Iterator[Space]:
    """``space`` in slices of about ``rows`` rows that never split a block (the rows of one
    base configuration)."""
    n = len(space)
    if n <= rows:
        yield space
        return
    key = np.stack([space.offer, space.nodes, space.part2, space.count2], axis=1)
    bounds = np.r_[np.flatnonzero(np.r_[True, np.any(key[1:] != key[:-1], axis=1)]), n]
    lo = 0
    while lo < n:
        hi = int(bounds[np.searchsorted(bounds, lo + rows, side="right") - 1])
        if hi <= lo:  # one block longer than `rows`: it goes whole
            hi = int(bounds[np.searchsorted(bounds, lo, side="right")])
        yield space.take(slice(lo, hi))
        lo = hi


def _single_rows(
    request: TrainRequest,
    offers: OfferTable,
    offer_idx: IntArray,
    nodes: IntArray,
    variants: list[tuple[int, int]],
    batches: list[int],
    markets: list[bool],
) -> Space:
    """The rows of these base configurations (offer x nodes): markets x variants x batches
    each, batches fastest; FSDP on one GPU dropped (it is plain training)."""
    gpn = offers.gpus_per_node
    n_base = offer_idx.size
    v_strat = np.array([v[0] for v in variants], dtype=np.int64)
    v_shards = np.array([v[1] for v in variants], dtype=np.int64)
    reps = len(markets) * len(variants) * len(batches)
    offer_col = np.repeat(offer_idx, reps)
    nodes_col = np.repeat(nodes, reps)
    inner = len(variants) * len(batches)
    spot_col = np.tile(np.repeat(np.array(markets, dtype=bool), inner), n_base)
    strat_col = np.tile(np.repeat(v_strat, len(batches)), n_base * len(markets))
    shards_col = np.tile(np.repeat(v_shards, len(batches)), n_base * len(markets))
    batch_col = np.tile(np.array(batches, dtype=np.int64), n_base * len(markets) * len(variants))
    workers = nodes_col * gpn[offer_col]
    keep = ~((strat_col == FSDP) & (workers < 2))  # FSDP on one GPU is plain training
    return Space(
        offers=offers,
        offer=offer_col[keep],
        nodes=nodes_col[keep],
        spot=spot_col[keep],
        strategy=strat_col[keep],
        shards=shards_col[keep],
        batch=batch_col[keep],
        global_batch=request.global_batch,
    )


def market_twins(space: Space) -> IntArray:
    """For each row, the row of the same configuration in the other market (-1: none).

    Relies on the layout of :func:`space_chunks`: a base configuration's rows are contiguous,
    its on-demand rows first, then its spot rows in the same order.
    """
    n = len(space)
    twin = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return twin
    key = np.stack([space.offer, space.nodes, space.part2, space.count2], axis=1)
    new_block = np.r_[True, np.any(key[1:] != key[:-1], axis=1)]
    block = np.cumsum(new_block) - 1
    od_count = np.bincount(block, weights=~space.spot, minlength=int(block[-1]) + 1)
    all_count = np.bincount(block, minlength=int(block[-1]) + 1)
    half = od_count[block].astype(np.int64)
    both = 2 * od_count[block] == all_count[block]
    idx = np.arange(n, dtype=np.int64)
    twin = np.where(both & ~space.spot, idx + half, twin)
    twin = np.where(both & space.spot, idx - half, twin)
    return twin


def twin_source(space: Space, twin: IntArray) -> IntArray:
    """The row each row's market-independent numbers come from: a single-type spot row's
    on-demand twin (``twin``: :func:`market_twins`) where it has one, else the row itself."""
    rows = np.arange(len(space), dtype=np.int64)
    return np.asarray(np.where(space.spot & (twin >= 0) & ~space.mixed, twin, rows))


def concat(first: Space, *rest: Space) -> Space:
    """The rows of every part, in order (same offers), each column joined once."""
    if not rest:
        return first
    parts = (first, *rest)
    return Space(
        offers=first.offers,
        offer=np.concatenate([p.offer for p in parts]),
        nodes=np.concatenate([p.nodes for p in parts]),
        spot=np.concatenate([p.spot for p in parts]),
        strategy=np.concatenate([p.strategy for p in parts]),
        shards=np.concatenate([p.shards for p in parts]),
        batch=np.concatenate([p.batch for p in parts]),
        global_batch=first.global_batch,
        offer2=np.concatenate([p.part2 for p in parts]),
        nodes2=np.concatenate([p.count2 for p in parts]),
    )


def building_blocks(offers: OfferTable) -> dict[tuple[str, str], list[int]]:
    """Per (provider, region): for each GPU type the offer with the fewest GPUs per node,
    then the cheapest per GPU (the instance a mixed cluster is built from)."""
    best: dict[tuple[str, str, str], int] = {}
    for o in range(len(offers)):
        key = (offers.provider[o], offers.region[o], offers.gpu_name[o])
        cur = best.get(key)
        rank = (
            int(offers.gpus_per_node[o]),
            float(offers.on_demand_usd_per_hour[o] / offers.gpus_per_node[o]),
            offers.instance_type[o],
        )
        if cur is None or rank < (
            int(offers.gpus_per_node[cur]),
            float(offers.on_demand_usd_per_hour[cur] / offers.gpus_per_node[cur]),
            offers.instance_type[cur],
        ):
            best[key] = o
    out: dict[tuple[str, str], list[int]] = {}
    for (provider, region, _), o in sorted(best.items()):
        out.setdefault((provider, region), []).append(o)
    return out


def _mixed_pairs(request: TrainRequest, offers: OfferTable) -> list[tuple[int, int, int, int]]:
    """(offer, nodes, offer2, nodes2) of every mixed cluster within ``max_gpus``."""
    pairs: list[tuple[int, int, int, int]] = []
    gpn = offers.gpus_per_node
    for blocks in building_blocks(offers).values():
        for i, oa in enumerate(blocks):
            for ob in blocks[i + 1 :]:
                for na in MIXED_NODES:
                    for nb in MIXED_NODES:
                        if na * gpn[oa] + nb * gpn[ob] <= request.max_gpus:
                            pairs.append((oa, na, ob, nb))
    return pairs


def build_mixed(
    request: TrainRequest, offers: OfferTable, batches: list[int], markets: list[bool]
) -> Space | None:
    """Mixed rows: pairs of GPU types per provider/region x node grid x market x strategy x
    batch (see the module docstring). ``None`` when no region offers two GPU types."""
    pairs = _mixed_pairs(request, offers)
    variants: list[tuple[int, int]] = []
    if "ddp" in request.strategies:
        variants.append((DDP, 0))
    if "ps" in request.strategies:
        for h in range(1, request.max_ps_shards + 1):
            variants += [(PS, h), (PS_SYNC, h)]
    if not pairs or not variants:
        return None
    p = np.array(pairs, dtype=np.int64)
    reps = len(markets) * len(variants) * len(batches)
    inner = len(variants) * len(batches)
    n_base = p.shape[0]
    v_strat = np.array([v[0] for v in variants], dtype=np.int64)
    v_shards = np.array([v[1] for v in variants], dtype=np.int64)
    return Space(
        offers=offers,
        offer=np.repeat(p[:, 0], reps),
        nodes=np.repeat(p[:, 1], reps),
        offer2=np.repeat(p[:, 2], reps),
        nodes2=np.repeat(p[:, 3], reps),
        spot=np.tile(np.repeat(np.array(markets, dtype=bool), inner), n_base),
        strategy=np.tile(np.repeat(v_strat, len(batches)), n_base * len(markets)),
        shards=np.tile(np.repeat(v_shards, len(batches)), n_base * len(markets)),
        batch=np.tile(np.array(batches, dtype=np.int64), n_base * len(markets) * len(variants)),
        global_batch=request.global_batch,
    )


def cluster_offers(
    cluster: ClusterSpec,
    gpu: GpuSpec,
    gpu_index: int,
    node_link_gbps: Mapping[tuple[str, int], float] | None = None,
) -> OfferTable:
    """A user's cluster as offers (module docstring): ``c`` GPUs of one node for ``c`` in
    1..k-1, then the whole node on up to ``cluster.nodes`` nodes, priced per GPU-hour (0
    without a price, ``nan`` spot without a spot market). The parameter-server shards run on
    the cluster's own host CPUs at no extra cost, over the inter-node network (a single node
    without one: over its GPUs' PCIe links). Each offer's all-reduce inside the node is
    ``node_link_gbps[(gpu.name, c)]`` where given (the app's figures: a ring beyond a bridged
    pair at NCCL's PCIe figure, :func:`gpucast.inputs.clusters.node_link_gbps`), else the
    node's link (:meth:`~gpucast.domain.systems.NodeShape.ring_gbps`, PCIe at its nominal
    rate)."""
    shape = cluster.shape
    k = shape.gpus_per_node
    counts = [*range(1, k), k]
    pcie = PCIE_X16_GBIT_PER_S.get(gpu.pcie_generation, 128.0)
    nan = float("nan")
    network = [
        shape.inter_node_gbps if shape.inter_node_gbps is not None else pcie * c for c in counts
    ]

    def label(c: int) -> str:
        return shape.name if c == k else f"{shape.name}[{c} of {k}]"

    def spot(c: int) -> float:
        price = cluster.usd_per_hour(c, spot=True)
        return nan if price is None else price

    n = len(counts)
    return OfferTable(
        provider=(cluster.provider,) * n,
        region=(cluster.region,) * n,
        instance_type=tuple(label(c) for c in counts),
        gpu_name=(gpu.name,) * n,
        gpu=np.full(n, gpu_index, dtype=np.int64),
        gpus_per_node=np.array(counts, dtype=np.int64),
        network_gbps=np.array(network, dtype=np.float64),
        on_demand_usd_per_hour=np.array(
            [cluster.usd_per_hour(c) or 0.0 for c in counts], dtype=np.float64
        ),
        spot_usd_per_hour=np.array([spot(c) for c in counts], dtype=np.float64),
        cpu_instance=(f"{shape.name} host CPUs",) * n,
        cpu_usd_per_hour=np.zeros(n, dtype=np.float64),
        cpu_network_gbps=np.array(network, dtype=np.float64),
        intra_node_gbps=np.array(
            [(node_link_gbps or {}).get((gpu.name, c), shape.ring_gbps(c, pcie)) for c in counts],
            dtype=np.float64,
        ),
        nvlink=np.array([shape.intra_node != "pcie" and c > 1 for c in counts], dtype=np.bool_),
        max_nodes=np.array([1] * (n - 1) + [cluster.nodes], dtype=np.int64),
    )
