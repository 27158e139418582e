"""What the serving verbs need from the catalog, the profiler and the user's files.

``plan serve`` and ``simulate serve`` take their inputs from here, so the same question gets
the same answer in both:

* :func:`build_server_options` -- the server types a plan may rent (whole GPUs, MIG slices,
  CPU servers) with their prices; :func:`gpu_server` -- the one server ``simulate serve``
  runs on;
* :func:`mig_price_usd_per_hour` -- THE price of a MIG slice (both verbs);
* :func:`inference_work`, :func:`roofline_curve`, :func:`read_latency_table`,
  :func:`read_latency_tables`, :func:`model_profiles` -- the latency curve of each model on
  each server: the roofline of the profiled inference pass, or a measured table;
* :func:`request_overhead` -- the per-request network time;
* :func:`arrivals`, :func:`read_trace_arrivals`, :func:`function_arrivals` -- request
  streams: Poisson, constant, the bursty preset, or a trace file (Azure LLM, Azure Functions
  per-minute counts, ``arrival_s`` CSV);
* :func:`given_host_capacity`, :func:`calibrated_host_capacity` -- the host-path capacity,
  given or fitted to a measured median.

Skipped malformed trace rows come back as ``warnings`` (never printed here).
"""

from __future__ import annotations

import csv
import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucast.domain.catalog import GpuSpec, MigProfile, Offer
from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.provenance import Sourced
from gpucast.domain.serving import LatencyCurve, ServerKind
from gpucast.domain.serving_plan import ModelLoad, ModelProfile, ServerOption

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from gpucast.domain.catalog import Catalog
    from gpucast.domain.serving import Deployment
    from gpucast.predict.serving import InferenceWork
    from gpucast.store.datasets.azure_functions import InvocationCounts

    FloatArray = npt.NDArray[np.float64]

#: What the latency predictor needs for one server option: the GPU and MIG profile (None for
#: a CPU server) and the offer it is rented from.
ServerTarget = tuple[GpuSpec | None, MigProfile | None, Offer]

#: The arrival kinds ``simulate serve --arrivals`` takes (besides ``trace:FILE``).
ARRIVAL_KINDS: tuple[str, ...] = ("poisson", "constant", "bursty")
TRACE_PREFIX = "trace:"
#: The bursty preset: calm at 0.5x and bursts at 3x the mean rate, mean sojourns 8 s / 2 s
#: (4:1 time share), rescaled so the long-run mean is the requested rate.
BURSTY_RATE_FACTORS = (0.5, 3.0)
BURSTY_SOJOURN_S = (8.0, 2.0)


# -- prices ---------------------------------------------------------------------------------
def mig_price_usd_per_hour(gpu_price_usd_per_hour: float, profile: MigProfile) -> float:
    """THE price of one MIG slice, in ``plan serve`` and ``simulate serve`` alike: the GPU's
    price over ``profile.max_instances``, the slices of this profile one GPU holds.

    Clouds rent whole GPUs, and a GPU is partitioned into equal slices of one profile, so a
    slice costs its share of the GPU it sits on. Pricing by compute share (``compute_slices
    / 7``) would undercharge every profile whose layout leaves compute unused: two
    ``3g.20gb`` slices fill an A100 but would cost 6/7 of it, four memory-bound ``1g.10gb``
    slices 4/7, one ``4g.20gb`` 4/7. ``plan serve`` also rents whole GPUs
    (:attr:`ServerOption.per_unit`), so ``n`` slices cost ``ceil(n / max_instances)`` GPUs
    there; ``simulate serve`` charges the slices it simulates.
    """
    return gpu_price_usd_per_hour / profile.max_instances


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuServer:
    """The server ``simulate serve`` runs on: a catalog GPU or one MIG slice of it."""

    spec: GpuSpec
    mig: MigProfile | None
    offer: Offer | None  # the cheapest offer per GPU; None when only --price was given
    price: Sourced[float]  # per device (GPU or slice), US$/h

    @property
    def name(self) -> str:
        return f"{self.spec.name}/{self.mig.name}" if self.mig else self.spec.name

    @property
    def kind(self) -> ServerKind:
        return "mig" if self.mig else "gpu"

    @property
    def memory_gib(self) -> float:
        return self.mig.memory_gib if self.mig else self.spec.memory_gib


