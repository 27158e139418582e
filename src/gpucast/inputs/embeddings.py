"""Inputs of ``plan embeddings``: the model's tables and the UVM cache's hit-rate curve."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucast.domain.embeddings import LOCALITY_WINDOWS, RecModel
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.provenance import Sourced

if TYPE_CHECKING:
    from gpucast.domain.catalog import GpuSpec
    from gpucast.domain.serving import LatencyCurve
    from gpucast.predict.embedding_cache import EmbeddingLocalityModel, ZipfLocality


@dataclass(frozen=True, slots=True, kw_only=True)
class CachedCurve:
    """A served model's latency curve behind an embedding cache, and the bytes a request's
    misses read over PCIe (from host DRAM, or SSD through it) inside that device time."""

    curve: LatencyCurve
    pcie_bytes_per_request: float
    lookups_per_request: int = 0
    row_bytes: float = 0.0
    #: shares of the lookups served by HBM, host DRAM and SSD (summing to 1)
    shares: tuple[float, float, float] = (1.0, 0.0, 0.0)

    def to_dict(self) -> dict[str, Any]:
        """The tiers' numbers ``simulate serve --json`` gives beside its text source."""
        hbm, dram, ssd = self.shares
        return {
            "lookups_per_request": self.lookups_per_request,
            "row_bytes": self.row_bytes,
            "lookup_share_hbm": hbm,
            "lookup_share_dram": dram,
            "lookup_share_ssd": ssd,
            "miss_bytes_per_request": self.pcie_bytes_per_request,
        }


def rec_model_input(
    name: str | None, tables: Path | None, batch: int | None
) -> tuple[RecModel, str]:
    """A shipped model by name, or the user's tables file (``--tables``), with a warning
    naming the file's columns the planner does not read (empty where none)."""
    from dataclasses import replace

    from gpucast.catalog._csv import unread_columns, unread_columns_warning
    from gpucast.catalog.embeddings import (
        READ_COLUMNS,
        TABLE_COLUMNS,
        parse_rec_models,
        rec_model,
    )
    from gpucast.store.files import read_input_text

    if (name is None) == (tables is None):
        raise InvalidSpecError(
            "model",
            "give exactly one of --model NAME and --tables FILE",
            fix="e.g. --model dlrm-dcnv2",
        )
    if tables is not None:
        if Path(tables).suffix.lower() in (".yaml", ".yml", ".toml", ".json"):
            raise InvalidSpecError(  # its first line read as a CSV header: "missing columns"
                "tables",
                f"must be a CSV file, not {Path(tables).suffix.lstrip('.').upper()}",
                got=str(tables),
                fix="write one row per table under the header table,rows,dim,pooling "
                "(e.g. users,1000000,64,1); --config takes YAML/TOML for the other options",
            )
        text = read_input_text(tables, "tables", fix="a CSV with columns table,rows,dim,pooling")
        models = parse_rec_models(
            text, str(tables), required=TABLE_COLUMNS, default_model=Path(tables).stem
        )
        if not models:
            raise InvalidSpecError(
                "tables", "has no table rows, only a header", got=str(tables),
                fix="add one row per table, e.g. users,1000000,64,1",
            )  # fmt: skip
        if len(models) != 1:
            raise InvalidSpecError(
                "tables", "must describe one model (one value in its model column)", got=str(tables)
            )
        model = models[0]
        if batch is None and model.global_batch <= 1:
            raise InvalidSpecError(
                "batch",
                "is required with --tables (global samples per step)",
                fix="e.g. --batch 65536",
            )
        warning = unread_columns_warning(tables, unread_columns(text, READ_COLUMNS), READ_COLUMNS)
    else:
        assert name is not None
        model, warning = rec_model(name), ""
    return (model if batch is None else replace(model, global_batch=batch)), warning


@dataclass(frozen=True, slots=True, kw_only=True)
class FittedWindow:
    """The locality model fitted on one trace of a ``dlrm_datasets`` window, with the trace's
    name, lookups and distinct rows, and the file it came from."""

    model: EmbeddingLocalityModel
    window: str
    trace: str
    lookups: int
    unique_rows: int
    path: Path

    def describe(self) -> str:
        return (
            f"dlrm_datasets {self.window} window {self.trace} ({self.lookups:,} lookups, "
            f"{self.unique_rows:,} distinct rows)"
        )


