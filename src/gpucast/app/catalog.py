"""``gpucast.catalog_gpus``, ``catalog_offers``, ``catalog_systems``, ``import_skypilot``: the
facts gpucast plans on.

GPU specs, cloud offers and node shapes come from the built-in catalog (each row with a source
and a date), plus an offers CSV of your own (``offers=``, e.g. written by
:func:`import_skypilot`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.domain.catalog import Catalog, GpuSpec, Offer, offers_option
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.limits import check_price
from gpucast.domain.options import documented, option, split_list
from gpucast.domain.provenance import Validation
from gpucast.domain.systems import NodeShape

if TYPE_CHECKING:
    import pandas as pd


def _row(value: GpuSpec | Offer | NodeShape) -> dict[str, Any]:
    out = asdict(value)
    out["as_of"] = value.as_of.isoformat()
    return out


#: A GPU's bandwidths in GB/s (bytes) under keys that say so, each beside the ``_gbps`` key
#: (GB/s too, the catalog CSV's column) kept for files saved before: ``_gbps`` elsewhere
#: (``network_gbps``, every ``--*-gbps`` flag of a network) is Gbit/s.
_GPU_GB_PER_S_KEYS = {
    "memory_bandwidth_gbps": "memory_bandwidth_gb_per_s",
    "interconnect_gbps": "interconnect_gb_per_s",
}


def _gpu_row(gpu: GpuSpec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in _row(gpu).items():
        out[key] = value
        if key in _GPU_GB_PER_S_KEYS:
            out[_GPU_GB_PER_S_KEYS[key]] = value
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogGpusRequest:
    """The GPU specs (``gpucast catalog gpus``); there is nothing to choose yet."""

    VERB: ClassVar[str] = "catalog gpus"


@dataclass(frozen=True, slots=True, kw_only=True)
class GpusResult:
    gpus: tuple[GpuSpec, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"gpus": [_gpu_row(g) for g in self.gpus]}

    def to_frame(self) -> pd.DataFrame:
        """One row per GPU (MIG profiles as a list per row)."""
        import pandas as pd

        return pd.DataFrame(self.to_dict()["gpus"])


def catalog_gpus(request: CatalogGpusRequest | None = None, /, **options: Any) -> GpusResult:
    """GPU specs: dense peak TFLOP/s per precision, memory, bandwidth, MIG profiles."""
    from gpucast.catalog import load_catalog

    resolve(CatalogGpusRequest, request, options)
    return GpusResult(gpus=tuple(load_catalog().gpus))


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogSystemsRequest:
    """The node shapes a ``--cluster NAME`` can name (``gpucast catalog systems``)."""

    VERB: ClassVar[str] = "catalog systems"

    gpu: str | None = option(None, help="Only shapes of this GPU (name or alias).", example="H100")


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemsResult:
    systems: tuple[NodeShape, ...]
    #: why the list is empty (no shape of the --gpu asked for)
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "count": len(self.systems),
            "systems": [_row(s) for s in self.systems],
            "warnings": list(self.warnings),
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per node shape (bandwidths as the shape states them)."""
        import pandas as pd

        return pd.DataFrame(self.to_dict()["systems"], columns=_columns(NodeShape))


