"""What `gpucast simulate train` feeds the transient simulator, and where each piece came from.

The shell between files and the pure simulator: it reads the catalog, a price table and the
published data (``--data-dir`` / ``$GPUCAST_SHARED_DATA``), fits the models the data supports
(server lifetimes, cluster scaling, VM start-up, checkpoint cost, restart penalty) and falls
back to documented constants where the data is absent. Every function returns its value and
a one-line ``source`` that ends up in the result's ``sources``. Fits are cached by
:mod:`gpucast.store.cache` (keyed by the data files' sizes and mtimes), so only the first call
on a given data folder pays for them.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucast.domain.errors import (
    InvalidSpecError,
    UnknownRegionError,
    UnknownWorkloadError,
)
from gpucast.domain.units import MIB

if TYPE_CHECKING:  # numpy, scipy and the models load inside the functions that use them
    import numpy as np

    from gpucast.domain.simulation import PriceTable, WorkerGroup
    from gpucast.predict.cluster import ClusterModel
    from gpucast.predict.revocation import LifetimeDistribution, RevocationModel
    from gpucast.simulate.transient import Delay, Sampler, SpeedTable

#: Strategies `simulate train` offers (FSDP has no validated cluster model to lean on).
STRATEGIES: tuple[str, ...] = ("ps-async", "ps-sync", "allreduce")
#: Restart penalty (s) when CM-DARE's chief_rejoining files are not at hand: the median of the
#: seven runs there (see gpucast.predict.revocation.estimate_restart_penalty).
DEFAULT_RESTART_PENALTY_S = 100.0
#: Checkpoint cost (s) when no checkpoint data is at hand: CM-DARE's mean checkpoint save time
#: of ResNet-32 (checkpoint/aggregated.csv, 3.38 s).
DEFAULT_CHECKPOINT_S = 3.38
#: Round trip between two regions of one cloud (s), added twice per PS step of a worker that
#: is not in the parameter servers' region. An order of magnitude (US east <-> west is
#: ~60-70 ms); override with --inter-region-rtt-ms.
DEFAULT_INTER_REGION_RTT_S = 0.07
#: TensorFlow checkpoints of CM-DARE's momentum-SGD models hold weights + one momentum slot:
#: ResNet-32's 1.86 M parameters give a 14.2 MB weight file (checkpoint/aggregated.csv).
CMDARE_CHECKPOINT_BYTES_PER_PARAMETER = 8.0
_FP32_BYTES = 4.0


# ---------------------------------------------------------------------------- cluster shape
def parse_groups(gpu: str, workers: int | None, region: str, spot: bool) -> tuple[WorkerGroup, ...]:
    """``--gpu K80`` + ``--workers 4``, or ``--gpu K80:2,P100:2@us-west1`` (GPU[:N][@REGION])."""
    from gpucast.domain.simulation import WorkerGroup

    items = [part.strip() for part in gpu.split(",") if part.strip()]
    if not items:
        raise InvalidSpecError("gpu", "must name a GPU", got=gpu, fix="e.g. --gpu K80")
    groups: list[WorkerGroup] = []
    counted = 0
    for item in items:
        m = re.fullmatch(r"([^:@]+)(?::(-?\d+))?(?:@([A-Za-z0-9-]+))?", item)
        if m is None:
            raise InvalidSpecError(
                "gpu",
                "must be GPU[:COUNT][@REGION], comma-separated",
                got=item,
                fix="e.g. --gpu K80:2,P100:2 or --gpu K80:4@us-west1",
            )
        name, count_text, where = m.group(1).strip(), m.group(2), m.group(3)
        if count_text is None:
            if len(items) > 1:
                raise InvalidSpecError(
                    "gpu",
                    "give a count for every GPU type of a mixed cluster",
                    got=item,
                    fix="e.g. --gpu K80:2,P100:2",
                )
            if workers is None:
                raise InvalidSpecError(
                    "workers", "is required", fix="e.g. --workers 4 (or --gpu K80:4)"
                )
            count = workers
        else:
            count = int(count_text)
            counted += count
        groups.append(WorkerGroup(gpu=name, count=count, region=where or region, spot=spot))
    if workers is not None and len(items) > 1 and workers != counted:
        raise InvalidSpecError(
            "workers",
            f"must equal the sum of the --gpu counts ({counted})",
            got=workers,
            fix="drop --workers or make the counts add up",
        )
    return tuple(groups)


def check_names(groups: Sequence[WorkerGroup], ps_region: str, catalog: Any) -> None:
    """Unknown GPUs and regions fail with close matches from the catalog."""
    known = set(catalog.regions())
    for where in [ps_region, *(g.region for g in groups)]:
        if where not in known:
            raise UnknownRegionError(where, sorted(known), fix="see `gpucast catalog offers`")
    for g in groups:
        catalog.gpu(g.gpu)  # raises UnknownGpuError with close matches


# ---------------------------------------------------------------------------- prices
@dataclass(frozen=True, slots=True, kw_only=True)
class Network:
    """Nominal NIC speeds (Gbit/s) from the catalog's offers, ``None`` where none matched."""

    ps_gbps: float | None
    worker_gbps: float | None
    source: str


