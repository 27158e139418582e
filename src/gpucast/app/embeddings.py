"""``gpucast.plan_embeddings``: shard a recommendation model's embedding tables over GPUs.

The model is a shipped one (``catalog/data/embedding_tables.csv``: the MLPerf DLRM-DCNv2
reference with its published Criteo 1TB table sizes, NVIDIA's TensorFlow2 Wide & Deep on
Outbrain, TorchRec's two-tower retrieval example) or the user's tables (``--tables FILE``:
``table,rows,dim,pooling``; without the dense columns the dense part is not priced, said in a
warning). The hardware comes from the catalog: the GPU's HBM, its bandwidth and NVLink/PCIe;
the node (GPUs, host memory, NIC, price) from the cheapest
on-demand offer with that GPU -- or from the server the user has (``--cluster FILE|NAME``: a
cluster file or a node shape of ``catalog/data/systems.csv``), whose intra-node topology then
prices the all-to-all (GPUs joined in NVLink-bridged pairs reach the other pairs over PCIe).
:func:`gpucast.predict.embeddings.plan_embeddings` prices the candidate plans (data-parallel,
table-wise, row-wise, column-wise, mixed, tiered over a UVM cache whose hit rate comes from the
locality model fitted on ``dlrm_datasets``) and picks the fastest that fits; the result
explains the pick against the others and shows how far pricing the tables as dense weights
would be off. The validated error is shown for DLRM-DCNv2 only (the model it was checked on);
every other model says "not validated".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.domain.catalog import offers_option
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.options import option
from gpucast.domain.systems import (
    ClusterSettings,
    check_cluster_options,
    cluster_nodes_option,
    cluster_option,
    cluster_price_option,
    cluster_set_option,
)

if TYPE_CHECKING:
    from gpucast.domain.embeddings import RecModel
    from gpucast.domain.provenance import Validation
    from gpucast.predict.embeddings import PlanCost, ShardingHardware

#: Shipped models the sharding model was validated on (``benchmarks/dlrm_mlperf.py``).
VALIDATED_MODELS = ("dlrm-dcnv2",)
#: Achieved share of the GPU's BF16 peak on the dense MLPs (an assumption, shown).
DENSE_EFFICIENCY = 0.4
#: Node defaults where the catalog has no offer with the GPU.
DEFAULT_GPUS_PER_NODE = 8
DEFAULT_HOST_GIB = 1024.0
DEFAULT_NETWORK_GBPS = 100.0
#: The most GPUs a plan is priced for (per-GPU arrays are allocated).
MAX_GPUS = 65536
SHARDINGS = (
    "data-parallel", "table-wise", "row-wise", "column-wise", "grid", "mixed", "tiered",
    "hierarchical-ps",
)  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanEmbeddingsRequest:
    """Tables, GPUs and cache options (``gpucast plan embeddings``)."""

    VERB: ClassVar[str] = "plan embeddings"

    model: str | None = option(
        None,
        help="A model of catalog/data/embedding_tables.csv: dlrm-dcnv2, wide-deep or two-tower.",
        example="dlrm-dcnv2",
    )
    tables: Path | None = option(
        None,
        help="Your own tables: CSV with columns table,rows,dim,pooling and optionally "
        "dense_params,dense_train_flops_per_sample,global_batch (instead of --model).",
        example="tables.csv",
    )
    gpu: str | None = option(
        None, help="Catalog GPU name [default: the --cluster's GPU].", example="A100-80GB"
    )
    gpus: int = option(8, help="GPUs the tables are sharded over.", example="8")
    cluster: str | None = cluster_option()
    cluster_nodes: int | None = cluster_nodes_option()
    cluster_price_usd_per_gpu_hour: float | None = cluster_price_option()
    cluster_set: ClusterSettings = cluster_set_option()
    offers_file: Path | None = offers_option()
    batch: int | None = option(
        None,
        help="Global samples per step (default: the model's reference batch).",
        example="65536",
    )
    sharding: str | None = option(
        None,
        help=f"Evaluate only this plan: {', '.join(SHARDINGS)} (default: pick the fastest).",
        example="row-wise",
    )
    cache_fraction: float | None = option(
        None,
        help="Share of a UVM-cached table's rows kept in HBM (tiered plan; default: what fits).",
        example="0.1",
    )
    host_memory_gib: float | None = option(
        None,
        help="Host DRAM per node for UVM tables (default: the offer's, else 1024).",
        example="2048",
    )
    ssd: str = option(
        "local-nvme",
        help="NVMe drive of catalog/data/ssd.csv for the SSD tier, or none (no SSD tier).",
        example="none",
    )
    ssd_drives: int = option(1, help="SSD drives per node (the SSD tier).", example="4")
    cache_policy: str = option("lru", help="UVM cache policy: lru or lfu.", example="lfu")
    locality: str = option(
        "2022", help="dlrm_datasets window the hit rate is fitted on: 2021 or 2022.", example="2021"
    )
    data_dir: Path | None = option(
        None,
        help="Published data folder holding dlrm_datasets/ (default: $GPUCAST_SHARED_DATA).",
        example="../shared/data",
    )

    def __post_init__(self) -> None:
        named = check_cluster_options(
            self.cluster, self.cluster_nodes, self.cluster_price_usd_per_gpu_hour, self.cluster_set
        )
        if self.gpu is None and not named:
            raise InvalidSpecError(
                "gpu", "is required (or --cluster)", fix="e.g. --gpu A100-80GB or --cluster D54U-3U"
            )
        if named and self.offers_file is not None:
            raise InvalidSpecError(
                "offers",
                "adds to the cloud catalog, and a --cluster replaces it",
                fix="drop --offers, or drop --cluster to price catalog offers",
            )
        for name in ("gpus", "batch", "ssd_drives"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or value < 1):
                raise InvalidSpecError(name, "must be an integer >= 1", got=value)
        if self.gpus > MAX_GPUS:
            raise InvalidSpecError("gpus", f"must be <= {MAX_GPUS}", got=self.gpus)
        if self.sharding is not None and self.sharding not in SHARDINGS:
            raise InvalidSpecError(
                "sharding", f"must be one of {', '.join(SHARDINGS)}", got=self.sharding
            )
        if self.cache_fraction is not None and not (
            math.isfinite(self.cache_fraction) and 0.0 < self.cache_fraction <= 1.0
        ):
            raise InvalidSpecError("cache-fraction", "must be in (0, 1]", got=self.cache_fraction)
        if self.host_memory_gib is not None and not (
            math.isfinite(self.host_memory_gib) and self.host_memory_gib >= 0
        ):
            raise InvalidSpecError("host-memory-gib", "must be >= 0", got=self.host_memory_gib)
        if self.cache_policy not in ("lru", "lfu"):
            raise InvalidSpecError("cache-policy", "must be lru or lfu", got=self.cache_policy)
        if self.locality not in ("2021", "2022"):
            raise InvalidSpecError("locality", "must be 2021 or 2022", got=self.locality)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanEmbeddingsResult:
    """The chosen plan, every plan evaluated, the dense-pricing comparison and assumptions."""

    model: str
    gpu: str
    hardware: ShardingHardware
    best: PlanCost
    plans: tuple[PlanCost, ...]
    dense_priced_step_s: float
    global_batch: int
    price_usd_per_gpu_hour: float | None
    validation: Validation
    assumptions: dict[str, str] = field(default_factory=dict)
    #: options given that had no effect on the plans evaluated, and a dense part not priced
    warnings: tuple[str, ...] = ()
    #: False where the model has no dense part (a ``--tables`` file without its columns)
    dense_priced: bool = True

    @property
    def samples_per_s(self) -> float:
        return self.global_batch / self.best.step_time_s

    @property
    def usd_per_million_samples(self) -> float | None:
        if self.price_usd_per_gpu_hour is None:
            return None
        gpu_hours = self.hardware.gpus * self.best.step_time_s / 3600.0
        return gpu_hours * self.price_usd_per_gpu_hour / self.global_batch * 1e6

    def explanation(self) -> str:
        """Why the pick: its step against the runner-up and the plans that do not fit."""
        others = [c for c in self.plans if c is not self.best]
        feasible = [c for c in others if c.feasible]
        text = (
            f"{self.best.name} is the fastest plan that fits ({self.best.step_time_s * 1e3:.2f} ms)"
        )
        if feasible:
            nxt = feasible[0]
            text += f"; next {nxt.name} {nxt.step_time_s * 1e3:.2f} ms"
        bad = [f"{c.name} ({c.reason})" for c in others if not c.feasible]
        if bad:
            text += "; does not fit: " + "; ".join(bad)
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "gpu": self.gpu,
            "gpus": self.hardware.gpus,
            "global_batch": self.global_batch,
            "pick": self.best.to_dict()
            | {
                "placements": [
                    {
                        "table": p.table,
                        "sharding": p.sharding,
                        "gpu": p.gpu,
                        "cache_fraction": p.cache_fraction,
                        "dram_fraction": p.dram_fraction,
                    }
                    for p in self.best.placements
                ]
            },
            "samples_per_s": self.samples_per_s,
            "price_usd_per_gpu_hour": self.price_usd_per_gpu_hour,
            "usd_per_million_samples": self.usd_per_million_samples,
            "dense_priced": self.dense_priced,
            "plans": [c.to_dict() for c in self.plans],
            "explanation": self.explanation(),
            "dense_priced_step_s": self.dense_priced_step_s,
            "dense_over_sparse": self.dense_priced_step_s / self.best.step_time_s,
            "validation": self.validation.to_dict(),
            "assumptions": dict(self.assumptions),
            "warnings": list(self.warnings),
        }


def _hardware(
    request: PlanEmbeddingsRequest,
) -> tuple[ShardingHardware, str, float | None, dict[str, str]]:
    from gpucast.catalog import load_catalog, offers_file
    from gpucast.domain.units import GIB
    from gpucast.inputs.clusters import (
        cluster_gpu,
        host_link_gbps,
        intra_link_gbps,
        request_cluster,
    )
    from gpucast.plan.inputs import PCIE_GBPS, intra_node_gbps
    from gpucast.predict.embeddings import ShardingHardware

    catalog = load_catalog(offers_file(request.offers_file))
    cluster = request_cluster(request, catalog)
    gpu = cluster_gpu(cluster, catalog, request.gpu, request.gpus)
    offers = [o for o in catalog.find_offers(gpu=gpu.name) if o.gpus > 0]
    notes: dict[str, str] = {}
    price = None
    link = intra_node_gbps(gpu) / 8.0
    if cluster is not None:
        per_node, host_gib = cluster.gpus_per_node, DEFAULT_HOST_GIB
        network = host_link_gbps(cluster, gpu.pcie_generation)
        price = cluster.price_usd_per_gpu_hour
        link = intra_link_gbps(cluster, catalog, min(request.gpus, per_node)) / 8.0
        notes["node"] = (
            f"{cluster.describe()} ({cluster.source}); all-to-all inside a node at "
            f"{link:g} GB/s per GPU ({cluster.shape.intra_node}"
            + (", over PCIe between the bridged pairs" if link < cluster.shape.intra_node_gbps
               else "")
            + f"); {host_gib:g} GiB host memory per node assumed"
        )  # fmt: skip
    elif offers:
        # the fewest nodes first (all-to-all stays on NVLink), then the cheapest per GPU
        need = min(request.gpus, max(o.gpus for o in offers))
        wide = [o for o in offers if o.gpus >= need]
        offer = min(wide, key=lambda o: (o.on_demand_usd_per_hour / o.gpus, -o.gpus))
        per_node, host_gib, network = offer.gpus, offer.memory_gib, offer.network_gbps
        price = offer.on_demand_usd_per_hour / offer.gpus
        notes["node"] = (
            f"{offer.provider} {offer.instance_type} ({offer.region}): {per_node} GPUs, "
            f"{host_gib:g} GiB host memory, {network:g} Gbit/s, ${price:.2f} per GPU-hour "
            "on demand (the cheapest per GPU among the catalog's widest-enough nodes)"
        )
    else:
        per_node, host_gib, network = (
            DEFAULT_GPUS_PER_NODE,
            DEFAULT_HOST_GIB,
            DEFAULT_NETWORK_GBPS,
        )
        notes["node"] = (
            f"no offer with {gpu.name} in the catalog: {per_node} GPUs, {host_gib:g} GiB host "
            f"memory and {network:g} Gbit/s per node assumed; no price"
        )
    if request.host_memory_gib is not None:
        host_gib = request.host_memory_gib
        notes["host memory"] = f"{host_gib:g} GiB per node (--host-memory-gib)"
    ssd = None
    if request.ssd.strip().lower() != "none":
        from gpucast.catalog.ssd import ssd_drive

        ssd = ssd_drive(request.ssd)
        notes["ssd"] = (
            f"{request.ssd_drives} x {ssd.name} per node for rows host memory cannot hold: "
            f"{ssd.read_gbps:g} GB/s, {ssd.random_read_iops:,.0f} random 4 KiB reads/s, "
            f"{ssd.read_latency_s * 1e6:.0f} us a read, {ssd.capacity_bytes / 1e12:g} TB each; "
            f"write-back at the read rates ({ssd.source})"
        )
    pcie = PCIE_GBPS.get(gpu.pcie_generation, 128.0) / 8.0
    dense = gpu.peak_tflops("bf16") * DENSE_EFFICIENCY
    notes["dense compute"] = (
        f"{DENSE_EFFICIENCY:.0%} of {gpu.name}'s BF16 peak on the dense MLPs ({dense:.0f} TFLOP/s)"
    )
    hw = ShardingHardware(
        gpus=request.gpus,
        gpus_per_node=per_node,
        hbm_bytes=gpu.memory_gib * GIB,
        hbm_gbps=gpu.memory_bandwidth_gbps,
        link_gbps=link,
        network_gbps=network,
        host_bytes_per_node=host_gib * GIB,
        host_link_gbps=pcie,
        dense_tflops=dense,
        ssd=ssd,
        ssd_drives_per_node=request.ssd_drives,
    )
    return hw, gpu.name, price, notes


def plan_embeddings(
    request: PlanEmbeddingsRequest | None = None, /, **options: Any
) -> PlanEmbeddingsResult:
    """The fastest (for fixed GPUs: cheapest) sharding that fits, explained (module docstring)."""
    from gpucast.catalog.validation import validation_for
    from gpucast.inputs.embeddings import distinct_per_lookup, hit_rate_curve, rec_model_input
    from gpucast.predict import embeddings as emb

    request = resolve(PlanEmbeddingsRequest, request, options)
    model = rec_model_input(request.model, request.tables, request.batch)
    hw, gpu_name, price, notes = _hardware(request)
    curve = hit_rate_curve(request.data_dir, request.locality, request.cache_policy)
    distinct = distinct_per_lookup(request.data_dir, request.locality)
    best, costs = emb.plan_embeddings(
        model,
        hw,
        hit_rate=curve.value,
        cache_fraction=request.cache_fraction,
        sharding=request.sharding,
        distinct_per_lookup=distinct.value,
    )
    notes |= {
        "tables": f"{len(model.tables)} tables, {model.embedding_bytes / 2**30:.1f} GiB in fp32"
        + (f" ({model.source_url})" if model.source_url else f" ({request.tables})"),
        "gather": f"{emb.GATHER_EFFICIENCY:.0%} of HBM bandwidth, {emb.TRAIN_TRAFFIC_FACTOR:g}x "
        "the gathered bytes per training step (read, gradient, row-wise Adagrad update)",
        "overlap": "phases added, none overlapped (a conservative step)",
        "hbm": f"{emb.HBM_USABLE_FRACTION:.0%} of HBM for tables and the dense part",
        "uvm hit rate": curve.source,
    }
    if best.ssd_bytes_per_node > 0 or hw.nodes > 1:
        tiers = validation_for("embedding-cache-tiers", [gpu_name], "fp32", request.gpus)
        notes["tier shares validated"] = tiers.text()
    if hw.nodes > 1:
        notes["hierarchical ps"] = (
            f"each node pulls its batch share's distinct rows from their owners and pushes "
            f"their gradients over its NIC; {distinct.source}"
        )
    warnings = []
    unpriced = _unpriced_dense(model)
    if unpriced:
        notes["dense compute"] = unpriced
        warnings.append(unpriced)
    if request.cache_fraction is not None and not any(c.name == "tiered" for c in costs):
        why = (
            f"--sharding {request.sharding} keeps every row in HBM"
            if request.sharding is not None
            else f"every table of {model.name} is placed in HBM without a cache"
        )
        warnings.append(
            f"--cache-fraction {request.cache_fraction:g} has no effect: {why}; only the tiered "
            "plan keeps rows behind an HBM cache (--sharding tiered)"
        )
    return PlanEmbeddingsResult(
        model=model.name,
        gpu=gpu_name,
        hardware=hw,
        best=best,
        plans=tuple(costs),
        dense_priced_step_s=emb.dense_priced_step_s(model, hw),
        global_batch=model.global_batch,
        price_usd_per_gpu_hour=price,
        validation=_validation(model.name, request, gpu_name),
        assumptions=notes,
        warnings=tuple(warnings),
        dense_priced=not unpriced,
    )


def _unpriced_dense(model: RecModel) -> str:
    """One line where the model's dense part is missing (a ``--tables`` file without the dense
    columns), else ''."""
    missing = [
        name
        for name, value in (
            ("dense_params", model.dense_params),
            ("dense_train_flops_per_sample", model.dense_train_flops_per_sample),
        )
        if value == 0
    ]
    if not missing:
        return ""
    what = []
    if model.dense_train_flops_per_sample == 0:
        what.append("the dense MLPs' compute")
    if model.dense_params == 0:
        what.append("their gradient all-reduce and memory")
    return (
        f"dense part not priced: {model.name} has no {' or '.join(missing)}, so "
        f"{' and '.join(what)} count as 0 (the step and the $ per million samples cover the "
        "embeddings only); add the column(s) to the tables file, e.g. "
        "dense_train_flops_per_sample = 6 x dense_params"
    )


def _validation(model: str, request: PlanEmbeddingsRequest, gpu: str) -> Validation:
    """The sharding model's validated error -- for the shipped models it was checked on
    (MLPerf DLRM-DCNv2), "not validated" for every other model or tables file."""
    from gpucast.catalog.validation import validation_for
    from gpucast.domain.provenance import Validation

    if request.model is not None and model.lower() in VALIDATED_MODELS:
        return validation_for("embedding-sharding", [gpu], "fp32", request.gpus)
    return Validation(
        model="embedding-sharding",
        regime=f"{model} on {request.gpus} x {gpu} (the sharding model is validated only on "
        "MLPerf DLRM-DCNv2 time to train: python benchmarks/dlrm_mlperf.py)",
        error=None,
    )