def catalog_systems(
    request: CatalogSystemsRequest | None = None, /, **options: Any
) -> SystemsResult:
    """Node shapes (DGX and HGX servers, a GB200 NVL72 rack, MLPerf systems, cloud instance
    types): GPUs per node, the link inside a node and the network between nodes, each with
    its source; any of them is a ``--cluster NAME``."""
    from gpucast.catalog import load_catalog
    from gpucast.catalog.systems import load_systems

    request = resolve(CatalogSystemsRequest, request, options)
    shapes = load_systems()
    warnings: tuple[str, ...] = ()
    if request.gpu is not None:
        name = load_catalog().gpu(request.gpu).name  # an unknown GPU names the close ones
        having = sorted({s.gpu for s in shapes})
        shapes = tuple(s for s in shapes if s.gpu == name)
        if not shapes:
            warnings = (
                f"no node shape in catalog/data/systems.csv has a {name}; shapes exist for "
                f"{', '.join(having)} (a cloud instance of a {name} is priced from its offers: "
                f"gpucast catalog offers --gpu {name})",
            )
    return SystemsResult(systems=shapes, warnings=warnings)


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogOffersRequest:
    """Which cloud offers to list (``gpucast catalog offers``); every filter is optional."""

    VERB: ClassVar[str] = "catalog offers"

    provider: str | None = option(None, help="aws, gcp or azure.", example="gcp")
    region: str | None = option(None, help="Region, e.g. us-east-1.", example="us-east-1")
    gpu: str | None = option(None, help="GPU name or alias, e.g. V100.", example="V100")
    spot: bool = option(False, help="Only offers with a spot price.")
    cpu_only: bool = option(False, help="Only CPU-only instances.")
    offers_file: Path | None = offers_option()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffersResult:
    snapshot_date: date
    offers: tuple[Offer, ...]
    #: one line when nothing matches: why, and where else to look
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "snapshot_date": self.snapshot_date.isoformat(),
            "count": len(self.offers),
            "offers": [_row(o) for o in self.offers],
            "warnings": list(self.warnings),
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per offer (prices in USD per hour)."""
        import pandas as pd

        return pd.DataFrame(self.to_dict()["offers"], columns=_columns(Offer))


def _columns(cls: type) -> list[str]:
    return [f.name for f in fields(cls)]


def catalog_offers(request: CatalogOffersRequest | None = None, /, **options: Any) -> OffersResult:
    """Cloud offers with on-demand and spot prices; unknown names list the close matches."""
    from gpucast.catalog import load_catalog, offers_file

    request = resolve(CatalogOffersRequest, request, options)
    catalog = load_catalog(offers_file(request.offers_file))
    found = catalog.find_offers(
        provider=request.provider,
        region=request.region,
        gpu=request.gpu,
        spot=True if request.spot else None,
        cpu_only=True if request.cpu_only else None,
    )
    warnings = () if found else (_no_offer(catalog, request),)
    return OffersResult(snapshot_date=catalog.snapshot_date, offers=tuple(found), warnings=warnings)


def _no_offer(catalog: Catalog, request: CatalogOffersRequest) -> str:
    """Why no offer matched: a GPU no offer sells, or filters that exclude each other."""
    if request.gpu is not None and not catalog.find_offers(gpu=request.gpu):
        gpu = catalog.gpu(request.gpu).name
        return (
            f"gpu: no offer of the catalog sells {gpu}; its node shapes are in `gpucast "
            f"catalog systems --gpu {gpu}` (a --cluster NAME), or add your prices with "
            "--offers FILE"
        )
    return "no offer matches all of these filters; drop one (--region, --spot, --provider, --gpu)"


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class ImportSkypilotRequest:
    """A SkyPilot price catalog to convert (``gpucast catalog import-skypilot``)."""

    VERB: ClassVar[str] = "catalog import-skypilot"

    file: Path = option(
        help="A SkyPilot catalog vms.csv (catalogs/v8/<cloud>).", argument=True, example="vms.csv"
    )
    cloud: str = option(help="aws, gcp or azure.", example="gcp")
    out: Path = option(help="Offers CSV to write (for --offers).", example="offers.csv")

    def __post_init__(self) -> None:
        if self.out.resolve() == self.file.resolve():
            raise InvalidSpecError(
                "out", "must differ from the input file", fix="choose another output path"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportResult:
    """The offers written to ``out`` and why the other rows were skipped."""

    offers: tuple[Offer, ...]
    skipped_reasons: tuple[str, ...]
    out: Path
    #: One line per assumption made for some offers (a network figure, a dropped spot price);
    #: each such row's ``note`` in ``out`` says it too.
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "imported": len(self.offers),
            "skipped": len(self.skipped_reasons),
            "skipped_reasons": list(self.skipped_reasons),
            "out": str(self.out),
            "warnings": list(self.warnings),
        }

    def to_frame(self) -> pd.DataFrame:
        """The imported offers, one row each."""
        import pandas as pd

        return pd.DataFrame([_row(o) for o in self.offers], columns=_columns(Offer))


def import_skypilot(
    request: ImportSkypilotRequest | str | Path | int | None = None, /, **options: Any
) -> ImportResult:
    """Convert a SkyPilot ``vms.csv`` into a gpucast offers CSV (written atomically)."""
    from gpucast.catalog import write_offers_csv
    from gpucast.catalog.skypilot import import_skypilot as read_skypilot

    request = resolve(ImportSkypilotRequest, request, options)
    got = read_skypilot(request.file, request.cloud)
    write_offers_csv(got.offers, request.out, notes=got.notes)
    return ImportResult(
        offers=got.offers, skipped_reasons=got.skipped, out=request.out, warnings=got.warnings
    )


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogSpotRequest:
    """Spot-market semantics and the no-data scenarios (``gpucast catalog spot``)."""

    VERB: ClassVar[str] = "catalog spot"

    provider: str | None = option(None, help="aws, gcp or azure (default: all).", example="aws")


@dataclass(frozen=True, slots=True, kw_only=True)
class SpotResult:
    """Each provider's transient servers, and the documented scenarios used without data."""

    markets: tuple[Any, ...]  # gpucast.domain.spot.SpotMarket
    scenarios: tuple[Any, ...]  # gpucast.domain.spot.SpotScenario
    #: the hazard of a scenario that takes the --interruption-band (the optimistic one) at
    #: the band's default, and what it is
    band_hazard_per_node_hour: float
    band_hazard_source: str

    def hazard(self, scenario: Any) -> tuple[float, str]:
        """A scenario's revocations per node-hour and where the figure comes from: the
        scenario file's, or (the optimistic scenario) the default --interruption-band's."""
        if scenario.hazard_per_node_hour is not None:
            return scenario.hazard_per_node_hour, "spot_scenarios.csv"
        return self.band_hazard_per_node_hour, self.band_hazard_source

    def to_dict(self) -> dict[str, Any]:
        scenarios = []
        for s in self.scenarios:
            hazard, source = self.hazard(s)
            scenarios.append(asdict(s) | {"hazard_per_node_hour": hazard, "hazard_source": source})
        return {"markets": [asdict(m) for m in self.markets], "scenarios": scenarios}

    def to_frame(self) -> pd.DataFrame:
        """One row per provider and kind of transient server."""
        import pandas as pd

        return pd.DataFrame(self.to_dict()["markets"])


