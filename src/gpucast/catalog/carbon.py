"""Grid carbon intensity per cloud region as data (``data/grid_carbon.csv``).

One row per (provider, region) of the offers catalog: gCO2e per kWh of the electricity where
the region's data centres are, the year it describes, its source and what kind of figure it is
(Google's own location-based figure for GCP; US EPA eGRID subregion rates for AWS/Azure US
regions; Ember national averages elsewhere -- lifecycle, so higher than the other two: the
``note`` of every row says which).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources

from gpucast.catalog._csv import parse_int, read_rows, require_float

_COLUMNS = ("provider", "region", "gco2e_per_kwh", "year", "source_url", "as_of", "note")


@dataclass(frozen=True, slots=True, kw_only=True)
class GridCarbon:
    """The carbon intensity of one region's grid."""

    provider: str
    region: str
    gco2e_per_kwh: float
    year: int
    source_url: str
    note: str

    @property
    def source(self) -> str:
        return f"{self.note} ({self.source_url})"


@functools.cache
def grid_carbon() -> dict[tuple[str, str], GridCarbon]:
    """Every region's figure, by (provider, region)."""
    path = "gpucast/catalog/data/grid_carbon.csv"
    text = resources.files("gpucast.catalog").joinpath("data/grid_carbon.csv").read_text("utf-8")
    out: dict[tuple[str, str], GridCarbon] = {}
    for line, row in read_rows(text, path, _COLUMNS):
        key = (row["provider"], row["region"])
        out[key] = GridCarbon(
            provider=row["provider"],
            region=row["region"],
            gco2e_per_kwh=require_float(
                row["gco2e_per_kwh"], path=path, line=line, column="gco2e_per_kwh"
            ),
            year=parse_int(row["year"], path=path, line=line, column="year", minimum=1990),
            source_url=row["source_url"],
            note=row["note"],
        )
    return out