def gpu_server(
    catalog: Catalog, gpu: str, mig: str | None, price_usd_per_hour: float | None
) -> GpuServer:
    """GPU ``gpu`` (or its MIG profile ``mig``) at the cheapest catalog price per GPU, or at
    ``price_usd_per_hour`` per GPU; a slice is priced by :func:`mig_price_usd_per_hour`."""
    from gpucast.predict.serving import mig_profile

    spec = catalog.gpu(gpu)
    profile = mig_profile(spec, mig) if mig else None
    offers = [o for o in catalog.find_offers(gpu=spec.name) if o.gpus >= 1]
    offer = min(offers, key=lambda o: o.on_demand_usd_per_hour / o.gpus) if offers else None
    if price_usd_per_hour is None:
        if offer is None:
            raise InvalidSpecError(
                "price",
                f"the catalog has no offer with {spec.name}",
                fix="pass --price USD_PER_HOUR",
            )
        price_usd_per_hour = offer.on_demand_usd_per_hour / offer.gpus
    where = f" ({offer.provider} {offer.instance_type})" if offer else ""
    if profile is None:
        return GpuServer(
            spec=spec,
            mig=None,
            offer=offer,
            price=Sourced(price_usd_per_hour, f"{price_usd_per_hour:.4g} US$/h per GPU{where}"),
        )
    slice_price = mig_price_usd_per_hour(price_usd_per_hour, profile)
    return GpuServer(
        spec=spec,
        mig=profile,
        offer=offer,
        price=Sourced(
            slice_price,
            f"{slice_price:.4g} US$/h per slice{where}: the GPU's {price_usd_per_hour:.4g} "
            f"US$/h over the {profile.max_instances} {profile.name} slices it holds",
        ),
    )


def build_server_options(
    *,
    gpus: Sequence[str] = (),
    migs: Sequence[str] = (),
    no_mig: bool = False,
    no_cpu: bool = False,
    providers: Sequence[str] = (),
    regions: Sequence[str] = (),
    spot: bool = False,
    catalog: Catalog | None = None,
) -> tuple[list[ServerOption], dict[str, ServerTarget]]:
    """Server options from the catalog: the cheapest offer per GPU type (price per GPU), the
    MIG profiles of those GPUs (a layout of ``max_instances`` equal slices per GPU, priced by
    :func:`mig_price_usd_per_hour`), and the cheapest offer per CPU instance type. Returns the
    options and, per option name, what the latency predictor needs (the GpuSpec + MigProfile,
    or the CPU offer)."""
    from gpucast.predict import serving as pserve

    if catalog is None:
        from gpucast.catalog import load_catalog

        catalog = load_catalog()
    offers: list[Offer] = []
    any_: list[str | None] = [None]
    for provider in list(providers) or any_:
        for region in list(regions) or any_:
            offers += catalog.find_offers(provider=provider, region=region)
    wanted = {catalog.gpu(g).name for g in gpus}
    mig_wanted: dict[str, set[str]] = {}
    for item in migs:
        gpu_name, sep, prof_name = item.partition(":")
        if not sep:
            raise InvalidSpecError(
                "mig", "must be GPU:PROFILE", got=item, fix="e.g. --mig A100-40GB:1g.5gb"
            )
        spec = catalog.gpu(gpu_name)
        pserve.mig_profile(spec, prof_name)  # one clear error when the GPU has no such profile
        mig_wanted.setdefault(spec.name, set()).add(prof_name)
        if gpus:
            wanted.add(spec.name)
    best_gpu: dict[str, Offer] = {}
    best_cpu: dict[str, Offer] = {}
    for offer in offers:
        if spot and offer.spot_usd_per_hour is None:
            continue
        price = offer.price_usd_per_hour(spot=spot)
        if offer.gpu is None:
            if no_cpu or gpus or migs:
                continue
            cur = best_cpu.get(offer.instance_type)
            if cur is None or price < cur.price_usd_per_hour(spot=spot):
                best_cpu[offer.instance_type] = offer
            continue
        if (wanted or mig_wanted) and offer.gpu not in wanted | set(mig_wanted):
            continue
        cur = best_gpu.get(offer.gpu)
        if cur is None or price / offer.gpus < (cur.price_usd_per_hour(spot=spot) / cur.gpus):
            best_gpu[offer.gpu] = offer
    options: list[ServerOption] = []
    targets: dict[str, ServerTarget] = {}
    for gpu_name, offer in sorted(best_gpu.items()):
        spec = catalog.gpu(gpu_name)
        price = offer.price_usd_per_hour(spot=spot) / offer.gpus
        if not mig_wanted or gpu_name in wanted:
            options.append(
                ServerOption(
                    name=gpu_name,
                    kind="gpu",
                    memory_gib=spec.memory_gib,
                    price_usd_per_hour=price,
                    gpu=gpu_name,
                    provider=offer.provider,
                    region=offer.region,
                    instance_type=offer.instance_type,
                )
            )
            targets[gpu_name] = (spec, None, offer)
        if no_mig:
            continue
        for prof in spec.mig_profiles:
            if mig_wanted and prof.name not in mig_wanted.get(gpu_name, set()):
                continue
            name = f"{gpu_name}/{prof.name}"
            options.append(
                ServerOption(
                    name=name,
                    kind="mig",
                    memory_gib=prof.memory_gib,
                    price_usd_per_hour=mig_price_usd_per_hour(price, prof),
                    gpu=gpu_name,
                    mig_profile=prof.name,
                    per_unit=prof.max_instances,
                    provider=offer.provider,
                    region=offer.region,
                    instance_type=offer.instance_type,
                )
            )
            targets[name] = (spec, prof, offer)
    for itype, offer in sorted(best_cpu.items()):
        name = f"cpu {itype}"
        options.append(
            ServerOption(
                name=name,
                kind="cpu",
                memory_gib=offer.memory_gib,
                price_usd_per_hour=offer.price_usd_per_hour(spot=spot),
                provider=offer.provider,
                region=offer.region,
                instance_type=itype,
            )
        )
        targets[name] = (None, None, offer)
    if not options:
        raise InvalidSpecError(
            "servers",
            "no catalog offer matches the filters",
            fix="relax --gpu / --provider / --region / --spot",
        )
    return options, targets