def _cpu_offer(catalog: Any, region: str, provider: str | None) -> Any:
    cpu = [o for o in catalog.find_offers(provider=provider, region=region, cpu_only=True)]
    cpu = [o for o in cpu if o.vcpus >= 4]
    return min(cpu, key=lambda o: o.on_demand_usd_per_hour) if cpu else None


def _gpu_offer(catalog: Any, gpu: str, region: str, provider: str | None) -> Any:
    name = catalog.gpu(gpu).name
    offers = [
        o for o in catalog.find_offers(provider=provider, region=region, gpu=name) if o.gpus == 1
    ]
    return min(offers, key=lambda o: o.on_demand_usd_per_hour) if offers else None


def prices_and_network(
    price_table: Path | None,
    groups: Sequence[WorkerGroup],
    ps_region: str,
    ps_count: int,
    provider: str | None,
    catalog: Any,
) -> tuple[PriceTable, Network]:
    """Prices from ``--price-table`` or the catalog; NIC speeds from the catalog either way."""
    from gpucast.domain.simulation import CPU_PS, PriceTable

    ps_offer = _cpu_offer(catalog, ps_region, provider)
    gpu_offers = {(g.gpu, g.region): _gpu_offer(catalog, g.gpu, g.region, provider) for g in groups}
    worker_nics = [o.network_gbps for o in gpu_offers.values() if o is not None]
    network = Network(
        ps_gbps=None if ps_offer is None else ps_offer.network_gbps,
        worker_gbps=min(worker_nics) if worker_nics else None,
        source=(
            f"PS NIC {ps_offer.network_gbps:g} Gbit/s (catalog {ps_offer.provider} "
            f"{ps_offer.instance_type}, {ps_region})"
            if ps_offer is not None
            else f"no >= 4-vCPU CPU offer in {ps_region}: PS NIC at the cluster model's default"
        ),
    )
    if price_table is not None:
        from gpucast.store.datasets.transient import read_price_table

        return read_price_table(price_table), network
    mixed_regions = len({g.region for g in groups} | ({ps_region} if ps_count else set())) > 1
    prices: dict[tuple[str, str], float] = {}
    used: list[str] = []
    for (gpu, where), offer in gpu_offers.items():
        if offer is None:
            raise InvalidSpecError(
                "gpu/region",
                f"the catalog has no 1-GPU {catalog.gpu(gpu).name} offer in {where}",
                fix="pick another region (gpucast catalog offers) or pass --price-table CSV",
            )
        key = f"{gpu}@{where}" if mixed_regions else gpu
        prices[(key, "on-demand")] = offer.on_demand_usd_per_hour
        if offer.spot_usd_per_hour is not None:
            prices[(key, "spot")] = offer.spot_usd_per_hour
        used.append(f"{offer.provider} {where} {offer.instance_type}")
    if ps_count:
        if ps_offer is None:
            raise InvalidSpecError(
                "ps",
                f"the catalog has no CPU server with >= 4 vCPUs in {ps_region}",
                fix="pass --price-table CSV with a cpu-ps row, or --region with one",
            )
        key = f"{CPU_PS}@{ps_region}" if mixed_regions else CPU_PS
        prices[(key, "on-demand")] = ps_offer.on_demand_usd_per_hour
        if ps_offer.spot_usd_per_hour is not None:
            prices[(key, "spot")] = ps_offer.spot_usd_per_hour
        used.append(f"PS {ps_offer.instance_type}")
    snapshot = catalog.snapshot_date.isoformat()
    return PriceTable(usd_per_hour=prices, source=f"catalog {snapshot}: {'; '.join(used)}"), network


