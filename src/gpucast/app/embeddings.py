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
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.domain.catalog import offers_option
from gpucast.domain.embeddings import check_cache_policy
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.limits import check_seed
from gpucast.domain.options import as_flags, documented, lower_text, option
from gpucast.domain.systems import (
    ClusterSettings,
    check_cluster_options,
    cluster_nodes_option,
    cluster_option,
    cluster_price_option,
    cluster_set_option,
    used_gpus_text,
)
from gpucast.domain.units import count_of

if TYPE_CHECKING:
    from gpucast.domain.embeddings import AccessLocality, RecModel
    from gpucast.domain.provenance import Validation
    from gpucast.predict.embeddings import PlanCost, ShardingHardware

#: Shipped models the sharding model was validated on (``benchmarks/dlrm_mlperf.py``).
VALIDATED_MODELS = ("dlrm-dcnv2",)
#: The precision of the runs it was validated on (catalog/data/validation.csv).
VALIDATED_PRECISION = "mixed"
#: Achieved share of the GPU's BF16 peak on the dense MLPs (an assumption, shown).
DENSE_EFFICIENCY = 0.4
#: Node defaults where the catalog has no offer with the GPU.
DEFAULT_GPUS_PER_NODE = 8
#: GPUs a plan shards over without --gpus or --cluster
DEFAULT_GPUS = 8
DEFAULT_HOST_GIB = 1024.0
DEFAULT_NETWORK_GBPS = 100.0
#: The most GPUs a plan is priced for (per-GPU arrays are allocated).
MAX_GPUS = 65536
SHARDINGS = (
    "data-parallel", "table-wise", "row-wise", "column-wise", "grid", "mixed", "tiered",
    "hierarchical-ps",
)  # fmt: skip


