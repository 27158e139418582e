"""`gpucast catalog ...` verbs: GPU specs, cloud offers, SkyPilot price import."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from gpucast.cli._common import console, emit_json
from gpucast.domain.catalog import GpuSpec, Offer
from gpucast.domain.errors import InvalidSpecError

app = typer.Typer(no_args_is_help=True, help="GPU specs and cloud offers with prices.")


def _fmt(value: float | None, spec: str = "g") -> str:
    return "-" if value is None else format(value, spec)


def _gpu_json(spec: GpuSpec) -> dict[str, Any]:
    out = asdict(spec)
    out["as_of"] = spec.as_of.isoformat()
    return out


def _offer_json(offer: Offer) -> dict[str, Any]:
    out = asdict(offer)
    out["as_of"] = offer.as_of.isoformat()
    return out


@app.command("gpus")
def gpus(json: bool = typer.Option(False, "--json", help="Print one JSON object.")) -> None:
    """List GPU specs (dense peak TFLOP/s, memory, bandwidth, MIG profiles)."""
    from gpucast.catalog import load_catalog

    catalog = load_catalog()
    if json:
        emit_json({"gpus": [_gpu_json(g) for g in catalog.gpus]})
        return
    table = Table(title="GPU specs (dense peak TFLOP/s)")
    for col in (
        "GPU",
        "FP32",
        "TF32",
        "FP16",
        "BF16",
        "FP8",
        "Mem GiB",
        "BW GB/s",
        "Link GB/s",
        "PCIe",
        "TDP W",
        "SMs",
        "MIG",
        "as of",
    ):
        table.add_column(
            col, justify="left" if col in ("GPU", "MIG") else "right", no_wrap=col == "GPU"
        )
    for g in catalog.gpus:
        table.add_row(
            g.name,
            _fmt(g.fp32_tflops),
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
            str(len(g.mig_profiles)) if g.mig_profiles else "-",
            g.as_of.isoformat(),
        )
    console.print(table)


@app.command("offers")
def offers(
    provider: str | None = typer.Option(None, "--provider", help="aws, gcp or azure."),
    region: str | None = typer.Option(None, "--region", help="Region, e.g. us-east-1."),
    gpu: str | None = typer.Option(None, "--gpu", help="GPU name or alias, e.g. V100."),
    spot: bool = typer.Option(False, "--spot", help="Only offers with a spot price."),
    cpu_only: bool = typer.Option(False, "--cpu-only", help="Only CPU-only instances."),
    offers_file: Path | None = typer.Option(
        None,
        "--offers",
        help="Extra offers CSV (e.g. from import-skypilot), added to the "
        "built-in ones; same instance type and region replaces the built-in row.",
    ),
    json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """List cloud offers with on-demand and spot prices (USD per hour)."""
    from gpucast.catalog import load_catalog

    catalog = load_catalog(offers_file)
    found = catalog.find_offers(
        provider=provider,
        region=region,
        gpu=gpu,
        spot=True if spot else None,
        cpu_only=True if cpu_only else None,
    )
    if json:
        emit_json(
            {
                "snapshot_date": catalog.snapshot_date.isoformat(),
                "count": len(found),
                "offers": [_offer_json(o) for o in found],
            }
        )
        return
    table = Table(title=f"{len(found)} offers (prices USD/h; snapshot {catalog.snapshot_date})")
    for col in (
        "provider",
        "region",
        "instance type",
        "GPU",
        "#",
        "vCPU",
        "mem GiB",
        "net Gb/s",
        "on-demand",
        "spot",
        "as of",
    ):
        table.add_column(
            col,
            justify="right"
            if col in ("#", "vCPU", "mem GiB", "net Gb/s", "on-demand", "spot")
            else "left",
            no_wrap=col in ("instance type", "GPU", "region"),
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
            o.as_of.isoformat(),
        )
    console.print(table)


@app.command("import-skypilot")
def import_skypilot_cmd(
    file: Path = typer.Argument(..., help="A SkyPilot catalog vms.csv (catalogs/v8/<cloud>)."),
    cloud: str = typer.Option(..., "--cloud", help="aws, gcp or azure."),
    out: Path = typer.Option(..., "--out", help="Offers CSV to write (for --offers)."),
    json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Convert a SkyPilot price catalog into a gpucast offers CSV."""
    from gpucast.catalog import write_offers_csv
    from gpucast.catalog.skypilot import import_skypilot

    if out.resolve() == file.resolve():
        raise InvalidSpecError(
            "--out", "must differ from the input file", fix="choose another output path"
        )
    imported, skipped = import_skypilot(file, cloud)
    write_offers_csv(imported, out, notes=["imported from SkyPilot catalog"] * len(imported))
    if json:
        emit_json(
            {
                "imported": len(imported),
                "skipped": len(skipped),
                "skipped_reasons": skipped,
                "out": str(out),
            }
        )
        return
    console.print(f"imported {len(imported)} offers, skipped {len(skipped)} rows -> {out}")
    for reason in skipped[:10]:
        console.print(f"  skipped {reason}", highlight=False)
    if len(skipped) > 10:
        console.print(f"  ... and {len(skipped) - 10} more (use --json for all)")