def check_prices(
    prices: PriceTable, groups: Sequence[WorkerGroup], ps_region: str, ps: int
) -> None:
    """Fail early, in one line, on a price table without a row the simulation needs."""
    from gpucast.domain.simulation import CPU_PS

    for g in groups:
        prices.price(g.gpu, spot=False, region=g.region)
        if g.spot:
            prices.price(g.gpu, spot=True, region=g.region)
    if ps:
        prices.price(CPU_PS, spot=False, region=ps_region)


# ---------------------------------------------------------------------------- lifetimes
def lifetimes(
    groups: Sequence[WorkerGroup],
    data_dir: Path | None,
    hazard: float | None,
    band: str | None,
    method: str,
) -> tuple[list[LifetimeDistribution | None], str]:
    """One lifetime distribution per spot group: a user hazard, fitted data or a band."""
    from gpucast.predict.revocation import ExponentialLifetime, hazard_from_interruption_band

    if not any(g.spot for g in groups):
        return [None] * len(groups), "not used (every worker on demand)"
    if hazard is not None:
        if not (math.isfinite(hazard) and hazard > 0):
            raise InvalidSpecError(
                "hazard-per-hour", "must be > 0 revocations per server-hour", got=hazard
            )
        dist = ExponentialLifetime(
            hazard_per_hour=hazard, source=f"user-given hazard {hazard:g} revocations/h"
        )
        return [dist if g.spot else None for g in groups], dist.source
    fallback = hazard_from_interruption_band(band) if band is not None else None
    path = None if data_dir is None else data_dir / "transient" / "lifetime" / "lifetime.csv"
    if path is None or not path.is_file():
        if fallback is None:
            raise InvalidSpecError(
                "revocation data",
                "no lifetime data found for spot servers",
                fix="pass --data-dir ../shared/data, --hazard-per-hour H or "
                "--interruption-band 5-10%",
            )
        return [fallback if g.spot else None for g in groups], fallback.source
    model, facts = fitted_lifetime_model(path, method)
    out: list[LifetimeDistribution | None] = []
    for g in groups:
        if not g.spot:
            out.append(None)
            continue
        if fallback is None and g.gpu.lower() not in model.gpus():
            raise InvalidSpecError(
                "revocation data",
                f"no lifetimes for {g.gpu} (have {', '.join(model.gpus())})",
                fix="give --hazard-per-hour H or --interruption-band 5-10%",
            )
        out.append(model.distribution(g.gpu, g.region, fallback=fallback))
    skipped = f", {facts['skipped']} rows skipped" if facts["skipped"] else ""
    return out, f"RevocationModel ({method}) fitted on {path} ({facts['rows']} rows{skipped})"


