"""The server types the serving verbs rent and their prices: whole catalog GPUs, MIG slices and
CPU servers (:func:`build_server_options`, ``plan serve``), the one GPU or slice ``simulate
serve`` runs on (:func:`gpu_server`), THE price of a MIG slice (:func:`mig_price_usd_per_hour`),
each GPU's share of its offer's network and its PCIe link, and the refusals where the filters
leave no offer (:func:`no_offer_within`, :func:`unserved_gpus`, :func:`unoffered_gpus`).

Private part of :mod:`gpucast.inputs.serving`, which re-exports its public names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpucast.domain.catalog import GpuSpec, MigProfile, Offer
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.provenance import Sourced
from gpucast.domain.serving import ServerKind
from gpucast.domain.serving_plan import ServerOption

if TYPE_CHECKING:
    from gpucast.domain.catalog import Catalog


#: What the latency predictor needs for one server option: the GPU and MIG profile (None for
#: a CPU server) and the offer it is rented from.
ServerTarget = tuple[GpuSpec | None, MigProfile | None, Offer]


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