@documented
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
        "dense_params,dense_train_flops_per_sample,global_batch and locality (a table's own "
        "access pattern: a dlrm_datasets window such as 2021, or a Zipf exponent such as "
        "1.05) (instead of --model).",
        example="tables.csv",
    )
    gpu: str | None = option(
        None, help="Catalog GPU name [default: the --cluster's GPU].", example="A100-80GB"
    )
    gpus: int | None = option(
        None,
        help=f"GPUs the tables are sharded over [default: {DEFAULT_GPUS} with --gpu; with "
        "--cluster all of its GPUs].",
        example="8",
    )
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
        parse=lower_text,
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
    cache_policy: str = option(
        "lru", parse=lower_text, help="UVM cache policy: lru or lfu.", example="lfu"
    )
    locality: str = option(
        "2022",
        help="dlrm_datasets window the hit rate is fitted on: 2021 or 2022 (its first trace) "
        "or WINDOW/TRACE, e.g. 2021/fbgemm_t856_bs65536_3 (tables without their own locality "
        "column).",
        example="2021",
    )
    data_dir: Path | None = option(
        None,
        help="Published data folder holding dlrm_datasets/ (default: $GPUCAST_SHARED_DATA).",
        example="../shared/data",
    )

    def __post_init__(self) -> None:
        with as_flags(type(self)):  # a domain check's field as the flag typed, with a fix
            self._check()

    def _check(self) -> None:
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
        if self.gpus is not None and self.gpus > MAX_GPUS:
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
        check_cache_policy(self.cache_policy, "cache-policy")
        _window(self.locality, "locality")


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
    from gpucast.domain.catalog import PCIE_X16_GBIT_PER_S
    from gpucast.domain.units import GIB
    from gpucast.inputs.clusters import (
        cluster_gpu,
        host_link_gbps,
        intra_link_gbps,
        request_cluster,
    )
    from gpucast.plan.inputs import intra_node_gbps
    from gpucast.predict.embeddings import ShardingHardware

    catalog = load_catalog(offers_file(request.offers_file))
    cluster = request_cluster(request, catalog, request.gpu)
    gpu = cluster_gpu(cluster, catalog, request.gpu, request.gpus)
    offers = [o for o in catalog.find_offers(gpu=gpu.name) if o.gpus > 0]
    notes: dict[str, str] = {}
    price = None
    link = intra_node_gbps(gpu) / 8.0
    # --cluster: all of its GPUs unless --gpus says fewer, as predict train runs on them
    gpus = cluster.used_gpus(request.gpus) if cluster is not None else request.gpus or DEFAULT_GPUS
    if cluster is not None:
        per_node, host_gib = cluster.gpus_per_node, DEFAULT_HOST_GIB
        network = host_link_gbps(cluster, gpu.pcie_generation)
        price = cluster.price_usd_per_gpu_hour
        nodes = -(-gpus // per_node)
        notes["gpus"] = used_gpus_text(
            gpus,
            cluster.max_gpus,
            f"{count_of(nodes, 'node')} of {per_node} GPUs",
            default=request.gpus is None,
        )
        link = intra_link_gbps(cluster, catalog, min(gpus, per_node), all_reduce=False) / 8.0
        notes["node"] = (
            f"{cluster.describe()} ({cluster.source}); all-to-all inside a node at "
            f"{link:g} GB/s per GPU ({cluster.shape.intra_node}"
            + (", over PCIe between the bridged pairs" if link < cluster.shape.intra_node_gbps
               else "")
            + f"); {host_gib:g} GiB host memory per node assumed"
        )  # fmt: skip
    elif offers:
        # the fewest nodes first (all-to-all stays on NVLink), then the cheapest per GPU
        need = min(gpus, max(o.gpus for o in offers))
        wide = [o for o in offers if o.gpus >= need]
        offer = min(wide, key=lambda o: (o.on_demand_usd_per_hour / o.gpus, -o.gpus))
        per_node, host_gib, network = offer.gpus, offer.memory_gib, offer.network_gbps
        price = offer.on_demand_usd_per_hour / offer.gpus
        notes["node"] = (
            f"{offer.provider} {offer.instance_type} ({offer.region}): "
            f"{count_of(per_node, 'GPU')}, "
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
    pcie = PCIE_X16_GBIT_PER_S.get(gpu.pcie_generation, 128.0) / 8.0
    dense = gpu.peak_tflops("bf16") * DENSE_EFFICIENCY
    notes["dense compute"] = (
        f"{DENSE_EFFICIENCY:.0%} of {gpu.peak_text('bf16')} on the dense MLPs ({dense:.0f} TFLOP/s)"
    )
    hw = ShardingHardware(
        gpus=gpus,
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
    request: PlanEmbeddingsRequest | None = None,
    /,
    *,
    config: Path | str | None = None,
    **options: Any,
) -> PlanEmbeddingsResult:
    """The fastest (for fixed GPUs: cheapest) sharding that fits, explained (module docstring)."""
    from gpucast.catalog.validation import validation_for
    from gpucast.inputs.embeddings import (
        distinct_per_lookup,
        fitted_window,
        hit_rate_curve,
        rec_model_input,
        table_hit_rates,
    )
    from gpucast.predict import embeddings as emb
    from gpucast.predict.roofline import KERNEL_OVERHEAD_S

    request = resolve(PlanEmbeddingsRequest, request, options, config)
    model, unread = rec_model_input(request.model, request.tables, request.batch)
    hw, gpu_name, price, notes = _hardware(request)
    uneven = _batch_split(model.global_batch, hw.gpus, given=request.batch is not None)
    window = _window(request.locality, "locality")
    curve = hit_rate_curve(request.data_dir, window.window, request.cache_policy, window.trace)
    own = table_hit_rates(model, request.data_dir, request.cache_policy)
    distinct = distinct_per_lookup(request.data_dir, window.window, window.trace)
    best, costs = emb.plan_embeddings(
        model,
        hw,
        hit_rate=curve.value,
        cache_fraction=request.cache_fraction,
        sharding=request.sharding,
        distinct_per_lookup=distinct.value,
        table_hit_rates=own.value,
    )
    notes |= {
        "tables": f"{len(model.tables)} tables, {model.embedding_bytes / 2**30:.1f} GiB in fp32"
        + (f" ({model.source_url})" if model.source_url else f" ({request.tables})"),
        "gather": f"{emb.GATHER_EFFICIENCY:.0%} of HBM bandwidth, {emb.TRAIN_TRAFFIC_FACTOR:g}x "
        "the gathered bytes per training step (read, gradient, row-wise Adagrad update)",
        "overlap": "phases added, none overlapped (a conservative step)",
        "launches": f"at least {best.launch_s / KERNEL_OVERHEAD_S:.0f} kernel launches a "
        f"training step for the pick at {KERNEL_OVERHEAD_S * 1e6:.0f} us each (the roofline's "
        "per-kernel prior): per sharding kind the lookup and its fused backward-update, and "
        "where sharded its 4 all-to-alls; the gradient all-reduce; the dense MLPs' kernels "
        "not counted (a floor); the step is the slower of that and its phases",
        "hbm": f"{emb.HBM_USABLE_FRACTION:.0%} of HBM for tables, the dense part and the "
        "batch's buffers (indices and pooled rows sent and received; the dense MLPs' hidden "
        "activations not counted)",
        "uvm hit rate": _hit_rate_note(model, curve.source, own.value, own.source),
    }
    if best.ssd_bytes_per_node > 0 or hw.nodes > 1:
        tiers = validation_for("embedding-cache-tiers", [gpu_name], "fp32", hw.gpus)
        notes["tier shares validated"] = tiers.text()
    if hw.nodes > 1:
        notes["hierarchical ps"] = (
            f"each node pulls its batch share's distinct rows from their owners and pushes "
            f"their gradients over its NIC; {distinct.source}"
        )
    warnings = [w for w in (unread, uneven) if w]
    if fitted_window(request.data_dir, window.window, window.trace) is None:
        warnings += _uniform_cache(model, best)
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
        validation=_validation(model.name, request, gpu_name, hw.gpus),
        assumptions=notes,
        warnings=tuple(warnings),
        dense_priced=not unpriced,
    )


def _batch_split(batch: int, gpus: int, *, given: bool) -> str:
    """A global batch of fewer samples than GPUs is refused (as ``plan train`` refuses one
    smaller than its workers); one that does not split evenly is a warning (the step is
    priced at the mean share); ``given``: ``--batch`` set it (else the model's reference)."""
    where = "--batch" if given else "the model's reference batch"
    if batch < gpus:
        raise InvalidSpecError(
            "batch", f"{batch:,} samples is fewer than the {gpus} GPUs (each takes >= 1)",
            fix=f"use --batch {gpus} or more (a multiple of {gpus}), or fewer --gpus",
        )  # fmt: skip
    share, rest = divmod(batch, gpus)
    if not rest:
        return ""
    return (
        f"{where} {batch:,} does not split evenly over {gpus} GPUs: "
        f"{count_of(rest, 'GPU')} take{'s' if rest == 1 else ''} {share + 1:,} samples, the "
        f"rest {share:,}; the step is priced at the mean share ({batch / gpus:,.1f}); "
        f"--batch {(share + 1) * gpus:,} splits evenly"
    )


def _hit_rate_note(
    model: RecModel, global_source: str, own: Mapping[str, object], own_source: str
) -> str:
    """Which curve each table's cache hits follow: the one global curve (no table names a
    ``locality``: said so), each table's own, or both."""
    if not own:
        return (
            f"{global_source}; one curve for every table (no per-table locality column: add "
            "one, a dlrm_datasets window or a Zipf exponent, for tables to differ)"
        )
    rest = len(model.tables) - len(own)
    if rest == 0:
        return own_source
    return f"{own_source}; the other {rest} table{'s' if rest > 1 else ''}: {global_source}"


def _uniform_cache(model: RecModel, best: PlanCost) -> list[str]:
    """A warning where the pick caches tables in HBM and prices some without locality data
    (hit rate = cache share): its step rests on that assumption (QA 39: it was only an
    assumption line)."""
    own = {t.name for t in model.tables if t.locality is not None}
    cached = [
        p.table
        for p in best.placements
        if p.sharding in ("row_wise_uvm", "parameter_server") and p.table not in own
    ]
    if not cached:
        return []
    return [
        f"the pick, {best.name}, prices its cache tiers at uniform access (hit rate = the cache's "
        f"share of the rows) for {count_of(len(cached), 'table')}: no dlrm_datasets locality "
        "data; production lookups are skewed, so this is likely pessimistic; pass --data-dir "
        "../shared/data (or set $GPUCAST_SHARED_DATA), or give the tables a locality column"
    ]


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


def _validation(model: str, request: PlanEmbeddingsRequest, gpu: str, gpus: int) -> Validation:
    """The sharding model's validated error -- for the shipped models it was checked on
    (MLPerf DLRM-DCNv2), "not validated" for every other model or tables file."""
    from gpucast.catalog.validation import validation_for
    from gpucast.domain.provenance import Validation

    if request.model is not None and model.lower() in VALIDATED_MODELS:
        # the MLPerf runs it was checked on train in mixed precision (the plan prices fp32
        # tables and the dense part at the BF16 peak), not fp32; "mixed" alone reads as the
        # plan named mixed printed above it (QA 37 G #15)
        checked = validation_for("embedding-sharding", [gpu], VALIDATED_PRECISION, gpus)
        precision = f", {VALIDATED_PRECISION},"
        return replace(
            checked,
            regime=checked.regime.replace(precision, f", {VALIDATED_PRECISION} precision,"),
        )
    return Validation(
        model="embedding-sharding",
        regime=f"{model} on {gpus} x {gpu} (the sharding model is validated only on "
        "MLPerf DLRM-DCNv2 time to train: python benchmarks/dlrm_mlperf.py)",
        error=None,
    )


# --------------------------------------------------------------- predict embedding-cache
#: Cache sizes (shares of a window's distinct rows) predicted by default.
DEFAULT_FRACTIONS = (0.001, 0.01, 0.05, 0.1, 0.2, 0.5)
#: The most cache sizes one call predicts.
MAX_FRACTIONS = 64
#: Bounds of the replayed synthetic stream's distinct rows (its lookups: about 7-13 x).
MIN_REPLAY_ROWS = 1_000
MAX_REPLAY_ROWS = 1_000_000
#: Cache sizes the hit-rate curve was validated at (``benchmarks/embedding_cache.py``).
VALIDATED_FRACTIONS = (0.01, 0.5)
#: How far the replayed stream's lookups per distinct row may stray from the window's before
#: a warning says the replay is not like for like (200,000 rows: within 1.5% on both windows;
#: 20,000 rows of the 2022 window: -13%, its replayed hit rates 4-6 points low).
REPLAY_REUSE_TOLERANCE = 0.05


def _window(text: str, flag: str = "window") -> AccessLocality:
    """``--window`` / ``--locality``: a dlrm_datasets window, or one trace of it."""
    from gpucast.domain.embeddings import AccessLocality

    error = InvalidSpecError(
        flag,
        "must be a dlrm_datasets window: 2021 or 2022, or WINDOW/TRACE",
        got=text,
        fix=f"e.g. --{flag} 2022 or --{flag} 2021/fbgemm_t856_bs65536_3",
    )
    try:
        locality = AccessLocality.parse(text)
    except InvalidSpecError:
        raise error from None
    if locality.zipf_exponent is not None:
        raise error
    return locality


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class PredictEmbeddingCacheRequest:
    """A locality window, a cache policy and cache sizes (``gpucast predict embedding-cache``)."""

    VERB: ClassVar[str] = "predict embedding-cache"

    data_dir: Path | None = option(
        None,
        help="Published data folder holding dlrm_datasets/ (default: $GPUCAST_SHARED_DATA).",
        example="../shared/data",
    )
    window: str = option(
        "2022",
        help="dlrm_datasets window the locality model is fitted on: 2021 or 2022 (its first "
        "trace), or WINDOW/TRACE for one of its traces.",
        example="2021/fbgemm_t856_bs65536_3",
    )
    policy: str = option(
        "lru",
        parse=lower_text,  # any case, as --precision (QA 39 G #11: --policy LRU was refused)
        help="Cache policy: lru, or lfu (per-row counters over all rows, as FBGEMM's).",
        example="lfu",
    )
    fractions: tuple[float, ...] = option(
        DEFAULT_FRACTIONS,
        help="Cache sizes as shares of the window's distinct rows, e.g. 0.001,0.01,0.1.",
        example="0.001,0.01,0.1",
        item="float",
    )
    replay: bool = option(
        False,
        negative="no-replay",
        help="Also replay a synthetic lookup stream matching the window through an exact "
        "cache, for comparison (about 10-15 s at 200,000 rows).",
    )
    replay_rows: int = option(
        200_000,
        help=f"Distinct rows of the replayed stream ({MIN_REPLAY_ROWS:,}-{MAX_REPLAY_ROWS:,}; "
        "fewer rows run faster and lose the hottest rows' tail).",
        example="50000",
    )
    seed: int = option(0, help="Seed of the replayed stream's order.", example="1")

    def __post_init__(self) -> None:
        with as_flags(type(self)):  # a domain check's field as the flag typed, with a fix
            self._check()

    def _check(self) -> None:
        _window(self.window)
        check_cache_policy(self.policy, "policy")
        # --fractions "" is refused as every verb's blank list is (--models '': QA 35 S #17);
        # fractions=() in the API is "not given" (domain.options.build), the default sizes
        if not self.fractions or len(self.fractions) > MAX_FRACTIONS:
            raise InvalidSpecError(
                "fractions",
                f"needs 1 to {MAX_FRACTIONS} cache sizes",
                got=len(self.fractions),
                fix="e.g. --fractions 0.001,0.01,0.1",
            )
        for f in self.fractions:
            if not (math.isfinite(f) and 0.0 < f <= 1.0):
                raise InvalidSpecError(
                    "fractions",
                    "each must be in (0, 1] (a share of the window's distinct rows)",
                    got=f,
                    fix="e.g. --fractions 0.001,0.01,0.1",
                )
        twice = sorted({f for f in self.fractions if self.fractions.count(f) > 1})
        if twice:
            raise InvalidSpecError(
                "fractions",
                "must each be given once (a repeat prints the same row twice)",
                got=",".join(f"{f:g}" for f in twice),
                fix="drop the repeat",
            )
        if isinstance(self.replay_rows, bool) or not (
            MIN_REPLAY_ROWS <= self.replay_rows <= MAX_REPLAY_ROWS
        ):
            raise InvalidSpecError(
                "replay-rows",
                f"must be an integer in [{MIN_REPLAY_ROWS:,}, {MAX_REPLAY_ROWS:,}]",
                got=self.replay_rows,
            )
        check_seed(self.seed)


@dataclass(frozen=True, slots=True, kw_only=True)
class CachePoint:
    """One cache size: its share of the window's distinct rows, those rows, the predicted hit
    rate and the replayed one (None: not replayed)."""

    fraction: float
    cache_rows: int
    predicted_hit_rate: float
    replayed_hit_rate: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "fraction": self.fraction,
            "cache_rows": self.cache_rows,
            "predicted_hit_rate": self.predicted_hit_rate,
            "replayed_hit_rate": self.replayed_hit_rate,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictEmbeddingCacheResult:
    """The hit-rate curve of one window and policy: cache size -> predicted (and replayed)
    hit rate, the ceiling the window's first lookups set, and what it rests on."""

    window: str
    trace: str
    policy: str
    lookups: int
    unique_rows: int
    points: tuple[CachePoint, ...]
    #: 1 - 1 / mean reuse: a row's first lookup in the window always misses
    max_hit_rate: float
    validation: Validation
    #: the replayed stream: distinct rows and lookups (None: not replayed)
    replay_rows: int | None = None
    replay_lookups: int | None = None
    assumptions: dict[str, str] = field(default_factory=dict)
    #: what makes a figure less than it seems (a replayed stream unlike the window)
    warnings: tuple[str, ...] = ()

    @property
    def replayed(self) -> bool:
        return self.replay_rows is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "trace": self.trace,
            "policy": self.policy,
            "lookups": self.lookups,
            "unique_rows": self.unique_rows,
            "points": [p.to_dict() for p in self.points],
            "max_hit_rate": self.max_hit_rate,
            "replay_rows": self.replay_rows,
            "replay_lookups": self.replay_lookups,
            "validation": self.validation.to_dict(),
            "assumptions": dict(self.assumptions),
            "warnings": list(self.warnings),
        }