def fitted_lifetime_model(
    csv: Path, method: str = "weibull"
) -> tuple[RevocationModel, dict[str, Any]]:
    """:class:`RevocationModel` fitted on a lifetime CSV, through the fit cache; the facts
    say how many rows were read (``rows``), skipped (``skipped``) and fitted (``lifetimes``)."""
    from gpucast.predict.revocation import RevocationModel
    from gpucast.store.cache import cached_fit

    def fit() -> tuple[RevocationModel, dict[str, Any]]:
        from gpucast.store.datasets.transient import lifetimes_frame, read_lifetimes

        parsed = read_lifetimes(csv)
        frame = lifetimes_frame(parsed.records)
        facts = {
            "rows": len(parsed.records),
            "skipped": len(parsed.skipped),
            "lifetimes": len(frame),
        }
        return RevocationModel(method=method).fit(frame), facts

    return cached_fit(
        "revocation",
        fit,
        model_type=RevocationModel,
        files=[csv],
        params={"method": method},
        code=("gpucast.store.datasets.transient",),
    )


# ---------------------------------------------------------------------------- workload
def _builtin_workloads() -> list[str]:
    """:func:`gpucast.workloads.registry.list_workloads`, cached: the registry imports torch
    (a second), which a cached profile does not need."""
    from gpucast.store.cache import cached_json

    def names() -> list[str]:
        from gpucast.workloads.registry import list_workloads

        return list(list_workloads())

    def load(data: Any) -> list[str]:
        if not isinstance(data, list):
            raise TypeError("expected a list of names")
        return [str(n) for n in data]

    return cached_json("workload-names", names, dump=list, load=load, code=("gpucast.workloads",))


def _is_user_spec(workload: str) -> bool:
    from gpucast.workloads.user import is_user_spec

    return is_user_spec(workload)


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadInputs:
    """What the cluster and checkpoint models need to know about the trained model."""

    name: str
    param_bytes: float
    n_tensors: int
    max_tensor_bytes: float | None
    checkpoint_bytes: float
    source: str
    facts: Any = None  # gpucast.plan.inputs.WorkloadFacts for built-ins (roofline speed)
    cmdare_key: str | None = None  # CM-DARE model key for measured speeds


def _cmdare_features(data_dir: Path | None) -> Any:
    path = None if data_dir is None else data_dir / "cmdare" / "speed" / "single_gpu_speed.csv"
    if path is None or not path.is_file():
        return None, None
    from gpucast.store.datasets.cmdare_cluster import read_model_features

    return read_model_features(path).frame, path


def workload_inputs(workload: str | None, data_dir: Path | None, precision: str) -> WorkloadInputs:
    """Parameter bytes and tensor count: the profiler for built-in (and ``module:factory``)
    workloads, CM-DARE's feature table for CM-DARE model names."""
    if not workload:
        raise InvalidSpecError(
            "workload",
            "is required (the cluster model needs its parameter bytes and tensor count)",
            fix="e.g. --workload cifar-resnet32 (gpucast profile --help lists them)",
        )
    builtins = _builtin_workloads()
    if workload in builtins or _is_user_spec(workload):
        from gpucast.cli.plan import workload_profile
        from gpucast.plan.inputs import WorkloadFacts

        prof = workload_profile(workload, precision, None)
        facts = WorkloadFacts.from_profile(prof)
        memory = prof.memory
        return WorkloadInputs(
            name=workload,
            param_bytes=float(prof.parameters_total) * _FP32_BYTES,
            n_tensors=max(1, int(prof.parameter_tensors)),
            max_tensor_bytes=float(prof.parameter_tensor_max_mib * MIB) or None,
            checkpoint_bytes=float(memory.weights_bytes + memory.optimizer_state_bytes),
            source=f"profiler: {workload} ({prof.parameters_total:,} parameters, "
            f"{prof.parameter_tensors} tensors)",
            facts=facts,
        )
    from gpucast.store.datasets.cmdare_cluster import model_key

    features, path = _cmdare_features(data_dir)
    key = model_key(workload)
    if features is not None:
        rows = features[features["model_key"] == key]
        if len(rows):
            row = rows.iloc[0]
            n_params = float(row["n_parameters"])
            mtb = float(row["max_tensor_bytes"])
            return WorkloadInputs(
                name=str(row["model"]),
                param_bytes=n_params * _FP32_BYTES,
                n_tensors=int(row["n_tensors"]),
                max_tensor_bytes=mtb if math.isfinite(mtb) else None,
                checkpoint_bytes=n_params * CMDARE_CHECKPOINT_BYTES_PER_PARAMETER,
                source=f"CM-DARE features {path}: {row['model']} ({n_params:,.0f} parameters, "
                f"{int(row['n_tensors'])} tensors)",
                cmdare_key=key,
            )
    names = builtins + ([] if features is None else [str(m) for m in features["model"]])
    raise UnknownWorkloadError(
        workload,
        names,
        fix="a built-in workload, module:factory, or a CM-DARE model name with --data-dir",
    )


