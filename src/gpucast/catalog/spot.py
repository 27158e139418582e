"""Spot-market facts as data: provider semantics and the scenarios used where data is missing.

* ``data/spot_markets.csv`` -- per provider and kind of transient server: notice, maximum
  lifetime (GCE preemptible: 24 h; Spot VMs, AWS and Azure spot: none), billing increment and
  minimum, eviction; each row with a source and a date.
* ``data/spot_scenarios.csv`` -- the optimistic and pessimistic assumptions (hazard, capacity
  gap) a plan shows side by side where no lifetime data covers a (provider, GPU).
"""

from __future__ import annotations

import functools
from importlib import resources

from gpucast.catalog._csv import parse_bool, read_rows
from gpucast.domain.catalog import PROVIDERS
from gpucast.domain.errors import DataFormatError, UnknownProviderError
from gpucast.domain.spot import SPOT_SCENARIOS, SpotMarket, SpotScenario

_MARKET_COLUMNS = (
    "provider", "kind", "notice_s", "max_lifetime_s", "billing_increment_s",
    "billing_minimum_s", "replacement_guaranteed", "eviction", "current", "source_url", "as_of",
)  # fmt: skip
_SCENARIO_COLUMNS = ("scenario", "hazard_per_node_hour", "capacity_gap_s", "source_url", "as_of")


def _text(name: str) -> tuple[str, str]:
    path = f"gpucast/catalog/data/{name}"
    return resources.files("gpucast.catalog").joinpath(f"data/{name}").read_text("utf-8"), path


def _number(row: dict[str, str], column: str, path: str, line: int) -> float:
    try:
        value = float(row[column])
    except ValueError:
        raise DataFormatError(path, "not a number", line=line, column=column) from None
    if value < 0:
        raise DataFormatError(path, "must be >= 0", line=line, column=column)
    return value


@functools.cache
def spot_markets() -> tuple[SpotMarket, ...]:
    """Every provider's transient-server semantics."""
    text, path = _text("spot_markets.csv")
    out = []
    for line, row in read_rows(text, path, _MARKET_COLUMNS):
        cap = row["max_lifetime_s"].strip()
        out.append(
            SpotMarket(
                provider=row["provider"],
                kind=row["kind"],
                notice_s=_number(row, "notice_s", path, line),
                max_lifetime_s=None if not cap else _number(row, "max_lifetime_s", path, line),
                billing_increment_s=_number(row, "billing_increment_s", path, line),
                billing_minimum_s=_number(row, "billing_minimum_s", path, line),
                replacement_guaranteed=parse_bool(
                    row["replacement_guaranteed"],
                    path=path,
                    line=line,
                    column="replacement_guaranteed",
                ),
                eviction=row["eviction"],
                current=parse_bool(row["current"], path=path, line=line, column="current"),
                source_url=row["source_url"],
                as_of=row["as_of"],
            )
        )
    return tuple(out)


def spot_market(provider: str, kind: str | None = None) -> SpotMarket:
    """The semantics of ``provider``'s spot servers (its current kind unless ``kind``)."""
    wanted = provider.strip().lower()
    rows = [m for m in spot_markets() if m.provider == wanted]
    if not rows:
        raise UnknownProviderError(provider, PROVIDERS, fix="e.g. --provider aws")
    for m in rows:
        if (kind is None and m.current) or m.kind == kind:
            return m
    raise UnknownProviderError(
        f"{provider} {kind}", [f"{m.provider} {m.kind}" for m in spot_markets()]
    )


@functools.cache
def spot_scenarios() -> dict[str, SpotScenario]:
    """The documented optimistic and pessimistic assumptions, by name."""
    text, path = _text("spot_scenarios.csv")
    out: dict[str, SpotScenario] = {}
    for line, row in read_rows(text, path, _SCENARIO_COLUMNS):
        hazard = row["hazard_per_node_hour"].strip()
        out[row["scenario"]] = SpotScenario(
            name=row["scenario"],
            hazard_per_node_hour=None
            if hazard == "band"
            else _number(row, "hazard_per_node_hour", path, line),
            capacity_gap_s=_number(row, "capacity_gap_s", path, line),
            source_url=row["source_url"],
            as_of=row["as_of"],
            note=row.get("note", ""),
        )
    missing = set(SPOT_SCENARIOS) - set(out)
    if missing:
        raise DataFormatError(path, f"lacks the scenario(s) {', '.join(sorted(missing))}")
    return out
