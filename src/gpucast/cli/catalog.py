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
    GpusResult,
    ImportSkypilotRequest,
    MigResult,
    OffersResult,
)
from gpucast.cli._command import request_command
from gpucast.cli._common import JSON_OPTION_HELP, console, emit_json, print_warnings
from gpucast.domain.units import count_of, format_amount
from gpucast.report.captions import add_columns, sources_caption

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="GPU specs, MIG layouts and cloud offers with prices.",
)


def _fmt(value: float | None, spec: str = "g") -> str:
    return "-" if value is None else format(value, spec)


def gpus_table(result: GpusResult) -> Table:
    table = Table(
        title="GPU specs (dense peak TFLOP/s)",
        caption="FP32 a (b): the datasheet's a counts lanes shared with INT32 or dual-issued; "
        "predictions price FP32 work at the dedicated lanes' b\n"
        + sources_caption([g.source_url for g in result.gpus]),
    )
    names = ("GPU", "FP32", "TF32", "FP16", "BF16", "FP8", "Mem GiB", "BW GB/s", "Link GB/s",
             "PCIe", "TDP W", "SMs", "MIG", "as of")  # fmt: skip
    add_columns(table, names, left=("GPU", "MIG"), no_wrap=("GPU",))
    for g in result.gpus:
        table.add_row(
            g.name,
            _fmt(g.fp32_tflops)
            + ("" if g.fp32_dedicated_tflops is None else f" ({g.fp32_dedicated_tflops:g})"),
            _fmt(g.tf32_tflops),
            _fmt(g.fp16_tflops),
            _fmt(g.bf16_tflops),
            _fmt(g.fp8_tflops),
            _fmt(g.memory_gib),
            _fmt(g.memory_bandwidth_gbps),
            _fmt(g.interconnect_gbps),
            str(g.pcie_generation),
            _fmt(g.tdp_w),
            str(g.sm_count),
            g.mig_summary,
            g.as_of.isoformat(),
        )
    return table


def offers_table(result: OffersResult) -> Table:
    found = result.offers
    table = Table(title=f"{len(found)} offers (prices USD/h; snapshot {result.snapshot_date})")
    names = ("provider", "region", "instance type", "GPU", "#", "vCPU", "mem GiB", "net Gbit/s",
             "on-demand", "spot", "as of")  # fmt: skip
    add_columns(
        table,
        names,
        left=("provider", "region", "instance type", "GPU", "as of"),
        no_wrap=("instance type", "GPU", "region"),
    )
    for o in found:
        table.add_row(
            o.provider,
            o.region,
            o.instance_type,
            o.gpu or "-",
            str(o.gpus),
            str(o.vcpus),
            _fmt(o.memory_gib),
            _fmt(o.network_gbps),
            f"{o.on_demand_usd_per_hour:.4f}",
            _fmt(o.spot_usd_per_hour, ".4f"),
            o.as_of.isoformat() + (" (estimated)" if o.price_estimated else ""),
        )
    # an estimated row's source_url is the price page its price was not read from (F2)
    read = [o.source_url for o in found if not o.price_estimated]
    notes = [sources_caption(read)] if read else []
    guessed = sum(o.price_estimated for o in found)
    if guessed:
        notes.append(
            f"(estimated): {guessed} rows' prices not read from any source (their source_url "
            "is the vendor's price page to check them on) -- refresh them with "
            "`gpucast catalog import-skypilot`"
        )
    table.caption = "\n".join(notes) or None
    return table


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
            _fmt(n.intra_node_gbps),
            (n.network or "-") + (" (RDMA)" if n.rdma else ""),
            _fmt(n.inter_node_gbps),
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


def mig_table(result: MigResult) -> Table:
    table = Table(title=f"MIG profiles of {result.gpu} (shares of the whole GPU)")
    names = ("profile", "compute", "memory", "GiB", "SMs", "max", "starts", "SM %", "BW %",
             "US$/h")  # fmt: skip
    add_columns(table, names, left=("profile", "starts"))
    compute, memory = result.slices
    for p in result.profiles:
        table.add_row(
            p.name,
            f"{p.compute_slices}/{compute}",
            "-" if p.memory_slices is None else f"{p.memory_slices}/{memory}",
            _fmt(p.memory_gib),
            "-" if p.sm_count is None else str(p.sm_count),
            str(p.max_instances),
            ",".join(str(s) for s in p.placements),
            f"{100 * p.compute_share:.1f}",
            f"{100 * p.bandwidth_share:.1f}",
            _fmt(p.price_usd_per_hour, ".4f"),
        )
    return table


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