# ---------------------------------------------------------------------------- speed
@dataclass(frozen=True, slots=True, kw_only=True)
class StepTime:
    """One worker's step time alone on its GPU; ``includes_ps``: measured with 1 PS."""

    step_time_s: float
    includes_ps: bool
    source: str


def parse_speed(text: str | None, groups: Sequence[WorkerGroup]) -> dict[str, float]:
    """``--speed 4.5`` (one GPU type) or ``--speed K80:4.5,P100:9.1`` -> steps/s per GPU."""
    if text is None:
        return {}
    gpus = {g.gpu for g in groups}
    out: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, _, value = part.rpartition(":")
        if not name:
            if len(gpus) > 1:
                raise InvalidSpecError(
                    "speed",
                    "needs GPU:STEPS_PER_S for each GPU of a mixed cluster",
                    got=text,
                    fix="e.g. --speed K80:4.5,P100:9.1",
                )
            name = next(iter(gpus))
        try:
            speed = float(value)
        except ValueError:
            speed = math.nan
        if not (math.isfinite(speed) and speed > 0):
            raise InvalidSpecError(
                "speed",
                "must be > 0 steps/s",
                got=part,
                fix="give the measured single-worker steps/s, e.g. --speed 4.5",
            )
        if name not in gpus:
            raise InvalidSpecError(
                "speed", f"names {name}, which is not a --gpu of this cluster", got=part
            )
        out[name] = speed
    return out


def _cmdare_step_time_s(data_dir: Path | None, gpu: str, key: str) -> tuple[float, str] | None:
    path = None if data_dir is None else data_dir / "cmdare" / "speed" / "single_gpu_speed.csv"
    if path is None or not path.is_file():
        return None
    from gpucast.store.datasets.cmdare_cluster import model_key
    from gpucast.store.datasets.cmdare_speed import read_single_gpu_speed

    frame = read_single_gpu_speed(path).frame
    rows = frame[
        (frame["gpu"].astype(str).str.lower() == gpu.lower())
        & (frame["model"].astype(str).map(model_key) == key)
    ]
    if rows.empty:
        return None
    median = float(rows["step_time_s"].median())
    return median, f"CM-DARE {path.name}: median of {len(rows)} samples"