# -- latency curves -------------------------------------------------------------------------
def read_latency_table(path: Path) -> LatencyCurve:
    """A CSV with columns ``batch_size`` and ``latency_s`` (rows in any order)."""
    from gpucast.store.files import check_header, read_input_text

    text = read_input_text(path, "latency-table", fix="write a header line 'batch_size,latency_s'")
    reader = csv.DictReader(text.splitlines())
    check_header(reader.fieldnames or (), path)
    if not reader.fieldnames or not {"batch_size", "latency_s"} <= set(reader.fieldnames):
        raise DataFormatError(
            str(path),
            "needs columns batch_size and latency_s",
            fix="write a header line 'batch_size,latency_s'",
        )
    points: dict[int, float] = {}
    for line, row in enumerate(reader, start=2):
        try:
            b, t = int(row["batch_size"]), float(row["latency_s"])
        except (TypeError, ValueError):
            raise DataFormatError(
                str(path), "batch_size must be an integer and latency_s a number", line=line
            ) from None
        if b < 1 or not math.isfinite(t) or t <= 0:
            raise DataFormatError(str(path), "needs batch_size >= 1 and latency_s > 0", line=line)
        points[b] = t
    if not points:
        raise DataFormatError(str(path), "has no rows")
    sizes = sorted(points)
    return LatencyCurve(
        batch_sizes=tuple(sizes),
        latency_s=tuple(points[b] for b in sizes),
        source=f"measured: {Path(path).name}",
    )


def parse_latency_table_item(item: str) -> tuple[str, str, Path]:
    """``MODEL@SERVER=CSV`` -> (model, server, path); one error naming the flag otherwise."""
    key, sep, path = item.partition("=")
    model, at, server = key.partition("@")
    if not (sep and at and model and server and path):
        raise InvalidSpecError(
            "latency-table", "must be MODEL@SERVER=CSV", got=item,
            fix="e.g. --latency-table resnet50@T4=t4.csv",
        )  # fmt: skip
    return model, server, Path(path)


def read_latency_tables(items: Iterable[str]) -> dict[tuple[str, str], LatencyCurve]:
    """Measured curves keyed by (model, server option) from ``MODEL@SERVER=CSV`` items."""
    out: dict[tuple[str, str], LatencyCurve] = {}
    for item in items:
        model, server, path = parse_latency_table_item(item)
        out[(model, server)] = read_latency_table(path)
    return out


def inference_work(model: str, precision: str) -> InferenceWork:
    """The inference pass of ``model`` from its profiles at batch 1 and 2 (fixed and
    per-sample FLOPs, bytes and memory)."""
    from gpucast.domain.workload import PRECISIONS
    from gpucast.inputs.workload import workload_profile
    from gpucast.predict.serving import InferenceWork

    if precision not in PRECISIONS:
        raise InvalidSpecError(
            "precision", f"must be one of {', '.join(PRECISIONS)}", got=precision
        )
    # the profile cache (gpucast.inputs.workload) serves repeated calls without PyTorch
    return InferenceWork.from_profiles(
        workload_profile(model, precision, batch_size=1),
        workload_profile(model, precision, batch_size=2),
    )


