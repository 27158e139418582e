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
grid            ``1 / (s k)``     ``B pool / (s k)``          all-to-all ``B r / s`` (partial
                                                              sums of the shard's columns)
row_wise_uvm    ``c / P`` (cache) hits in HBM, misses on host as row_wise
                                  (then on SSD)
=============== ================= =========================== =================================

(``s = min(P, dim / 16)`` column shards a table, each on its own GPU; a grid plan also splits
each column shard of a hot table row-wise over ``k`` GPUs, TorchRec's grid sharding and what
HugeCTR's planner does when it splits the hottest table again, so that a table with a high
pooling factor can spread over more GPUs than it has 16-wide column shards.)

Lookups are memory-bound gathers: ``TRAIN_TRAFFIC_FACTOR`` x the gathered bytes (forward read,
backward gradient and the row-wise Adagrad update) at :data:`GATHER_EFFICIENCY` of the HBM
bandwidth; UVM misses cross the host link (read, then the update written back). Pooled
embeddings go through an all-to-all forward and backward, and the dense part's gradient (plus
any data-parallel table's) through an all-reduce, both priced by
:func:`gpucast.predict.comm.hierarchical_collective_s` (NVLink / PCIe inside a node, the NIC
across nodes). Besides the tables and the dense part's weights and optimizer state, a GPU's
HBM holds the batch's buffers, as TorchRec's storage estimator counts each shard's input and
output sizes on top of its 15% reservation: the indices and pooled rows it sends (the ``send``
column above) and the pooled rows of its own ``b`` samples it receives, the dense part's input
(``b sum(r)``); the dense MLPs' hidden activations are not counted (the catalog gives the
dense part by parameters and FLOPs, not widths), so the buffers are a floor that grows with
the batch. The dense MLPs run at the GPU's achieved FLOP rate. Phases are added (no
overlap): a conservative step time, said as an assumption.

:func:`plan_embeddings` evaluates uniform plans (every table data-parallel, table-wise,
row-wise or column-wise), a mixed plan (small tables data-parallel, tables that fit a GPU
table-wise, balanced greedily, the rest row-wise) and a tiered plan (the mixed plan with the
tables that do not fit in HBM row-wise over a UVM cache), and picks the fastest that fits in
memory (for a fixed GPU count the fastest is the cheapest).