@functools.lru_cache(maxsize=8)
def fitted_window(
    data_dir: Path | None, window: str, trace: str = "", *, flag: str = "locality"
) -> FittedWindow | None:
    """The locality model fitted on a dlrm_datasets window's first trace (or on ``trace``);
    None where the data is absent. A ``trace`` the file does not have is an error (on
    ``flag``) naming the traces it has."""
    from gpucast.inputs.data import data_path, published_data_dir

    if window not in LOCALITY_WINDOWS:
        raise InvalidSpecError(flag, f"window must be {' or '.join(LOCALITY_WINDOWS)}", got=window)
    root = published_data_dir(data_dir, needs=("dlrm_datasets", "transient", "cmdare"))
    path = data_path(root, "dlrm_datasets", f"embedding_bag_{window}_locality_stats.txt")
    if path is None:
        return None
    from gpucast.predict.embedding_cache import EmbeddingLocalityModel
    from gpucast.store.datasets.dlrm_locality import read_dlrm_locality

    data = read_dlrm_locality(path)
    traces = list(data.totals.trace)
    name = trace.removesuffix(".pt") if trace else traces[0]
    if name not in traces:
        raise InvalidSpecError(
            flag,
            f"dlrm_datasets {window} has no trace {name!r}",
            fix=f"use one of {', '.join(f'{window}/{t}' for t in traces[:3])}, ... "
            f"({len(traces)} traces), or {window} for the first",
        )
    total = data.totals[data.totals.trace == name].iloc[0]
    model = EmbeddingLocalityModel().fit(
        data.histogram[data.histogram.trace == name],
        lookups=int(total.lookups),
        unique_rows=int(total.unique_rows),
    )
    return FittedWindow(
        model=model,
        window=window,
        trace=name,
        lookups=int(total.lookups),
        unique_rows=int(total.unique_rows),
        path=path,
    )


def hit_rate_curve(
    data_dir: Path | None, window: str, policy: str, trace: str = ""
) -> Sourced[Callable[[float], float]]:
    """The LRU/LFU hit rate vs cache share fitted on a dlrm_datasets window (its first trace,
    or ``trace``), or uniform access (hit rate = cache share) where the data is absent."""
    fitted = fitted_window(data_dir, window, trace)
    if fitted is None:
        return Sourced(
            lambda c: float(c),
            "no dlrm_datasets locality data (--data-dir): uniform access assumed, hit rate = "
            "cache share of the rows",
        )
    model = fitted.model

    def curve(c: float) -> float:
        return float(model.hit_rate([c], policy=policy)[0])  # type: ignore[arg-type]

    return Sourced(
        curve,
        f"{policy.upper()} hit rate fitted on {fitted.describe()}; the cache share of a "
        "table's rows is read as the share of the window's distinct rows; tiers inclusive "
        "(HBM h(c), DRAM h(d) - h(c), SSD 1 - h(d))",
    )


def table_hit_rates(
    model: RecModel, data_dir: Path | None, policy: str
) -> Sourced[dict[str, Callable[[float], float]]]:
    """The hit-rate curve of every table with its own ``locality`` (a dlrm_datasets window or
    trace: the locality model fitted on it; a Zipf exponent:
    :class:`~gpucast.predict.embedding_cache.ZipfLocality` over the table's rows), by table
    name; empty where no table has one. A window whose data is absent is an error: the table
    asked for it."""
    from gpucast.predict.embedding_cache import ZipfLocality

    curves: dict[str, Callable[[float], float]] = {}
    groups: dict[str, list[str]] = {}
    for t in model.tables:
        loc = t.locality
        if loc is None:
            continue
        if loc.zipf_exponent is not None:
            zipf = ZipfLocality(rows=t.rows, exponent=loc.zipf_exponent)
            curves[t.name] = _curve(zipf, policy)
            groups.setdefault(f"{loc.label()} over its rows (steady state)", []).append(t.name)
            continue
        fitted = fitted_window(data_dir, loc.window, loc.trace, flag=f"locality of table {t.name}")
        if fitted is None:
            raise InvalidSpecError(
                "locality",
                f"table {t.name} names dlrm_datasets {loc.window}, which no data folder holds",
                fix="pass --data-dir ../shared/data (or set $GPUCAST_SHARED_DATA), or give "
                "the table a Zipf exponent",
            )
        curves[t.name] = _curve(fitted.model, policy)
        groups.setdefault(fitted.describe(), []).append(t.name)
    text = "; ".join(
        f"{', '.join(names[:4])}{f' and {len(names) - 4} more' if len(names) > 4 else ''}: {label}"
        for label, names in groups.items()
    )
    if any(t.locality is not None and t.locality.window for t in model.tables):
        text += "; a window's curve reads a table's cache share as the window's distinct rows"
    return Sourced(curves, f"{policy.upper()} per table ({text})" if curves else "")