def roofline_curve(
    work: InferenceWork,
    device: GpuSpec | Offer,
    precision: str,
    max_batch: int,
    *,
    mig: MigProfile | None = None,
) -> LatencyCurve:
    """The roofline latency curve of ``work`` on a catalog GPU (or its MIG slice ``mig``), or
    on a CPU server given as its offer (always fp32)."""
    from gpucast.predict import serving as pserve

    if isinstance(device, Offer):
        return pserve.predict_latency_curve(
            work, pserve.cpu_device(device), "fp32", max_batch=max_batch
        )
    return pserve.predict_latency_curve(work, device, precision, max_batch=max_batch, mig=mig)


def request_overhead(work: InferenceWork, network_gbps: float) -> Sourced[float]:
    """Seconds each request spends on the network (its input over ``network_gbps``)."""
    from gpucast.predict.serving import request_overhead_s

    overhead_s = request_overhead_s(work.input_bytes_per_sample, network_gbps)
    return Sourced(overhead_s, f"{overhead_s * 1e3:.3g} ms (input over {network_gbps:g} Gb/s)")


def model_profiles(
    loads: Sequence[ModelLoad],
    options: Sequence[ServerOption],
    targets: Mapping[str, ServerTarget],
    *,
    precision: str,
    max_batch: int,
    measured: Mapping[tuple[str, str], LatencyCurve],
) -> Sourced[dict[tuple[str, str], ModelProfile]]:
    """What the planner knows of each model on each server option: its latency curve
    (``measured`` where given, else the roofline), memory and request overhead."""
    from gpucast.predict.serving import request_overhead_s

    profiles: dict[tuple[str, str], ModelProfile] = {}
    for load in loads:
        work = inference_work(load.name, precision)
        fixed_gib = 1.2 * work.weights_bytes / 2**30
        per_gib = 1.2 * (work.input_bytes_per_sample + work.activation_bytes_per_sample) / 2**30
        for option in options:
            spec, profile, offer = targets[option.name]
            curve = measured.get((load.name, option.name))
            if curve is None:
                curve = roofline_curve(
                    work, offer if spec is None else spec, precision, max_batch, mig=profile
                )
            profiles[(load.name, option.name)] = ModelProfile(
                model=load.name,
                server=option.name,
                curve=curve,
                memory_fixed_gib=fixed_gib,
                memory_per_sample_gib=per_gib,
                request_overhead_s=request_overhead_s(
                    work.input_bytes_per_sample, offer.network_gbps
                ),
            )
    tables = ", ".join(f"{m}@{s}" for m, s in measured)
    source = (
        "roofline of the profiled inference pass on each catalog GPU / MIG slice / CPU "
        "(uncalibrated priors)" + (f"; measured tables for {tables}" if measured else "")
    )
    return Sourced(profiles, source)


# -- arrivals -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class Arrivals:
    """Arrival times (seconds from 0, sorted), where they came from, and what was skipped."""

    times_s: FloatArray
    source: str
    warnings: tuple[str, ...] = ()


def skipped_rows_warning(path: Path, skipped: Sequence[str]) -> str:
    """The one warning about a file's skipped malformed rows."""
    return f"skipped {len(skipped)} malformed row(s) of {Path(path).name}; first: {skipped[0]}"


def function_arrivals(
    counts: InvocationCounts,
    rng: np.random.Generator,
    *,
    rows: npt.ArrayLike | None = None,
    scale: float = 1.0,
) -> FloatArray:
    """Arrival times (s from the first minute) of the summed Azure Functions invocations of
    ``rows`` (default: every function), uniform inside each minute
    (:func:`gpucast.simulate.arrivals.from_counts`); ``scale`` multiplies the counts."""
    from gpucast.simulate.arrivals import from_counts
    from gpucast.store.datasets.azure_functions import MINUTE_S

    return from_counts(counts.total_per_minute(rows), MINUTE_S, rng, scale=scale)