def step_times(
    groups: Sequence[WorkerGroup],
    work: WorkloadInputs,
    given: dict[str, float],
    strategy: str,
    data_dir: Path | None,
    batch_size: int,
    precision: str,
    catalog: Any,
) -> dict[str, StepTime]:
    """Single-worker step time per GPU type: --speed, a published measurement, CM-DARE's
    single-GPU data, else the roofline prediction from the workload's profile."""
    from gpucast.store.datasets.transient import PUBLISHED_SINGLE_WORKER_STEPS_PER_S

    out: dict[str, StepTime] = {}
    for g in groups:
        if g.gpu in out:
            continue
        if g.gpu in given:
            out[g.gpu] = StepTime(
                step_time_s=1.0 / given[g.gpu],
                includes_ps=strategy != "allreduce",
                source=f"--speed {given[g.gpu]:g} steps/s (1 worker"
                + (" + 1 PS)" if strategy != "allreduce" else " alone)"),
            )
            continue
        published = PUBLISHED_SINGLE_WORKER_STEPS_PER_S.get(
            (work.name.lower(), catalog.gpu(g.gpu).name)
        )
        if published is not None:
            out[g.gpu] = StepTime(
                step_time_s=1.0 / published[0],
                includes_ps=True,
                source=f"{published[0]:g} steps/s (1 worker + 1 PS) from {published[1]}",
            )
            continue
        if work.cmdare_key is not None:
            found = _cmdare_step_time_s(data_dir, g.gpu, work.cmdare_key)
            if found is None:
                raise InvalidSpecError(
                    "speed",
                    f"CM-DARE has no single-GPU speed of {work.name} on {g.gpu}",
                    fix="pass --speed STEPS_PER_S (e.g. from gpucast predict speed)",
                )
            out[g.gpu] = StepTime(step_time_s=found[0], includes_ps=True, source=found[1])
            continue
        from gpucast.predict.roofline import predict_step_time

        est = predict_step_time(
            work.facts.roofline_workload(batch_size), catalog.gpu(g.gpu), precision
        )
        out[g.gpu] = StepTime(
            step_time_s=est.value,
            includes_ps=False,
            source=f"roofline ({est.source}) {est.value * 1e3:.1f} ms at batch {batch_size} "
            f"on {catalog.gpu(g.gpu).name} (range {est.lower * 1e3:.1f}-{est.upper * 1e3:.1f})",
        )
    return out


def cluster_model(data_dir: Path | None) -> tuple[ClusterModel, str]:
    """The distributed-scaling model: fitted on CM-DARE's cluster_scaling runs when at hand,
    else carrying the planner's built-in constants (:class:`gpucast.plan.inputs.PerfParams`)."""
    from gpucast.predict.cluster import ClusterModel

    folder = None if data_dir is None else data_dir / "cmdare" / "cluster_scaling"
    if folder is not None and folder.is_dir():
        model, facts = fitted_cluster_model(folder)
        cv = "n/a" if model.cv_mape_pct_ is None else f"{model.cv_mape_pct_:.1f}%"
        return model, (
            f"ClusterModel fitted on {folder} ({facts['runs']} runs; NIC share "
            f"{model.network_efficiency_:.3f}, {1e6 * (model.per_tensor_cost_s_ or 0):.1f} us "
            f"per tensor; leave-one-model-out MAPE {cv})"
        )
    from gpucast.plan.inputs import PerfParams

    perf = PerfParams()
    defaults = ClusterModel()
    state = {
        "params": {
            **{k: getattr(defaults, k) for k in _CLUSTER_PARAMS},
            "bottleneck_utilization": perf.ps_bottleneck_utilization,
            "hop_latency_s": perf.hop_latency_s,
            "overlap_fraction": perf.overlap_fraction,
        },
        "network_efficiency": perf.ps_network_efficiency,
        "per_tensor_cost_s": perf.ps_per_tensor_cost_s,
        "log_residual_q10": perf.ps_log_residual_q10,
        "log_residual_q90": perf.ps_log_residual_q90,
        "cv_mape_pct": perf.ps_cv_mape_pct,
        "train_mape_pct": None,
        "single_worker_step_time_s": {},
        "models": [],
    }
    model = ClusterModel.from_dict(
        {"kind": ClusterModel.kind, "schema_version": ClusterModel.schema_version, "state": state}
    )
    return model, f"ClusterModel with {perf.source} (no cmdare/cluster_scaling data given)"


def fitted_cluster_model(folder: Path) -> tuple[ClusterModel, dict[str, Any]]:
    """:class:`ClusterModel` fitted on CM-DARE's ``cluster_scaling`` folder, through the fit
    cache; the facts say how many runs it was fitted on (``runs``)."""
    from gpucast.predict.cluster import ClusterModel
    from gpucast.store.cache import cached_fit

    def fit() -> tuple[ClusterModel, dict[str, Any]]:
        from gpucast.store.datasets.cmdare_cluster import cluster_fit_table

        table = cluster_fit_table(folder)
        return ClusterModel().fit(table.frame), {"runs": len(table.frame)}

    return cached_fit(
        "cluster",
        fit,
        model_type=ClusterModel,
        files=[folder],
        code=("gpucast.predict.comm", "gpucast.store.datasets.cmdare_cluster"),
    )