def _curve(model: EmbeddingLocalityModel | ZipfLocality, policy: str) -> Callable[[float], float]:
    def curve(c: float) -> float:
        return float(model.hit_rate([c], policy=policy)[0])  # type: ignore[arg-type]

    return curve


def distinct_per_lookup(data_dir: Path | None, window: str, trace: str = "") -> Sourced[float]:
    """Distinct rows per lookup of a batch (the hierarchical PS pulls each once): the
    window's (or its ``trace``'s) distinct rows over its lookups, or 1 (every lookup a new
    row) without data."""
    fitted = fitted_window(data_dir, window, trace)
    if fitted is None:
        return Sourced(
            1.0, "no dlrm_datasets locality data: every lookup of a batch a distinct row"
        )
    trace, lookups, unique = fitted.trace, fitted.lookups, fitted.unique_rows
    return Sourced(
        unique / lookups,
        f"{unique / lookups:.3f} distinct rows per lookup, as in dlrm_datasets {window} window "
        f"{trace} ({unique:,} of {lookups:,}); the same ratio assumed at every node's batch",
    )


def embedding_cache_curve(
    curve: LatencyCurve,
    model: str,
    options: Mapping[str, Any],
    precision: str,
    gpu: GpuSpec,
    *,
    cache_fraction: float,
    dram_fraction: float,
    policy: str,
    data_dir: Path | None,
) -> Sourced[CachedCurve]:
    """A served recommendation model's latency curve with its embedding rows behind an HBM
    cache (``cache_fraction``) over host DRAM (``dram_fraction``) over the catalog's NVMe
    drive: :func:`gpucast.predict.embeddings.cached_lookup_curve` with the hit rates of the
    locality model (:func:`hit_rate_curve`)."""
    from gpucast.domain.embeddings import dlrm_lookups
    from gpucast.inputs.serving import pcie_gbps
    from gpucast.predict.embeddings import cached_lookup_curve, tier_shares
    from gpucast.predict.serving import ELEMENT_BYTES

    if model != "dlrm":
        raise InvalidSpecError(
            "cache-fraction",
            f"applies to a recommendation model with embedding tables, not {model!r}",
            fix="use --model dlrm (its tables: -o table_sizes=..., ...)",
        )
    lookups, dim = dlrm_lookups(options)
    row_bytes = dim * ELEMENT_BYTES.get(precision, 4.0)
    hit = hit_rate_curve(data_dir, "2022", policy)
    shares = tier_shares(hit.value, cache_fraction, dram_fraction)
    ssd = None
    if shares[2] > 0:
        from gpucast.catalog.ssd import ssd_drive

        ssd = ssd_drive()
    link = pcie_gbps(gpu)
    out = cached_lookup_curve(
        curve,
        lookups_per_sample=lookups,
        row_bytes=row_bytes,
        shares=shares,
        hbm_gbps=gpu.memory_bandwidth_gbps,
        host_link_gbps=link.value,
        ssd=ssd,
    )
    text = (
        f"{lookups} lookups of {row_bytes:g} B per request; HBM cache {cache_fraction:.0%} of "
        f"the rows, host DRAM {dram_fraction:.0%}; lookups served HBM {shares[0]:.1%} / DRAM "
        f"{shares[1]:.1%} / SSD {shares[2]:.1%} ({hit.source}); misses over {link.source}"
    )
    if ssd is not None:
        text += f"; SSD reads with one read latency a batch ({ssd.source})"
    misses = lookups * row_bytes * (shares[1] + shares[2])
    cached = CachedCurve(
        curve=out, pcie_bytes_per_request=misses, lookups_per_request=lookups,
        row_bytes=row_bytes, shares=shares,
    )  # fmt: skip
    return Sourced(cached, text)