def read_trace_arrivals(path: Path, seed: int, *, field: str = "trace") -> Arrivals:
    """Arrival times (s) of a trace file: an Azure Functions 2019 per-minute count file (all
    its functions summed, placed in each minute with ``seed``), an Azure LLM trace or an
    ``arrival_s`` CSV. Malformed rows are skipped and counted in ``warnings``."""
    import numpy as np

    from gpucast.simulate import arrivals as gen
    from gpucast.store.files import not_utf8, open_input_text

    path = Path(path)
    try:
        with open_input_text(path, field, fix="check the trace's path") as handle:
            head = handle.readline()
    except UnicodeDecodeError as exc:
        raise not_utf8(path, exc) from None
    if head.startswith("HashOwner"):
        from gpucast.store.datasets.azure_functions import read_invocation_counts

        counts = read_invocation_counts(path)
        skipped = counts.skipped
        times = function_arrivals(counts, np.random.default_rng(seed))
        what = f"Azure Functions counts, {len(counts.functions)} functions"
    else:
        from gpucast.store.datasets.azure_traces import read_arrival_trace

        parsed = read_arrival_trace(path)
        skipped = parsed.skipped
        times = gen.from_timestamps(parsed.frame["arrival_s"].to_numpy())
        what = f"{len(parsed.frame)} requests"
    if times.size < 2 or times[-1] <= 0:
        raise DataFormatError(str(path), "has fewer than two arrivals", fix="give a longer trace")
    return Arrivals(
        times_s=times,
        source=f"trace {path.name} ({what}, {len(skipped)} malformed rows skipped)",
        warnings=(skipped_rows_warning(path, skipped),) if skipped else (),
    )


def check_arrival_kind(kind: str) -> str:
    """``kind`` when it is poisson, constant, bursty or trace:FILE (one error otherwise)."""
    if kind in ARRIVAL_KINDS or (kind.startswith(TRACE_PREFIX) and len(kind) > len(TRACE_PREFIX)):
        return kind
    raise InvalidSpecError(
        "arrivals",
        "must be poisson, constant, bursty or trace:FILE",
        got=kind,
        fix="e.g. --arrivals poisson",
    )


def arrivals(kind: str, rate_rps: float, duration_s: float, seed: int) -> Arrivals:
    """``duration_s`` of arrivals: Poisson or constant at ``rate_rps``, the bursty preset
    (:data:`BURSTY_RATE_FACTORS`, mean ``rate_rps``) or ``trace:FILE`` (cut at
    ``duration_s``; see :func:`read_trace_arrivals`)."""
    import numpy as np

    from gpucast.simulate import arrivals as gen

    check_arrival_kind(kind)
    rng = np.random.default_rng(seed)
    if kind == "poisson":
        return Arrivals(
            times_s=gen.poisson(rate_rps, duration_s, rng), source=f"Poisson {rate_rps:g} req/s"
        )
    if kind == "constant":
        return Arrivals(
            times_s=gen.constant(rate_rps, duration_s), source=f"constant {rate_rps:g} req/s"
        )
    if kind == "bursty":
        rates = tuple(rate_rps * f for f in BURSTY_RATE_FACTORS)
        scale = rate_rps / gen.bursty_mean_rate(rates, BURSTY_SOJOURN_S)
        rates = tuple(r * scale for r in rates)
        return Arrivals(
            times_s=gen.bursty(rates, BURSTY_SOJOURN_S, duration_s, rng),
            source=f"bursty MMPP {rates[0]:.3g}/{rates[1]:.3g} req/s, sojourns 8 s/2 s",
        )
    trace = read_trace_arrivals(Path(kind[len(TRACE_PREFIX) :]), seed, field="arrivals")
    times = gen.from_timestamps(trace.times_s, duration_s=duration_s)
    return dataclasses.replace(trace, times_s=times)


# -- host path ------------------------------------------------------------------------------
def given_host_capacity(capacity_rps: float) -> Sourced[float]:
    return Sourced(capacity_rps, f"{capacity_rps:g} requests/s per server (given)")


def calibrated_host_capacity(
    deployment: Deployment,
    traffic: Mapping[str, Any],
    measured_p50_s: float,
    *,
    seed: int,
) -> Sourced[float]:
    """The host capacity at which the simulated median of ``traffic`` on ``deployment`` is
    the measured one (:func:`gpucast.simulate.serving.calibrate_host_capacity`)."""
    from gpucast.simulate.serving import calibrate_host_capacity

    capacity_rps = calibrate_host_capacity(deployment, traffic, measured_p50_s, seed=seed)
    return Sourced(
        capacity_rps,
        f"{capacity_rps:.1f} requests/s per server, calibrated to the measured median "
        f"{measured_p50_s * 1e3:g} ms at this load",
    )
