"""The search space as arrays: one row per candidate configuration.

A row is (offer, nodes, market, strategy, PS shards, per-worker batch). Offers come from the
catalog after the user's filters (provider, region, GPU); every whole number of instances up
to ``--max-gpus`` GPUs is a candidate, on demand and on spot, with DDP, FSDP (two or more
GPUs) and an asynchronous parameter server with 1..k CPU shards. Pure: numbers in, numbers out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpucast.domain.catalog import Offer
from gpucast.domain.plan import STRATEGIES, TrainRequest

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

DDP, FSDP, PS = (STRATEGIES.index(s) for s in ("ddp", "fsdp", "ps"))


@dataclass(frozen=True, slots=True, kw_only=True)
class OfferTable:
    """GPU offers as columns, with the cheapest CPU server of the same provider and region
    (the parameter-server shard; ``nan`` price where there is none)."""

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

    def __len__(self) -> int:
        return len(self.instance_type)

    @staticmethod
    def build(
        gpu_offers: list[Offer], cpu_offers: list[Offer], gpu_index: dict[str, int]
    ) -> OfferTable:
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

    def __len__(self) -> int:
        return int(self.offer.size)

    @property
    def workers(self) -> IntArray:
        return np.asarray(self.nodes * self.offers.gpus_per_node[self.offer], dtype=np.int64)

    def take(self, index: IntArray | BoolArray) -> Space:
        return Space(
            offers=self.offers,
            offer=self.offer[index],
            nodes=self.nodes[index],
            spot=self.spot[index],
            strategy=self.strategy[index],
            shards=self.shards[index],
            batch=self.batch[index],
            global_batch=self.global_batch,
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
        }
        cols.update(arrays)
        return Space(offers=self.offers, global_batch=self.global_batch, **cols)  # type: ignore[arg-type]


def build_space(request: TrainRequest, offers: OfferTable) -> tuple[Space, dict[str, int]]:
    """Every (offer, nodes, market, strategy, shards, batch) row; plus rows never generated
    because an instance alone has more GPUs than ``max_gpus`` (reason -> count)."""
    dropped: dict[str, int] = {}
    gpn = offers.gpus_per_node
    kmax = request.max_gpus // gpn
    too_big = int(np.sum(kmax == 0))
    variants: list[tuple[int, int]] = []
    for name in request.strategies:
        code = STRATEGIES.index(name)
        if code == PS:
            variants += [(PS, h) for h in range(1, request.max_ps_shards + 1)]
        else:
            variants.append((code, 0))
    if request.batch_size is not None:
        batches = [request.batch_size]
    elif request.global_batch is not None:
        batches = [0]
    else:
        batches = sorted(set(request.batch_sizes))
    markets = [False, True] if request.allow_spot else [False]
    per_offer = len(markets) * len(variants) * len(batches)
    if too_big:
        dropped["instance has more GPUs than --max-gpus"] = too_big * per_offer
    offer_idx = np.repeat(np.arange(len(offers), dtype=np.int64), kmax)
    starts = np.repeat(np.cumsum(kmax) - kmax, kmax)
    nodes = np.arange(offer_idx.size, dtype=np.int64) - starts + 1
    n_base = offer_idx.size
    v_strat = np.array([v[0] for v in variants], dtype=np.int64)
    v_shards = np.array([v[1] for v in variants], dtype=np.int64)
    # cartesian product (base rows) x markets x variants x batches, batches fastest
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
    space = Space(
        offers=offers,
        offer=offer_col[keep],
        nodes=nodes_col[keep],
        spot=spot_col[keep],
        strategy=strat_col[keep],
        shards=shards_col[keep],
        batch=batch_col[keep],
        global_batch=request.global_batch,
    )
    return space, dropped