_CLUSTER_PARAMS = (
    "ps_network_gbps",
    "bytes_per_parameter",
    "efficiency_prior_weight",
    "network_gbps",
    "gpus_per_node",
    "intra_node_gbps",
)


def speed_table(
    groups: Sequence[WorkerGroup],
    steps: dict[str, StepTime],
    model: ClusterModel,
    work: WorkloadInputs,
    *,
    strategy: str,
    ps_shards: int,
    ps_region: str,
    network: Network,
    rtt_s: float,
) -> tuple[SpeedTable, str]:
    """Cluster steps/s for every count of ready workers per group, from the cluster model."""
    from gpucast.simulate.transient import SpeedTable

    includes_ps = all(steps[g.gpu].includes_ps for g in groups)
    per_group = [
        steps[g.gpu].step_time_s + (2.0 * rtt_s if g.region != ps_region else 0.0) for g in groups
    ]

    def speed(alive: Sequence[int]) -> float:
        times = [t for t, n in zip(per_group, alive, strict=True) for _ in range(int(n))]
        est = model.predict(
            times,
            ps_shards=max(1, ps_shards),
            strategy=strategy,
            param_bytes=work.param_bytes,
            n_tensors=work.n_tensors,
            max_tensor_bytes=work.max_tensor_bytes,
            ps_network_gbps=network.ps_gbps,
            network_gbps=network.worker_gbps,
            step_time_includes_ps=includes_ps,
        )
        return float(est.value)

    table = SpeedTable.from_function(speed, [g.count for g in groups])
    full = float(table.table[tuple(g.count for g in groups)])
    one = "; ".join(f"{g}: {s.source}" for g, s in steps.items())
    mixed = (
        ""
        if includes_ps or all(not s.includes_ps for s in steps.values())
        else ("; measured (with-PS) and predicted (bare) step times mixed: all taken as bare")
    )
    remote = [g for g in groups if g.region != ps_region]
    rtt = (
        f"; {len(remote)} group(s) outside the PS region pay 2 x {rtt_s * 1e3:g} ms per step"
        if remote and rtt_s > 0
        else ""
    )
    shards = f" with {ps_shards} PS shard(s)" if strategy != "allreduce" else ""
    return table, (
        f"cluster model {strategy}{shards} ({network.source}); {full:.3g} steps/s with every "
        f"worker up; single worker: {one}{mixed}{rtt}"
    )


