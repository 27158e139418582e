"""What the serving verbs need from the catalog, the profiler and the user's files.

``plan serve`` and ``simulate serve`` take their inputs from here, so the same question gets
the same answer in both:

* :func:`build_server_options` -- the server types a plan may rent (whole GPUs, MIG slices,
  CPU servers) with their prices; :func:`gpu_server` -- the one server ``simulate serve``
  runs on;
* :func:`mig_price_usd_per_hour` -- THE price of a MIG slice (both verbs);
* :func:`serving_efficiency` -- an inference engine's efficiency figures (eager PyTorch,
  TensorRT-class: ``serving_engines.csv`` says which fitted sets they come from);
* :func:`inference_work`, :func:`roofline_curve`, :func:`read_latency_table`,
  :func:`read_latency_tables`, :func:`model_profiles` -- the latency curve of each model on
  each server at a precision (fp32, fp16, bf16, fp8, int8): the roofline of the profiled
  inference pass, or a measured table;
* :func:`request_overhead`, :func:`pcie_gbps` -- the round trip and the host path's links;
* :func:`arrivals`, :func:`read_trace_arrivals`, :func:`function_arrivals` -- request
  streams, the same for every serving verb: Poisson, constant, the bursty preset, or a trace
  file (Azure LLM, Azure Functions per-minute counts, ``arrival_s`` CSV), time-scaled to a
  rate when one is given; the source names the process used;
* :func:`given_host_capacity`, :func:`calibrated_host_path` -- the shared host, given or
  fitted to measured medians at one or two loads.

Skipped malformed trace rows come back as ``warnings`` (never printed here).
"""

from __future__ import annotations

