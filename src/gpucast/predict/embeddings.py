"""Sharded and tiered embedding tables: per-GPU memory and step time of a sharding plan.

Training step of a recommendation model on ``P`` GPUs with a global batch ``B`` (``b = B / P``
per GPU), per table of ``rows x dim`` values (``r`` bytes a row) looked up ``pool`` times a
sample, as TorchRec shards it:

=============== ================= =========================== =================================
sharding        HBM per GPU       rows gathered per GPU       communication per GPU
=============== ================= =========================== =================================
data_parallel   whole table       ``b pool``                  all-reduce of the table's gradient
table_wise      whole, on one GPU ``B pool`` (on that GPU)    all-to-all of pooled rows ``B r``
row_wise        ``1 / P``         ``B pool / P``              reduce-scatter / all-gather ``B r``
column_wise     ``1 / s``         ``B pool / s`` (dim / s)    all-to-all ``B r / s``
row_wise_uvm    ``c / P`` (cache) hits in HBM, misses on host as row_wise
=============== ================= =========================== =================================

(``s = min(P, dim / 16)`` column shards a table, each on its own GPU.)

Lookups are memory-bound gathers: ``TRAIN_TRAFFIC_FACTOR`` x the gathered bytes (forward read,
backward gradient and the row-wise Adagrad update) at :data:`GATHER_EFFICIENCY` of the HBM
bandwidth; UVM misses cross the host link (read, then the update written back). Pooled
embeddings go through an all-to-all forward and backward, and the dense part's gradient (plus
any data-parallel table's) through an all-reduce, both priced by
:func:`gpucast.predict.comm.hierarchical_collective_s` (NVLink / PCIe inside a node, the NIC
across nodes). The dense MLPs run at the GPU's achieved FLOP rate. Phases are added (no
overlap): a conservative step time, said as an assumption.

:func:`plan_embeddings` evaluates uniform plans (every table data-parallel, table-wise,
row-wise or column-wise), a mixed plan (small tables data-parallel, tables that fit a GPU
table-wise, balanced greedily, the rest row-wise) and a tiered plan (the mixed plan with the
tables that do not fit in HBM row-wise over a UVM cache), and picks the fastest that fits in
memory (for a fixed GPU count the fastest is the cheapest).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from gpucast.domain.embeddings import EmbeddingTable, RecModel, ShardingType
from gpucast.domain.errors import InvalidSpecError
from gpucast.predict.comm import DEFAULT_HOP_LATENCY_S, hierarchical_collective_s

#: Share of the HBM bandwidth a random row gather achieves (FBGEMM table-batched embedding).
GATHER_EFFICIENCY = 0.5
#: Bytes moved per gathered byte in training: forward read, backward gradient, optimizer update.
TRAIN_TRAFFIC_FACTOR = 3.0
#: Row-wise Adagrad keeps one fp32 value per row.
OPTIMIZER_BYTES_PER_ROW = 4
#: Dense parameters cost weights + gradient + two fp32 optimizer moments.
DENSE_BYTES_PER_PARAM = 16
#: HBM share left for tables (the rest: activations, buffers, the CUDA context).
HBM_USABLE_FRACTION = 0.85
#: A column-wise shard is at least this wide.
MIN_COLUMN_SHARD = 16
#: Index bytes per lookup sent to the owning GPU (int64).
INDEX_BYTES = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardingHardware:
    """What a plan runs on (per-GPU figures unless said)."""

    gpus: int
    gpus_per_node: int
    hbm_bytes: float
    hbm_gbps: float  # GB/s
    link_gbps: float  # GB/s per GPU inside a node (NVLink, else PCIe)
    network_gbps: float  # Gbit/s per node
    host_bytes_per_node: float
    host_link_gbps: float  # GB/s per GPU to host memory (PCIe)
    dense_tflops: float  # achieved on the dense MLPs
    hop_latency_s: float = DEFAULT_HOP_LATENCY_S

    def __post_init__(self) -> None:
        if self.gpus < 1 or self.gpus_per_node < 1:
            raise InvalidSpecError("gpus", "must be >= 1", got=self.gpus)
        for name in (
            "hbm_bytes", "hbm_gbps", "link_gbps", "network_gbps", "host_link_gbps",
            "dense_tflops",
        ):  # fmt: skip
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise InvalidSpecError(name, "must be a number > 0", got=value)
        if not (math.isfinite(self.host_bytes_per_node) and self.host_bytes_per_node >= 0):
            raise InvalidSpecError("host memory", "must be >= 0", got=self.host_bytes_per_node)

    @property
    def nodes(self) -> int:
        return math.ceil(self.gpus / self.gpus_per_node)

    @property
    def table_capacity_bytes(self) -> float:
        return self.hbm_bytes * HBM_USABLE_FRACTION


@dataclass(frozen=True, slots=True, kw_only=True)
class Placement:
    """How one table is sharded (``gpu``: the owner of a table-wise table)."""

    table: str
    sharding: ShardingType
    gpu: int | None = None
    cache_fraction: float | None = None
    #: column-wise: shards of ``dim / shards`` columns on GPUs ``gpu, gpu + 1, ...`` (mod P);
    #: None: one per GPU
    shards: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanCost:
    """A plan's per-GPU memory, step time by phase and whether it fits."""

    name: str
    placements: tuple[Placement, ...]
    hbm_bytes_per_gpu: tuple[float, ...]
    host_bytes_per_node: float
    gather_s: float
    uvm_s: float
    alltoall_s: float
    allreduce_s: float
    dense_s: float
    feasible: bool
    reason: str = ""
    hit_rate: float | None = None
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def step_time_s(self) -> float:
        return self.gather_s + self.uvm_s + self.alltoall_s + self.allreduce_s + self.dense_s

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "feasible": self.feasible,
            "reason": self.reason,
            "step_time_s": self.step_time_s,
            "phases_s": {
                "embedding_gather": self.gather_s,
                "uvm_misses": self.uvm_s,
                "all_to_all": self.alltoall_s,
                "all_reduce": self.allreduce_s,
                "dense_compute": self.dense_s,
            },
            "max_hbm_bytes_per_gpu": max(self.hbm_bytes_per_gpu),
            "host_bytes_per_node": self.host_bytes_per_node,
            "uvm_hit_rate": self.hit_rate,
            "tables_by_sharding": dict(self.counts),
        }