def catalog_spot(request: CatalogSpotRequest | None = None, /, **options: Any) -> SpotResult:
    """How each provider's spot servers behave (notice, maximum lifetime, billing) and the
    pessimistic/optimistic scenarios plans use where no lifetime data applies."""
    from gpucast.catalog.spot import spot_market, spot_markets, spot_scenarios
    from gpucast.domain.spot import DEFAULT_BAND
    from gpucast.predict.revocation import hazard_from_interruption_band

    request = resolve(CatalogSpotRequest, request, options)
    markets = spot_markets()
    if request.provider is not None:
        spot_market(request.provider)  # an unknown provider names the known ones
        markets = tuple(m for m in markets if m.provider == request.provider.strip().lower())
    band = hazard_from_interruption_band(DEFAULT_BAND)
    return SpotResult(
        markets=markets,
        scenarios=tuple(spot_scenarios().values()),
        band_hazard_per_node_hour=band.hazard_per_hour,
        band_hazard_source=f"the --interruption-band of plan/simulate train at its default "
        f"({band.source}; another band gives another hazard)",
    )


def _layout(value: Any) -> tuple[str, ...]:
    """``--layout``'s profiles; one given empty is refused (it would list every layout)."""
    profiles = tuple(str(p) for p in split_list(value))
    if not profiles:
        raise InvalidSpecError(
            "layout",
            "is empty: give the layout's profiles",
            fix="e.g. --layout 3g.20gb,2g.10gb,1g.5gb, or leave --layout out to list every layout",
        )
    return profiles


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogMigRequest:
    """A GPU's MIG profiles and valid layouts (``gpucast catalog mig``)."""

    VERB: ClassVar[str] = "catalog mig"

    gpu: str = option(help="A MIG-capable GPU, e.g. A100-40GB.", example="A100-40GB")
    layout: tuple[str, ...] = option(
        (),
        parse=_layout,
        help="Check one layout: its profiles, e.g. 3g.20gb,2g.10gb,1g.5gb (PROFILE@START pins "
        "a start offset).",
        example="3g.20gb,2g.10gb,1g.5gb",
    )
    profiles: tuple[str, ...] = option(
        (),
        flag="profile",
        help="Enumerate layouts of these profiles only (default: all the GPU's).",
        example="1g.5gb,3g.20gb",
    )
    all_layouts: bool = option(
        False, help="Every valid layout, not only the full ones no instance can be added to."
    )
    price: float | None = option(
        None,
        help="GPU price, US$/h, to price the slices (default: the catalog's cheapest offer).",
        example="3.67",
    )

    def __post_init__(self) -> None:
        check_price(self.price)


@dataclass(frozen=True, slots=True, kw_only=True)
class MigProfileRow:
    """One MIG profile: its slices, placements, its share of the GPU and its price."""

    name: str
    compute_slices: int
    memory_slices: int | None
    memory_gib: float
    sm_count: int | None
    max_instances: int
    placements: tuple[int, ...]
    compute_share: float
    bandwidth_share: float
    price_usd_per_hour: float | None  # in a layout of this profile alone
    as_of: str | None = None  # the data file row's date (ISO), None for a profile made in code