import csv
import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucast.domain.catalog import GpuSpec, MigProfile, Offer
from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.provenance import Sourced
from gpucast.domain.serving import LatencyCurve, ServerKind
from gpucast.domain.serving_plan import ModelLoad, ModelProfile, ServerOption
from gpucast.domain.units import count_of

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from gpucast.domain.catalog import Catalog
    from gpucast.domain.serving import Deployment
    from gpucast.predict.serving import InferenceWork, ServingEfficiency
    from gpucast.simulate.serving import HostPathFit
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
    there; ``simulate serve`` charges the slices it simulates. Mixed layouts split the GPU's
    price by the same rule (:func:`gpucast.predict.mig.layout_prices_usd_per_hour`), of which
    this is the one-profile case.
    """
    from gpucast.predict.mig import layout_prices_usd_per_hour

    return layout_prices_usd_per_hour(gpu_price_usd_per_hour, [profile] * profile.max_instances)[0]


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


#: What a ``--price`` given with ``--spot`` does (simulate serve, plan serve).
PRICE_REPLACES_SPOT = "--price replaces the catalog's spot prices"


def given_price_text(price_usd_per_hour: float, offer: Offer | None, *, spot: bool) -> str:
    """Where a ``--price`` per GPU comes from: the user, not the catalog offer that names the
    server (its network, its host); with ``spot``, that it replaces the spot prices (--spot
    still keeps only the offers that have one)."""
    named = ""
    if offer is not None:
        named = f"; the offer {offer.provider} {offer.instance_type} names the server"
    replaced = f"; {PRICE_REPLACES_SPOT}" if spot else ""
    return f"{price_usd_per_hour:.4g} US$/h per GPU (given with --price{named}{replaced})"


def gpu_server(
    catalog: Catalog,
    gpu: str,
    mig: str | None,
    price_usd_per_hour: float | None,
    *,
    providers: Sequence[str] = (),
    regions: Sequence[str] = (),
    spot: bool = False,
) -> GpuServer:
    """GPU ``gpu`` (or its MIG profile ``mig``) at the cheapest catalog price per GPU, or at
    ``price_usd_per_hour`` per GPU; a slice is priced by :func:`mig_price_usd_per_hour`. The
    offers are those ``plan serve`` picks from: within ``providers`` and ``regions`` (none:
    every one), priced on demand or, with ``spot``, at their spot price (offers without one
    left out)."""
    from gpucast.predict.serving import mig_profile

    spec = catalog.gpu(gpu)
    if mig is not None and not mig.strip():  # QA 40 M #9: --mig '' ran the whole GPU
        raise InvalidSpecError(
            "mig", "is empty", fix=f"name a profile (gpucast catalog mig --gpu {spec.name}), "
            "or leave --mig out for the whole GPU",
        )  # fmt: skip
    profile = mig_profile(spec, mig, catalog.mig_gpu_names(), field="gpu") if mig else None
    any_: list[str | None] = [None]
    offers = [
        o
        for provider in list(providers) or any_
        for region in list(regions) or any_
        for o in catalog.find_offers(provider=provider, region=region, gpu=spec.name, spot=spot)
        if o.gpus >= 1
    ]
    filtered = bool(providers or regions or spot)
    if filtered and not offers:
        raise no_offer_within(spec.name, providers=providers, regions=regions, spot=spot)
    offer = min(offers, key=lambda o: o.price_usd_per_hour(spot=spot) / o.gpus) if offers else None
    where = ""
    if offer is not None:
        market = "spot" if spot else "on demand"
        where = f" ({offer.provider} {offer.instance_type}" + (
            f" in {offer.region}, {market})" if filtered else ")"
        )
    if price_usd_per_hour is None:
        if offer is None:
            raise InvalidSpecError(
                "price",
                f"the catalog has no offer with {spec.name}",
                fix="pass --price USD_PER_HOUR",
            )
        price_usd_per_hour = offer.price_usd_per_hour(spot=spot) / offer.gpus
        per_gpu = f"{price_usd_per_hour:.4g} US$/h per GPU{where}"
    else:  # given: not the offer's price, though the offer still names the server
        per_gpu = given_price_text(price_usd_per_hour, offer, spot=spot)
    if profile is None:
        return GpuServer(
            spec=spec, mig=None, offer=offer, price=Sourced(price_usd_per_hour, per_gpu)
        )
    slice_price = mig_price_usd_per_hour(price_usd_per_hour, profile)
    return GpuServer(
        spec=spec,
        mig=profile,
        offer=offer,
        price=Sourced(
            slice_price,
            f"{slice_price:.4g} US$/h per slice: the GPU's {per_gpu} over the "
            f"{profile.max_instances} {profile.name} slices it holds",
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
    price_usd_per_gpu_hour: float | None = None,
) -> tuple[list[ServerOption], dict[str, ServerTarget]]:
    """Server options from the catalog: the cheapest offer per GPU type (price per GPU), the
    MIG profiles of those GPUs (a layout of ``max_instances`` equal slices per GPU, priced by
    :func:`mig_price_usd_per_hour`), and the cheapest offer per CPU instance type. Returns the
    options and, per option name, what the latency predictor needs (the GpuSpec + MigProfile,
    or the CPU offer). ``price_usd_per_gpu_hour`` (``--price``) replaces every GPU's price
    (a slice: its share of it; the offer still names the server); CPU servers keep theirs."""
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
        mig_gpus = catalog.mig_gpu_names()  # one clear error when the GPU has no such profile
        example = f"{mig_gpus[0]}:{catalog.gpu(mig_gpus[0]).placeable_mig_profiles[0].name}"
        pserve.mig_profile(spec, prof_name, mig_gpus, field="mig", example=example)
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
        price = (
            offer.price_usd_per_hour(spot=spot) / offer.gpus
            if price_usd_per_gpu_hour is None
            else price_usd_per_gpu_hour
        )
        nic = network_share_gbps(offer)
        pcie = pcie_gbps(spec).value
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
                    network_gbps=nic,
                    pcie_gbps=pcie,
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
                    network_gbps=nic / prof.max_instances,
                    pcie_gbps=pcie / prof.max_instances,
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
                network_gbps=offer.network_gbps,
            )
        )
        targets[name] = (None, None, offer)
    if not options:
        missing = unserved_gpus(
            catalog, (*gpus, *mig_wanted), options, providers=providers, regions=regions, spot=spot
        )
        if missing:  # QA 40 M #3: it was "no catalog offer matches the filters" for --mig A30:...
            first = missing[0].partition(":")[0]
            raise InvalidSpecError(
                "mig" if migs else "gpu",
                "no server to plan on: " + "; ".join(missing),
                fix="plan serve rents catalog offers (--price changes their price, not which "
                "exist): pick GPUs with offers (gpucast catalog offers) or add one (--offers "
                f"FILE); `gpucast simulate serve --gpu {first} --price USD_PER_HOUR` runs one at "
                "your price",
            )
        raise InvalidSpecError(
            "servers",
            "no catalog offer matches the filters",
            fix="relax --gpu / --provider / --region / --spot",
        )
    return options, targets


def no_offer_within(
    gpu: str, *, providers: Sequence[str] = (), regions: Sequence[str] = (), spot: bool = False
) -> InvalidSpecError:
    """The error where the provider, region and spot filters leave no catalog offer of
    ``gpu`` (a canonical name): the GPU named, with the filters that left it out (``simulate
    serve``'s line, for a CNN and a language model alike)."""
    flags = [f"--provider {','.join(providers)}"] * bool(providers)
    flags += [f"--region {','.join(regions)}"] * bool(regions) + ["--spot"] * spot
    return InvalidSpecError(
        "gpu",
        f"no catalog offer of {gpu} within {' '.join(flags)}",
        fix=f"relax --provider / --region / --spot (see gpucast catalog offers --gpu {gpu})",
    )


def unserved_gpus(
    catalog: Catalog,
    asked: Sequence[str],
    options: Sequence[ServerOption],
    *,
    providers: Sequence[str] = (),
    regions: Sequence[str] = (),
    spot: bool = False,
) -> list[str]:
    """The GPUs of ``asked`` (``--gpu`` and ``--mig``'s GPUs) that no server option runs on,
    each with why: no catalog offer at all, or none within the filters. ``plan serve``
    rents a catalog offer for every server (``--price`` changes its price, not which exist)."""
    return unoffered_gpus(
        tuple(asked), {o.gpu for o in options if o.gpu is not None}, providers=tuple(providers),
        regions=tuple(regions), spot=spot, catalog=catalog, model="",
        no_offer="no catalog offer prices it",
    )  # fmt: skip


def unoffered_gpus(
    gpus: tuple[str, ...],
    offered: set[str],
    *,
    model: str,
    providers: tuple[str, ...] = (),
    regions: tuple[str, ...] = (),
    spot: bool = False,
    catalog: Catalog | None = None,
    no_offer: str | None = None,
) -> list[str]:
    """Each of ``gpus`` (asked for) missing from ``offered`` (the GPU types
    :func:`gpu_offers` priced), with why: the catalog has no offer of it at all (``no_offer``
    says what to do instead; default: the language-model planner's ``--price``), or none
    within the provider, region and spot filters."""
    if catalog is None:
        from gpucast.catalog import load_catalog

        catalog = load_catalog()
    out = []
    for name in sorted({catalog.gpu(g).name for g in gpus} - offered):
        if any(o.gpus >= 1 for o in catalog.find_offers(gpu=name, cpu_only=False)):
            filters = [f"--provider {','.join(providers)}"] * bool(providers)
            filters += [f"--region {','.join(regions)}"] * bool(regions) + ["--spot"] * spot
            why = f"no offer within {' '.join(filters)}"
        else:
            why = no_offer or (
                "no catalog offer prices it (plan serve rents GPUs at the catalog's prices; "
                "--price USD_PER_GPU_HOUR plans it on the catalog's node of it, and "
                f"`gpucast simulate serve --model {model} --gpu {name} --price USD_PER_HOUR` "
                "simulates a deployment at your price)"
            )
        out.append(f"{name}: {why}")
    return out


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


def latency_table_warnings(curve: LatencyCurve, largest_batch: int, flag: str) -> list[str]:
    """What a measured latency table leaves to extrapolation or says that no device does
    (QA 34 C #18: one row, or a latency that falls with the batch, were taken silently):
    batches beyond its largest, priced along its last segment (one row: in proportion), and
    a latency lower at a larger batch."""
    sizes, lat = curve.batch_sizes, curve.latency_s
    out = []
    if largest_batch > sizes[-1]:
        if len(sizes) == 1:
            how = f"in proportion to the batch from its one row (batch {sizes[0]})"
        elif lat[-1] < lat[-2]:  # QA 40 V #13: a falling last segment is not followed down
            how = (
                f"flat at its last row's {lat[-1] * 1e3:.3g} ms (batch {sizes[-1]}): its last "
                f"segment (batch {sizes[-2]} to {sizes[-1]}) falls, and is not extended"
            )
        else:
            how = f"along its last segment (batch {sizes[-2]} to {sizes[-1]})"
        out.append(
            f"{flag}: batches up to {largest_batch} are served but the table stops at "
            f"{sizes[-1]}: larger ones are priced {how}; measure them "
            "(gpucast measure infer-curve --batch-sizes ... --csv FILE)"
        )
    falls = [(sizes[k], sizes[k + 1]) for k in range(len(sizes) - 1) if lat[k + 1] < lat[k]]
    if falls:
        a, b = falls[0]
        out.append(
            f"{flag}: the latency falls from batch {a} to batch {b} "
            f"({len(falls)} such step{'s' if len(falls) > 1 else ''}): priced as given, though a "
            "device takes no less time for more work -- check the measurement"
        )
    return out


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


def inference_work(
    model: str, precision: str, options: Mapping[str, Any] | None = None
) -> InferenceWork:
    """The inference pass of ``model`` (built with its workload ``options``) from its
    profiles at batch 1 and 2 (fixed and per-sample FLOPs, bytes and memory), at a serving
    precision: int8/fp8 are the 16-bit profile with one byte per element (a request's input: its
    floating-point elements at the precision, :meth:`InferenceWork.at_precision`)."""
    from gpucast.domain.serving import SERVING_PRECISIONS
    from gpucast.inputs.workload import workload_profile
    from gpucast.predict.serving import InferenceWork, profile_precision

    if precision not in SERVING_PRECISIONS:
        raise InvalidSpecError(
            "precision", f"must be one of {', '.join(SERVING_PRECISIONS)}", got=precision,
            fix="e.g. --precision fp16",
        )  # fmt: skip
    profiled = profile_precision(precision)
    # the profile cache (gpucast.inputs.workload) serves repeated calls without PyTorch
    work = InferenceWork.from_profiles(
        workload_profile(model, profiled, batch_size=1, options=options),
        workload_profile(model, profiled, batch_size=2, options=options),
    )
    return work.at_precision(precision, profiled)


#: The engine a served model runs on unless the user names one.
DEFAULT_SERVING_ENGINE = "eager-pytorch"


def serving_efficiency(
    engine: str | None = None, precision: str | None = None
) -> Sourced[ServingEfficiency]:
    """The efficiency figures of ``engine`` (default :data:`DEFAULT_SERVING_ENGINE`), from the
    fitted sets its ``serving_engines.csv`` row names; one clear error when it cannot run
    ``precision``. Without the shipped step-time model, the roofline priors."""
    from gpucast.catalog.serving_engines import serving_engine
    from gpucast.catalog.steptime import shipped_step_time_model
    from gpucast.predict.roofline import RooflineEfficiency
    from gpucast.predict.serving import ServingEfficiency

    profile = serving_engine(engine or DEFAULT_SERVING_ENGINE)
    if precision is not None:
        profile.check_precision(precision)
    model = shipped_step_time_model()
    if model is None or model.eta_compute_ is None or model.eta_memory_ is None:
        prior = ServingEfficiency.from_roofline(RooflineEfficiency())
        return Sourced(
            dataclasses.replace(prior, engine=profile.name),
            f"{profile.display_name}: roofline priors (no fitted step-time model shipped)",
        )
    stack = profile.stack
    eta = model.eta_compute_
    tensor = eta["tensor16"]
    conv_ratio = model.conv_ratio_
    tensor_from = (
        f"step-time model ({stack} stack; convolutions at {conv_ratio:.2f} of it)"
        if conv_ratio != 1.0
        else f"step-time model ({stack} stack)"
    )
    if profile.gemm_efficiency_from.startswith("inference_engines:"):
        from gpucast.catalog.engines import inference_engine

        row = inference_engine(profile.gemm_efficiency_from.partition(":")[2])
        tensor = row.compute_efficiency
        conv_ratio = 1.0  # fitted on whole passes, not split by operator
        tensor_from = f"inference_engines.csv {row.name} ({row.fitted_on})"
    eff = ServingEfficiency(
        engine=profile.name,
        compute_efficiency_fp32=min(1.0, eta["fp32"]),
        compute_efficiency_tensor=min(1.0, tensor),
        bandwidth_efficiency=min(1.0, model.eta_memory_),
        traffic_factor=model.traffic_[stack],
        kernel_overhead_s=model.overhead_s_[stack],
        source=f"{profile.display_name} (serving_engines.csv)",
        tensor_core_conv_ratio=conv_ratio,
    )
    return Sourced(
        eff,
        f"{profile.display_name}: tensor-core efficiency {eff.compute_efficiency_tensor:.3f} "
        f"from {tensor_from}; fp32 {eff.compute_efficiency_fp32:.3f}, bytes x"
        f"{eff.traffic_factor:.2f} of eager, {eff.kernel_overhead_s * 1e6:.2g} us per kernel "
        f"from the step-time model ({stack} stack, catalog/data/steptime.json: "
        f"{model.fitted_on_})",
    )


def roofline_curve(
    work: InferenceWork,
    device: GpuSpec | Offer,
    precision: str,
    max_batch: int,
    *,
    mig: MigProfile | None = None,
    engine: ServingEfficiency | None = None,
) -> LatencyCurve:
    """The roofline latency curve of ``work`` on a catalog GPU (or its MIG slice ``mig``), or
    on a CPU server given as its offer (always fp32), with ``engine``'s efficiencies (None:
    the roofline priors)."""
    from gpucast.predict import serving as pserve

    if isinstance(device, Offer):
        return pserve.predict_latency_curve(
            work, pserve.cpu_device(device), "fp32", max_batch=max_batch, efficiency=engine
        )
    return pserve.predict_latency_curve(
        work, device, precision, max_batch=max_batch, mig=mig, efficiency=engine
    )


def forward_pass_s(
    model: str,
    gpu: GpuSpec,
    *,
    batch_size: int = 1,
    precision: str = "fp32",
    options: Mapping[str, Any] | None = None,
    engine: str | None = None,
    on_device: bool = False,
) -> Sourced[float]:
    """One forward pass of ``batch_size`` through a built-in (or ``module:factory``) ``model``
    on ``gpu``, as the serving engine's latency model prices it (simulate serve's and plan
    serve's latency curve: per-operator-class roofline at ``engine``'s fitted efficiencies
    plus its per-kernel overhead). predict coldstart's first call, serverless functions and
    KaaS kernels take it, so one forward pass has one latency across the verbs.
    ``on_device``: without the engine's per-kernel launch overhead, for a caller that prices
    launches itself (simulate kaas's --dispatch-us)."""
    eff = serving_efficiency(engine, precision)
    work = inference_work(model, precision, options)
    curve = roofline_curve(work, gpu, precision, batch_size, engine=eff.value)
    name = eff.source.partition(":")[0]
    if on_device:
        return Sourced(
            curve.latency(batch_size) - curve.host_s,
            f"the serving engine's latency model at batch {batch_size}, on the device "
            f"({curve.source}, {name} efficiencies, as simulate serve less its per-kernel "
            "launch overhead)",
        )
    return Sourced(
        curve.latency(batch_size),
        f"the serving engine's latency model at batch {batch_size} ({curve.source}, {name} "
        "efficiencies and per-kernel overhead, as simulate serve)",
    )


def network_share_gbps(offer: Offer) -> float:
    """Each GPU's share of an offer's network (Gbit/s): the NIC over its GPUs."""
    return offer.network_gbps / max(offer.gpus, 1)


def pcie_gbps(gpu: GpuSpec) -> Sourced[float]:
    """The host-to-device link of ``gpu``: x16 at its PCIe generation."""
    from gpucast.domain.catalog import PCIE_X16_PAYLOAD_GBYTE_PER_S

    gbps = PCIE_X16_PAYLOAD_GBYTE_PER_S.get(
        gpu.pcie_generation, PCIE_X16_PAYLOAD_GBYTE_PER_S[max(PCIE_X16_PAYLOAD_GBYTE_PER_S)]
    )
    return Sourced(gbps, f"{gbps:g} GB/s (PCIe {gpu.pcie_generation}.0 x16, {gpu.name})")


#: The Azure Functions trace as the refusals of an unreadable trace name it
FUNCTIONS_TRACE_FORMAT = (
    "an Azure Functions per-minute count file (HashOwner,HashApp,HashFunction,Trigger,1,...,1440)"
)
#: What ``--arrivals trace:FILE`` reads, in the refusal of a file it cannot (QA 40 V #7)
SERVING_TRACE_FORMATS = (
    f"give a CSV with an arrival_s column, {FUNCTIONS_TRACE_FORMAT} or an Azure LLM trace "
    "(TIMESTAMP,ContextTokens,GeneratedTokens)"
)


def payload_text(work: InferenceWork, precision: str) -> str:
    """What a request of ``work`` carries over the network and PCIe, in words: the model's
    input tensors as it takes them, the floating-point ones at the serving ``precision`` (as
    MLPerf Inference's TensorRT submissions send ResNet-50: preprocessed int8 tensors)."""
    from gpucast.predict.serving import ELEMENT_BYTES

    size = f"{work.input_bytes_per_sample / 1e3:,.4g} KB per request"
    elements = work.input_float_elements_per_sample
    if elements is None:
        return f"{size}: {work.name}'s profiled input batch, per sample (--input-kb to change)"
    parts = []
    if elements:
        width = ELEMENT_BYTES[precision]
        parts.append(f"{elements:,.0f} floating-point elements x {width:g} B ({precision})")
    other = work.input_bytes_per_sample - elements * ELEMENT_BYTES[precision]
    if other > 0.5:
        parts.append(f"{other:,.0f} B of integer inputs (token ids, indices: any precision)")
    sent = (  # the comparison holds for tensors, not for token ids (QA 40 V #6)
        ", sent preprocessed (as MLPerf Inference's TensorRT submissions send ResNet-50: "
        "int8 tensors), no training target (--input-kb to change, e.g. 150 for a 224x224x3 "
        "uint8 image)"
        if elements
        else ", no training target (--input-kb to change)"
    )
    return (
        f"{size}: {work.name}'s input tensors as the model takes them, " + " + ".join(parts) + sent
    )


def request_overhead(work: InferenceWork, network_gbps: float) -> Sourced[float]:
    """The network link a request crosses (its input over ``network_gbps``, a queueing stage
    of the host path) and the round trip, the per-request delay that occupies no stage."""
    from gpucast.predict.serving import ZONE_RTT_S

    transfer_ms = work.input_bytes_per_sample * 8.0 / (network_gbps * 1e9) * 1e3
    most_rps = network_gbps * 1e9 / (8 * work.input_bytes_per_sample)
    return Sourced(
        ZONE_RTT_S,
        f"{ZONE_RTT_S * 1e3:.3g} ms round trip; the {work.input_bytes_per_sample / 1e3:.0f} KB "
        f"input holds the {round(network_gbps, 2):g} Gbit/s link {transfer_ms:.3g} ms "
        f"(a FIFO stage: {most_rps:.0f} req/s at most)",
    )


def _transfer_s(input_bytes: float, option: ServerOption) -> float:
    """Seconds one request's input spends on the option's network link and PCIe copy."""
    total = 0.0
    if option.network_gbps:
        total += input_bytes * 8.0 / (option.network_gbps * 1e9)
    if option.pcie_gbps:
        total += input_bytes / (option.pcie_gbps * 1e9)
    return total


def model_profiles(
    loads: Sequence[ModelLoad],
    options: Sequence[ServerOption],
    targets: Mapping[str, ServerTarget],
    *,
    precision: str,
    max_batch: int,
    measured: Mapping[tuple[str, str], LatencyCurve],
    engine: ServingEfficiency | None = None,
    workload_options: Mapping[str, Any] | None = None,
) -> Sourced[dict[tuple[str, str], ModelProfile]]:
    """What the planner knows of each model on each server option: its latency curve
    (``measured`` where given, else the roofline with ``engine``'s efficiencies), memory,
    request payload and round trip."""
    from gpucast.predict.serving import ZONE_RTT_S

    profiles: dict[tuple[str, str], ModelProfile] = {}
    for load in loads:
        work = inference_work(load.name, precision, workload_options)
        fixed_gib = 1.2 * work.weights_bytes / 2**30
        per_gib = 1.2 * (work.input_bytes_per_sample + work.activation_bytes_per_sample) / 2**30
        for option in options:
            spec, profile, offer = targets[option.name]
            curve = measured.get((load.name, option.name))
            if curve is None:
                curve = roofline_curve(
                    work, offer if spec is None else spec, precision, max_batch, mig=profile,
                    engine=engine,
                )  # fmt: skip
            profiles[(load.name, option.name)] = ModelProfile(
                model=load.name,
                server=option.name,
                curve=curve,
                memory_fixed_gib=fixed_gib,
                memory_per_sample_gib=per_gib,
                request_overhead_s=ZONE_RTT_S,
                input_bytes=work.input_bytes_per_sample,
                transfer_s=_transfer_s(work.input_bytes_per_sample, option),
            )
    _check_tables_used(measured, profiles, [load.name for load in loads], options)
    tables = ", ".join(f"{m}@{s}" for m, s in measured)
    how = f"{engine.engine} efficiencies" if engine is not None else "roofline priors"
    source = (
        f"roofline of the profiled inference pass ({precision}) on each catalog GPU / MIG "
        f"slice / CPU ({how})" + (f"; measured tables for {tables}" if measured else "")
    )
    specs = {spec.name: spec for spec, _, _ in (targets[o.name] for o in options) if spec}
    fallback = [
        f"{name} ({spec.priced_as(precision)})"
        for name, spec in sorted(specs.items())
        if precision not in ("fp32", "tf32") and spec.priced_as(precision) != precision
    ]
    if fallback:  # QA 40 V #3
        source += (
            f"; {precision} priced at another mode's peak where the catalog has no {precision} "
            f"figure: {', '.join(fallback)}"
        )
    return Sourced(profiles, source)


def _check_tables_used(
    measured: Mapping[tuple[str, str], LatencyCurve],
    profiles: Mapping[tuple[str, str], ModelProfile],
    models: Sequence[str],
    options: Sequence[ServerOption],
) -> None:
    """A ``--latency-table MODEL@SERVER`` that names no planned model on a searched server
    would be dropped without a word while the output said it was used: one error instead."""
    unused = [f"{m}@{s}" for m, s in measured if (m, s) not in profiles]
    if not unused:
        return
    servers = [o.name for o in options]
    shown = ", ".join(servers[:8]) + (f", ... ({len(servers)})" if len(servers) > 8 else "")
    raise InvalidSpecError(
        "latency-table",
        f"{unused[0]} names no model on a server this plan searches (models: "
        f"{', '.join(models)}; servers: {shown})",
        fix=f"spell both as listed, e.g. --latency-table {models[0]}@{servers[0]}=FILE, or "
        "add the server with --gpu",
    )


# -- arrivals -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class Arrivals:
    """Arrival times (seconds from 0, sorted), the process they come from (``source``, as the
    output names it), the span they cover, and what was skipped."""

    times_s: FloatArray
    source: str
    duration_s: float
    warnings: tuple[str, ...] = ()
    #: a trace of which only part is replayed (its first ``duration_s`` or its busiest
    #: window): the rate that part offers is not the trace's mean
    cut: bool = False


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


#: Requests a trace needs before its rate means anything (two arrivals are one gap).
MIN_TRACE_REQUESTS = 3


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
    if head.lstrip("\ufeff").startswith("HashOwner"):
        from gpucast.store.datasets.azure_functions import read_invocation_counts

        counts = read_invocation_counts(path)
        skipped = counts.skipped
        times = function_arrivals(counts, np.random.default_rng(seed))
        what = f"Azure Functions counts, {len(counts.functions)} functions"
    else:
        from gpucast.store.datasets.azure_traces import read_arrival_trace

        parsed = read_arrival_trace(path, formats=SERVING_TRACE_FORMATS)
        skipped = parsed.skipped
        times = gen.from_timestamps(parsed.frame["arrival_s"].to_numpy())
        what = count_of(len(parsed.frame), "request")
    if times.size < MIN_TRACE_REQUESTS or times[-1] <= 0:
        raise DataFormatError(
            str(path),
            f"has {times.size} requests over {float(times[-1]) if times.size else 0.0:g} s: "
            f"too few to have a rate (at least {MIN_TRACE_REQUESTS} spread over time)",
            fix="give a longer trace",
        )
    return Arrivals(
        times_s=times,
        source=f"trace {path.name} ({what}, {len(skipped)} malformed rows skipped)",
        duration_s=float(times[-1]),
        warnings=(skipped_rows_warning(path, skipped),) if skipped else (),
    )


def check_arrival_kind(kind: str, field: str = "arrivals") -> str:
    """``kind`` when it is poisson, constant, bursty or trace:FILE (one error otherwise)."""
    if kind in ARRIVAL_KINDS or (kind.startswith(TRACE_PREFIX) and len(kind) > len(TRACE_PREFIX)):
        return kind
    raise InvalidSpecError(
        field,
        "must be poisson, constant, bursty or trace:FILE",
        got=kind,
        fix=f"e.g. --{field} poisson",
    )


def trace_path(kind: str) -> Path | None:
    """The file of a ``trace:FILE`` arrival kind (None for the generated ones)."""
    return Path(kind[len(TRACE_PREFIX) :]) if kind.startswith(TRACE_PREFIX) else None


def arrival_rate_of(times_s: FloatArray) -> float:
    """Mean rate (requests/s) of sorted arrival times."""
    return (times_s.size - 1) / float(times_s[-1]) if times_s.size > 1 and times_s[-1] > 0 else 0.0


def busiest_part(times_s: FloatArray, window_s: float) -> tuple[slice, str]:
    """The requests a plan replays of a trace: those of its busiest ``window_s`` seconds
    (:func:`gpucast.simulate.arrivals.busiest_window`), and what the arrivals' source adds
    to say so (""  and every request when the trace is no longer than the window)."""
    from gpucast.domain.units import format_duration
    from gpucast.simulate import arrivals as gen

    n = times_s.size
    lo, hi = gen.busiest_window(times_s, window_s)
    if hi - lo == n:
        return slice(0, n), ""
    span = float(times_s[-1] - times_s[0])
    mean = (n - 1) / span if span > 0 else 0.0
    what = "hour" if window_s == 3600.0 else format_duration(window_s)
    text = (
        f", its busiest {what} ({format_duration(float(times_s[lo] - times_s[0]))} in: "
        f"{hi - lo:,} of {n:,} requests, {(hi - lo) / window_s:.3g} req/s offered, "
        f"{mean:.3g} over the whole trace), starting from idle servers: a plan sizes for the "
        "peak, where the SLO is hardest to meet (simulate serve replays the whole trace; "
        "--duration-s D replays the trace's first D s instead)"
    )
    return slice(lo, hi), text


def whole_trace_note(times_s: FloatArray) -> str:
    """What the arrivals' source adds where a simulation replays all of a trace longer than
    the window a plan replays: the plan's busiest hour, so the two verbs agree in words
    (QA 40 V #11; a language model's trace alike, :func:`gpucast.inputs.llm_serving.
    llm_traffic`); "" for a trace no longer than it."""
    from gpucast.domain.serving_plan import PLAN_TRACE_WINDOW_S
    from gpucast.domain.units import format_duration
    from gpucast.simulate import arrivals as gen

    lo, hi = gen.busiest_window(times_s, PLAN_TRACE_WINDOW_S)
    n = times_s.size
    if hi - lo == n:
        return ""
    span = float(times_s[-1] - times_s[0])
    return (
        f", replayed whole ({format_duration(span)}, {(n - 1) / span:.3g} req/s over it; "
        f"its busiest hour offers {(hi - lo) / PLAN_TRACE_WINDOW_S:.3g} req/s, what plan serve "
        "and plan llm-serve size for; --duration-s D replays the trace's first D s instead)"
    )


def _generated(kind: str, rate_rps: float, duration_s: float, seed: int) -> tuple[FloatArray, str]:
    import numpy as np

    from gpucast.simulate import arrivals as gen

    rng = np.random.default_rng(seed)
    if kind == "poisson":
        return gen.poisson(rate_rps, duration_s, rng), f"Poisson {rate_rps:g} req/s"
    if kind == "constant":
        return gen.constant(rate_rps, duration_s), f"constant {rate_rps:g} req/s"
    rates = tuple(rate_rps * f for f in BURSTY_RATE_FACTORS)
    scale = rate_rps / gen.bursty_mean_rate(rates, BURSTY_SOJOURN_S)
    rates = tuple(r * scale for r in rates)
    return (
        gen.bursty(rates, BURSTY_SOJOURN_S, duration_s, rng),
        f"bursty MMPP {rates[0]:.3g}/{rates[1]:.3g} req/s (mean {rate_rps:g}), sojourns 8 s/2 s",
    )


def arrivals(
    kind: str,
    rate_rps: float | None,
    duration_s: float | None,
    seed: int,
    *,
    field: str = "arrivals",
    window_s: float | None = None,
) -> Arrivals:
    """One model's request stream, the same for every serving verb.

    ``poisson`` / ``constant`` at ``rate_rps`` (required) over ``duration_s``; ``bursty``: the
    preset (:data:`BURSTY_RATE_FACTORS`, mean ``rate_rps``); ``trace:FILE``
    (:func:`read_trace_arrivals`): replayed, time-scaled to a mean of ``rate_rps`` when one
    is given, cut at ``duration_s`` when one is given, else its busiest ``window_s`` seconds
    when one is given (:func:`busiest_part`), else its whole span.
    """
    check_arrival_kind(kind, field)
    path = trace_path(kind)
    if path is None:
        if rate_rps is None:
            raise InvalidSpecError("rate", f"is needed for {kind} arrivals", fix="e.g. --rate 150")
        if duration_s is None:
            raise InvalidSpecError("duration-s", "is needed", fix="e.g. --duration-s 60")
        times, source = _generated(kind, rate_rps, duration_s, seed)
        return Arrivals(times_s=times, source=source, duration_s=duration_s)
    from gpucast.simulate import arrivals as gen

    trace = read_trace_arrivals(path, seed, field=field)
    times = trace.times_s
    source = trace.source
    if rate_rps is not None:
        times = gen.from_timestamps(times, target_rate_rps=rate_rps)
        source += f", time-scaled to {rate_rps:g} req/s (its mean over the whole trace)"
    # a trace shorter than the duration asked for ends where its requests end (its last
    # arrival plus one mean gap): the offered rate is the trace's, not diluted over seconds
    # nothing arrives in
    n = times.size
    own = float(times[-1]) * n / (n - 1) if n > 1 else float(times[-1])
    if duration_s is not None:
        times = gen.from_timestamps(times, duration_s=duration_s)
        if times.size == 0:
            raise InvalidSpecError(
                "duration-s", f"keeps no request of {path.name}", got=duration_s,
                fix="give a longer duration",
            )  # fmt: skip
    elif window_s is not None:
        part, note = busiest_part(times, window_s)
        if note:
            times = gen.from_timestamps(times[part])
            source += note
            return dataclasses.replace(
                trace, times_s=times, source=source, duration_s=window_s, cut=True
            )
    span = float(times[-1]) if duration_s is None else min(duration_s, own)
    if duration_s is None and window_s is None:
        source += whole_trace_note(times)
    if times.size < n:  # what is simulated: the requests kept and the rate they offer
        source += (
            f", first {duration_s:g} s ({times.size} of {n} requests, "
            f"{times.size / span:.3g} req/s offered)"
        )
    return dataclasses.replace(
        trace, times_s=times, source=source, duration_s=span, cut=times.size < n
    )


def arrivals_at(
    kind: str, seed: int, *, trace: Arrivals | None = None
) -> Callable[[float, float], FloatArray]:
    """``at(rate, duration)``: arrival times over ``duration`` seconds at any mean rate, of
    the same process as ``kind`` (a ``trace`` time-scaled, repeated to cover the run): what a
    saturation search offers."""
    from gpucast.simulate import arrivals as gen

    def at(rate_rps: float, duration_s: float) -> FloatArray:
        if trace is None:
            return _generated(kind, rate_rps, duration_s, seed)[0]
        return gen.rescaled(trace.times_s, rate_rps, duration_s)

    return at


# -- host path ----------------------------------------------------------------------------
def given_host_capacity(capacity_rps: float) -> Sourced[float]:
    return Sourced(capacity_rps, f"{capacity_rps:g} requests/s per server (given)")


def calibrated_host_path(
    deployment: Deployment,
    points: Sequence[tuple[Mapping[str, Any], float]],
    *,
    capacity_rps: float | None,
    seed: int,
    field: str = "measured p50",
) -> Sourced[HostPathFit]:
    """The shared host fitted to measured medians (arrivals, seconds) by
    :func:`gpucast.simulate.serving.calibrate_host_path`: its time alone from one load (at
    the given capacity, None: unlimited), its time and capacity from two."""
    from gpucast.simulate.serving import calibrate_host_path

    fit = calibrate_host_path(deployment, points, capacity_rps=capacity_rps, seed=seed, field=field)
    medians = ", ".join(f"{p50 * 1e3:g} ms" for _a, p50 in points)
    cap = (
        f"capacity {fit.capacity_rps:.1f} req/s fitted"
        if fit.capacity_fitted
        else "capacity unlimited"
        if fit.capacity_rps is None
        else f"capacity {fit.capacity_rps:g} req/s (given)"
    )
    return Sourced(
        fit,
        f"{fit.host_s * 1e3:.2f} ms on the host path alone, {cap}: calibrated to the "
        f"measured median(s) {medians}",
    )
