"""The tables `gpucast catalog gpus|offers|mig` print (moved out of :mod:`gpucast.cli.catalog`,
which keeps the commands)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from gpucast.report.captions import add_columns, sources_caption

if TYPE_CHECKING:
    from gpucast.app.catalog import GpusResult, MigResult, OffersResult


def fmt_cell(value: float | None, spec: str = "g") -> str:
    """A table cell: ``value`` formatted, "-" where the catalog has none."""
    return "-" if value is None else format(value, spec)


def _limits(low_w: float | None, high_w: float | None) -> str:
    """The power-limit range a board accepts, "-" where the catalog has neither end (QA 40 E
    #6: only --json showed it)."""
    if low_w is None and high_w is None:
        return "-"
    return f"{'?' if low_w is None else format(low_w, 'g')}-{fmt_cell(high_w)}"


def gpus_table(result: GpusResult) -> Table:
    table = Table(
        title="GPU specs (dense peak TFLOP/s)",
        caption="FP32 a (b): the datasheet's a counts lanes shared with INT32 or dual-issued; "
        "predictions price FP32 work at the dedicated lanes' b; Limit W: the power limits the "
        "board accepts (nvidia-smi's Min-Max; the max is its default; ?: no minimum in "
        "gpus.csv), Idle W: its draw with "
        "no work (-: none in gpus.csv; the energy verbs then take the power model's fitted "
        "share of the default limit)\n" + sources_caption([g.source_url for g in result.gpus]),
    )
    names = ("GPU", "FP32", "TF32", "FP16", "BF16", "FP8", "Mem GiB", "BW GB/s", "Link GB/s",
             "PCIe", "TDP W", "Limit W", "Idle W", "SMs", "MIG", "as of")  # fmt: skip
    add_columns(table, names, left=("GPU", "MIG"), no_wrap=("GPU",))
    for g in result.gpus:
        table.add_row(
            g.name,
            fmt_cell(g.fp32_tflops)
            + ("" if g.fp32_dedicated_tflops is None else f" ({g.fp32_dedicated_tflops:g})"),
            fmt_cell(g.tf32_tflops),
            fmt_cell(g.fp16_tflops),
            fmt_cell(g.bf16_tflops),
            fmt_cell(g.fp8_tflops),
            fmt_cell(g.memory_gib),
            fmt_cell(g.memory_bandwidth_gbps),
            fmt_cell(g.interconnect_gbps),
            str(g.pcie_generation),
            fmt_cell(g.tdp_w),
            _limits(g.min_power_limit_w, g.max_power_limit_w),
            fmt_cell(g.idle_power_w),
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
            fmt_cell(o.memory_gib),
            fmt_cell(o.network_gbps),
            f"{o.on_demand_usd_per_hour:.4f}",
            fmt_cell(o.spot_usd_per_hour, ".4f"),
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
            fmt_cell(p.memory_gib),
            "-" if p.sm_count is None else str(p.sm_count),
            str(p.max_instances),
            ",".join(str(s) for s in p.placements),
            f"{100 * p.compute_share:.1f}",
            f"{100 * p.bandwidth_share:.1f}",
            fmt_cell(p.price_usd_per_hour, ".4f"),
        )
    return table