HitRate = Callable[[float], float]


def _a2a_s(per_gpu_bytes: float, hw: ShardingHardware) -> float:
    return float(
        hierarchical_collective_s(
            per_gpu_bytes,
            hw.gpus,
            hw.gpus_per_node,
            hw.link_gbps * 8.0,
            hw.network_gbps,
            hw.hop_latency_s,
            passes=1.0,
        )
    )


def _allreduce_s(n_bytes: float, hw: ShardingHardware) -> float:
    return float(
        hierarchical_collective_s(
            n_bytes,
            hw.gpus,
            hw.gpus_per_node,
            hw.link_gbps * 8.0,
            hw.network_gbps,
            hw.hop_latency_s,
            passes=2.0,
        )
    )


def evaluate_plan(
    name: str,
    model: RecModel,
    placements: Sequence[Placement],
    hw: ShardingHardware,
    *,
    hit_rate: HitRate | None = None,
) -> PlanCost:
    """Memory per GPU and step time of one plan (module docstring)."""
    tables = {t.name: t for t in model.tables}
    p = hw.gpus
    big_b = float(model.global_batch)
    local_b = big_b / p
    dense_bytes = model.dense_params * DENSE_BYTES_PER_PARAM
    hbm = np.full(p, dense_bytes)
    gather = np.zeros(p)  # bytes gathered from HBM per GPU
    uvm = np.zeros(p)  # bytes over the host link per GPU
    send = np.zeros(p)  # all-to-all bytes per GPU, one direction
    host_total = 0.0
    allreduce_bytes = model.dense_params * 4.0
    counts: dict[str, int] = {}
    hits: list[tuple[float, float]] = []
    for pl in placements:
        t: EmbeddingTable = tables[pl.table]
        counts[pl.sharding] = counts.get(pl.sharding, 0) + 1
        state = t.rows * OPTIMIZER_BYTES_PER_ROW
        full = t.bytes + state
        lookups = big_b * t.pooling
        if pl.sharding == "data_parallel":
            hbm += full
            gather += local_b * t.pooling * t.row_bytes
            allreduce_bytes += t.bytes
        elif pl.sharding == "table_wise":
            g = 0 if pl.gpu is None else pl.gpu
            hbm[g] += full
            gather[g] += lookups * t.row_bytes
            send[g] += big_b * t.row_bytes * (p - 1) / p
            send += local_b * t.pooling * INDEX_BYTES / p
        elif pl.sharding == "column_wise":
            n = p if pl.shards is None else min(pl.shards, p)
            on = (np.arange(n) + (pl.gpu or 0)) % p
            hbm[on] += full / n
            gather[on] += lookups * t.row_bytes / n
            send[on] += big_b * t.row_bytes / n * (p - 1) / p
            send += local_b * t.pooling * INDEX_BYTES * n / p
        else:  # row_wise, row_wise_uvm
            send += big_b * t.row_bytes + local_b * t.pooling * INDEX_BYTES
            if pl.sharding == "row_wise":
                hbm += full / p
                gather += lookups * t.row_bytes / p
            else:
                c = 1.0 if pl.cache_fraction is None else pl.cache_fraction
                h = 1.0 if hit_rate is None or c >= 1.0 else float(hit_rate(c))
                hits.append((h, lookups))
                hbm += c * t.bytes / p
                host_total += (1.0 - c) * t.bytes + state
                gather += h * lookups * t.row_bytes / p
                uvm += 2.0 * (1.0 - h) * lookups * t.row_bytes / p
    host_per_node = host_total / hw.nodes
    over = [i for i in range(p) if hbm[i] > hw.table_capacity_bytes]
    reason = ""
    if over:
        reason = (
            f"GPU {over[0]} needs {hbm[over[0]] / 2**30:.1f} GiB of HBM, "
            f"{hw.table_capacity_bytes / 2**30:.1f} GiB usable"
        )
    elif host_per_node > hw.host_bytes_per_node:
        reason = (
            f"host memory {host_per_node / 2**30:.0f} GiB per node exceeds "
            f"{hw.host_bytes_per_node / 2**30:.0f} GiB"
        )
    hit = None
    if hits:
        weights = np.array([w for _, w in hits])
        hit = float(np.array([h for h, _ in hits]) @ weights / weights.sum())
    return PlanCost(
        name=name,
        placements=tuple(placements),
        hbm_bytes_per_gpu=tuple(float(v) for v in hbm),
        host_bytes_per_node=host_per_node,
        gather_s=float(
            TRAIN_TRAFFIC_FACTOR * gather.max() / (hw.hbm_gbps * 1e9 * GATHER_EFFICIENCY)
        ),
        uvm_s=float(uvm.max() / (hw.host_link_gbps * 1e9)),
        alltoall_s=2.0 * _a2a_s(float(send.max()), hw),
        allreduce_s=_allreduce_s(allreduce_bytes, hw),
        dense_s=local_b * model.dense_train_flops_per_sample / (hw.dense_tflops * 1e12),
        feasible=not reason,
        reason=reason,
        hit_rate=hit,
        counts=counts,
    )


