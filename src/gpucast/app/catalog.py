"""``gpucast.catalog_gpus``, ``catalog_offers``, ``import_skypilot``: the facts gpucast plans on.

GPU specs and cloud offers come from the built-in catalog (each row with a source and a date),
plus an offers CSV of your own (``offers=``, e.g. written by :func:`import_skypilot`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.domain.catalog import GpuSpec, Offer, offers_option
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.options import option

if TYPE_CHECKING:
    import pandas as pd


def _row(value: GpuSpec | Offer) -> dict[str, Any]:
    out = asdict(value)
    out["as_of"] = value.as_of.isoformat()
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogGpusRequest:
    """The GPU specs (``gpucast catalog gpus``); there is nothing to choose yet."""

    VERB: ClassVar[str] = "catalog gpus"


@dataclass(frozen=True, slots=True, kw_only=True)
class GpusResult:
    gpus: tuple[GpuSpec, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"gpus": [_row(g) for g in self.gpus]}

    def to_frame(self) -> pd.DataFrame:
        """One row per GPU (MIG profiles as a list per row)."""
        import pandas as pd

        return pd.DataFrame(self.to_dict()["gpus"])


def catalog_gpus(request: CatalogGpusRequest | None = None, /, **options: Any) -> GpusResult:
    """GPU specs: dense peak TFLOP/s per precision, memory, bandwidth, MIG profiles."""
    from gpucast.catalog import load_catalog

    resolve(CatalogGpusRequest, request, options)
    return GpusResult(gpus=tuple(load_catalog().gpus))


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "snapshot_date": self.snapshot_date.isoformat(),
            "count": len(self.offers),
            "offers": [_row(o) for o in self.offers],
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
    return OffersResult(snapshot_date=catalog.snapshot_date, offers=tuple(found))


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "imported": len(self.offers),
            "skipped": len(self.skipped_reasons),
            "skipped_reasons": list(self.skipped_reasons),
            "out": str(self.out),
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
    imported, skipped = read_skypilot(request.file, request.cloud)
    notes = ["imported from SkyPilot catalog"] * len(imported)
    write_offers_csv(imported, request.out, notes=notes)
    return ImportResult(offers=tuple(imported), skipped_reasons=tuple(skipped), out=request.out)


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "markets": [asdict(m) for m in self.markets],
            "scenarios": [asdict(s) for s in self.scenarios],
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per provider and kind of transient server."""
        import pandas as pd

        return pd.DataFrame(self.to_dict()["markets"])


def catalog_spot(request: CatalogSpotRequest | None = None, /, **options: Any) -> SpotResult:
    """How each provider's spot servers behave (notice, maximum lifetime, billing) and the
    pessimistic/optimistic scenarios plans use where no lifetime data applies."""
    from gpucast.catalog.spot import spot_market, spot_markets, spot_scenarios

    request = resolve(CatalogSpotRequest, request, options)
    markets = spot_markets()
    if request.provider is not None:
        spot_market(request.provider)  # an unknown provider names the known ones
        markets = tuple(m for m in markets if m.provider == request.provider.strip().lower())
    return SpotResult(markets=markets, scenarios=tuple(spot_scenarios().values()))
