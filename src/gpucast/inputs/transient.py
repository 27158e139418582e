"""The cluster of ``simulate train``: its groups, prices, network and speed by live nodes.

* :func:`parse_groups` -- ``K80`` + ``workers=4`` or ``K80:2,P100:2@us-west1``;
* :func:`prices_and_network` -- per-node prices (a price table or the catalog's cheapest
  offer with ``gpus_per_node`` GPUs, or the named instance type) and NIC speeds;
* :func:`step_times` -- one worker's step time per GPU type: a measured speed, a published
  one, CM-DARE's single-GPU data, else the roofline of the workload's profile (calibrated by
  a stored measurement when there is one -- the same prediction ``plan train`` makes);
* :func:`speed_table` -- the cluster's steps/s for every count of live nodes per group,
  from the cluster model (a node carries ``gpus_per_node`` workers).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucast.domain.catalog import estimated_prices_note
from gpucast.domain.cmdare import CMDARE_BATCH
from gpucast.domain.errors import InvalidSpecError, UnknownRegionError
from gpucast.domain.provenance import Sourced
from gpucast.inputs.data import data_path

if TYPE_CHECKING:
    from gpucast.domain.simulation import PriceTable, WorkerGroup
    from gpucast.inputs.workload import WorkloadInputs
    from gpucast.predict.cluster import ClusterModel
    from gpucast.predict.collective import CollectiveConstants
    from gpucast.predict.roofline import Calibration, RooflineEfficiency
    from gpucast.simulate.transient import SpeedTable

#: Round trip between two regions of one cloud (s), added twice per PS step of a worker that
#: is not in the parameter servers' region. An order of magnitude (US east <-> west is
#: ~60-70 ms); override with --inter-region-rtt-ms.
DEFAULT_INTER_REGION_RTT_S = 0.07
#: Strategies whose steps are global steps (every worker takes part in each one).
SYNCHRONOUS: tuple[str, ...] = ("ps-sync", "allreduce", "fsdp")


def parse_groups(gpu: str, workers: int | None, region: str, spot: bool) -> tuple[WorkerGroup, ...]:
    """``gpu=K80`` + ``workers=4``, or ``K80:2,P100:2@us-west1`` (GPU[:N][@REGION])."""
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


def gpu_offer(
    catalog: Any,
    gpu: str,
    region: str,
    provider: str | None,
    *,
    gpus_per_node: int = 1,
    instance_type: str | None = None,
) -> Any:
    """The cheapest offer of ``gpu`` in ``region`` with ``gpus_per_node`` GPUs (or the named
    ``instance_type``); ``None`` when the catalog has none."""
    name = catalog.gpu(gpu).name
    offers = catalog.find_offers(provider=provider, region=region, gpu=name)
    if instance_type is not None:
        offers = [o for o in offers if o.instance_type == instance_type]
    else:
        offers = [o for o in offers if o.gpus == gpus_per_node]
    return min(offers, key=lambda o: o.on_demand_usd_per_hour) if offers else None


def prices_and_network(
    price_table: Path | None,
    groups: Sequence[WorkerGroup],
    ps_region: str,
    ps_count: int,
    provider: str | None,
    catalog: Any,
    *,
    gpus_per_node: int = 1,
    instance_type: str | None = None,
) -> tuple[PriceTable, Network]:
    """Per-node prices from ``price_table`` or the catalog; NIC speeds from the catalog."""
    from gpucast.domain.simulation import CPU_PS, PriceTable

    ps_offer = _cpu_offer(catalog, ps_region, provider)
    gpu_offers = {
        (g.gpu, g.region): gpu_offer(
            catalog,
            g.gpu,
            g.region,
            provider,
            gpus_per_node=gpus_per_node,
            instance_type=instance_type,
        )
        for g in groups
    }
    worker_offers = [o for o in gpu_offers.values() if o is not None]
    slowest = min(worker_offers, key=lambda o: o.network_gbps) if worker_offers else None
    if ps_count == 0:  # all-reduce / FSDP: no parameter server, the workers' NICs carry it
        source = (
            f"worker NIC {slowest.network_gbps:g} Gbit/s (catalog {slowest.provider} "
            f"{slowest.instance_type}, {slowest.region}; the slowest worker's)"
            if slowest is not None
            else "worker NIC at the cluster model's default (no catalog offer)"
        )
    elif ps_offer is not None:
        source = (
            f"PS NIC {ps_offer.network_gbps:g} Gbit/s (catalog {ps_offer.provider} "
            f"{ps_offer.instance_type}, {ps_region})"
        )
    else:
        source = f"no >= 4-vCPU CPU offer in {ps_region}: PS NIC at the cluster model's default"
    network = Network(
        ps_gbps=None if ps_offer is None else ps_offer.network_gbps,
        worker_gbps=None if slowest is None else slowest.network_gbps,
        source=source,
    )
    if price_table is not None:
        from gpucast.store.datasets.transient import read_price_table

        return read_price_table(price_table), network
    mixed_regions = len({g.region for g in groups} | ({ps_region} if ps_count else set())) > 1
    prices: dict[tuple[str, str], float] = {}
    used: list[str] = []
    for (gpu, where), offer in gpu_offers.items():
        if offer is None:
            what = instance_type or f"{gpus_per_node}-GPU {catalog.gpu(gpu).name}"
            raise InvalidSpecError(
                "gpu/region",
                f"the catalog has no {what} offer in {where}",
                fix="pick another region or --gpus-per-node (gpucast catalog offers), or pass "
                "--price-table CSV",
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
    servers = [*worker_offers, *([ps_offer] if ps_count and ps_offer is not None else [])]
    guessed = estimated_prices_note(  # QA 37 T #7: plan train said so, simulate train did not
        dict.fromkeys(
            f"{o.provider}/{o.region} {o.instance_type}" for o in servers if o.price_estimated
        )
    )
    estimated = f"; estimated prices: {guessed}" if guessed else ""
    return PriceTable(
        usd_per_hour=prices, source=f"catalog {snapshot}: {'; '.join(used)}{estimated}"
    ), network


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


def spot_above_on_demand(prices: PriceTable, groups: Sequence[WorkerGroup]) -> str | None:
    """A note where a spot group is priced above on demand (a --price-table with the markets
    swapped would otherwise go unnoticed, QA 39 K #5); ``None``: spot is the cheaper."""
    dear = []
    for g in groups:
        if g.spot:
            spot = prices.price(g.gpu, spot=True, region=g.region)
            on_demand = prices.price(g.gpu, spot=False, region=g.region)
            if spot > on_demand:
                dear.append(f"{g.gpu} in {g.region} US$ {spot:.4g}/h vs {on_demand:.4g}/h")
    if not dear:
        return None
    return (
        f"spot is priced above on demand here ({'; '.join(dear)}): the spot runs cost more "
        "per hour than the on-demand ones; check the prices (--price-table: market column)"
    )


# ---------------------------------------------------------------------------- speed
@dataclass(frozen=True, slots=True, kw_only=True)
class StepTime:
    """One worker's step time alone on its GPU; ``includes_ps``: measured with 1 PS.
    ``lower_ratio``/``upper_ratio``: the model's interval as ratios of the value (1 when the
    step time was measured); ``batch_size``: the per-GPU batch the roofline priced (``None``:
    measured, at whatever batch the measurement ran)."""

    step_time_s: float
    includes_ps: bool
    source: str
    lower_ratio: float = 1.0
    upper_ratio: float = 1.0
    batch_size: int | None = None


def parse_speed(text: str | None, groups: Sequence[WorkerGroup]) -> dict[str, float]:
    """``4.5`` (one GPU type) or ``K80:4.5,P100:9.1`` -> steps/s per GPU."""
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
        if name in out:
            raise InvalidSpecError(
                "speed",
                f"gives {name} twice ({out[name]:g} and {speed:g} steps/s)",
                got=text,
                fix=f"give one measured speed per GPU type, e.g. --speed {name}:{speed:g}",
            )
        out[name] = speed
    return out


def _cmdare_step_time_s(data_dir: Path | None, gpu: str, key: str) -> tuple[float, str] | None:
    path = data_path(data_dir, "cmdare", "speed", "single_gpu_speed.csv")
    if path is None:
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
    return median, (
        f"CM-DARE {path.name}: median of {len(rows)} samples (batch {CMDARE_BATCH}, fp32, "
        "TensorFlow 1.x, as measured: --software does not apply)"
    )


def _check_cmdare_setup(name: str, batch_size: int, precision: str) -> None:
    """A CM-DARE model name prices CM-DARE's measured step, which ran at batch
    :data:`CMDARE_BATCH` in fp32: another batch or precision is one clear error (it was the
    measured step, unchanged, without a word)."""
    given = [
        text
        for text, differs in (
            (f"--batch-size {batch_size}", batch_size != CMDARE_BATCH),
            (f"--precision {precision}", precision != "fp32"),
        )
        if differs
    ]
    if given:
        raise InvalidSpecError(
            "batch-size" if batch_size != CMDARE_BATCH else "precision",
            f"{name} is a CM-DARE model name: its step is CM-DARE's measurement at batch "
            f"{CMDARE_BATCH}, fp32, which {' and '.join(given)} would not change",
            fix=f"pass --batch-size {CMDARE_BATCH} --precision fp32, or a built-in workload "
            "whose roofline prices any batch (gpucast profile --help lists them), or "
            "--speed STEPS_PER_S",
        )


def step_times(
    groups: Sequence[WorkerGroup],
    work: WorkloadInputs,
    given: dict[str, float],
    strategy: str,
    data_dir: Path | None,
    batch_size: int,
    precision: str,
    catalog: Any,
    calibration: Sourced[Calibration] | None = None,
    efficiency: RooflineEfficiency | None = None,
    uncalibrated: str = "",
    *,
    software: str,
) -> dict[str, StepTime]:
    """Single-worker step time per GPU type: a given speed, a published measurement of this
    architecture in this setup (batch, precision, ``software`` stack), CM-DARE's single-GPU
    data, else the roofline prediction from the workload's profile (``uncalibrated``: why no
    stored measurement calibrates it, where none does) -- one GPU alone, the step ``gpucast
    predict train`` prints, to which the cluster model adds the PS or all-reduce."""
    from gpucast.store.datasets.transient import published_single_worker

    out: dict[str, StepTime] = {}
    for g in groups:
        if g.gpu in out:
            continue
        if g.gpu in given:
            out[g.gpu] = StepTime(
                step_time_s=1.0 / given[g.gpu],
                includes_ps=strategy not in ("allreduce", "fsdp"),
                source=f"--speed {given[g.gpu]:g} steps/s (1 worker"
                + (" + 1 PS)" if strategy not in ("allreduce", "fsdp") else " alone)"),
            )
            continue
        published = published_single_worker(work.name, work.options, catalog.gpu(g.gpu).name)
        if published is not None and (batch_size, precision, software) == (
            published.batch_size,
            published.precision,
            published.software,
        ):
            out[g.gpu] = StepTime(
                step_time_s=1.0 / published.steps_per_s,
                includes_ps=True,
                source=f"{published.steps_per_s:g} steps/s ({published.setup}) from "
                f"{published.source}",
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
            _check_cmdare_setup(work.name, batch_size, precision)
            out[g.gpu] = StepTime(step_time_s=found[0], includes_ps=True, source=found[1])
            continue
        from gpucast.predict.roofline import predict_step_time

        spec = catalog.gpu(g.gpu)
        est = predict_step_time(
            work.facts.roofline_workload(batch_size),
            spec,
            precision,
            calibration=None if calibration is None else calibration.value,
            efficiency=efficiency,
        )
        cal = (
            f", calibrated by {calibration.source}"
            if calibration is not None
            else (f", calibration: none: {uncalibrated}" if uncalibrated else "")
        )
        out[g.gpu] = StepTime(
            step_time_s=est.value,
            includes_ps=False,
            source=f"roofline ({est.source}{cal}) {est.value * 1e3:.1f} ms at batch "
            f"{batch_size} on {spec.name} alone, {software} stack, as `gpucast predict train` "
            f"(range {est.lower * 1e3:.1f}-{est.upper * 1e3:.1f})"
            + (
                ""
                if published is None
                else f"; measured in another setup ({published.setup}): "
                f"{1e3 / published.steps_per_s:.1f} ms with the PS"
            ),
            lower_ratio=est.lower / est.value,
            upper_ratio=est.upper / est.value,
            batch_size=batch_size,
        )
    return out


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
    catalog: Any,
    gpus_per_node: int = 1,
    intra_node_gbps: float | None = None,
    collective: CollectiveConstants | None = None,
    step_scale: Callable[[Sequence[int]], Sequence[float]] | None = None,
) -> tuple[SpeedTable, str]:
    """Cluster steps/s for every count of live nodes per group, from the cluster model;
    ``intra_node_gbps`` (Gbit/s per GPU, a user's cluster) wins over the GPUs' own links (a
    node of ``gpus_per_node`` at the catalog's rule, as ``plan train`` prices its offers:
    :func:`gpucast.catalog.pcie_allreduce.data_parallel_gbps`).
    ``step_scale(live nodes per group)``: a factor per group on its single-worker step time
    (the per-GPU batch an elastic job re-plans at those counts; ``inf``: it does not fit ->
    0)."""
    from gpucast.catalog.pcie_allreduce import data_parallel_gbps
    from gpucast.simulate.transient import SpeedTable

    includes_ps = all(steps[g.gpu].includes_ps for g in groups)
    per_group = [
        steps[g.gpu].step_time_s + (2.0 * rtt_s if g.region != ps_region else 0.0) for g in groups
    ]
    intra = (
        intra_node_gbps
        if intra_node_gbps is not None
        else min(data_parallel_gbps(catalog.gpu(g.gpu), gpus_per_node) for g in groups)
    )

    def speed(alive: Sequence[int]) -> float:
        scale = [1.0] * len(per_group)
        if step_scale is not None:
            live = int(sum(alive)) * gpus_per_node
            if live == 0:
                return 0.0
            scale = list(step_scale(alive))
            if not all(math.isfinite(f) for f in scale):
                return 0.0
        times = [
            t * f
            for t, f, n in zip(per_group, scale, alive, strict=True)
            for _ in range(int(n) * gpus_per_node)
        ]
        est = model.predict(
            times,
            ps_shards=max(1, ps_shards),
            strategy=strategy,
            param_bytes=work.param_bytes,
            n_tensors=work.n_tensors,
            max_tensor_bytes=work.max_tensor_bytes,
            ps_network_gbps=network.ps_gbps,
            network_gbps=network.worker_gbps,
            gpus_per_node=gpus_per_node,
            intra_node_gbps=intra,
            step_time_includes_ps=includes_ps,
            collective=collective,
        )
        # synchronous jobs count global steps: every live worker contributes to each one
        return float(est.value) / (len(times) if synchronous else 1)

    synchronous = strategy in SYNCHRONOUS
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
    shards = f" with {ps_shards} PS shard(s)" if strategy.startswith("ps") else ""
    nodes = f", {gpus_per_node} GPUs per node" if gpus_per_node > 1 else ""
    unit = "global steps/s" if synchronous else "worker steps/s"
    return table, (
        f"cluster model {strategy}{shards}{nodes} ({network.source}); {full:.3g} {unit} with "
        f"every worker up; single worker: {one}{mixed}{rtt}"
    )