@dataclass(frozen=True, slots=True, kw_only=True)
class MigResult:
    """``catalog mig``: the profiles, the valid layouts, and the checked layout if one was given."""

    gpu: str
    maximal: bool
    profiles: tuple[MigProfileRow, ...]
    layouts: tuple[Any, ...]  # gpucast.predict.mig.MigLayout
    checked: Any | None  # gpucast.predict.mig.MigLayout
    checked_prices_usd_per_hour: tuple[float, ...]
    gpu_price: str  # where the GPU price came from
    source_url: str
    #: the latest ``as_of`` of the GPU's profile rows (ISO date; None: none dated)
    as_of: str | None = None
    #: the GPU price the slice prices split (US$/h per GPU), None without one
    gpu_price_usd_per_hour: float | None = None
    validation: Validation  # of a slice's speed from its shares
    #: the GPU's (compute, memory) slices: (7, 8), an A30's (4, 4)
    slices: tuple[int, int] = (7, 8)

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "compute_slices": self.slices[0],
            "memory_slices": self.slices[1],
            "maximal": self.maximal,
            "profiles": [asdict(p) for p in self.profiles],
            "count": len(self.layouts),
            "layouts": [lay.label for lay in self.layouts],
            "checked": None
            if self.checked is None
            else {
                **self.checked.to_dict(),
                "prices_usd_per_hour": list(self.checked_prices_usd_per_hour),
            },
            "gpu_price": self.gpu_price,
            "gpu_price_usd_per_hour": self.gpu_price_usd_per_hour,
            "source_url": self.source_url,
            "as_of": self.as_of,
            "slice_speed_validation": self.validation.text(),
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per layout (its label and the slices it uses)."""
        import pandas as pd

        return pd.DataFrame([lay.to_dict() for lay in self.layouts])


MIG_SOURCE = "https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html"


def _check_layout_in_profiles(checked: Any | None, profiles: tuple[str, ...]) -> None:
    """--layout and --profile together: the checked layout's profiles must be among
    --profile (which limits the layouts listed beside it), else one line naming both."""
    outside = (
        []
        if checked is None or not profiles
        else [i.profile.name for i in checked.instances if i.profile.name not in profiles]
    )
    if outside:
        raise InvalidSpecError(
            "profile",
            f"--layout uses {', '.join(dict.fromkeys(outside))}, not among --profile "
            f"{','.join(profiles)} (--profile limits the layouts listed beside the checked one)",
            fix="add them to --profile, or drop --profile",
        )


def catalog_mig(request: CatalogMigRequest | None = None, /, **options: Any) -> MigResult:
    """A GPU's MIG profiles (slices, SMs, start offsets, share, price) and every valid layout;
    ``layout=`` checks one and names the rule it breaks."""
    from gpucast.catalog import load_catalog
    from gpucast.catalog.validation import validation_for
    from gpucast.predict.mig import (
        check_layout,
        enumerate_layouts,
        layout_prices_usd_per_hour,
        mig_share,
        placeable_profiles,
    )

    request = resolve(CatalogMigRequest, request, options)
    catalog = load_catalog()
    spec = catalog.gpu(request.gpu)
    usable = placeable_profiles(spec, catalog.mig_gpu_names(), field="gpu")
    price = request.price
    where = f"--price {price:g} US$/h per GPU" if price is not None else "no price"
    if price is None:
        offers = [o for o in catalog.find_offers(gpu=spec.name) if o.gpus >= 1]
        if offers:
            best = min(offers, key=lambda o: o.on_demand_usd_per_hour / o.gpus)
            price = best.on_demand_usd_per_hour / best.gpus
            where = (
                f"{price:.4g} US$/h per GPU, cheapest on-demand offer "
                f"({best.provider} {best.instance_type})"
            )
    rows = []
    for p in usable:
        share = mig_share(spec, p)
        rows.append(
            MigProfileRow(
                name=p.name,
                compute_slices=p.compute_slices,
                memory_slices=p.memory_slices,
                memory_gib=p.memory_gib,
                sm_count=p.sm_count,
                max_instances=p.max_instances,
                placements=p.placements,
                compute_share=share.compute_share,
                bandwidth_share=share.bandwidth_share,
                price_usd_per_hour=None
                if price is None
                else layout_prices_usd_per_hour(
                    price, [p] * p.max_instances, slices=spec.mig_slices
                )[0],
                as_of=None if p.as_of is None else p.as_of.isoformat(),
            )
        )
    checked = check_layout(spec, request.layout) if request.layout else None
    prices: tuple[float, ...] = ()
    if checked is not None and price is not None:
        prices = layout_prices_usd_per_hour(
            price, [i.profile for i in checked.instances], slices=spec.mig_slices
        )
    layouts = enumerate_layouts(
        spec, profiles=request.profiles or None, maximal=not request.all_layouts
    )
    _check_layout_in_profiles(checked, request.profiles)
    return MigResult(
        gpu=spec.name,
        maximal=not request.all_layouts,
        profiles=tuple(rows),
        layouts=layouts,
        checked=checked,
        checked_prices_usd_per_hour=prices,
        gpu_price=where,
        gpu_price_usd_per_hour=price,
        source_url=", ".join(sorted({p.source_url for p in usable if p.source_url})) or MIG_SOURCE,
        as_of=max((r.as_of for r in rows if r.as_of is not None), default=None),
        validation=validation_for("mig-slice", [spec.name], "*"),
        slices=spec.mig_slices,
    )