**Three tiers** (HugeCTR's hierarchical parameter server: HBM cache, host DRAM, NVMe SSD). A
UVM-cached table keeps a share ``d`` of its rows (with their optimizer state) in host DRAM and
the rest on the node's SSDs when host memory runs out (``ShardingHardware.ssd``); a share
``c`` is cached in HBM (copies, as in FBGEMM's UVM caching and HugeCTR's GPU cache).
Hit rates come from one curve ``h`` (the locality model's LRU or LFU curve; a table with its
own ``locality`` has its own curve) read as inclusive tiers: HBM serves ``h(c)`` of the
lookups, DRAM ``h(d) - h(c)``, the SSD ``1 - h(d)`` (the two upper tiers together act as one
cache of ``d``: exact for LFU with global counters and for an LRU whose DRAM level sees every
lookup; a HugeCTR-style two-level LRU, whose DRAM cache sees only the HBM misses, is within
0.64 pp of it in ``benchmarks/embedding_cache.py``). The
locality windows are independent, so a row's first lookup in a window misses every tier: an
upper estimate of the SSD traffic. Every miss of HBM crosses PCIe (read, update written back);
an SSD miss also costs, per node, ``max(bytes / bandwidth, 4 KiB pages / IOPS)`` over its
drives, twice (read, write-back at the read rates). :func:`lookup_time_s` gives the same per
tier for a batch of lookups (serving).

**Hierarchical parameter server** (Baidu AIBox) on more than one node: every node holds
``1 / nodes`` of all rows in its DRAM (spilling to its SSDs), each node pulls the *distinct*
rows its share of the batch touches (``u`` distinct rows per lookup, from the locality data)
from their owners over the NIC and pushes their gradients back; the node's GPUs hold that
working set in HBM row-wise, with an all-to-all of pooled rows over NVLink inside the node.
TorchRec's plans instead send every sample's pooled rows across nodes; the PS sends each
distinct row once, so it wins where rows repeat within a batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from gpucast.domain.embeddings import EmbeddingTable, RecModel, ShardingType, SsdSpec
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.gpu_memory import share_bytes
from gpucast.domain.limits import format_bytes
from gpucast.domain.serving import LatencyCurve
from gpucast.domain.units import GIB, count_of
from gpucast.predict.comm import DEFAULT_HOP_LATENCY_S, hierarchical_collective_s
from gpucast.predict.roofline import KERNEL_OVERHEAD_S

#: Share of the HBM bandwidth a random row gather achieves (FBGEMM table-batched embedding).
GATHER_EFFICIENCY = 0.5
#: Bytes moved per gathered byte in training: forward read, backward gradient, optimizer update.
TRAIN_TRAFFIC_FACTOR = 3.0
#: Row-wise Adagrad keeps one fp32 value per row.
OPTIMIZER_BYTES_PER_ROW = 4
#: Dense parameters cost weights + gradient + two fp32 optimizer moments.
DENSE_BYTES_PER_PARAM = 16
#: HBM share left for tables (the rest: activations, buffers, the CUDA context): TorchRec's
#: planner reserves 15% by default (``EmbeddingShardingPlanner``'s
#: ``HeuristicalStorageReservation(percentage=0.15)``, torchrec/distributed/planner/
#: planners.py), on top of the one usable-memory rule, never instead of it
#: (:func:`gpucast.domain.gpu_memory.share_bytes`: the same 85% on every GPU of 10 GiB or more).
HBM_USABLE_FRACTION = 0.85
#: A column-wise shard is at least this wide.
MIN_COLUMN_SHARD = 16
#: The most row splits the grid plan tries (each doubles the hottest table's GPUs).
GRID_SPLITS = 32
#: Index bytes per lookup sent to the owning GPU (int64).
INDEX_BYTES = 8
#: An SSD reads whole pages: a row costs ``ceil(row bytes / page)`` random reads.
SSD_PAGE_BYTES = 4096
#: Kernels one sharding kind launches a training step: the pooled lookup (FBGEMM's
#: table-batched embedding forward, one kernel for all of the kind's tables) and its backward
#: fused with the optimizer update.
LOOKUP_KERNELS = 2
#: A kind sharded over several GPUs also redistributes: the indices' lengths and values
#: (two all-to-alls) and the pooled rows forward, their gradients back.
DIST_KERNELS = 4


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
    ssd: SsdSpec | None = None  # the NVMe tier (None: none)
    ssd_drives_per_node: int = 1

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
        if isinstance(self.ssd_drives_per_node, bool) or self.ssd_drives_per_node < 1:
            raise InvalidSpecError(
                "ssd-drives", "must be an integer >= 1", got=self.ssd_drives_per_node
            )

    @property
    def nodes(self) -> int:
        return math.ceil(self.gpus / self.gpus_per_node)

    @property
    def node_gpus(self) -> int:
        """GPUs in one node of this plan."""
        return min(self.gpus, self.gpus_per_node)

    @property
    def ssd_bytes_per_node(self) -> float:
        return 0.0 if self.ssd is None else self.ssd.capacity_bytes * self.ssd_drives_per_node

    @property
    def table_capacity_bytes(self) -> float:
        return share_bytes(self.hbm_bytes / GIB, HBM_USABLE_FRACTION)


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
    #: grid: each column shard split row-wise over this many further GPUs (the table spans
    #: ``shards x row_shards`` consecutive GPUs from ``gpu``)
    row_shards: int = 1
    #: share of the rows in host DRAM; the rest on SSD; None: all
    dram_fraction: float | None = None


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
    ssd_s: float = 0.0
    ps_network_s: float = 0.0
    ssd_bytes_per_node: float = 0.0
    #: lookup shares served by HBM, host DRAM and SSD (UVM-cached and PS tables)
    tier_shares: tuple[float, float, float] | None = None
    #: of ``hbm_bytes_per_gpu``, the batch's buffers (indices and pooled rows sent and
    #: received, module docstring): the part that grows with the batch
    batch_bytes_per_gpu: tuple[float, ...] = ()
    #: the host's kernel launches (:func:`step_kernels` at the roofline's per-kernel prior):
    #: the step takes at least this long however little its phases move
    launch_s: float = 0.0

    @property
    def step_time_s(self) -> float:
        return max(self.work_s, self.launch_s)

    @property
    def work_s(self) -> float:
        """The phases, added (none overlapped)."""
        return (
            self.gather_s
            + self.uvm_s
            + self.ssd_s
            + self.ps_network_s
            + self.alltoall_s
            + self.allreduce_s
            + self.dense_s
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "feasible": self.feasible,
            "reason": self.reason,
            "step_time_s": self.step_time_s,
            "phases_s": {
                "embedding_gather": self.gather_s,
                "uvm_misses": self.uvm_s,
                "ssd_reads": self.ssd_s,
                "ps_pull_push": self.ps_network_s,
                "all_to_all": self.alltoall_s,
                "all_reduce": self.allreduce_s,
                "dense_compute": self.dense_s,
            },
            "launch_floor_s": self.launch_s,
            "max_hbm_bytes_per_gpu": max(self.hbm_bytes_per_gpu),
            "max_batch_bytes_per_gpu": max(self.batch_bytes_per_gpu, default=0.0),
            "host_bytes_per_node": self.host_bytes_per_node,
            "ssd_bytes_per_node": self.ssd_bytes_per_node,
            "uvm_hit_rate": self.hit_rate,
            "tier_shares": None
            if self.tier_shares is None
            else dict(zip(("hbm", "dram", "ssd"), self.tier_shares, strict=True)),
            "tables_by_sharding": dict(self.counts),
        }


HitRate = Callable[[float], float]


def tier_shares(
    hit_rate: HitRate | None, cache_fraction: float, dram_fraction: float = 1.0
) -> tuple[float, float, float]:
    """Shares of the lookups served by HBM, host DRAM and SSD (inclusive tiers, module
    docstring): ``h(c)``, ``h(d) - h(c)``, ``1 - h(d)`` (a DRAM tier smaller than the HBM
    cache adds nothing); a tier holding every row serves every lookup that reaches it."""
    if not (0.0 <= cache_fraction <= 1.0 and 0.0 <= dram_fraction <= 1.0):
        raise InvalidSpecError(
            "cache and dram fractions", "must be in [0, 1]", got=(cache_fraction, dram_fraction)
        )

    def h(f: float) -> float:
        return 1.0 if hit_rate is None or f >= 1.0 else float(hit_rate(f))

    h1 = h(cache_fraction)
    h2 = max(h(dram_fraction), h1)
    return h1, h2 - h1, 1.0 - h2


def ssd_read_s(rows: float, row_bytes: float, ssd: SsdSpec, drives: int = 1) -> float:
    """Reading ``rows`` random rows from ``drives`` drives at full depth: the slower of the
    bandwidth and the page-read (IOPS) bound."""
    return _ssd_s(rows * row_bytes, rows * math.ceil(row_bytes / SSD_PAGE_BYTES), ssd, drives)


def _ssd_s(n_bytes: float, pages: float, ssd: SsdSpec, drives: int) -> float:
    return max(n_bytes / (ssd.read_gbps * 1e9 * drives), pages / (ssd.random_read_iops * drives))


@dataclass(frozen=True, slots=True, kw_only=True)
class TierLookup:
    """One batch of lookups through the tiers: shares and time per tier (serving)."""

    shares: tuple[float, float, float]
    hbm_s: float
    dram_s: float
    ssd_s: float

    @property
    def time_s(self) -> float:
        return self.hbm_s + self.dram_s + self.ssd_s


def lookup_time_s(
    lookups: float,
    row_bytes: float,
    shares: tuple[float, float, float],
    *,
    hbm_gbps: float,
    host_link_gbps: float,
    ssd: SsdSpec | None = None,
    ssd_drives: int = 1,
) -> TierLookup:
    """Forward lookups of one GPU's batch (no update): hits gathered from HBM, DRAM rows over
    PCIe, SSD rows at the drive's rates plus one read latency (the batch's reads are issued
    together) and then over PCIe too."""
    hbm_s = shares[0] * lookups * row_bytes / (hbm_gbps * 1e9 * GATHER_EFFICIENCY)
    dram_s = (shares[1] + shares[2]) * lookups * row_bytes / (host_link_gbps * 1e9)
    ssd_s = 0.0
    if shares[2] > 0:
        if ssd is None:
            raise InvalidSpecError("ssd", "is needed: rows live on SSD but no drive is given")
        ssd_s = ssd.read_latency_s + ssd_read_s(shares[2] * lookups, row_bytes, ssd, ssd_drives)
    return TierLookup(shares=shares, hbm_s=hbm_s, dram_s=dram_s, ssd_s=ssd_s)


def cached_lookup_curve(
    curve: LatencyCurve,
    *,
    lookups_per_sample: float,
    row_bytes: float,
    shares: tuple[float, float, float],
    hbm_gbps: float,
    host_link_gbps: float,
    ssd: SsdSpec | None = None,
    ssd_drives: int = 1,
) -> LatencyCurve:
    """A served recommendation model's batch latency with its embeddings behind a cache:
    ``curve`` (every row in HBM) plus, per batch, the time of the lookups that miss HBM
    (host DRAM over PCIe, SSD reads): device time, as the GPU waits for them."""
    extra = [
        lookup_time_s(
            b * lookups_per_sample, row_bytes, shares, hbm_gbps=hbm_gbps,
            host_link_gbps=host_link_gbps, ssd=ssd, ssd_drives=ssd_drives,
        )
        for b in curve.batch_sizes
    ]  # fmt: skip
    return replace(
        curve,
        latency_s=tuple(
            t + e.dram_s + e.ssd_s for t, e in zip(curve.latency_s, extra, strict=True)
        ),
        source=f"{curve.source}; embedding lookups HBM {shares[0]:.1%} / DRAM {shares[1]:.1%}"
        f" / SSD {shares[2]:.1%} (misses added per batch)",
    )


def _table_curve(
    name: str, hit_rate: HitRate | None, table_hit_rates: Mapping[str, HitRate] | None
) -> HitRate | None:
    """A table's own hit-rate curve where it has one, else the plan's global curve."""
    if table_hit_rates is not None and name in table_hit_rates:
        return table_hit_rates[name]
    return hit_rate


def _a2a_s(per_gpu_bytes: float, hw: ShardingHardware) -> float:
    if per_gpu_bytes <= 0:  # nothing sent: no collective is launched, so no hop latency
        return 0.0
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
    if n_bytes <= 0:  # no dense part and no replicated table: nothing to reduce
        return 0.0
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


def step_kernels(kinds: Sequence[str], gpus: int, *, dense: bool) -> int:
    """Kernel launches of one training step, at least: per sharding kind
    :data:`LOOKUP_KERNELS`, and where it is sharded over several GPUs :data:`DIST_KERNELS`;
    one gradient all-reduce for the dense part and any data-parallel table. The dense MLPs'
    own kernels are not counted (the model gives them by parameters and FLOPs, not layers):
    a floor."""
    n = 0
    for kind in set(kinds):
        n += LOOKUP_KERNELS + (DIST_KERNELS if gpus > 1 and kind != "data_parallel" else 0)
    if gpus > 1 and (dense or "data_parallel" in kinds):
        n += 1
    return n


def evaluate_plan(
    name: str,
    model: RecModel,
    placements: Sequence[Placement],
    hw: ShardingHardware,
    *,
    hit_rate: HitRate | None = None,
    table_hit_rates: Mapping[str, HitRate] | None = None,
) -> PlanCost:
    """Memory per GPU and step time of one plan (module docstring); a UVM-cached table's hit
    rate is its own curve in ``table_hit_rates``, else ``hit_rate``."""
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
    shares: list[tuple[tuple[float, float, float], float]] = []
    ssd_total = 0.0
    ssd_io = np.zeros(2)  # per node: bytes and pages read from SSD
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
        elif pl.sharding in ("column_wise", "grid"):
            n = p if pl.shards is None else min(pl.shards, p)
            m = min(n * max(pl.row_shards, 1), p)  # GPUs the table spans
            on = (np.arange(m) + (pl.gpu or 0)) % p
            hbm[on] += full / m
            gather[on] += lookups * t.row_bytes / m
            send[on] += big_b * t.row_bytes / n * (p - 1) / p
            send += local_b * t.pooling * INDEX_BYTES * n / p
        else:  # row_wise, row_wise_uvm
            send += big_b * t.row_bytes + local_b * t.pooling * INDEX_BYTES
            if pl.sharding == "row_wise":
                hbm += full / p
                gather += lookups * t.row_bytes / p
            else:
                c = 1.0 if pl.cache_fraction is None else pl.cache_fraction
                d = 1.0 if pl.dram_fraction is None else pl.dram_fraction
                share = tier_shares(_table_curve(t.name, hit_rate, table_hit_rates), c, d)
                h = share[0]
                hits.append((h, lookups))
                shares.append((share, lookups))
                hbm += c * t.bytes / p
                host_total += d * full  # inclusive: the HBM rows keep their host copy
                ssd_total += (1.0 - d) * full
                gather += h * lookups * t.row_bytes / p
                uvm += 2.0 * (1.0 - h) * lookups * t.row_bytes / p
                rows = share[2] * lookups * hw.node_gpus / p
                ssd_io += (rows * t.row_bytes, rows * math.ceil(t.row_bytes / SSD_PAGE_BYTES))
    host_per_node = host_total / hw.nodes
    ssd_per_node = ssd_total / hw.nodes
    ssd_s = 0.0
    if ssd_io[0] > 0 and hw.ssd is not None:  # read, then the updated row written back
        ssd_s = 2.0 * _ssd_s(float(ssd_io[0]), float(ssd_io[1]), hw.ssd, hw.ssd_drives_per_node)
    batch_bytes = send + local_b * sum(t.row_bytes for t in model.tables)
    hbm += batch_bytes
    over = [i for i in range(p) if hbm[i] > hw.table_capacity_bytes * (1 + 1e-9)]
    reason = ""
    if over:
        reason = _over_hbm(f"GPU {over[0]} needs", hbm[over[0]], batch_bytes[over[0]], hw)
    elif host_per_node > hw.host_bytes_per_node * (1 + 1e-9):
        reason = (
            f"host memory {host_per_node / 2**30:.0f} GiB per node exceeds "
            f"{hw.host_bytes_per_node / 2**30:.0f} GiB"
        )
    elif ssd_per_node > hw.ssd_bytes_per_node * (1 + 1e-9):
        reason = (
            f"SSD {ssd_per_node / 2**30:.0f} GiB per node exceeds "
            f"{hw.ssd_bytes_per_node / 2**30:.0f} GiB"
        )
    hit = None
    mean_shares = None
    if hits:
        weights = np.array([w for _, w in hits])
        hit = float(np.array([h for h, _ in hits]) @ weights / weights.sum())
        avg = np.array([sh for sh, _ in shares]).T @ weights / weights.sum()
        mean_shares = (float(avg[0]), float(avg[1]), float(avg[2]))
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
        dense_s=_dense_s(model, hw),
        feasible=not reason,
        reason=reason,
        hit_rate=hit,
        counts=counts,
        ssd_s=ssd_s,
        ssd_bytes_per_node=ssd_per_node,
        tier_shares=mean_shares,
        batch_bytes_per_gpu=tuple(float(v) for v in batch_bytes),
        launch_s=KERNEL_OVERHEAD_S * step_kernels(list(counts), p, dense=model.dense_params > 0),
    )