def _table_wise(
    tables: Sequence[EmbeddingTable], hw: ShardingHardware, dense_bytes: float
) -> list[Placement] | None:
    """Greedy balance: biggest first onto the GPU with the least gathered bytes where it fits."""
    load = np.zeros(hw.gpus)
    used = np.full(hw.gpus, dense_bytes)
    out: list[Placement] = []
    for t in sorted(tables, key=lambda t: (-t.bytes, t.name)):
        need = t.bytes + t.rows * OPTIMIZER_BYTES_PER_ROW
        fits = used + need <= hw.table_capacity_bytes
        if not fits.any():
            return None
        g = int(np.argmin(np.where(fits, load, np.inf)))
        used[g] += need
        load[g] += t.pooling * t.row_bytes
        out.append(Placement(table=t.name, sharding="table_wise", gpu=g))
    return out


def _column_wise(tables: Sequence[EmbeddingTable], hw: ShardingHardware) -> list[Placement]:
    """Each table cut into ``min(P, dim / MIN_COLUMN_SHARD)`` column shards on consecutive
    GPUs, the heaviest tables first where the gathered bytes are lowest (TorchRec's
    column-wise and table-wise-column-wise)."""
    p = hw.gpus
    load = np.zeros(p)
    out: list[Placement] = []
    for t in sorted(tables, key=lambda t: (-t.pooling * t.row_bytes, t.name)):
        n = max(1, min(p, t.dim // MIN_COLUMN_SHARD))
        window = np.zeros(p)
        for j in range(n):  # load over GPUs start, start + 1, ..., start + n - 1
            window += np.roll(load, -j)
        start = int(np.argmin(window))
        load[(np.arange(n) + start) % p] += t.pooling * t.row_bytes / n
        out.append(Placement(table=t.name, sharding="column_wise", gpu=start, shards=n))
    return out


def candidate_plans(
    model: RecModel, hw: ShardingHardware, *, cache_fraction: float | None = None
) -> list[tuple[str, list[Placement]]]:
    """The plans :func:`plan_embeddings` compares (module docstring)."""
    tables = model.tables
    dense_bytes = model.dense_params * DENSE_BYTES_PER_PARAM
    plans: list[tuple[str, list[Placement]]] = [
        ("data-parallel", [Placement(table=t.name, sharding="data_parallel") for t in tables]),
        ("row-wise", [Placement(table=t.name, sharding="row_wise") for t in tables]),
    ]
    plans.append(("column-wise", _column_wise(tables, hw)))
    tw = _table_wise(tables, hw, dense_bytes)
    plans.append(
        ("table-wise", tw or [Placement(table=t.name, sharding="table_wise") for t in tables])
    )
    # mixed: a table whose gradient all-reduce moves fewer bytes than its pooled all-to-all
    # is data-parallel; one that fits a GPU's share of memory table-wise; the rest row-wise
    share = (hw.table_capacity_bytes - dense_bytes) / max(len(tables), 1) * hw.gpus / 2
    small = [t for t in tables if 2 * t.bytes < model.global_batch * t.row_bytes]
    rest = [t for t in tables if t not in small]
    fit = [t for t in rest if t.bytes + t.rows * OPTIMIZER_BYTES_PER_ROW <= share]
    large = [t for t in rest if t not in fit]
    small_bytes = sum(t.bytes + t.rows * OPTIMIZER_BYTES_PER_ROW for t in small)
    mixed_tw = _table_wise(fit, hw, dense_bytes + small_bytes) or [
        Placement(table=t.name, sharding="row_wise") for t in fit
    ]
    base = [Placement(table=t.name, sharding="data_parallel") for t in small] + mixed_tw
    plans.append(("mixed", base + [Placement(table=t.name, sharding="row_wise") for t in large]))
    # tiered: the large tables row-wise over a UVM cache sized to what HBM has left
    if large:
        fixed = evaluate_plan("fixed", model, base, hw).hbm_bytes_per_gpu
        free = hw.table_capacity_bytes - max(fixed)
        large_bytes = sum(t.bytes for t in large)
        c = cache_fraction
        if c is None:
            c = float(np.clip(free * hw.gpus / large_bytes, 0.0, 1.0)) if large_bytes else 1.0
        if c >= 1.0 and cache_fraction is None:
            return plans  # everything fits in HBM: no cache to plan
        plans.append(
            (
                "tiered",
                base
                + [
                    Placement(table=t.name, sharding="row_wise_uvm", cache_fraction=c)
                    for t in large
                ],
            )
        )
    return plans


def dense_priced_step_s(model: RecModel, hw: ShardingHardware) -> float:
    """The step if the embeddings were priced as dense weights, as a roofline over parameters
    does: every GPU reads and updates every table each step and all-reduces its gradient."""
    read_s = TRAIN_TRAFFIC_FACTOR * model.embedding_bytes / (hw.hbm_gbps * 1e9)
    return read_s + _allreduce_s(float(model.embedding_bytes + model.dense_params * 4), hw)


def plan_embeddings(
    model: RecModel,
    hw: ShardingHardware,
    *,
    hit_rate: HitRate | None = None,
    cache_fraction: float | None = None,
    sharding: str | None = None,
) -> tuple[PlanCost, list[PlanCost]]:
    """The fastest memory-feasible plan and every plan evaluated (fastest first).

    ``sharding`` restricts the choice to one candidate (``mixed``, ``row-wise``, ...); a
    candidate that does not fit is then an error naming the GPU, the bytes and a fix."""
    total = model.embedding_bytes + sum(t.rows for t in model.tables) * OPTIMIZER_BYTES_PER_ROW
    tiers = hw.table_capacity_bytes * hw.gpus + hw.host_bytes_per_node * hw.nodes
    if total > tiers:
        raise InvalidSpecError(
            "model",
            f"{model.name}'s tables and optimizer state take {total / 2**30:,.0f} GiB, more "
            f"than HBM and host memory of {hw.gpus} GPUs hold ({tiers / 2**30:,.0f} GiB)",
            fix="use more GPUs (--gpus) or more host memory per node (--host-memory-gib)",
        )
    if cache_fraction is not None and not (0.0 < cache_fraction <= 1.0):
        raise InvalidSpecError("cache-fraction", "must be in (0, 1]", got=cache_fraction)
    candidates = candidate_plans(model, hw, cache_fraction=cache_fraction)
    names = [n for n, _ in candidates]
    if sharding is not None:
        if sharding not in names:
            raise InvalidSpecError(
                "sharding", f"must be one of {', '.join(names)} here", got=sharding
            )
        candidates = [(n, pl) for n, pl in candidates if n == sharding]
    costs = [evaluate_plan(n, model, pl, hw, hit_rate=hit_rate) for n, pl in candidates]
    costs.sort(key=lambda c: (not c.feasible, c.step_time_s))
    best = costs[0]
    if not best.feasible:
        # the plan of last resort says what stops it (host memory for the tiered plan)
        best = next((c for c in costs if c.name == "tiered"), best)
        fix = "use --sharding tiered, more GPUs (--gpus) or a GPU with more memory"
        if sharding is None:
            fix = "use more GPUs (--gpus), a GPU with more memory or more host memory"
        raise InvalidSpecError(
            "sharding",
            f"no {'plan' if sharding is None else repr(sharding)} of {model.name} fits on "
            f"{hw.gpus} GPUs: {best.reason}",
            fix=fix,
        )
    return best, costs
