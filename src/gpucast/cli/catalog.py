"""`gpucast catalog gpus|offers|systems|spot|mig|import-skypilot`: the catalog's facts.

The flags are the fields of the requests in :mod:`gpucast.app.catalog`; the work happens in
its verbs. This module renders the tables.
"""

from __future__ import annotations

import typer
from rich.markup import escape
from rich.table import Table

from gpucast.app.catalog import (
    CatalogGpusRequest,
    CatalogMigRequest,
    CatalogOffersRequest,
    CatalogSpotRequest,
    CatalogSystemsRequest,
    ImportSkypilotRequest,
)
from gpucast.cli._catalog_tables import fmt_cell, gpus_table, mig_table, offers_table
from gpucast.cli._command import request_command
from gpucast.cli._common import JSON_OPTION_HELP, console, emit_json, print_warnings
from gpucast.domain.units import count_of, format_amount
from gpucast.report.captions import add_columns

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="GPU specs, MIG layouts and cloud offers with prices.",
)


@app.command("gpus")
@request_command(CatalogGpusRequest)
def gpus(
    request: CatalogGpusRequest,
    as_json: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """List GPU specs (dense peak TFLOP/s, memory, bandwidth, MIG profiles)."""
    from gpucast.app import catalog_gpus

    result = catalog_gpus(request)
    if as_json:
        emit_json(result.to_dict())
    else:
        console.print(gpus_table(result))


@app.command("offers")
@request_command(CatalogOffersRequest)
def offers(
    request: CatalogOffersRequest,
    as_json: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """List cloud offers with on-demand and spot prices (USD per hour)."""
    from gpucast.app import catalog_offers

    result = catalog_offers(request)
    if as_json:
        emit_json(result.to_dict())
    else:
        console.print(offers_table(result))
        print_warnings(result.warnings)


@app.command("systems")
@request_command(CatalogSystemsRequest)
def systems(
    request: CatalogSystemsRequest,
    as_json: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """List node shapes (servers, racks, cloud instance types): any is a --cluster NAME."""
    from gpucast.app import catalog_systems

    result = catalog_systems(request)
    print_warnings(result.warnings)
    if as_json:
        emit_json(result.to_dict())
        return
    if not result.systems:
        return  # the warning says why; no empty table
    table = Table(title=f"{len(result.systems)} node shapes (catalog/data/systems.csv)")
    names = ("name", "GPU", "GPUs", "inside a node", "GB/s per GPU", "network", "Gbit/s",
             "as of")  # fmt: skip
    add_columns(
        table, names, left=("name", "GPU", "inside a node", "network", "as of"), no_wrap=("name",)
    )
    for n in result.systems:
        table.add_row(
            n.name,
            n.gpu,
            str(n.gpus_per_node),
            n.intra_node,
            fmt_cell(n.intra_node_gbps),
            (n.network or "-") + (" (RDMA)" if n.rdma else ""),
            fmt_cell(n.inter_node_gbps),
            n.as_of.isoformat(),
        )
    table.caption = (
        "use a name with --cluster NAME (plan/simulate/predict train, predict/plan llm-train, "
        "plan embeddings); --cluster-set KEY=VALUE changes a field"
    )
    console.print(table)


@app.command("spot")
@request_command(CatalogSpotRequest)
def spot(
    request: CatalogSpotRequest,
    as_json: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Spot-market semantics per provider, and the scenarios used where no data applies."""
    from gpucast.app import catalog_spot
    from gpucast.domain.spot import DEFAULT_BAND

    result = catalog_spot(request)
    if as_json:
        emit_json(result.to_dict())
        return
    table = Table(title="transient servers by provider (catalog/data/spot_markets.csv)")
    for col in ("provider", "kind", "notice", "max lifetime", "billing", "eviction", "as of"):
        table.add_column(col)
    for m in result.markets:
        cap = "-" if m.max_lifetime_s is None else f"{m.max_lifetime_s / 3600:g} h"
        kind = m.kind + (" (priced)" if m.current else "")
        billing = f"per {m.billing_increment_s:g} s, min {m.billing_minimum_s:g} s"
        table.add_row(m.provider, kind, f"{m.notice_s:g} s", cap, billing, m.eviction, m.as_of)
    console.print(table)
    for s in result.scenarios:
        per_hour, _source = result.hazard(s)  # the optimistic one's: the band's (QA 39 K #14)
        band = f" (the --interruption-band, default {DEFAULT_BAND} interrupted a month)"
        hazard = f"{format_amount(per_hour * 24)} revocations/node/24 h" + (
            band if s.hazard_per_node_hour is None else ""
        )
        console.print(
            f"[bold]{escape(s.name)}[/bold] (no lifetime data): {escape(str(hazard))}, "
            "capacity gap "
            f"{s.capacity_gap_s / 3600:g} h -- {s.source_url}",
            highlight=False,
        )


@app.command("import-skypilot")
@request_command(ImportSkypilotRequest)
def import_skypilot_cmd(
    request: ImportSkypilotRequest,
    as_json: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Convert a SkyPilot price catalog into a gpucast offers CSV."""
    from gpucast.app import import_skypilot

    result = import_skypilot(request)
    if as_json:
        emit_json(result.to_dict())
        return
    skipped = result.skipped_reasons
    console.print(
        f"imported {count_of(len(result.offers), 'offer')}, skipped "
        f"{count_of(len(skipped), 'row')} -> {result.out}",
        highlight=False,
    )
    for reason in skipped[:10]:
        console.print(f"  skipped {reason}", highlight=False)
    if len(skipped) > 10:
        console.print(f"  ... and {len(skipped) - 10} more (use --json for all)")
    print_warnings(result.warnings)


@app.command("mig")
@request_command(CatalogMigRequest)
def mig(
    request: CatalogMigRequest,
    as_json: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """List a GPU's MIG profiles and every valid layout; --layout checks one."""
    from gpucast.app import catalog_mig

    result = catalog_mig(request)
    if as_json:
        emit_json(result.to_dict())
        return
    console.print(mig_table(result))
    kind = "full layouts (no instance can be added)" if result.maximal else "valid layouts"
    console.print(f"{len(result.layouts)} {kind} of {result.gpu}:", highlight=False)
    for number, lay in enumerate(result.layouts, 1):
        console.print(f"  {number:3d}  {lay.label}", highlight=False)
    if result.checked is not None:
        console.print(f"valid: {result.checked.label}", highlight=False)
        for inst, price in zip(
            result.checked.instances, result.checked_prices_usd_per_hour, strict=False
        ):
            console.print(f"  {inst.label}: {price:.4f} US$/h", highlight=False)
    console.print(
        f"slice price: the GPU's ({result.gpu_price}) split by max(compute/{result.slices[0]}, "
        f"memory/{result.slices[1]}) "
        "over the layout's instances (the profile table's: a GPU filled with that profile "
        f"alone, price / max); source {result.source_url}"
        + (f" (as of {result.as_of})" if result.as_of else ""),
        highlight=False,
    )
    console.print(f"slice speed (SM and memory-slice shares): {result.validation.text()}")