def predict_embedding_cache(
    request: PredictEmbeddingCacheRequest | None = None, /, **options: Any
) -> PredictEmbeddingCacheResult:
    """The LRU/LFU hit rate of an embedding cache holding each share of a window's distinct
    rows, from the locality model fitted on the ``dlrm_datasets`` window
    (:class:`gpucast.predict.embedding_cache.EmbeddingLocalityModel`); with ``replay``, also
    the hit rate of an exact cache over a synthetic stream drawn to match the window
    (:func:`gpucast.simulate.embedding_cache.replay_row_counts`)."""
    import dataclasses

    import numpy as np

    from gpucast.catalog.validation import validation_for
    from gpucast.inputs.embeddings import fitted_window

    request = resolve(PredictEmbeddingCacheRequest, request, options)
    locality = _window(request.window)
    fitted = fitted_window(request.data_dir, locality.window, locality.trace, flag="window")
    if fitted is None:
        raise InvalidSpecError(
            "data-dir",
            f"is needed: the hit-rate curve is fitted on dlrm_datasets/embedding_bag_"
            f"{locality.window}_locality_stats.txt, which no data folder given holds",
            fix="pass --data-dir ../shared/data (the published data folder) or set "
            "$GPUCAST_SHARED_DATA",
        )
    model = fitted.model
    fractions = np.array(request.fractions, dtype=np.float64)
    rows = np.round(fractions * fitted.unique_rows)
    predicted = model.hit_rate(fractions, policy=request.policy)  # type: ignore[arg-type]
    predicted = np.where(rows >= 1, predicted, 0.0)  # a cache of no rows hits nothing
    max_hit = 1.0 - model.compulsory_miss_rate()
    notes = {
        "locality": f"{fitted.describe()}, {fitted.path}",
        "model": "per-row lookup counts fitted per reuse bucket (a power law inside each); "
        "lookups in random order within the window (independent references: the files give "
        "reuse counts, not the order); "
        + (
            "LRU by Che's approximation on the finite window"
            if request.policy == "lru"
            else "LFU with per-row counters over all rows (FBGEMM's), the top rows by running "
            "count cached"
        ),
        "cache size": "a share of the window's distinct rows (rows the window never looks up "
        f"do not change its hit rate); a row's first lookup always misses: at most "
        f"{max_hit:.1%} ({model.mean_reuse():.1f} lookups per distinct row)",
    }
    lo, hi = VALIDATED_FRACTIONS
    outside = [f for f in request.fractions if not lo <= f <= hi]
    if outside:
        notes["validated range"] = (
            f"{', '.join(f'{f:g}' for f in outside)} outside the {lo:.0%}-{hi:.0%} of the "
            "distinct rows the curve was checked at"
        )
    if (rows < 1).any():
        smallest = 1.0 / fitted.unique_rows
        notes["cache size"] += (
            f"; a share under one row ({smallest:.2g} of {fitted.unique_rows:,}) caches "
            "nothing: hit rate 0"
        )
    replayed: list[float | None] = [None] * len(fractions)
    replay_rows = replay_lookups = None
    warnings: list[str] = []
    if request.replay:
        from gpucast.simulate.embedding_cache import replay_row_counts

        counts = model.sample_row_counts(request.replay_rows)
        capacities = np.round(fractions * len(counts)).astype(np.int64)
        rates, replay_lookups = replay_row_counts(
            counts, capacities, request.policy, np.random.default_rng(request.seed)
        )
        replay_rows = len(counts)
        replayed = [float(r) if c >= 1 else None for r, c in zip(rates, capacities, strict=True)]
        notes["replay"] = (
            f"{replay_rows:,} distinct rows whose lookup counts reproduce the window's row and "
            f"lookup shares per reuse bucket, {replay_lookups:,} lookups in a random order "
            f"(seed {request.seed}), through an exact {request.policy.upper()} cache of "
            "round(share x rows) rows: a check of the model against its own assumptions, not "
            "of the production order (the traces are not published)"
        )
        if any(c < 1 for c in capacities):
            notes["replay"] += "; sizes under one row of the stream are not replayed"
        reuse = replay_lookups / replay_rows
        if abs(reuse / model.mean_reuse() - 1.0) > REPLAY_REUSE_TOLERANCE:
            warnings.append(
                f"--replay-rows {replay_rows:,}: the replayed stream has {reuse:.1f} lookups "
                f"per distinct row where the window has {model.mean_reuse():.1f} (too few rows "
                "to draw its hottest ones), so its hit rates are not the window's; use more "
                "--replay-rows (e.g. the default 200,000)"
            )
    else:
        notes["replay"] = (
            "not replayed (--replay draws a synthetic stream matching the window and runs it "
            "through an exact cache)"
        )
    validation = validation_for("embedding-cache-hit-rate", [], "fp32", 1)
    validation = dataclasses.replace(
        validation,
        regime=f"{request.policy.upper()}, caches of {lo:.0%}-{hi:.0%} of a window's distinct rows",
    )
    return PredictEmbeddingCacheResult(
        window=fitted.window,
        trace=fitted.trace,
        policy=request.policy,
        lookups=fitted.lookups,
        unique_rows=fitted.unique_rows,
        points=tuple(
            CachePoint(
                fraction=float(f),
                cache_rows=int(n),
                predicted_hit_rate=float(p),
                replayed_hit_rate=r,
            )
            for f, n, p, r in zip(fractions, rows, predicted, replayed, strict=True)
        ),
        max_hit_rate=max_hit,
        validation=validation,
        replay_rows=replay_rows,
        replay_lookups=replay_lookups,
        assumptions=notes,
        warnings=tuple(warnings),
    )