def _over_hbm(who: str, need: float, batch: float, hw: ShardingHardware) -> str:
    """Why a plan does not fit: ``who`` needs ``need`` bytes of HBM, ``batch`` of them the
    batch's buffers (said where they are a tenth of it or more)."""
    part = f" ({format_bytes(batch)} of it the batch's buffers)" if batch >= need / 10 else ""
    return (
        f"{who} {need / 2**30:,.1f} GiB of HBM{part}, "
        f"{hw.table_capacity_bytes / 2**30:.1f} GiB usable"
    )


def evaluate_parameter_server(
    model: RecModel,
    hw: ShardingHardware,
    *,
    hit_rate: HitRate | None = None,
    distinct_per_lookup: float = 1.0,
    table_hit_rates: Mapping[str, HitRate] | None = None,
) -> PlanCost:
    """Baidu AIBox-style hierarchical parameter server (module docstring): per node the
    distinct rows of its share of the batch pulled from (and their gradients pushed to) the
    nodes that own them, through their DRAM (and SSD) tier; inside the node row-wise in HBM.
    Each table's DRAM / SSD shares come from its own curve in ``table_hit_rates``, else from
    ``hit_rate``."""
    if not (math.isfinite(distinct_per_lookup) and 0.0 < distinct_per_lookup <= 1.0):
        raise InvalidSpecError(
            "distinct rows per lookup", "must be in (0, 1]", got=distinct_per_lookup
        )
    n, g, p = hw.nodes, hw.node_gpus, hw.gpus
    tables = model.tables
    big_b = float(model.global_batch)
    local_b = big_b / p
    rb = np.array([t.row_bytes for t in tables], dtype=np.float64)
    pool = np.array([t.pooling for t in tables], dtype=np.float64)
    rows = np.array([t.rows for t in tables], dtype=np.float64)
    # distinct rows a node's share of the batch touches (at most the table's rows)
    working = np.minimum(distinct_per_lookup * big_b / n * pool, rows)
    working_bytes = float(working @ rb)
    state = rows * OPTIMIZER_BYTES_PER_ROW
    total = float(rows @ rb + state.sum())
    dense_bytes = model.dense_params * DENSE_BYTES_PER_PARAM
    hbm = dense_bytes + (working_bytes + float(working.sum()) * OPTIMIZER_BYTES_PER_ROW) / g
    # every node keeps 1/n of all rows: DRAM first, the rest on its SSDs
    d = min(1.0, hw.host_bytes_per_node * n / total) if total else 1.0
    # per table: shares of its distinct rows served by DRAM and SSD (HBM holds no cache here)
    shares = np.array(
        [tier_shares(_table_curve(t.name, hit_rate, table_hit_rates), 0.0, d) for t in tables]
    )
    bytes_t = working * rb
    share_w = shares.T @ bytes_t / working_bytes if working_bytes else shares.mean(axis=0)
    share = (float(share_w[0]), float(share_w[1]), float(share_w[2]))
    host_per_node = d * total / n
    ssd_per_node = (1.0 - d) * total / n
    remote = (n - 1) / n
    ps_network_s = 2.0 * working_bytes * remote / (hw.network_gbps / 8.0 * 1e9)
    ssd_s = 0.0
    ssd_bytes = float(shares[:, 2] @ bytes_t)
    if ssd_bytes > 0 and hw.ssd is not None:  # the rows this node serves, read and written
        ssd_s = 2.0 * _ssd_s(
            ssd_bytes,
            float(shares[:, 2] @ (working * np.ceil(rb / SSD_PAGE_BYTES))),
            hw.ssd,
            hw.ssd_drives_per_node,
        )
    node_hw = replace(hw, gpus=g)
    gathered = local_b * float(pool @ rb)
    send = local_b * float(rb.sum()) + local_b * float(pool.sum()) * INDEX_BYTES
    batch_bytes = send + local_b * float(rb.sum())  # sent, and the GPU's own pooled rows
    hbm += batch_bytes
    reason = ""
    if hbm > hw.table_capacity_bytes:
        reason = _over_hbm("the batch's working set needs", hbm, batch_bytes, hw)
        reason = reason.replace(" of HBM", " of HBM per GPU", 1)
    elif ssd_per_node > hw.ssd_bytes_per_node * (1 + 1e-9):
        reason = (
            f"SSD {ssd_per_node / 2**30:.0f} GiB per node exceeds "
            f"{hw.ssd_bytes_per_node / 2**30:.0f} GiB"
        )
    return PlanCost(
        name="hierarchical-ps",
        placements=tuple(Placement(table=t.name, sharding="parameter_server") for t in tables),
        hbm_bytes_per_gpu=(hbm,) * p,
        host_bytes_per_node=host_per_node,
        gather_s=TRAIN_TRAFFIC_FACTOR * gathered / (hw.hbm_gbps * 1e9 * GATHER_EFFICIENCY),
        uvm_s=2.0 * working_bytes / g / (hw.host_link_gbps * 1e9),
        alltoall_s=2.0 * _a2a_s(send, node_hw) if g > 1 else 0.0,
        allreduce_s=_allreduce_s(model.dense_params * 4.0, hw),
        dense_s=_dense_s(model, hw),
        feasible=not reason,
        reason=reason,
        hit_rate=None,
        counts={"parameter_server": len(tables)},
        ssd_s=ssd_s,
        ps_network_s=ps_network_s,
        ssd_bytes_per_node=ssd_per_node,
        tier_shares=share,
        batch_bytes_per_gpu=(batch_bytes,) * p,
        launch_s=KERNEL_OVERHEAD_S
        * step_kernels(["parameter_server"], p, dense=model.dense_params > 0),
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


def _column_shards(t: EmbeddingTable, hw: ShardingHardware) -> int:
    return max(1, min(hw.gpus, t.dim // MIN_COLUMN_SHARD))


def _column_wise(
    tables: Sequence[EmbeddingTable],
    hw: ShardingHardware,
    row_shards: Mapping[str, int] | None = None,
) -> list[Placement]:
    """Each table cut into ``min(P, dim / MIN_COLUMN_SHARD)`` column shards (each split
    row-wise over ``row_shards[table]`` GPUs: a grid) on consecutive GPUs, the heaviest
    tables first where the gathered bytes are lowest (TorchRec's column-wise and
    table-wise-column-wise)."""
    p = hw.gpus
    load = np.zeros(p)
    out: list[Placement] = []
    for t in sorted(tables, key=lambda t: (-t.pooling * t.row_bytes, t.name)):
        n = _column_shards(t, hw)
        k = 1 if row_shards is None else row_shards.get(t.name, 1)
        m = min(n * k, p)
        ring = np.concatenate(([0.0], np.cumsum(np.concatenate((load, load)))))
        window = ring[m : m + p] - ring[:p]  # load over GPUs start, ..., start + m - 1
        start = int(np.argmin(window))
        load[(np.arange(m) + start) % p] += t.pooling * t.row_bytes / m
        kind: ShardingType = "grid" if k > 1 else "column_wise"
        out.append(Placement(table=t.name, sharding=kind, gpu=start, shards=n, row_shards=k))
    return out


def _grid(model: RecModel, hw: ShardingHardware) -> list[Placement] | None:
    """Column-wise, then the table with the most gathered bytes per GPU of its span split
    row-wise over twice as many GPUs, again and again while a table can still spread; the
    fastest of these plans (None: no table can spread past its column shards)."""
    k = {t.name: 1 for t in model.tables}
    best: tuple[float, list[Placement]] | None = None
    for _ in range(GRID_SPLITS):
        spreadable = [t for t in model.tables if 2 * k[t.name] * _column_shards(t, hw) <= hw.gpus]
        if not spreadable:
            break
        hot = max(
            spreadable,
            key=lambda t: (t.pooling * t.row_bytes / (k[t.name] * _column_shards(t, hw)), t.name),
        )
        k[hot.name] *= 2
        placements = _column_wise(model.tables, hw, k)
        cost = evaluate_plan("grid", model, placements, hw)
        key = cost.step_time_s if cost.feasible else math.inf
        if best is None or key < best[0]:
            best = (key, placements)
    return None if best is None else best[1]


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
    grid = _grid(model, hw)
    if grid is not None:
        plans.append(("grid", grid))
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
        # what HBM holds besides the cache: the other tables and every table's batch buffers
        uncached = [Placement(table=t.name, sharding="row_wise_uvm", cache_fraction=0.0)
                    for t in large]  # fmt: skip
        fixed = evaluate_plan("fixed", model, base + uncached, hw).hbm_bytes_per_gpu
        free = hw.table_capacity_bytes - max(fixed)
        large_bytes = sum(t.bytes for t in large)
        c = cache_fraction
        if c is None:
            c = float(np.clip(free * hw.gpus / large_bytes, 0.0, 1.0)) if large_bytes else 1.0
        if c >= 1.0 and cache_fraction is None:
            return plans  # everything fits in HBM: no cache to plan
        d = 1.0
        if hw.ssd is not None:  # what host DRAM cannot hold goes to the node's SSDs
            state = sum(t.rows * OPTIMIZER_BYTES_PER_ROW for t in large)
            host = hw.host_bytes_per_node * hw.nodes  # the other tables live in HBM only
            d = float(np.clip(host / (large_bytes + state), 0.0, 1.0))
        plans.append(
            (
                "tiered",
                base
                + [
                    Placement(
                        table=t.name,
                        sharding="row_wise_uvm",
                        cache_fraction=c,
                        dram_fraction=None if d >= 1.0 else d,
                    )
                    for t in large
                ],
            )
        )
    return plans


def _not_offered(
    sharding: str, names: Sequence[str], hw: ShardingHardware, cache_fraction: float | None
) -> InvalidSpecError:
    """Why :func:`candidate_plans` has no ``sharding`` plan on this hardware, and the fix."""
    offered = ", ".join(names)
    why, fix = {
        "hierarchical-ps": (
            f"prices a parameter server across nodes, and these {count_of(hw.gpus, 'GPU')} "
            f"are one node of {hw.gpus_per_node}",
            f"use more --gpus than a node holds ({hw.gpus_per_node}), or one of {offered}",
        ),
        "grid": (
            f"spreads a table's column shards ({MIN_COLUMN_SHARD} columns each) row-wise over "
            f"twice as many GPUs, and on {count_of(hw.gpus, 'GPU')} no table has room to (its "
            "shards already span more than half of them)",
            "use more --gpus, or --sharding column-wise",
        ),
        "tiered": (
            "caches the tables too large to place whole, and every table fits in HBM here"
            if cache_fraction is None
            else "caches the tables too large to place whole, and this model has none",
            f"give --cache-fraction to price a cache anyway, or use one of {offered}"
            if cache_fraction is None
            else f"use one of {offered}",
        ),
    }.get(sharding, (f"must be one of {offered} here", f"e.g. --sharding {names[0]}"))
    return InvalidSpecError("sharding", why, got=sharding, fix=fix)


def dense_priced_step_s(model: RecModel, hw: ShardingHardware) -> float:
    """The step if the embeddings were priced as dense weights, as a roofline over parameters
    does: every GPU reads and updates every table each step and all-reduces its gradient,
    besides the dense MLPs every plan runs (left out, a model whose step is mostly its MLPs
    read faster priced dense than sharded: Wide & Deep on 8 x A100 0.34x)."""
    read_s = TRAIN_TRAFFIC_FACTOR * model.embedding_bytes / (hw.hbm_gbps * 1e9)
    work_s = (
        read_s
        + _allreduce_s(float(model.embedding_bytes + model.dense_params * 4), hw)
        + _dense_s(model, hw)
    )
    kernels = step_kernels(["data_parallel"], hw.gpus, dense=model.dense_params > 0)
    return max(work_s, kernels * KERNEL_OVERHEAD_S)


def _dense_s(model: RecModel, hw: ShardingHardware) -> float:
    """The dense MLPs' forward and backward on one GPU's share of the global batch."""
    local_b = float(model.global_batch) / hw.gpus
    return local_b * model.dense_train_flops_per_sample / (hw.dense_tflops * 1e12)


def plan_embeddings(
    model: RecModel,
    hw: ShardingHardware,
    *,
    hit_rate: HitRate | None = None,
    cache_fraction: float | None = None,
    sharding: str | None = None,
    distinct_per_lookup: float = 1.0,
    table_hit_rates: Mapping[str, HitRate] | None = None,
) -> tuple[PlanCost, list[PlanCost]]:
    """The fastest memory-feasible plan and every plan evaluated (fastest first).

    ``table_hit_rates`` gives tables their own hit-rate curve (their ``locality``); the
    others use ``hit_rate``.

    ``sharding`` restricts the choice to one candidate (``mixed``, ``row-wise``, ...); a
    candidate that does not fit is then an error naming the GPU, the bytes and a fix."""
    total = model.embedding_bytes + sum(t.rows for t in model.tables) * OPTIMIZER_BYTES_PER_ROW
    tiers = (
        hw.table_capacity_bytes * hw.gpus
        + (hw.host_bytes_per_node + hw.ssd_bytes_per_node) * hw.nodes
    )
    if total > tiers:
        held = "HBM, host memory and SSDs" if hw.ssd is not None else "HBM and host memory"
        raise InvalidSpecError(
            "model",
            f"{model.name}'s tables and optimizer state take {total / 2**30:,.0f} GiB, more "
            f"than {held} of {count_of(hw.gpus, 'GPU')} hold ({tiers / 2**30:,.0f} GiB)",
            fix="use more GPUs (--gpus)"
            + (
                ", more host memory per node (--host-memory-gib) or more SSDs per node "
                "(--ssd-drives)"
                if hw.ssd is not None
                else " or more host memory per node (--host-memory-gib)"
            ),
        )
    if cache_fraction is not None and not (0.0 < cache_fraction <= 1.0):
        raise InvalidSpecError("cache-fraction", "must be in (0, 1]", got=cache_fraction)
    candidates = candidate_plans(model, hw, cache_fraction=cache_fraction)
    names = [n for n, _ in candidates] + (["hierarchical-ps"] if hw.nodes > 1 else [])
    if sharding is not None:
        if sharding not in names:
            raise _not_offered(sharding, names, hw, cache_fraction)
        candidates = [(n, pl) for n, pl in candidates if n == sharding]
    costs = [
        evaluate_plan(n, model, pl, hw, hit_rate=hit_rate, table_hit_rates=table_hit_rates)
        for n, pl in candidates
    ]
    if hw.nodes > 1 and sharding in (None, "hierarchical-ps"):
        costs.append(
            evaluate_parameter_server(
                model,
                hw,
                hit_rate=hit_rate,
                distinct_per_lookup=distinct_per_lookup,
                table_hit_rates=table_hit_rates,
            )
        )
    costs.sort(key=lambda c: (not c.feasible, c.step_time_s))
    best = costs[0]
    if not best.feasible:
        # the plan of last resort says what stops it (host memory for the tiered plan)
        best = next((c for c in costs if c.name == "tiered"), best)
        fix = "use --sharding tiered, more GPUs (--gpus) or a GPU with more memory"
        if sharding is None:
            fix = "use more GPUs (--gpus), a GPU with more memory or more host memory"
        elif sharding == "tiered" and cache_fraction is not None:
            fix = (
                f"use a smaller --cache-fraction than {cache_fraction:g} (or drop it: the "
                "cache takes what HBM has left), more GPUs (--gpus) or a GPU with more memory"
            )
        elif sharding == "tiered":
            fix = "use more GPUs (--gpus), a GPU with more memory or more host memory per node"
        if max(best.batch_bytes_per_gpu, default=0.0) > hw.table_capacity_bytes / 2:
            more = fix.removeprefix("use ")
            fix = f"use a smaller --batch than {model.global_batch:,}, or {more}"
        raise InvalidSpecError(
            "sharding",
            f"no {'plan' if sharding is None else repr(sharding)} of {model.name} fits on "
            f"{count_of(hw.gpus, 'GPU')}: {best.reason}",
            fix=fix,
        )
    return best, costs