# ---------------------------------------------------------------------------- overheads
def startup(
    groups: Sequence[WorkerGroup], ps_region: str, data_dir: Path | None
) -> tuple[list[Delay], list[Delay], str]:
    """Start-up delay samplers (spot, on-demand) per worker group plus one for the PS:
    :class:`~gpucast.predict.overheads.StartupModel` fitted on CM-DARE's launches."""
    import numpy as np

    folder = None if data_dir is None else data_dir / "cmdare" / "startup_time"
    n = len(groups) + 1
    if folder is None or not folder.is_dir():
        from gpucast.plan.inputs import RiskInputs

        fields: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(RiskInputs)}
        spot_s, od_s = float(fields["startup_spot_s"]), float(fields["startup_on_demand_s"])
        return (
            [spot_s] * n,
            [od_s] * n,
            f"planner default {spot_s:g} s (spot) / {od_s:g} s (on-demand) per VM start "
            "(no cmdare/startup_time data given)",
        )
    from gpucast.predict.overheads import StartupModel
    from gpucast.store.cache import cached_fit

    def fit(pooled: bool) -> tuple[StartupModel, dict[str, Any]]:
        from gpucast.store.datasets.transient import read_startup_times

        frame = read_startup_times(folder)
        return StartupModel().fit(frame.assign(gpu="any") if pooled else frame), {
            "launches": len(frame)
        }

    def cached(pooled: bool) -> tuple[StartupModel, dict[str, Any]]:
        return cached_fit(
            "startup",
            lambda: fit(pooled),
            model_type=StartupModel,
            files=[folder],
            params={"gpus": "pooled as 'any'" if pooled else "per GPU"},
            code=("gpucast.store.datasets.transient",),
        )

    by_gpu, facts = cached(pooled=False)
    pooled, _ = cached(pooled=True)
    notes: list[str] = []

    def sampler(gpu: str, market: str, region: str) -> Sampler:
        probe = np.random.default_rng(0)
        for model, name in ((by_gpu, gpu), (pooled, "any")):
            for where in (region, None):
                try:
                    model.sample(probe, 0, gpu=name, market=market, region=where)
                except InvalidSpecError:
                    continue
                label = f"{name} {market} {where or 'regions pooled'}"
                if label not in notes:
                    notes.append(label)
                return _bind(model, name, market, where)
        raise AssertionError("the pooled start-up model covers every market")  # pragma: no cover

    spot: list[Delay] = [sampler(g.gpu, "spot", g.region) for g in groups]
    spot.append(sampler("cpu", "spot", ps_region))
    od: list[Delay] = [sampler(g.gpu, "on-demand", g.region) for g in groups]
    od.append(sampler("cpu", "on-demand", ps_region))
    return (
        spot,
        od,
        f"StartupModel (lognormal phases) fitted on {folder} ({facts['launches']} launches); "
        f"used: {', '.join(notes)}",
    )


def _bind(model: Any, gpu: str, market: str, region: str | None) -> Sampler:
    def draw(rng: np.random.Generator, n: int) -> Any:
        return model.sample(rng, n, gpu=gpu, market=market, region=region)

    return draw


def checkpoint_s(work: WorkloadInputs, data_dir: Path | None) -> tuple[float, str]:
    """Seconds per checkpoint: CheckpointModel on CM-DARE's saves at this workload's size."""
    path = None if data_dir is None else data_dir / "cmdare" / "checkpoint" / "whole_data.csv"
    if path is None or not path.is_file():
        return DEFAULT_CHECKPOINT_S, (
            f"constant {DEFAULT_CHECKPOINT_S:g} s (CM-DARE ResNet-32 mean; "
            "no checkpoint data given)"
        )
    from gpucast.predict.overheads import CheckpointModel
    from gpucast.store.cache import cached_fit

    def fit() -> tuple[CheckpointModel, dict[str, Any]]:
        from gpucast.store.datasets.cmdare_checkpoint import read_checkpoint_csv

        table = read_checkpoint_csv(path)
        return CheckpointModel().fit(table.frame), {"saves": len(table.frame)}

    model, facts = cached_fit(
        "checkpoint",
        fit,
        model_type=CheckpointModel,
        files=[path],
        code=("gpucast.store.datasets.cmdare_checkpoint",),
    )
    size_mb = work.checkpoint_bytes / 1e6
    est = model.predict(size_mb)
    return est.value, (
        f"CheckpointModel fitted on {path} ({facts['saves']} saves): {est.value:.2f} s for "
        f"{size_mb:.1f} MB (range {est.lower:.2f}-{est.upper:.2f})"
    )


def restart_penalty(data_dir: Path | None) -> tuple[float, str]:
    from gpucast.predict.revocation import estimate_restart_penalty

    folder = None if data_dir is None else data_dir / "cmdare" / "chief_rejoining"
    if folder is None or not folder.is_dir():
        return DEFAULT_RESTART_PENALTY_S, (
            f"default {DEFAULT_RESTART_PENALTY_S:g} s (CM-DARE chief_rejoining median)"
        )
    from gpucast.store.datasets.transient import read_chief_rejoining

    est = estimate_restart_penalty(read_chief_rejoining(folder))
    return (
        est.value,
        f"{est.source}: median {est.value:.0f} s (range {est.lower:.0f}-{est.upper:.0f})",
    )
